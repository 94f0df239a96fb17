//! grep_documents: exact text or regex matches with line numbers.
//!
//! The pattern becomes a linear-time Rust regex (the `regex` crate: no
//! backtracking, so no pattern can take exponential time). The text every
//! match must contain becomes conditions that the trigram index on
//! `documents.content` answers through `dp_document_candidates` (see
//! prefilter.rs and migration 0008). Documents are read under row-level
//! security in path order, in batches bounded in count and bytes, and
//! matched exactly in Rust off the async threads: first the scope's own
//! documents in path order, then, once few of them match, only the index's
//! candidates (see [`search`]). Output is capped in lines and
//! characters, with a hint that says how to page or narrow.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, TagSpec, ToolContext,
    ToolError, ToolMeta,
};
use data_plane_store::ScopedTx;
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use crate::prefilter::{Candidates, NameGlob, content_conditions};

/// The arguments, as definitions/grep_documents.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Text to find; a regular expression (Rust syntax, no look-around or backreferences) when regex is true.
    pub pattern: String,
    /// Treat pattern as a regular expression.
    pub regex: Option<bool>,
    /// Match case exactly.
    pub case_sensitive: Option<bool>,
    /// Only documents matching this glob (case-insensitive): with a `/` it is matched against the path, e.g. `**/*.md` or `manual/**`; without, against the file name, e.g. `*.csv`.
    pub path_glob: Option<String>,
    /// Lines of context before and after each matching line.
    pub context_lines: Option<u64>,
    /// Most matching lines to return.
    pub max_results: Option<u64>,
    /// Matching lines to skip before the first one returned, to page through results (the `more` hint of a previous call gives the value).
    pub skip: Option<u64>,
    /// Only search this source.
    pub source_id: Option<Uuid>,
    /// Only search this document.
    pub document_id: Option<Uuid>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Search,
    short_description: "exact text or regex matches with line numbers",
    available_when: "always",
    aliases: &["grep"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Moderate,
    permission: Permission::Guest,
    timeout: Duration::from_millis(20000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: Some(TagSpec {
        tag_prefix: "GREP",
        pattern: r"(?P<pattern>.+)",
        example: "GREP: max_connections",
        strip_from_display: true,
    }),
};

pub fn available(_ctx: &ToolContext) -> bool {
    true
}

const NAME: &str = "grep_documents";

const DEFAULT_CONTEXT_LINES: u64 = 2;
const MAX_CONTEXT_LINES: u64 = 10;
const DEFAULT_MAX_RESULTS: u64 = 50;
const MAX_RESULTS: u64 = 500;
/// Characters of line text (matched lines, context, matched text) in one
/// answer; past it the answer ends with a hint to page.
const OUTPUT_BUDGET_CHARS: usize = 40_000;
/// A matched line longer than this is shown as a window around its first match.
const LINE_WINDOW_CHARS: usize = 300;
/// How much of the window comes before the first match.
const LINE_LEAD_CHARS: usize = 80;
const CONTEXT_LINE_CHARS: usize = 200;
const MATCH_TEXT_CHARS: usize = 200;
const MATCHES_PER_LINE: usize = 10;
/// Searching stops here and says so, well inside the tool's timeout, so the
/// caller gets what was found instead of a timeout.
const SEARCH_BUDGET: Duration = Duration::from_secs(12);
/// Candidate rows (ids and paths only) per FETCH from the cursor.
const CURSOR_BATCH: i64 = 256;
/// Documents whose content is read and matched at once.
const CONTENT_BATCH_DOCS: usize = 32;
const CONTENT_BATCH_BYTES: i64 = 8 << 20;
/// Compiled-program and lazy-DFA limits: a pattern over them is refused
/// rather than allowed to take memory and time.
const REGEX_SIZE_LIMIT: usize = 2 << 20;
const REGEX_DFA_SIZE_LIMIT: usize = 8 << 20;
const REGEX_NEST_LIMIT: u32 = 64;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Matching lines in path order, then line order.
    pub results: Vec<LineMatch>,
    pub returned: usize,
    /// Documents whose content was matched (the index may rule out others).
    pub documents_searched: u64,
    /// Present when there is more than was returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<More>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LineMatch {
    pub document_id: Uuid,
    pub path: String,
    pub name: String,
    /// 1-based line number of the line the match starts on.
    pub line: u64,
    /// The line, or a window of it when it is long (see `trimmed`).
    pub text: String,
    /// Character offset in the document of `text`'s first character.
    pub text_start: u64,
    /// Present when the line was cut: characters left out at each end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    pub matches: Vec<Span>,
    /// Matches on this line beyond those listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more_matches_on_line: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// One match, by character offsets into the document (Unicode code points,
/// end exclusive: the unit of search results and read_document).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Span {
    pub char_start: u64,
    pub char_end: u64,
    pub text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Trimmed {
    pub chars_before: u64,
    pub chars_after: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct More {
    /// Pass as `skip` to continue where this answer stopped.
    pub skip: u64,
    pub hint: String,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let case_sensitive = args.case_sensitive.unwrap_or(false);
    let (regex, conditions) = compile(&args.pattern, args.regex.unwrap_or(false), case_sensitive)?;
    let glob = args
        .path_glob
        .as_deref()
        .map(|g| NameGlob::new(g, false, "path_glob"))
        .transpose()?;
    let settings = Arc::new(Settings {
        regex,
        context_lines: args
            .context_lines
            .unwrap_or(DEFAULT_CONTEXT_LINES)
            .min(MAX_CONTEXT_LINES) as usize,
        deadline: Instant::now() + SEARCH_BUDGET,
    });
    let mut collector = Collector {
        skip: args.skip.unwrap_or(0),
        max: args
            .max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, MAX_RESULTS) as usize,
        budget_left: OUTPUT_BUDGET_CHARS,
        ..Collector::default()
    };

    let mut tx = deps.read(NAME, ctx).await?;
    let spaces = deps.spaces(NAME, &mut tx, ctx).await?;
    if let Some(source) = args.source_id {
        let visible: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sources WHERE id = $1 AND space_id = ANY($2))",
        )
        .bind(source)
        .bind(&spaces)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
        if !visible {
            return Err(ToolError::not_found(format!(
                "no source {source} in the spaces this request can read"
            )));
        }
    }
    if let Some(document) = args.document_id {
        let visible: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM documents WHERE id = $1 AND space_id = ANY($2))",
        )
        .bind(document)
        .bind(&spaces)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
        if !visible {
            return Err(crate::document_info::not_found(document));
        }
    }

    // Only ids and paths pass through the sort; contents are read per batch.
    let scope = Bounds {
        spaces,
        source: args.source_id,
        document: args.document_id,
    };
    let mut candidates = Candidates {
        content: conditions,
        ..Candidates::default()
    };
    if let Some(glob) = &glob {
        candidates.add_glob(glob);
    }

    match search(
        &mut tx,
        &scope,
        &candidates,
        glob.as_ref(),
        &settings,
        &mut collector,
    )
    .await
    {
        Ok(()) => {}
        // PostgreSQL gave up (statement_timeout): what was found so far
        // still comes back, with the hint to narrow.
        Err(SearchError::Db(sqlx::Error::Database(e))) if e.code().as_deref() == Some("57014") => {
            collector.stop = Some(Stop::Time);
        }
        Err(SearchError::Db(e)) => return Err(internal(NAME, e)),
        Err(SearchError::Worker(e)) => return Err(internal(NAME, e)),
    }
    drop(tx);
    Ok(collector.finish())
}

