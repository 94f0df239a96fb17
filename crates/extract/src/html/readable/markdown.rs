//! Renders the picked content as Markdown, walking the flat tree with a
//! loop and a stack of open constructs (never recursing on depth).
//!
//! Each construct that rewrites what it holds (a list item indents it, a
//! quote prefixes it, a table cell flattens it) collects its output in a
//! buffer of its own and hands the rewritten text to its parent on close.

use url::Url;

use super::Link;
use super::content::{Content, is_data_table};
use crate::html::dom::{DEAD, Dom};
use crate::html::math;

/// Constructs nested deeper than this render as plain blocks, so rewriting
/// buffers on close stays linear in practice.
const MAX_FRAMES: usize = 48;

enum Kind {
    Root,
    Heading(usize),
    Emphasis(&'static str),
    Code,
    Link(Option<String>),
    List {
        ordered: bool,
        next: u64,
    },
    Item,
    Quote,
    Table {
        rows: Vec<Vec<String>>,
        caption: Option<String>,
    },
    Row(Vec<String>),
    Cell {
        span: usize,
    },
    Caption,
}

struct Frame {
    node: usize,
    kind: Kind,
    buf: String,
    /// Whitespace came first, before anything was written (inline frames).
    lead_space: bool,
}

impl Frame {
    fn new(node: usize, kind: Kind) -> Self {
        Frame {
            node,
            kind,
            buf: String::new(),
            lead_space: false,
        }
    }

    fn is_inline(&self) -> bool {
        matches!(self.kind, Kind::Emphasis(_) | Kind::Code | Kind::Link(_))
    }
}

pub(crate) struct Rendered {
    pub markdown: String,
    pub links: Vec<Link>,
}

pub(crate) fn render(dom: &Dom<'_>, content: &Content, base: Option<&Url>) -> Rendered {
    let mut r = Renderer {
        dom,
        removed: &content.removed,
        base,
        frames: vec![Frame::new(0, Kind::Root)],
        links: Vec::new(),
    };
    for &root in &content.roots {
        r.walk(root);
        r.block_break();
    }
    while r.frames.len() > 1 {
        r.close_top();
    }
    let markdown = r.frames.pop().map(|f| f.buf).unwrap_or_default();
    Rendered {
        markdown: tidy(&markdown),
        links: r.links,
    }
}

struct Renderer<'d, 'a> {
    dom: &'d Dom<'a>,
    removed: &'d [bool],
    base: Option<&'d Url>,
    frames: Vec<Frame>,
    links: Vec<Link>,
}

enum Visit {
    Children,
    Done,
}

impl Renderer<'_, '_> {
    fn walk(&mut self, root: usize) {
        let dom = self.dom;
        let mut i = root;
        loop {
            let visit = if self.removed[i] {
                Visit::Done
            } else {
                self.enter(i)
            };
            if matches!(visit, Visit::Children) && i + 1 < dom.end(i) {
                i += 1;
                continue;
            }
            if matches!(visit, Visit::Children) {
                self.exit(i);
            }
            let mut cur = i;
            loop {
                if cur == root {
                    return;
                }
                let Some(parent) = dom.parent(cur) else {
                    return;
                };
                let next = dom.end(cur);
                if next < dom.end(parent) {
                    i = next;
                    break;
                }
                self.exit(parent);
                cur = parent;
            }
        }
    }

