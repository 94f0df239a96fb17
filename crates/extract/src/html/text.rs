//! A whole uploaded document as plain text: the readable text of every part
//! (navigation, scripts and page chrome dropped, no content guessing), its
//! headings with their character offsets, and what its head declares.

use ego_tree::NodeRef;
use ego_tree::iter::Edge;
use scraper::{Html, Node};

use super::DocumentHead;
use super::dom::Dom;
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
    let (text, headings) = readable_text(&document);
    let mut head = Head::read(&Dom::build(&document)).document();
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

/// Elements whose content is never part of the readable text.
const DROPPED: &[&str] = &[
    "aside", "button", "canvas", "datalist", "dialog", "embed", "head", "iframe", "input", "map",
    "nav", "noscript", "object", "script", "select", "style", "svg", "template", "textarea",
    "math",
];

/// Classes of page chrome, as DocBook-generated manuals (the PostgreSQL documentation among
/// them) mark their navigation bars.
const DROPPED_CLASSES: &[&str] = &["navheader", "navfooter"];

const BLOCKS: &[&str] = &[
    "address",
    "article",
    "blockquote",
    "body",
    "caption",
    "center",
    "details",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "li",
    "main",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

fn is_dropped(node: NodeRef<'_, Node>) -> bool {
    let Some(element) = node.value().as_element() else {
        return false;
    };
    let name = element.name();
    if DROPPED.contains(&name) {
        return true;
    }
    // An article's own header and footer carry its title and byline; only the page's are chrome.
    if (name == "header" || name == "footer") && !has_ancestor(node, "article") {
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

fn has_ancestor(node: NodeRef<'_, Node>, name: &str) -> bool {
    node.ancestors()
        .any(|a| a.value().as_element().is_some_and(|e| e.name() == name))
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

/// Walks the tree iteratively (deeply nested markup must not exhaust the stack) and writes the
/// text with block structure turned into line and paragraph breaks.
fn readable_text(document: &Html) -> (String, Vec<Heading>) {
    let mut out = TextBuilder::default();
    let mut headings = Vec::new();
    let mut skipping: Option<ego_tree::NodeId> = None;
    let mut pre_depth = 0usize;
    let mut cell_depth = 0usize;
    for edge in document.tree.root().traverse() {
        match edge {
            Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                if is_dropped(node) {
                    skipping = Some(node.id());
                    continue;
                }
                match node.value() {
                    Node::Text(text) => out.text(text, pre_depth > 0),
                    Node::Element(element) => {
                        let name = element.name();
                        let brk = if cell_depth > 0 {
                            Break::Space
                        } else {
                            Break::Paragraph
                        };
                        if BLOCKS.contains(&name) {
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
                                if has_previous_cell(node) {
                                    out.separator(" | ");
                                }
                                cell_depth += 1;
                            }
                            "li" => {
                                if let Some(marker) = list_marker(node) {
                                    out.separator(&marker);
                                }
                            }
                            _ => {}
                        }
                        if let Some(level) = heading_level(name) {
                            let title = heading_text(node);
                            if !title.is_empty() {
                                out.flush();
                                headings.push(Heading {
                                    level,
                                    text: title,
                                    char_offset: out.chars,
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if let Some(id) = skipping {
                    if id == node.id() {
                        skipping = None;
                    }
                    continue;
                }
                let Some(element) = node.value().as_element() else {
                    continue;
                };
                let name = element.name();
                match name {
                    "pre" => pre_depth = pre_depth.saturating_sub(1),
                    "td" | "th" => cell_depth = cell_depth.saturating_sub(1),
                    _ => {}
                }
                if BLOCKS.contains(&name) {
                    let brk = if cell_depth > 0 {
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
        }
    }
    (out.text, headings)
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn has_previous_cell(node: NodeRef<'_, Node>) -> bool {
    node.prev_siblings().any(|s| {
        s.value()
            .as_element()
            .is_some_and(|e| matches!(e.name(), "td" | "th"))
    })
}

/// "- " for an unordered item, "3. " for the third of an ordered list.
fn list_marker(node: NodeRef<'_, Node>) -> Option<String> {
    let parent = node.parent()?.value().as_element()?.name().to_string();
    match parent.as_str() {
        "ol" => {
            let index = 1 + node
                .prev_siblings()
                .filter(|s| s.value().as_element().is_some_and(|e| e.name() == "li"))
                .count();
            Some(format!("{index}. "))
        }
        "ul" | "menu" => Some("- ".to_string()),
        _ => None,
    }
}

fn heading_text(node: NodeRef<'_, Node>) -> String {
    let mut text = String::new();
    let mut skipping: Option<ego_tree::NodeId> = None;
    for edge in node.traverse() {
        match edge {
            Edge::Open(n) if skipping.is_none() => {
                if is_dropped(n) {
                    skipping = Some(n.id());
                } else if let Node::Text(t) = n.value() {
                    text.push_str(t);
                }
            }
            Edge::Close(n) if skipping == Some(n.id()) => skipping = None,
            _ => {}
        }
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