#[derive(Debug, thiserror::Error)]
enum SearchError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error("matching failed: {0}")]
    Worker(#[from] tokio::task::JoinError),
}

/// Which documents a call covers, before any pattern condition.
struct Bounds {
    spaces: Vec<Uuid>,
    source: Option<Uuid>,
    document: Option<Uuid>,
}

impl Bounds {
    /// Id, path, name and content length of the scope's documents in path
    /// order, `prefix` written before the SELECT: all of them, or only the
    /// index's candidates, from just past `after` when given.
    fn query<'a>(
        &'a self,
        prefix: &str,
        candidates: Option<&Candidates>,
        after: Option<&(String, Uuid)>,
    ) -> QueryBuilder<'a, Postgres> {
        let mut query: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "{prefix} SELECT d.id, d.path, d.name, octet_length(d.content)::bigint
               FROM documents d WHERE "
        ));
        // One space, the usual case, as an equality: then the index on
        // (space_id, path, id) yields rows in path order without a sort.
        match self.spaces.as_slice() {
            [space] => query.push("d.space_id = ").push_bind(*space),
            spaces => query
                .push("d.space_id = ANY(")
                .push_bind(spaces.to_vec())
                .push(")"),
        };
        if let Some(source) = self.source {
            query.push(" AND d.source_id = ").push_bind(source);
        }
        if let Some(document) = self.document {
            query.push(" AND d.id = ").push_bind(document);
        }
        if let Some((path, id)) = after {
            query
                .push(" AND (d.path, d.id) > (")
                .push_bind(path.clone())
                .push(", ")
                .push_bind(*id)
                .push(")");
        }
        if let Some(candidates) = candidates {
            candidates.push_filter(&mut query, &self.spaces);
        }
        query.push(" ORDER BY d.path, d.id");
        query
    }

    /// Opens cursor `name` over [`Bounds::query`]'s rows (lengths, not
    /// contents: contents are read per batch).
    async fn declare(
        &self,
        tx: &mut ScopedTx,
        name: &str,
        candidates: Option<&Candidates>,
        after: Option<&(String, Uuid)>,
    ) -> Result<(), sqlx::Error> {
        let prefix = format!("DECLARE {name} NO SCROLL CURSOR FOR");
        self.query(&prefix, candidates, after)
            .build()
            .persistent(false)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

/// Documents read in path order before the walk may hand over to the index.
const WALK_PROBE_DOCS: u64 = 8;
/// The walk goes on while at least one document in this many matches.
const WALK_MIN_HIT_RATIO: u64 = 8;

/// Matches the scope's documents in path order until everything is searched
/// or the collector stops.
///
/// The trigram index answers a rare pattern in milliseconds, but its
/// candidates come back only after PostgreSQL has re-checked every one of
/// them (detoasting and regex-matching whole documents) and sorted them: for
/// a phrase most documents hold, that is nearly the whole space, when the
/// first page of lines would have come from the first few documents. So the
/// search first reads the first [`WALK_PROBE_DOCS`] documents in path order
/// (one query, contents included) and matches them here. While at least one
/// in [`WALK_MIN_HIT_RATIO`] of the documents read matches, it walks on in
/// path order; otherwise it goes on from the last document read with the
/// index's candidates. Either way the lines come in the same order.
async fn search(
    tx: &mut ScopedTx,
    scope: &Bounds,
    candidates: &Candidates,
    glob: Option<&NameGlob>,
    settings: &Arc<Settings>,
    collector: &mut Collector,
) -> Result<(), SearchError> {
    // The index lookup and its sort run inside one FETCH; this bounds it.
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(SEARCH_BUDGET.as_millis().to_string())
        .execute(&mut **tx)
        .await?;
    if candidates.content.is_empty() {
        // Nothing for the index to look up in the content (the glob's
        // conditions would only re-check paths): every document is read.
        scope.declare(tx, "grep_walk", None, None).await?;
        drain(tx, "grep_walk", glob, settings, collector, None).await?;
        return Ok(());
    }

    // The first documents' ids, paths and lengths (a top-N of narrow rows
    // even where no index gives the order), then their contents up to the
    // batch's byte limit in path order (the first whatever its size), NULL
    // past it.
    let rows: Vec<(Uuid, String, String, Option<String>)> = scope
        .query(
            &format!(
                "SELECT p.id, p.path, p.name,
                        CASE WHEN sum(p.len) OVER (ORDER BY p.path, p.id) <= {CONTENT_BATCH_BYTES}
                               OR row_number() OVER (ORDER BY p.path, p.id) = 1
                             THEN d.content END
                   FROM ("
            ),
            None,
            None,
        )
        .push(format!(
            " LIMIT {WALK_PROBE_DOCS}) AS p (id, path, name, len)
              JOIN documents d ON d.id = p.id
             ORDER BY p.path, p.id"
        ))
        .build_query_as()
        .persistent(false)
        .fetch_all(&mut **tx)
        .await?;
    // Rows whose content did not come (past the byte limit) are read by
    // what follows, from just after the last one that did.
    let fetched = rows.len() as u64;
    let rows: Vec<_> = rows
        .into_iter()
        .map_while(|(id, path, name, content)| content.map(|c| (id, path, name, c)))
        .collect();
    let complete = fetched < WALK_PROBE_DOCS && rows.len() as u64 == fetched;
    let Some(after) = rows.last().map(|(id, path, ..)| (path.clone(), *id)) else {
        return Ok(());
    };
    let docs = rows
        .into_iter()
        .filter(|(_, path, name, _)| glob.is_none_or(|g| g.is_match(path, name)))
        .map(|(id, path, name, content)| Doc {
            id,
            path,
            name,
            content,
        })
        .collect();
    let mut probe = match_docs(collector, settings, docs).await?;
    if collector.stop.is_some() || complete {
        return Ok(());
    }
    let handover = if probe.hand_over() {
        Some(after)
    } else {
        scope.declare(tx, "grep_walk", None, Some(&after)).await?;
        let handover = drain(tx, "grep_walk", glob, settings, collector, Some(&mut probe)).await?;
        if handover.is_some() {
            sqlx::query("CLOSE grep_walk").execute(&mut **tx).await?;
        }
        handover
    };
    if let Some(after) = handover {
        scope
            .declare(tx, "grep_candidates", Some(candidates), Some(&after))
            .await?;
        drain(tx, "grep_candidates", glob, settings, collector, None).await?;
    }
    Ok(())
}

/// How the walk in path order is going: documents read and documents with
/// at least one matching line.
#[derive(Debug, Default, Clone, Copy)]
struct Probe {
    read: u64,
    matched: u64,
}

impl Probe {
    /// True once the walk has read enough to judge and few documents match.
    fn hand_over(&self) -> bool {
        self.read >= WALK_PROBE_DOCS && self.matched * WALK_MIN_HIT_RATIO < self.read
    }
}

/// Matches documents in order off the async threads, feeding the collector
/// until it stops; says how many were read and how many matched.
async fn match_docs(
    collector: &mut Collector,
    settings: &Arc<Settings>,
    docs: Vec<Doc>,
) -> Result<Probe, SearchError> {
    let settings = settings.clone();
    let mut working = std::mem::take(collector);
    let (done, probe) = tokio::task::spawn_blocking(move || {
        let mut probe = Probe::default();
        for doc in &docs {
            if working.stop.is_some() {
                break;
            }
            if Instant::now() > settings.deadline {
                working.stop = Some(Stop::Time);
                break;
            }
            working.documents_searched += 1;
            let seen = working.seen;
            scan(doc, &settings, &mut working);
            probe.read += 1;
            probe.matched += u64::from(working.seen > seen);
        }
        (working, probe)
    })
    .await?;
    *collector = done;
    Ok(probe)
}

/// Fetches the cursor's rows and matches their documents, batch by batch,
/// until the cursor ends or the collector stops: `None`. With a probe, stops
/// early when [`Probe::hand_over`] says so and returns the (path, id) of the
/// last document read, for the index to go on after.
async fn drain(
    tx: &mut ScopedTx,
    cursor: &str,
    glob: Option<&NameGlob>,
    settings: &Arc<Settings>,
    collector: &mut Collector,
    mut probe: Option<&mut Probe>,
) -> Result<Option<(String, Uuid)>, SearchError> {
    let fetch = format!("FETCH {CURSOR_BATCH} FROM {cursor}");
    loop {
        let rows: Vec<(Uuid, String, String, i64)> =
            sqlx::query_as(&fetch).fetch_all(&mut **tx).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|(_, path, name, _)| glob.is_none_or(|g| g.is_match(path, name)))
            .collect();
        for batch in content_batches(rows) {
            let last = batch.last().map(|(id, path, ..)| (path.clone(), *id));
            let ids: Vec<Uuid> = batch.iter().map(|(id, ..)| *id).collect();
            let mut contents: HashMap<Uuid, String> =
                sqlx::query_as("SELECT id, content FROM documents WHERE id = ANY($1)")
                    .bind(&ids)
                    .fetch_all(&mut **tx)
                    .await?
                    .into_iter()
                    .collect();
            let docs: Vec<Doc> = batch
                .into_iter()
                .filter_map(|(id, path, name, _)| {
                    contents.remove(&id).map(|content| Doc {
                        id,
                        path,
                        name,
                        content,
                    })
                })
                .collect();
            let read = match_docs(collector, settings, docs).await?;
            if collector.stop.is_some() {
                return Ok(None);
            }
            if let Some(probe) = probe.as_deref_mut() {
                probe.read += read.read;
                probe.matched += read.matched;
                if probe.hand_over() {
                    return Ok(last);
                }
            }
        }
    }
}

/// Groups candidate rows so one batch's contents stay within the limits.
fn content_batches(
    rows: Vec<(Uuid, String, String, i64)>,
) -> Vec<Vec<(Uuid, String, String, i64)>> {
    let mut batches = Vec::new();
    let mut batch = Vec::new();
    let mut bytes = 0;
    for row in rows {
        if !batch.is_empty()
            && (batch.len() >= CONTENT_BATCH_DOCS || bytes + row.3 > CONTENT_BATCH_BYTES)
        {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += row.3;
        batch.push(row);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

/// The matcher and the PostgreSQL conditions every match satisfies.
fn compile(
    pattern: &str,
    is_regex: bool,
    case_sensitive: bool,
) -> Result<(Regex, Vec<String>), ToolError> {
    let source = if is_regex {
        pattern.to_string()
    } else {
        regex::escape(pattern)
    };
    // Parsed with the same settings the regex is built with, so the
    // conditions describe exactly what it matches.
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(!case_sensitive)
        .multi_line(true)
        .crlf(true)
        .nest_limit(REGEX_NEST_LIMIT)
        .build()
        .parse(&source)
        .map_err(|e| syntax_error(pattern, &e))?;
    let regex = RegexBuilder::new(&source)
        .case_insensitive(!case_sensitive)
        .multi_line(true)
        .crlf(true)
        .nest_limit(REGEX_NEST_LIMIT)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => ToolError::invalid(format!(
                "pattern {pattern:?} is too large: it compiles to more than {} KiB; use a shorter pattern, smaller repetition counts ({{n,m}}) or narrower classes than \\w and .",
                limit / 1024
            )),
            other => ToolError::invalid(format!("invalid regex {pattern:?}: {other}")),
        })?;
    Ok((regex, content_conditions(&hir)))
}

fn syntax_error(pattern: &str, error: &regex_syntax::Error) -> ToolError {
    let (what, offset) = match error {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), Some(e.span().start.offset)),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), Some(e.span().start.offset)),
        other => (other.to_string(), None),
    };
    let at = offset
        .and_then(|o| pattern.get(..o))
        .map(|before| format!(" at character {}", before.chars().count() + 1))
        .unwrap_or_default();
    ToolError::invalid(format!(
        "invalid regex {pattern:?}: {what}{at}; fix the pattern, escape special characters with a backslash (\\. \\( \\[ \\*), or set regex to false to search for the text as written"
    ))
}