    fn top(&mut self) -> &mut Frame {
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn top_kind(&self) -> &Kind {
        &self.frames[self.frames.len() - 1].kind
    }

    fn push_frame(&mut self, node: usize, kind: Kind) -> bool {
        if self.frames.len() >= MAX_FRAMES {
            return false;
        }
        self.frames.push(Frame::new(node, kind));
        true
    }

    fn in_code(&self) -> bool {
        self.frames.iter().any(|f| matches!(f.kind, Kind::Code))
    }

    fn enter(&mut self, i: usize) -> Visit {
        let dom = self.dom;
        if let Some(text) = dom.text(i) {
            self.push_text(text);
            return Visit::Done;
        }
        let Some(el) = dom.element(i) else {
            return Visit::Done;
        };
        let tag = el.name();
        if math::is_formula(dom, i) {
            self.formula(i);
            return Visit::Done;
        }
        if DEAD.contains(&tag) {
            return Visit::Done;
        }
        match tag {
            "br" => {
                self.line_break();
                Visit::Done
            }
            "hr" => {
                self.block_break();
                self.top().buf.push_str("---");
                self.block_break();
                Visit::Done
            }
            "img" => {
                self.image(i);
                Visit::Done
            }
            "pre" => {
                self.preformatted(i);
                Visit::Done
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.block_break();
                let level = usize::from(tag.as_bytes()[1] - b'0');
                self.push_frame(i, Kind::Heading(level));
                Visit::Children
            }
            "ul" | "ol" | "menu" | "dir" => {
                // A list nested in an item stays tight; closing it adds the newline.
                if !matches!(self.top_kind(), Kind::Item) {
                    self.block_break();
                }
                let start = el
                    .attr("start")
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(1)
                    .min(1_000_000_000);
                self.push_frame(
                    i,
                    Kind::List {
                        ordered: tag == "ol",
                        next: start,
                    },
                );
                Visit::Children
            }
            "li" => {
                self.push_frame(i, Kind::Item);
                Visit::Children
            }
            "blockquote" => {
                self.block_break();
                self.push_frame(i, Kind::Quote);
                Visit::Children
            }
            "table" => {
                self.block_break();
                if is_data_table(dom, i) {
                    self.push_frame(
                        i,
                        Kind::Table {
                            rows: Vec::new(),
                            caption: None,
                        },
                    );
                }
                Visit::Children
            }
            "caption" if matches!(self.top_kind(), Kind::Table { .. }) => {
                self.push_frame(i, Kind::Caption);
                Visit::Children
            }
            "tr" if matches!(self.top_kind(), Kind::Table { .. }) => {
                self.push_frame(i, Kind::Row(Vec::new()));
                Visit::Children
            }
            "td" | "th" if matches!(self.top_kind(), Kind::Row(_)) => {
                let span = el
                    .attr("colspan")
                    .and_then(|s| s.trim().parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, 50);
                self.push_frame(i, Kind::Cell { span });
                Visit::Children
            }
            "a" => {
                let href = el.attr("href").and_then(|h| self.resolve(h));
                self.push_frame(i, Kind::Link(href));
                Visit::Children
            }
            "strong" | "b" => {
                self.push_frame(i, Kind::Emphasis("**"));
                Visit::Children
            }
            "em" | "i" | "cite" | "dfn" => {
                self.push_frame(i, Kind::Emphasis("*"));
                Visit::Children
            }
            "del" | "s" | "strike" => {
                self.push_frame(i, Kind::Emphasis("~~"));
                Visit::Children
            }
            "code" | "kbd" | "samp" | "tt" if !self.in_code() => {
                self.push_frame(i, Kind::Code);
                Visit::Children
            }
            _ => {
                if crate::html::dom::is_block(tag) {
                    self.block_break();
                }
                Visit::Children
            }
        }
    }

    fn exit(&mut self, i: usize) {
        if self.frames.len() > 1 && self.top().node == i {
            self.close_top();
            return;
        }
        if self
            .dom
            .element(i)
            .is_some_and(|e| crate::html::dom::is_block(e.name()))
        {
            self.block_break();
        }
    }

    fn close_top(&mut self) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let Frame {
            kind,
            buf,
            lead_space,
            ..
        } = frame;
        match kind {
            Kind::Root => self.frames.push(Frame {
                node: 0,
                kind: Kind::Root,
                buf,
                lead_space,
            }),
            Kind::Heading(level) => {
                let text = fold(&buf);
                if !text.is_empty() {
                    self.block_break();
                    let line = format!("{} {}", "#".repeat(level), text);
                    self.top().buf.push_str(&line);
                    self.block_break();
                }
            }
            Kind::Emphasis(marker) => {
                let trail = buf.ends_with([' ', '\n']);
                let inner = buf.trim();
                if inner.is_empty() {
                    if lead_space || trail {
                        self.space();
                    }
                } else if inner.contains('\n') {
                    self.push_inline(lead_space, inner, trail);
                } else {
                    self.push_inline(lead_space, &format!("{marker}{inner}{marker}"), trail);
                }
            }
            Kind::Code => {
                let trail = buf.ends_with(' ');
                let inner = fold(&buf);
                if inner.is_empty() {
                    if lead_space || trail {
                        self.space();
                    }
                } else {
                    let ticks = "`".repeat(longest_run(&inner, '`') + 1);
                    let pad = if inner.starts_with('`') || inner.ends_with('`') {
                        " "
                    } else {
                        ""
                    };
                    self.push_inline(
                        lead_space,
                        &format!("{ticks}{pad}{inner}{pad}{ticks}"),
                        trail,
                    );
                }
            }
            Kind::Link(href) => {
                let trail = buf.ends_with([' ', '\n']);
                let text = fold(&buf);
                // Permalink markers beside headings ("#", "¶") say nothing to a reader.
                if matches!(text.as_str(), "\\#" | "#" | "¶" | "§" | "🔗")
                    && href.as_deref().is_some_and(|h| h.contains('#'))
                {
                    if lead_space || trail {
                        self.space();
                    }
                    return;
                }
                match href {
                    Some(url) if !text.is_empty() => {
                        let shown = format!("[{text}]({})", escape_url(&url));
                        self.push_inline(lead_space, &shown, trail);
                        self.links.push(Link {
                            text: plain(&text),
                            url,
                        });
                    }
                    _ if !text.is_empty() => self.push_inline(lead_space, &text, trail),
                    _ => {
                        if lead_space || trail {
                            self.space();
                        }
                    }
                }
            }
            Kind::List { .. } => {
                let body = buf.trim_end();
                if body.is_empty() {
                    return;
                }
                if matches!(self.top().kind, Kind::Item) {
                    let top = self.top();
                    trim_spaces(&mut top.buf);
                    if !top.buf.is_empty() && !top.buf.ends_with('\n') {
                        top.buf.push('\n');
                    }
                    top.buf.push_str(body);
                    top.buf.push('\n');
                } else {
                    self.block_break();
                    self.top().buf.push_str(body);
                    self.block_break();
                }
            }
            Kind::Item => {
                let body = buf.trim();
                let marker = match &mut self.top().kind {
                    Kind::List {
                        ordered: true,
                        next,
                    } => {
                        let m = format!("{next}. ");
                        *next += 1;
                        m
                    }
                    _ => "- ".to_string(),
                };
                if body.is_empty() {
                    return;
                }
                let indented = indent(body, marker.len());
                let in_list = matches!(self.top().kind, Kind::List { .. });
                if !in_list {
                    self.block_break();
                }
                let top = self.top();
                top.buf.push_str(&marker);
                top.buf.push_str(&indented);
                top.buf.push('\n');
            }
            Kind::Quote => {
                let body = buf.trim();
                if body.is_empty() {
                    return;
                }
                let quoted: Vec<String> = body
                    .lines()
                    .map(|l| {
                        if l.is_empty() {
                            ">".to_string()
                        } else {
                            format!("> {l}")
                        }
                    })
                    .collect();
                self.block_break();
                self.top().buf.push_str(&quoted.join("\n"));
                self.block_break();
            }
            Kind::Caption => {
                let text = fold(&buf);
                if let Kind::Table { caption, .. } = &mut self.top().kind {
                    *caption = Some(text);
                }
            }
            Kind::Cell { span } => {
                let text = fold(&buf).replace('|', "\\|");
                if let Kind::Row(cells) = &mut self.top().kind {
                    cells.push(text);
                    cells.extend(std::iter::repeat_n(String::new(), span - 1));
                }
            }
            Kind::Row(cells) => {
                if let Kind::Table { rows, .. } = &mut self.top().kind {
                    rows.push(cells);
                } else {
                    self.push_inline(false, &cells.join(" "), true);
                }
            }
            Kind::Table { rows, caption } => {
                let table = pipe_table(&rows, &buf);
                self.block_break();
                if let Some(c) = caption.filter(|c| !c.is_empty()) {
                    self.top().buf.push_str(&c);
                    self.block_break();
                }
                self.top().buf.push_str(&table);
                self.block_break();
            }
        }
    }

