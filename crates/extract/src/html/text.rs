//! A whole uploaded document as plain text: the readable text of every part
//! (navigation, scripts and page chrome dropped, no content guessing), its
//! headings with their character offsets, and what its head declares.

use super::DocumentHead;
use super::dom::{DEAD, Dom, is_block};
use super::head::Head;
use crate::Limits;

/// A document's text, headings and head metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentText {
    /// Block structure as line and paragraph breaks, list markers, table
    /// cells joined by " | ".
    pub text: String,
    pub headings: Vec<Heading>,
    /// The head's metadata; the title falls back to the first `<h1>`.
    pub head: DocumentHead,
}

/// A heading and where it starts in `DocumentText::text`, in characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    pub char_offset: u64,
}

/// Renders the whole of `source` (already decoded) as text.
pub fn document(source: &str, limits: &Limits) -> DocumentText {
    let document = super::parse(source, limits);
    let dom = Dom::build(&document);
    let (text, headings) = readable_text(&dom);
    let mut head = Head::read(&dom).document();
    if head.title.is_none() {
        head.title = headings
            .iter()
            .find(|h| h.level == 1)
            .map(|h| h.text.clone());
    }
    DocumentText {
        text,
        headings,
        head,
    }
}

/// Page chrome an uploaded document's text leaves out beside what is never
/// readable (`dom::DEAD`): navigation and asides. The readable extraction of
/// web pages keeps them in the tree and scores them out instead
/// (`readable::content`), so they are not in `DEAD`.
const CHROME: &[&str] = &["aside", "datalist", "nav"];

/// Classes of page chrome, as DocBook-generated manuals (the PostgreSQL documentation among
/// them) mark their navigation bars.
const DROPPED_CLASSES: &[&str] = &["navheader", "navfooter"];

/// Whether `name` starts a line of its own here: the blocks of `dom::BLOCK`,
/// except table cells, which this renderer joins on their row's line.
fn starts_line(name: &str) -> bool {
    is_block(name) && !matches!(name, "td" | "th")
}

fn is_dropped(dom: &Dom<'_>, i: usize) -> bool {
    let Some(element) = dom.element(i) else {
        return false;
    };
    let name = element.name();
    if DEAD.contains(&name) || CHROME.contains(&name) {
        return true;
    }
    // An article's own header and footer carry its title and byline; only the page's are chrome.
    if (name == "header" || name == "footer") && !has_ancestor(dom, i, "article") {
        return true;
    }
    if element.attr("hidden").is_some()
        || element.attr("aria-hidden") == Some("true")
        || element.attr("role") == Some("navigation")
    {
        return true;
    }
    element.classes().any(|c| DROPPED_CLASSES.contains(&c))
}

