//! Index prefilters for the pattern tools (grep_documents, find_by_name): the
//! text every match of a regex or glob must contain, written as PostgreSQL
//! regular expressions that the trigram indexes of migration 0008 answer, so
//! the exact matching in Rust runs only on the rows they leave. Also the glob
//! rules both tools share.
//!
//! Soundness is the one property that matters here: every string the Rust
//! regex or glob matches must also match each condition produced, or a
//! document would silently go missing. A condition may be weaker than
//! needed (fewer candidates are dropped); it may never be stronger. Where the
//! analysis is unsure it gives up, which only costs speed.

use std::cmp::Reverse;

use data_plane_registry::ToolError;
use globset::{GlobBuilder, GlobMatcher};
use regex_syntax::hir::{Class, Hir, HirKind};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// The characters that may stand at one position of a required string.
type Pos = Vec<char>;
/// A string of positions.
type Seq = Vec<Pos>;
/// At least one of these sequences occurs in every match.
type Group = Vec<Seq>;

/// Largest character class kept as one position (`[0-9]` fits, `\w` does not).
const MAX_CLASS: usize = 16;
/// Most sequences in one set of alternatives.
const MAX_SET: usize = 16;
/// Longest sequence built by concatenation.
const MAX_SEQ: usize = 64;
/// Most conditions handed to PostgreSQL for one pattern.
const MAX_CONDITIONS: usize = 3;
/// Most positions of one sequence written into a condition; longer ones are
/// cut (a substring of a required string is required too), which keeps
/// pg_trgm's regex analysis within its limits.
const RENDER_POSITIONS: usize = 32;
/// pg_trgm needs three word characters in a row to look anything up; a
/// condition with fewer would make PostgreSQL read the whole index.
const MIN_WORD_RUN: usize = 3;

/// What a part of a regex tells about the strings it matches.
#[derive(Debug, Default)]
struct Info {
    /// Every string it can match, when that set is small.
    exact: Option<Vec<Seq>>,
    /// Otherwise, groups each of which every match satisfies.
    required: Vec<Group>,
}

impl Info {
    fn exact(set: Vec<Seq>) -> Info {
        Info {
            exact: Some(set),
            required: Vec::new(),
        }
    }

    fn unknown() -> Info {
        Info::default()
    }

    fn requirement(self) -> Vec<Group> {
        match self.exact {
            Some(set) if set.iter().all(|s| !s.is_empty()) => vec![set],
            Some(_) => Vec::new(),
            None => self.required,
        }
    }
}

fn analyze(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(vec![Vec::new()]),
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => Info::exact(vec![s.chars().map(|c| vec![c]).collect()]),
            Err(_) => Info::unknown(),
        },
        HirKind::Class(class) => match class_chars(class) {
            Some(chars) => Info::exact(vec![vec![chars]]),
            None => Info::unknown(),
        },
        HirKind::Capture(capture) => analyze(&capture.sub),
        HirKind::Repetition(rep) => repetition(rep.min, rep.max, analyze(&rep.sub)),
        HirKind::Concat(subs) => concat(subs.iter().map(analyze)),
        HirKind::Alternation(subs) => alternation(subs.iter().map(analyze).collect()),
    }
}