/// What every batch's matching needs.
struct Settings {
    regex: Regex,
    context_lines: usize,
    deadline: Instant,
}

struct Doc {
    id: Uuid,
    path: String,
    name: String,
    content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// max_results lines were returned and there is at least one more.
    Full,
    /// The character budget is spent.
    Budget,
    /// SEARCH_BUDGET ran out.
    Time,
}

#[derive(Default)]
struct Collector {
    skip: u64,
    max: usize,
    budget_left: usize,
    /// Matching lines met so far, skipped ones included.
    seen: u64,
    results: Vec<LineMatch>,
    documents_searched: u64,
    stop: Option<Stop>,
}

impl Collector {
    fn finish(self) -> Output {
        let next = self.skip + self.results.len() as u64;
        let more = self.stop.map(|stop| More {
            skip: next,
            hint: match stop {
                Stop::Full | Stop::Budget => format!(
                    "more matching lines follow; call again with skip: {next} for the next ones, or narrow with path_glob, source_id, document_id or a more specific pattern{}",
                    if stop == Stop::Budget {
                        " (this answer reached its size limit; fewer context_lines fit more lines)"
                    } else {
                        ""
                    }
                ),
                Stop::Time => format!(
                    "the search stopped after {} s having searched {} documents, so later documents may match too; narrow with path_glob, source_id or document_id, or use a longer literal part in the pattern so the index can skip documents (skip: {next} continues, but searches the same documents again)",
                    SEARCH_BUDGET.as_secs(),
                    self.documents_searched
                ),
            },
        });
        Output {
            returned: self.results.len(),
            results: self.results,
            documents_searched: self.documents_searched,
            more,
        }
    }