    /// Ends the current block: a blank line, unless nothing was written.
    fn block_break(&mut self) {
        let top = self.top();
        trim_spaces(&mut top.buf);
        if top.buf.is_empty() || top.buf.ends_with("\n\n") {
            return;
        }
        top.buf.push_str(if top.buf.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        });
    }

    fn line_break(&mut self) {
        let top = self.top();
        trim_spaces(&mut top.buf);
        if !top.buf.is_empty() && !top.buf.ends_with('\n') {
            top.buf.push_str("  \n");
        }
    }

    fn space(&mut self) {
        let top = self.top();
        if top.buf.is_empty() {
            if top.is_inline() {
                top.lead_space = true;
            }
        } else if !top.buf.ends_with([' ', '\n']) {
            top.buf.push(' ');
        }
    }

    fn push_inline(&mut self, lead: bool, s: &str, trail: bool) {
        if lead {
            self.space();
        }
        self.top().buf.push_str(s);
        if trail {
            self.space();
        }
    }

    fn push_text(&mut self, text: &str) {
        let code = matches!(self.top().kind, Kind::Code) || self.in_code();
        let mut first = true;
        for word in text.split_ascii_whitespace() {
            if !first || text.starts_with(|c: char| c.is_ascii_whitespace()) {
                self.space();
            }
            first = false;
            let top = self.top();
            let line_start = top.buf.is_empty() && !top.is_inline() || top.buf.ends_with('\n');
            let word = word.replace('\u{a0}', " ");
            if code {
                top.buf.push_str(&word);
            } else {
                escape_into(&mut top.buf, &word, line_start);
            }
        }
        if !first && text.ends_with(|c: char| c.is_ascii_whitespace()) {
            self.space();
        }
        if first && !text.is_empty() {
            // All whitespace: a single space between words.
            self.space();
        }
    }