fn has_ancestor(dom: &Dom<'_>, i: usize, name: &str) -> bool {
    let mut at = dom.parent(i);
    while let Some(p) = at {
        if dom.tag(p) == name {
            return true;
        }
        at = dom.parent(p);
    }
    false
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// Walks the flat tree in order (deeply nested markup must not exhaust the stack) and writes
/// the text with block structure turned into line and paragraph breaks.
fn readable_text(dom: &Dom<'_>) -> (String, Vec<Heading>) {
    let mut out = TextBuilder::default();
    let mut headings = Vec::new();
    // Elements entered and not yet left, innermost last.
    let mut open: Vec<usize> = Vec::new();
    // Per parent: list items seen so far, and whether a table cell was.
    let mut items = vec![0u32; dom.len()];
    let mut had_cell = vec![false; dom.len()];
    let mut pre_depth = 0usize;
    let mut cell_depth = 0usize;
    let mut i = 0;
    while i < dom.len() {
        while let Some(&top) = open.last() {
            if dom.end(top) > i {
                break;
            }
            open.pop();
            close(dom, top, &mut out, &mut pre_depth, &mut cell_depth);
        }
        let Some(element) = dom.element(i) else {
            if let Some(text) = dom.text(i) {
                out.text(text, pre_depth > 0);
            }
            i += 1;
            continue;
        };
        let name = element.name();
        // Siblings count whether shown or not, as the numbering of a list does.
        let (item, previous_cell) = match dom.parent(i) {
            Some(p) => {
                let previous_cell = had_cell[p];
                match name {
                    "li" => items[p] += 1,
                    "td" | "th" => had_cell[p] = true,
                    _ => {}
                }
                (items[p], previous_cell)
            }
            None => (0, false),
        };
        if super::math::is_formula(dom, i) {
            if let Some(f) = super::math::formula(dom, i) {
                if f.display {
                    out.block(Break::Paragraph);
                }
                out.text(&f.text, false);
                if f.display {
                    out.block(Break::Paragraph);
                }
            }
            i = dom.end(i);
            continue;
        }
        if is_dropped(dom, i) {
            i = dom.end(i);
            continue;
        }
        let brk = if cell_depth > 0 {
            Break::Space
        } else {
            Break::Paragraph
        };
        if starts_line(name) {
            out.block(
                if name == "li" || name == "tr" || name == "dt" || name == "dd" {
                    brk.min(Break::Line)
                } else {
                    brk
                },
            );
        }
        match name {
            "br" => out.line_break(),
            "pre" => pre_depth += 1,
            "td" | "th" => {
                if previous_cell {
                    out.separator(" | ");
                }
                cell_depth += 1;
            }
            "li" => {
                if let Some(marker) = list_marker(dom, i, item) {
                    out.separator(&marker);
                }
            }
            _ => {}
        }
        if let Some(level) = heading_level(name) {
            let title = heading_text(dom, i);
            if !title.is_empty() {
                out.flush();
                headings.push(Heading {
                    level,
                    text: title,
                    char_offset: out.chars,
                });
            }
        }
        open.push(i);
        i += 1;
    }
    while let Some(top) = open.pop() {
        close(dom, top, &mut out, &mut pre_depth, &mut cell_depth);
    }
    (out.text, headings)
}

/// Leaves element `i`: the break a block owes after it.
fn close(
    dom: &Dom<'_>,
    i: usize,
    out: &mut TextBuilder,
    pre_depth: &mut usize,
    cell_depth: &mut usize,
) {
    let name = dom.tag(i);
    match name {
        "pre" => *pre_depth = pre_depth.saturating_sub(1),
        "td" | "th" => *cell_depth = cell_depth.saturating_sub(1),
        _ => {}
    }
    if starts_line(name) {
        let brk = if *cell_depth > 0 {
            Break::Space
        } else {
            Break::Paragraph
        };
        out.block(if name == "li" || name == "tr" || name == "dt" {
            brk.min(Break::Line)
        } else {
            brk
        });
    }
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// "- " for an unordered item, "3. " for the third of an ordered list.
fn list_marker(dom: &Dom<'_>, i: usize, item: u32) -> Option<String> {
    match dom.tag(dom.parent(i)?) {
        "ol" => Some(format!("{item}. ")),
        "ul" | "menu" => Some("- ".to_string()),
        _ => None,
    }
}

fn heading_text(dom: &Dom<'_>, i: usize) -> String {
    let mut text = String::new();
    let mut j = i + 1;
    while j < dom.end(i) {
        if is_dropped(dom, j) {
            j = dom.end(j);
            continue;
        }
        if let Some(t) = dom.text(j) {
            text.push_str(t);
        }
        j += 1;
    }
    collapse_whitespace(&text)
}

/// The strongest separation still owed before the next visible character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Break {
    None,
    Space,
    Line,
    Paragraph,
}

/// Accumulates output text, collapsing whitespace outside `<pre>` and deferring breaks so that
/// the text never starts or ends with blank lines and never holds more than one blank line.
#[derive(Debug)]
struct TextBuilder {
    text: String,
    chars: u64,
    pending: Break,
}

impl Default for TextBuilder {
    fn default() -> Self {
        TextBuilder {
            text: String::new(),
            chars: 0,
            pending: Break::None,
        }
    }
}

impl TextBuilder {
    fn block(&mut self, brk: Break) {
        self.pending = self.pending.max(brk);
    }

    fn line_break(&mut self) {
        self.pending = if self.pending >= Break::Line {
            Break::Paragraph
        } else {
            Break::Line
        };
    }

    fn at_line_start(&self) -> bool {
        self.text.is_empty() || self.text.ends_with('\n')
    }

    /// Writes the owed break, never at the very start and never more newlines than needed.
    fn flush(&mut self) {
        if self.text.is_empty() {
            self.pending = Break::None;
            return;
        }
        let trailing = self.text.chars().rev().take_while(|&c| c == '\n').count();
        let wanted = match self.pending {
            Break::None => 0,
            Break::Space => {
                if !self.at_line_start() && !self.text.ends_with(' ') {
                    self.push(" ");
                }
                0
            }
            Break::Line => 1,
            Break::Paragraph => 2,
        };
        for _ in trailing..wanted {
            self.push("\n");
        }
        self.pending = Break::None;
    }

    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.chars += s.chars().count() as u64;
    }

    fn separator(&mut self, s: &str) {
        self.flush();
        if self.at_line_start() {
            self.push(s.trim_start());
        } else {
            self.push(s);
        }
    }

    fn text(&mut self, s: &str, preformatted: bool) {
        if preformatted {
            if !s.is_empty() {
                self.flush();
                self.push(s);
            }
            return;
        }
        for word in s.split_inclusive(char::is_whitespace) {
            let trimmed = word.trim_end_matches(char::is_whitespace);
            if !trimmed.is_empty() {
                self.flush();
                self.push(trimmed);
            } else if word.is_empty() {
                continue;
            }
            if trimmed.len() < word.len() {
                self.pending = self.pending.max(Break::Space);
            }
        }
    }
}