    /// Takes one matching line; false once nothing more is wanted.
    fn accept(&mut self, doc: &Doc, line: PendingLine, context_lines: usize) -> bool {
        self.seen += 1;
        if self.seen <= self.skip {
            return true;
        }
        if self.results.len() >= self.max {
            self.stop = Some(Stop::Full);
            return false;
        }
        let result = line.render(doc, context_lines);
        let size = result.text.chars().count()
            + result
                .matches
                .iter()
                .map(|m| m.text.chars().count())
                .sum::<usize>()
            + result
                .before
                .iter()
                .chain(&result.after)
                .map(|l| l.chars().count())
                .sum::<usize>();
        // The first line always fits: an answer never comes back empty
        // because of the budget.
        if size > self.budget_left && !self.results.is_empty() {
            self.stop = Some(Stop::Budget);
            return false;
        }
        self.budget_left = self.budget_left.saturating_sub(size);
        self.results.push(result);
        true
    }
}

/// Where a scan through a document has got to: byte position, character
/// offset, line number and the start of that line. Only moves forward, so a
/// whole document costs one pass however many matches it has.
struct LineCursor {
    byte: usize,
    chars: u64,
    line: u64,
    line_start_byte: usize,
    line_start_char: u64,
}

impl LineCursor {
    fn new() -> Self {
        LineCursor {
            byte: 0,
            chars: 0,
            line: 1,
            line_start_byte: 0,
            line_start_char: 0,
        }
    }