    fn image(&mut self, i: usize) {
        let dom = self.dom;
        let alt = dom.attr(i, "alt").map(fold).unwrap_or_default();
        let src = ["src", "data-src", "data-original", "data-lazy-src"]
            .iter()
            .filter_map(|a| dom.attr(i, a))
            .map(str::trim)
            .find(|s| !s.is_empty() && !s.starts_with("data:"))
            .or_else(|| {
                dom.attr(i, "srcset")
                    .and_then(|s| s.split_ascii_whitespace().next())
                    .filter(|s| !s.starts_with("data:"))
            });
        let url = src.and_then(|s| self.resolve(s));
        let mut alt_escaped = String::new();
        escape_into(&mut alt_escaped, &alt, false);
        let shown = match url {
            Some(url) => format!("![{alt_escaped}]({})", escape_url(&url)),
            None if !alt.is_empty() => alt_escaped,
            None => return,
        };
        self.push_inline(false, &shown, false);
    }

    /// A formula: TeX in `$…$` as written, a linear reading escaped as text;
    /// a display formula is a paragraph of its own.
    fn formula(&mut self, i: usize) {
        let Some(f) = math::formula(self.dom, i) else {
            return;
        };
        let shown = if f.text.starts_with('$') {
            f.text
        } else {
            let mut s = String::new();
            for (k, word) in f.text.split(' ').enumerate() {
                if k > 0 {
                    s.push(' ');
                }
                escape_into(&mut s, word, false);
            }
            s
        };
        if f.display {
            self.block_break();
            self.top().buf.push_str(&shown);
            self.block_break();
        } else {
            self.push_inline(false, &shown, false);
        }
    }

    fn preformatted(&mut self, i: usize) {
        let dom = self.dom;
        let mut text = String::new();
        let end = dom.end(i);
        let mut j = i + 1;
        while j < end {
            if self.removed[j] || DEAD.contains(&dom.tag(j)) {
                j = dom.end(j);
                continue;
            }
            if let Some(t) = dom.text(j) {
                text.push_str(t);
            } else if dom.tag(j) == "br" {
                text.push('\n');
            }
            j += 1;
        }
        let lang = [Some(i), dom.find(i, "code")]
            .into_iter()
            .flatten()
            .filter_map(|n| dom.attr(n, "class"))
            .flat_map(str::split_ascii_whitespace)
            .find_map(|c| {
                c.strip_prefix("language-")
                    .or_else(|| c.strip_prefix("lang-"))
                    .or_else(|| c.strip_prefix("highlight-source-"))
            })
            .filter(|l| {
                l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-#_.".contains(c))
            })
            .unwrap_or("");
        let body = text.replace("\r\n", "\n").replace('\u{a0}', " ");
        let body = body.trim_end();
        let body = body.trim_start_matches('\n');
        if body.trim().is_empty() {
            return;
        }
        let fence = "`".repeat(longest_run(body, '`').max(2) + 1);
        self.block_break();
        let block = format!("{fence}{lang}\n{body}\n{fence}");
        self.top().buf.push_str(&block);
        self.block_break();
    }

