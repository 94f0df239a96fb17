//! HTML, parsed once and read two ways: `readable` finds a web page's main
//! content and renders it as Markdown, `text` renders a whole uploaded
//! document as plain text with its headings. Both parse through `parse`,
//! read metadata through `head` and walk `dom`'s flat copy of the tree.
//!
//! Nesting is bounded before the HTML parser sees it: html5ever scans its
//! stack of open elements for every start tag, so a page of 100k nested
//! `<div>`s costs it quadratic time (tens of seconds). Real pages nest a few
//! dozen levels; past `Limits::html_max_depth` we drop the tags (never the
//! text between them), which keeps parsing linear and every later walk shallow.

pub(crate) mod dom;
mod head;
mod math;
pub mod readable;
pub mod text;

pub use head::DocumentHead;

use scraper::Html;

use crate::Limits;

use std::borrow::Cow;
use std::collections::HashMap;

const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param",
    "source", "track", "wbr", "frame", "basefont", "bgsound",
];

const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];

/// Start tags that close an open `<p>`, as the parser would.
const CLOSES_P: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "details",
    "div",
    "dl",
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
    "hr",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "ul",
];

/// Elements a following start tag of the same group closes implicitly.
fn closes_sibling(open: &str, new: &str) -> bool {
    match new {
        "li" => open == "li",
        "dt" | "dd" => open == "dt" || open == "dd",
        "td" | "th" => open == "td" || open == "th",
        "tr" => matches!(open, "tr" | "td" | "th"),
        "option" => open == "option",
        _ => false,
    }
}

/// Parses `html` as a document, its nesting first capped at `limits.html_max_depth`:
/// the only way HTML reaches the parser.
pub fn parse(html: &str, limits: &Limits) -> Html {
    Html::parse_document(&cap_nesting(html, limits.html_max_depth))
}

/// Returns `html` with start and end tags beyond `max_depth` removed;
/// borrowed unchanged when no tag nests that deep.
pub fn cap_nesting(html: &str, max_depth: usize) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut open: Vec<String> = Vec::new();
    let mut dropped: HashMap<String, usize> = HashMap::new();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while let Some(offset) = memchr_lt(&bytes[i..]) {
        let start = i + offset;
        i = start + 1;
        let rest = &bytes[i..];
        if rest.starts_with(b"!--") {
            i = find(bytes, i + 3, b"-->").map_or(bytes.len(), |p| p + 3);
        } else if rest.first().is_some_and(|b| *b == b'!' || *b == b'?') {
            i = find(bytes, i, b">").map_or(bytes.len(), |p| p + 1);
        } else if rest.first() == Some(&b'/') && rest.get(1).is_some_and(u8::is_ascii_alphabetic) {
            let (name, after) = tag_name(bytes, i + 1);
            let end = find(bytes, after, b">").map_or(bytes.len(), |p| p + 1);
            i = end;
            match dropped.get_mut(&name) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    cut.push((start, end));
                }
                _ => {
                    if let Some(pos) = open.iter().rposition(|o| *o == name) {
                        open.truncate(pos);
                    }
                }
            }
        } else if rest.first().is_some_and(u8::is_ascii_alphabetic) {
            let (name, after) = tag_name(bytes, i);
            let (end, self_closing) = tag_end(bytes, after);
            i = end;
            if RAW_TEXT.contains(&name.as_str()) {
                i = find_end_tag(bytes, i, &name);
                continue;
            }
            if VOID.contains(&name.as_str()) || self_closing {
                continue;
            }
            if CLOSES_P.contains(&name.as_str()) && open.last().is_some_and(|o| o == "p") {
                open.pop();
            }
            if open.last().is_some_and(|o| closes_sibling(o, &name)) {
                open.pop();
            }
            if open.len() >= max_depth {
                *dropped.entry(name).or_insert(0) += 1;
                cut.push((start, end));
            } else {
                open.push(name);
            }
        }
    }
    if cut.is_empty() {
        return Cow::Borrowed(html);
    }
    let mut out = String::with_capacity(html.len());
    let mut from = 0;
    for (s, e) in cut {
        out.push_str(&html[from..s]);
        from = e;
    }
    out.push_str(&html[from..]);
    Cow::Owned(out)
}

fn memchr_lt(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'<')
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= bytes.len() {
        return None;
    }
    bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The lowercased tag name at `from` and the index just past it. Tags end
/// on ASCII bytes, so the slice boundaries stay on UTF-8 character edges.
fn tag_name(bytes: &[u8], from: usize) -> (String, usize) {
    let mut end = from;
    while end < bytes.len()
        && !matches!(
            bytes[end],
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c | b'/' | b'>'
        )
    {
        end += 1;
    }
    let name = String::from_utf8_lossy(&bytes[from..end]).to_ascii_lowercase();
    (name, end)
}

/// Index just past the `>` closing a start tag, skipping quoted attribute
/// values, and whether the tag ends in `/>`.
fn tag_end(bytes: &[u8], from: usize) -> (usize, bool) {
    let mut i = from;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return (i + 1, i > from && bytes[i - 1] == b'/'),
            None => {}
        }
        i += 1;
    }
    (bytes.len(), false)
}

/// Index just past the end tag `</name` of a raw-text element.
fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> usize {
    let mut i = from;
    while let Some(p) = find(bytes, i, b"</") {
        let tail = &bytes[p + 2..];
        if tail.len() >= name.len() && tail[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return find(bytes, p, b">").map_or(bytes.len(), |e| e + 1);
        }
        i = p + 2;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_past_the_cap_are_dropped_and_text_kept() {
        fn check(html: &str, max: usize, expected: &str) {
            assert_eq!(cap_nesting(html, max), expected, "html: {html}");
        }
        let cases: &[(&str, usize, &str)] = &[
            ("<div><div>a</div></div>", 2, "<div><div>a</div></div>"),
            (
                "<div><div><div>a</div></div></div>",
                2,
                "<div><div>a</div></div>",
            ),
            (
                "<div><p>one<p>two<p>three</div>",
                2,
                "<div><p>one<p>two<p>three</div>",
            ),
            ("<ul><li>a<li>b<li>c</ul>", 2, "<ul><li>a<li>b<li>c</ul>"),
            (
                "<div><img><br><span/>x</div>",
                1,
                "<div><img><br><span/>x</div>",
            ),
            (
                "<div><script>'<div><div>'</script></div>",
                1,
                "<div><script>'<div><div>'</script></div>",
            ),
            (
                "<div><!-- <div><div> --></div>",
                1,
                "<div><!-- <div><div> --></div>",
            ),
            (
                "<div title=\"a>b\"><b>x</b></div>",
                1,
                "<div title=\"a>b\">x</div>",
            ),
            ("<div><b><i>x</i></b>y</div>", 2, "<div><b>x</b>y</div>"),
            ("<", 1, "<"),
            ("</div></div>text", 1, "</div></div>text"),
        ];
        for (html, max, expected) in cases {
            check(html, *max, expected);
        }
        assert!(matches!(cap_nesting("<p>shallow</p>", 4), Cow::Borrowed(_)));
    }
}