    fn advance(&mut self, text: &str, to: usize) {
        for (i, &b) in text.as_bytes()[self.byte..to].iter().enumerate() {
            // Every byte but a UTF-8 continuation byte starts a character.
            if b & 0xc0 != 0x80 {
                self.chars += 1;
            }
            if b == b'\n' {
                self.line += 1;
                self.line_start_byte = self.byte + i + 1;
                self.line_start_char = self.chars;
            }
        }
        self.byte = to;
    }
}

/// A matching line being gathered: the matches on it, as byte and
/// character ranges.
struct PendingLine {
    line: u64,
    line_start_byte: usize,
    line_start_char: u64,
    spans: Vec<(usize, usize, u64, u64)>,
    extra: u64,
}

impl PendingLine {
    fn render(&self, doc: &Doc, context_lines: usize) -> LineMatch {
        let text = doc.content.as_str();
        let start = self.line_start_byte;
        let raw_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = strip_cr(&text[start..raw_end]);
        let line_chars = line.chars().count();
        let (shown, text_start, trimmed) = if line_chars <= LINE_WINDOW_CHARS {
            (line.to_string(), self.line_start_char, None)
        } else {
            let first = self
                .spans
                .first()
                .map_or(0, |s| (s.2 - self.line_start_char) as usize);
            let from = first
                .saturating_sub(LINE_LEAD_CHARS)
                .min(line_chars - LINE_WINDOW_CHARS);
            let shown: String = line.chars().skip(from).take(LINE_WINDOW_CHARS).collect();
            (
                shown,
                self.line_start_char + from as u64,
                Some(Trimmed {
                    chars_before: from as u64,
                    chars_after: (line_chars - from - LINE_WINDOW_CHARS) as u64,
                }),
            )
        };
        let matches = self
            .spans
            .iter()
            .map(|&(sb, eb, sc, ec)| Span {
                char_start: sc,
                char_end: ec,
                text: cap(&text[sb..eb], MATCH_TEXT_CHARS),
            })
            .collect();

        let mut before = Vec::new();
        let mut pos = start;
        while before.len() < context_lines && pos > 0 {
            let end = pos - 1;
            let from = text[..end].rfind('\n').map_or(0, |i| i + 1);
            before.push(cap(strip_cr(&text[from..end]), CONTEXT_LINE_CHARS));
            pos = from;
        }
        before.reverse();
        let mut after = Vec::new();
        let mut end = raw_end;
        while after.len() < context_lines && end < text.len() {
            let from = end + 1;
            if from >= text.len() {
                break;
            }
            end = text[from..].find('\n').map_or(text.len(), |i| from + i);
            after.push(cap(strip_cr(&text[from..end]), CONTEXT_LINE_CHARS));
        }

        LineMatch {
            document_id: doc.id,
            path: doc.path.clone(),
            name: doc.name.clone(),
            line: self.line,
            text: shown,
            text_start,
            trimmed,
            matches,
            more_matches_on_line: (self.extra > 0).then_some(self.extra),
            before,
            after,
        }
    }
}