    fn resolve(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() {
            return None;
        }
        let lower = href.to_ascii_lowercase();
        if lower.starts_with("javascript:")
            || lower.starts_with("data:")
            || lower.starts_with("vbscript:")
        {
            return None;
        }
        match Url::parse(href) {
            Ok(u) => Some(u.to_string()),
            Err(url::ParseError::RelativeUrlWithoutBase) => match self.base {
                Some(base) => base.join(href).ok().map(|u| u.to_string()),
                None => Some(href.to_string()),
            },
            Err(_) => None,
        }
    }
}

fn trim_spaces(buf: &mut String) {
    let kept = buf.trim_end_matches(' ').len();
    buf.truncate(kept);
}

/// Whitespace folded to single spaces, lines joined.
fn fold(s: &str) -> String {
    s.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// Link text without Markdown escapes, for the links list.
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(|n| n.is_ascii_punctuation()) {
            continue;
        }
        out.push(c);
    }
    out
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

fn indent(body: &str, width: usize) -> String {
    let pad = " ".repeat(width);
    let mut out = String::with_capacity(body.len());
    for (n, line) in body.lines().enumerate() {
        if n > 0 {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(&pad);
            }
        }
        out.push_str(line);
    }
    out
}

fn escape_url(url: &str) -> String {
    url.replace('(', "\\(")
        .replace(')', "\\)")
        .replace(' ', "%20")
}

/// Appends `word` with the characters Markdown would read as syntax escaped.
fn escape_into(out: &mut String, word: &str, line_start: bool) {
    let chars: Vec<char> = word.chars().collect();
    if line_start {
        let first = chars.first().copied().unwrap_or(' ');
        let all_same = chars.iter().all(|&c| c == first);
        let digits = chars.iter().take_while(|c| c.is_ascii_digit()).count();
        if matches!(first, '#' | '>' | '+' | '-' | '=') && (all_same || first == '>') {
            out.push('\\');
        } else if digits > 0 && digits + 1 == chars.len() && matches!(chars[digits], '.' | ')') {
            out.extend(&chars[..digits]);
            out.push('\\');
            out.push(chars[digits]);
            return;
        }
    }
    for (k, &c) in chars.iter().enumerate() {
        let prev = if k == 0 { None } else { Some(chars[k - 1]) };
        let next = chars.get(k + 1).copied();
        let escape = match c {
            '\\' | '*' | '`' | '[' | ']' => true,
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            '<' => next.is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')),
            '~' => next == Some('~'),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
}

/// A pipe table; the first row is the header, every row as wide as the widest.
fn pipe_table(rows: &[Vec<String>], loose: &str) -> String {
    let rows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r.iter().any(|c| !c.is_empty()))
        .collect();
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    if width == 0 {
        return fold(loose);
    }
    let line = |cells: &[String]| {
        let mut s = String::from("|");
        for k in 0..width {
            s.push(' ');
            s.push_str(cells.get(k).map_or("", String::as_str));
            s.push_str(" |");
        }
        s
    };
    let mut out = line(rows[0]);
    out.push('\n');
    out.push('|');
    out.push_str(&" --- |".repeat(width));
    for r in &rows[1..] {
        out.push('\n');
        out.push_str(&line(r));
    }
    let loose = fold(loose);
    if !loose.is_empty() {
        out.push_str("\n\n");
        out.push_str(&loose);
    }
    out
}

/// Final whitespace: no trailing spaces except hard breaks, at most one
/// blank line in a row; fenced code is left exactly as it is.
fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut blank = 0;
    let mut fence: Option<String> = None;
    for line in md.trim().lines() {
        let bare = line.trim_start_matches([' ', '>']);
        if let Some(f) = &fence {
            if bare.trim_end() == f {
                fence = None;
            }
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if bare.starts_with("```") {
            let ticks = bare.chars().take_while(|&c| c == '`').count();
            fence = Some("`".repeat(ticks));
        }
        let hard = line.ends_with("  ") && !line.trim().is_empty();
        let l = line.trim_end();
        if l.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(l);
        if hard {
            out.push_str("  ");
        }
        out.push('\n');
    }
    out.trim_end().to_string()
}