/// The characters of a small class; `None` for a large or empty one.
fn class_chars(class: &Class) -> Option<Pos> {
    let mut chars = Vec::new();
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                for ch in r.start()..=r.end() {
                    chars.push(ch);
                    if chars.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
        Class::Bytes(b) => {
            for r in b.ranges() {
                // Bytes above ASCII are pieces of characters, not characters.
                if r.end() > 0x7f {
                    return None;
                }
                for byte in r.start()..=r.end() {
                    chars.push(char::from(byte));
                    if chars.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
    }
    (!chars.is_empty()).then_some(chars)
}

fn dedup(mut set: Vec<Seq>) -> Vec<Seq> {
    set.sort();
    set.dedup();
    set
}

/// Every concatenation of a string of `a` with one of `b`, when small.
fn product(a: &[Seq], b: &[Seq]) -> Option<Vec<Seq>> {
    if a.len() * b.len() > MAX_SET {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            // A lone long literal is kept whole; only joining is bounded.
            if !x.is_empty() && x.len() + y.len() > MAX_SEQ {
                return None;
            }
            let mut s = x.clone();
            s.extend(y.iter().cloned());
            out.push(s);
        }
    }
    Some(dedup(out))
}

fn power(set: &[Seq], n: u32) -> Option<Vec<Seq>> {
    if n as usize > MAX_SEQ {
        return None;
    }
    let mut acc = vec![Vec::new()];
    for _ in 0..n {
        acc = product(&acc, set)?;
    }
    Some(acc)
}

fn repetition(min: u32, max: Option<u32>, sub: Info) -> Info {
    if min == 0 {
        // `x?` is either nothing or x; anything else that may be absent
        // requires nothing.
        if max == Some(1)
            && let Some(mut set) = sub.exact
        {
            set.push(Vec::new());
            let set = dedup(set);
            if set.len() <= MAX_SET {
                return Info::exact(set);
            }
        }
        return Info::unknown();
    }
    let Some(set) = sub.exact else {
        // At least one occurrence: whatever one requires, all do.
        return Info {
            exact: None,
            required: sub.required,
        };
    };
    match power(&set, min) {
        Some(p) if max == Some(min) => Info::exact(p),
        Some(p) => Info {
            exact: None,
            required: Info::exact(p).requirement(),
        },
        None => Info {
            exact: None,
            required: Info::exact(set).requirement(),
        },
    }
}

fn concat(children: impl Iterator<Item = Info>) -> Info {
    let mut required = Vec::new();
    // The strings the consecutive exact children since the last break match.
    let mut run: Vec<Seq> = vec![Vec::new()];
    let mut all_exact = true;
    for child in children {
        match child.exact {
            Some(set) => match product(&run, &set) {
                Some(joined) => run = joined,
                None => {
                    all_exact = false;
                    required.extend(Info::exact(std::mem::replace(&mut run, set)).requirement());
                }
            },
            None => {
                all_exact = false;
                required.extend(
                    Info::exact(std::mem::replace(&mut run, vec![Vec::new()])).requirement(),
                );
                required.extend(child.required);
            }
        }
    }
    if all_exact {
        return Info::exact(run);
    }
    required.extend(Info::exact(run).requirement());
    Info {
        exact: None,
        required,
    }
}

fn alternation(children: Vec<Info>) -> Info {
    if children.iter().all(|c| c.exact.is_some()) {
        let union = dedup(
            children
                .iter()
                .flat_map(|c| c.exact.iter().flatten().cloned())
                .collect(),
        );
        if union.len() <= MAX_SET {
            return Info::exact(union);
        }
    }
    // A match matches one branch, so it satisfies that branch's group: the
    // union of one group per branch is required.
    let mut union = Vec::new();
    for child in children {
        match best(child.requirement()) {
            Some(group) => union.extend(group),
            None => return Info::unknown(),
        }
    }
    let union = dedup(union);
    if union.len() > MAX_SET {
        return Info::unknown();
    }
    Info {
        exact: None,
        required: vec![union],
    }
}

fn best(groups: Vec<Group>) -> Option<Group> {
    groups
        .into_iter()
        .max_by_key(|g| (score(g), Reverse(g.len())))
}

/// Longest stretch of positions that hold only letters and digits: what the
/// trigram index can look up.
fn word_run(seq: &[Pos]) -> (usize, usize) {
    let (mut best, mut best_start, mut len) = (0, 0, 0);
    for (i, pos) in seq.iter().enumerate() {
        if pos.iter().all(|c| c.is_alphanumeric()) {
            len += 1;
            if len > best {
                best = len;
                best_start = i + 1 - len;
            }
        } else {
            len = 0;
        }
    }
    (best, best_start)
}

fn score(group: &Group) -> usize {
    group.iter().map(|s| word_run(s).0).min().unwrap_or(0)
}

/// Up to three groups worth asking the index about, best first.
fn useful(groups: Vec<Group>) -> Vec<Group> {
    let mut groups: Vec<Group> = groups
        .into_iter()
        .filter(|g| score(g) >= MIN_WORD_RUN)
        .collect();
    groups.sort_by_key(|g| Reverse(score(g)));
    groups.dedup();
    groups.truncate(MAX_CONDITIONS);
    groups
}

/// A character for a PostgreSQL regular expression (also inside brackets):
/// letters and digits as they are, anything else as a `\u`/`\U` escape, so
/// no character can mean something else.
fn pg_char(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else if (c as u32) <= 0xffff {
        out.push_str(&format!("\\u{:04x}", c as u32));
    } else {
        out.push_str(&format!("\\U{:08x}", c as u32));
    }
}

fn pg_pos(pos: &[char], out: &mut String) {
    if let [c] = pos {
        pg_char(*c, out);
    } else {
        out.push('[');
        for &c in pos {
            pg_char(c, out);
        }
        out.push(']');
    }
}

/// The part of a sequence written into a condition: all of it, or a window
/// starting at its longest word stretch.
fn window(seq: &[Pos]) -> &[Pos] {
    if seq.len() <= RENDER_POSITIONS {
        return seq;
    }
    let (_, start) = word_run(seq);
    let start = start.min(seq.len() - RENDER_POSITIONS);
    &seq[start..start + RENDER_POSITIONS]
}

fn render_exact(group: &Group) -> String {
    let mut out = String::new();
    for (i, seq) in group.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for pos in window(seq) {
            pg_pos(pos, &mut out);
        }
    }
    out
}

/// Conditions for `content ~ $n` (case-sensitive PostgreSQL regexes, so the
/// comparison is exact and independent of the database's locale) that every
/// document the regex `hir` matches satisfies. Empty when the pattern has no
/// required text long enough for the index.
///
/// Case-insensitive `k` becomes `[Kk\u212a]` (the Kelvin sign folds to it).
/// pg_trgm cannot use a position holding a character whose lowercase has
/// another byte length, so such a position splits the lookup in two: fewer
/// documents are ruled out, none is lost.
pub fn content_conditions(hir: &Hir) -> Vec<String> {
    useful(analyze(hir).requirement())
        .iter()
        .map(render_exact)
        .collect()
}

/// The characters whose lowercase, in Rust or in PostgreSQL, may be the ASCII
/// character `c`, and `c` in either case: what `lower(column)` may hold where
/// a name holds something that matches `c`.
fn lowered_class(c: char, out: &mut Vec<char>) {
    out.push(c.to_ascii_lowercase());
    out.push(c.to_ascii_uppercase());
    match c.to_ascii_lowercase() {
        // KELVIN SIGN lowercases to k; LATIN CAPITAL LETTER I WITH DOT ABOVE
        // to i (plus a combining dot in Rust); C-locale databases leave both.
        'k' => out.push('\u{212a}'),
        'i' => out.push('\u{130}'),
        _ => {}
    }
}

/// A sequence written for `lower(column) ~ $n`. Lowercasing can change the
/// length of non-ASCII text differently in Rust and PostgreSQL, so only
/// stretches of ASCII positions are kept, joined by `.*`; `None` when no
/// stretch has enough letters or digits for the index.
fn render_lowered(seq: &[Pos]) -> Option<String> {
    let mut parts = Vec::new();
    for part in seq.split(|pos| pos.iter().any(|c| !c.is_ascii())) {
        if word_run(part).0 < MIN_WORD_RUN {
            continue;
        }
        let mut out = String::new();
        for pos in window(part) {
            let mut class = Vec::new();
            for &c in pos {
                lowered_class(c, &mut class);
            }
            class.sort_unstable();
            class.dedup();
            pg_pos(&class, &mut out);
        }
        parts.push(out);
    }
    (!parts.is_empty()).then(|| parts.join(".*"))
}

/// Conditions for `lower(column) ~ $n` that every string `hir` matches
/// satisfies, case aside.
fn lowered_conditions(hir: &Hir) -> Vec<String> {
    let mut groups: Vec<(usize, String)> = analyze(hir)
        .requirement()
        .into_iter()
        .filter_map(|group| {
            let rendered: Option<Vec<String>> =
                group.iter().map(|seq| render_lowered(seq)).collect();
            Some((score(&group), rendered?.join("|")))
        })
        .collect();
    groups.sort_by_key(|(score, _)| Reverse(*score));
    groups.dedup_by(|a, b| a.1 == b.1);
    groups.truncate(MAX_CONDITIONS);
    groups.into_iter().map(|(_, re)| re).collect()
}

/// A glob over document paths or file names, with the rules both pattern
/// tools follow: `*` and `?` stop at `/`, `**` crosses folders, a pattern
/// without `/` is matched against the file name and one with `/` against the
/// path (relative to the source, so a leading `/` is dropped). Without
/// case_sensitive, pattern and candidate are compared lowercased (any
/// script, not only ASCII). globset matches bytes, so `?` and a class like
/// `[é]` stand for one byte and do not match a character outside ASCII;
/// `*` and literal text are unaffected.
#[derive(Debug, Clone)]
pub struct NameGlob {
    matcher: GlobMatcher,
    on_path: bool,
    case_sensitive: bool,
    conditions: Vec<String>,
}

impl NameGlob {
    /// Compiles `pattern`; `argument` names it in errors.
    pub fn new(pattern: &str, case_sensitive: bool, argument: &str) -> Result<NameGlob, ToolError> {
        let trimmed = pattern.trim_start_matches('/');
        if trimmed.is_empty() {
            return Err(ToolError::invalid(format!(
                "{argument} {pattern:?} matches no file: give a name or path pattern such as `*.md` or `guides/**`"
            )));
        }
        let folded = if case_sensitive {
            trimmed.to_string()
        } else {
            trimmed.to_lowercase()
        };
        let glob = GlobBuilder::new(&folded)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::invalid(format!(
                    "{argument} {pattern:?} is not a valid glob: {}; write the characters * ? [ ] {{ }} literally as \\* \\? \\[ \\] \\{{ \\}}",
                    e.kind()
                ))
            })?;
        // globset compiles the glob to a regex; its parsed form is what the
        // conditions are drawn from, so they follow exactly what is matched.
        let conditions = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(glob.regex())
            .map(|hir| lowered_conditions(&hir))
            .unwrap_or_default();
        Ok(NameGlob {
            matcher: glob.compile_matcher(),
            on_path: trimmed.contains('/'),
            case_sensitive,
            conditions,
        })
    }

    /// Whether the document at `path` (file name `name`) matches.
    pub fn is_match(&self, path: &str, name: &str) -> bool {
        let target = if self.on_path { path } else { name };
        if self.case_sensitive {
            self.matcher.is_match(target)
        } else {
            self.matcher.is_match(target.to_lowercase())
        }
    }

    /// Whether the glob is matched against the path (else the file name).
    pub fn on_path(&self) -> bool {
        self.on_path
    }

    /// Regexes for `lower(path)` (or `lower(name)`, see `on_path`) each
    /// satisfied by every match.
    pub fn conditions(&self) -> &[String] {
        &self.conditions
    }
}