fn strip_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// At most `max` characters of `s`, with an ellipsis when cut.
fn cap(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// Finds every match in one document and hands the collector one entry per
/// matching line.
fn scan(doc: &Doc, settings: &Settings, out: &mut Collector) {
    let text = doc.content.as_str();
    let mut cursor = LineCursor::new();
    let mut pending: Option<PendingLine> = None;
    for (i, m) in settings.regex.find_iter(text).enumerate() {
        if i % 1024 == 1023 && Instant::now() > settings.deadline {
            out.stop = Some(Stop::Time);
            return;
        }
        cursor.advance(text, m.start());
        let start_char = cursor.chars;
        let end_char = start_char + text[m.start()..m.end()].chars().count() as u64;
        let span = (m.start(), m.end(), start_char, end_char);
        match &mut pending {
            Some(p) if p.line == cursor.line => {
                if p.spans.len() < MATCHES_PER_LINE {
                    p.spans.push(span);
                } else {
                    p.extra += 1;
                }
            }
            _ => {
                if let Some(done) = pending.take()
                    && !out.accept(doc, done, settings.context_lines)
                {
                    return;
                }
                pending = Some(PendingLine {
                    line: cursor.line,
                    line_start_byte: cursor.line_start_byte,
                    line_start_char: cursor.line_start_char,
                    spans: vec![span],
                    extra: 0,
                });
            }
        }
        cursor.advance(text, m.end());
    }
    if let Some(done) = pending {
        out.accept(doc, done, settings.context_lines);
    }
}