/// Index conditions for one search, answered by `dp_document_candidates`
/// (migration 0008), which runs the lookup where row-level security does not
/// keep PostgreSQL from using the trigram indexes.
#[derive(Debug, Default)]
pub struct Candidates {
    /// Regexes over `content`.
    pub content: Vec<String>,
    /// Regexes over `lower(path)`.
    pub path: Vec<String>,
    /// Regexes over `lower(name)`.
    pub name: Vec<String>,
}

impl Candidates {
    /// Adds the conditions of a glob.
    pub fn add_glob(&mut self, glob: &NameGlob) {
        let target = if glob.on_path() {
            &mut self.path
        } else {
            &mut self.name
        };
        target.extend(glob.conditions().iter().cloned());
    }

    /// Appends ` AND d.id IN (...)` to a query over `documents d`, when
    /// there is anything to narrow by.
    pub fn push_filter(&self, query: &mut QueryBuilder<'_, Postgres>, spaces: &[Uuid]) {
        if self.content.is_empty() && self.path.is_empty() && self.name.is_empty() {
            return;
        }
        query
            .push(" AND d.id IN (SELECT dp_document_candidates(")
            .push_bind(spaces.to_vec())
            .push(", ")
            .push_bind(self.content.clone())
            .push("::text[], ")
            .push_bind(self.path.clone())
            .push("::text[], ")
            .push_bind(self.name.clone())
            .push("::text[]))");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn content(pattern: &str, case_insensitive: bool) -> Vec<String> {
        let hir = regex_syntax::ParserBuilder::new()
            .case_insensitive(case_insensitive)
            .multi_line(true)
            .build()
            .parse(pattern)
            .unwrap();
        content_conditions(&hir)
    }

    #[test]
    fn regexes_yield_the_text_every_match_contains() {
        let check = |pattern: &str, case_insensitive: bool, expected: &[&str]| {
            assert_eq!(
                content(pattern, case_insensitive),
                expected,
                "{pattern} (case-insensitive: {case_insensitive})"
            );
        };
        check("TODO-4711", false, &["TODO\\u002d4711"]);
        check(r"TODO-47\d+", false, &["TODO\\u002d47"]);
        check(r"TODO-47[0-9]", false, &["TODO\\u002d47[0123456789]"]);
        check("vacuum", true, &["[Vv][Aa][Cc][Uu][Uu][Mm]"]);
        // The fold class of k holds the Kelvin sign, of s the long s.
        check("kiss", true, &["[Kk\\u212a][Ii][Ss\\u017f][Ss\\u017f]"]);
        check("colou?r", false, &["color|colour"]);
        check("(?:abc|xyz)def", false, &["abcdef|xyzdef"]);
        check(r"foo\d+barbaz", false, &["barbaz", "foo"]);
        check(r"(?:alpha\s+one|beta\w*two)", false, &["alpha|beta"]);
        check("^Budget approved", false, &["Budget\\u0020approved"]);
        check("(a+)+$", false, &[]);
        check(r"\d{4}-\d{2}", false, &[]);
        check("ab", false, &[]);
        check("a|bcd", false, &[]);
        check("(?s).*", false, &[]);
        check("héllo wörld", false, &["h\\u00e9llo\\u0020w\\u00f6rld"]);
    }

    #[test]
    fn long_literals_are_cut_to_a_window() {
        let long = "x".repeat(100);
        let conditions = content(&long, false);
        assert_eq!(conditions, [&long[..RENDER_POSITIONS]]);
    }

    #[test]
    fn globs_yield_lowered_conditions_on_the_right_column() {
        let check = |pattern: &str, column: &str, expected: &[&str]| {
            let glob = NameGlob::new(pattern, false, "pattern").unwrap();
            assert_eq!(glob.on_path(), column == "path", "{pattern}");
            assert_eq!(glob.conditions(), expected, "{pattern}");
        };
        check("*.md", "name", &[]);
        check("*.csv", "name", &["\\u002e[Cc][Ss][Vv]"]);
        check("*VACUUM*", "name", &["[Vv][Aa][Cc][Uu][Uu][Mm]"]);
        check(
            "guides/*",
            "path",
            &["[Gg][Uu][Ii\\u0130][Dd][Ee][Ss]\\u002f"],
        );
        check(
            "{notes,data}/**",
            "path",
            &["[Dd][Aa][Tt][Aa]\\u002f|[Nn][Oo][Tt][Ee][Ss]\\u002f"],
        );
        check(
            "report-202?.pdf",
            "name",
            &["[Rr][Ee][Pp][Oo][Rr][Tt]\\u002d202", "\\u002e[Pp][Dd][Ff]"],
        );
        check(
            "Réunion*.txt",
            "name",
            &["[Uu][Nn][Ii\\u0130][Oo][Nn]", "\\u002e[Tt][Xx][Tt]"],
        );
    }

    #[test]
    fn globs_match_names_or_paths() {
        let check = |pattern: &str, case_sensitive: bool, path: &str, expected: bool| {
            let name = path.rsplit('/').next().unwrap();
            let glob = NameGlob::new(pattern, case_sensitive, "pattern").unwrap();
            assert_eq!(
                glob.is_match(path, name),
                expected,
                "{pattern} on {path} (case-sensitive: {case_sensitive})"
            );
        };
        check("*.md", false, "guides/vacuum.md", true);
        check("*.MD", false, "guides/vacuum.md", true);
        check("*.MD", true, "guides/vacuum.md", false);
        check("guides/*", false, "guides/vacuum.md", true);
        check("guides/*", false, "guides/deep/vacuum.md", false);
        check("/guides/**", false, "guides/deep/vacuum.md", true);
        check("**/*.csv", false, "data/cities.csv", true);
        check("**/*.csv", false, "cities.csv", true);
        check("ÉTÉ*", false, "notes/été-2024.txt", true);
    }
}
