//! Scoring extraction against the readability fixtures: token-level
//! precision, recall and F1 of the text, and metadata agreement per field.
//! Shared by the fixture test and examples/bench_readability.rs.

#![allow(dead_code)] // each includer uses a different part

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use data_plane_extract::charset::{self, Hints};
use data_plane_extract::html::readable::{Metadata, extract_html};
use ego_tree::iter::Edge;
use pulldown_cmark::{Event, Parser, TagEnd};
use scraper::{Html, Node};

/// The metadata fields compared, in report order.
pub const FIELDS: [&str; 6] = [
    "title",
    "byline",
    "excerpt",
    "language",
    "site_name",
    "published_time",
];

/// One page's result.
pub struct PageScore {
    pub name: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Per field: `Some(agrees)` where the fixture states the field.
    pub fields: Vec<(&'static str, Option<bool>)>,
    /// F1 of the whole page's text, what a reader without extraction scores.
    pub baseline_f1: f64,
}

/// Averages over a set of pages.
pub struct Summary {
    pub pages: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub baseline_f1: f64,
    /// Per field: (agreeing pages, pages compared).
    pub fields: Vec<(&'static str, usize, usize)>,
}

/// The fixture folders (those holding source.html), sorted by name.
pub fn fixture_dirs(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("source.html").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Extracts one fixture page and scores it. The page's bytes are decoded as
/// a fetched page's are (`charset::decode`); the reference is `expected.html`
/// (its text) or else `expected.txt`, and metadata is compared where
/// `expected-metadata.json` exists.
pub fn score_dir(dir: &Path) -> std::io::Result<PageScore> {
    let bytes = std::fs::read(dir.join("source.html"))?;
    let hints = Hints {
        html: true,
        ..Hints::default()
    };
    let (source, _) = charset::decode(&bytes, hints);
    let expected_text = expected_text(dir)?;
    let expected_meta: serde_json::Value =
        match std::fs::read_to_string(dir.join("expected-metadata.json")) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
            Err(e) => return Err(e),
        };
    let page = extract_html(&source, None);
    let (precision, recall, f1) = token_scores(&markdown_text(&page.markdown), &expected_text);
    let (_, _, baseline_f1) = token_scores(&html_text(&source), &expected_text);
    Ok(PageScore {
        name: dir_name(dir),
        precision,
        recall,
        f1,
        fields: compare_metadata(&page.metadata, &expected_meta),
        baseline_f1,
    })
}

/// The reference text of a fixture page.
pub fn expected_text(dir: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(dir.join("expected.html")) {
        Ok(html) => Ok(html_text(&html)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::read_to_string(dir.join("expected.txt"))
        }
        Err(e) => Err(e),
    }
}

/// Scores another extractor's saved output for a fixture page: `<tool>.html`
/// is read as HTML, `<tool>.txt` as plain text. None when there is no output.
pub fn score_other(dir: &Path, output_dir: &Path, tool: &str) -> Option<PageScore> {
    let ours = if let Ok(html) = std::fs::read_to_string(output_dir.join(format!("{tool}.html"))) {
        html_text(&html)
    } else {
        std::fs::read_to_string(output_dir.join(format!("{tool}.txt"))).ok()?
    };
    let expected = expected_text(dir).ok()?;
    let (precision, recall, f1) = token_scores(&ours, &expected);
    Some(PageScore {
        name: dir_name(dir),
        precision,
        recall,
        f1,
        fields: Vec::new(),
        baseline_f1: 0.0,
    })
}

pub fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn summarize(scores: &[PageScore]) -> Summary {
    let n = scores.len().max(1) as f64;
    let avg = |f: fn(&PageScore) -> f64| scores.iter().map(f).sum::<f64>() / n;
    let fields = FIELDS
        .iter()
        .map(|&field| {
            let compared: Vec<bool> = scores
                .iter()
                .filter_map(|s| {
                    s.fields
                        .iter()
                        .find(|(f, _)| *f == field)
                        .and_then(|(_, a)| *a)
                })
                .collect();
            (
                field,
                compared.iter().filter(|a| **a).count(),
                compared.len(),
            )
        })
        .collect();
    Summary {
        pages: scores.len(),
        precision: avg(|s| s.precision),
        recall: avg(|s| s.recall),
        f1: avg(|s| s.f1),
        baseline_f1: avg(|s| s.baseline_f1),
        fields,
    }
}

/// Lowercased runs of letters and digits.
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Precision, recall and F1 of `ours` against `expected`, as multisets of tokens.
pub fn token_scores(ours: &str, expected: &str) -> (f64, f64, f64) {
    let count = |text: &str| {
        let mut m: HashMap<String, usize> = HashMap::new();
        for t in tokens(text) {
            *m.entry(t).or_default() += 1;
        }
        m
    };
    let (a, b) = (count(ours), count(expected));
    let total_a: usize = a.values().sum();
    let total_b: usize = b.values().sum();
    if total_a == 0 && total_b == 0 {
        return (1.0, 1.0, 1.0);
    }
    let overlap: usize = a
        .iter()
        .map(|(t, n)| (*n).min(b.get(t).copied().unwrap_or(0)))
        .sum();
    let p = if total_a == 0 {
        0.0
    } else {
        overlap as f64 / total_a as f64
    };
    let r = if total_b == 0 {
        0.0
    } else {
        overlap as f64 / total_b as f64
    };
    let f = if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    };
    (p, r, f)
}

/// The text a reader sees in Markdown: syntax stripped, URLs dropped.
pub fn markdown_text(md: &str) -> String {
    let mut out = String::new();
    for event in Parser::new(md) {
        match event {
            Event::Text(t) | Event::Code(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item | TagEnd::CodeBlock,
            ) => out.push(' '),
            Event::End(_) | Event::Start(_) => {}
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
            _ => out.push(' '),
        }
    }
    out
}

/// The text of an HTML fragment, blocks separated by spaces.
pub fn html_text(html: &str) -> String {
    let doc = Html::parse_document(html);
    let mut out = String::new();
    let mut skip = 0usize;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(n) => match n.value() {
                Node::Element(e) => {
                    if matches!(e.name(), "script" | "style" | "noscript" | "template") {
                        skip += 1;
                    }
                    if !is_inline(e.name()) {
                        out.push(' ');
                    }
                }
                Node::Text(t) if skip == 0 && !in_head(n) => out.push_str(t),
                _ => {}
            },
            Edge::Close(n) => {
                if let Node::Element(e) = n.value() {
                    if matches!(e.name(), "script" | "style" | "noscript" | "template") {
                        skip -= 1;
                    }
                    if !is_inline(e.name()) {
                        out.push(' ');
                    }
                }
            }
        }
    }
    out
}

fn in_head(n: ego_tree::NodeRef<'_, Node>) -> bool {
    n.ancestors()
        .any(|a| a.value().as_element().is_some_and(|e| e.name() == "head"))
}

fn is_inline(tag: &str) -> bool {
    matches!(
        tag,
        "a" | "abbr"
            | "b"
            | "bdi"
            | "bdo"
            | "cite"
            | "code"
            | "data"
            | "dfn"
            | "em"
            | "font"
            | "i"
            | "kbd"
            | "mark"
            | "q"
            | "s"
            | "samp"
            | "small"
            | "span"
            | "strong"
            | "sub"
            | "sup"
            | "time"
            | "tt"
            | "u"
            | "var"
            | "strike"
            | "del"
            | "ins"
    )
}

/// Case, whitespace and a leading "by" are not differences.
pub fn normalize(s: &str) -> String {
    let folded = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    folded
        .strip_prefix("by ")
        .map(str::to_string)
        .unwrap_or(folded)
}

fn compare_metadata(
    ours: &Metadata,
    expected: &serde_json::Value,
) -> Vec<(&'static str, Option<bool>)> {
    let pairs: [(&'static str, &Option<String>, &str); 6] = [
        ("title", &ours.title, "title"),
        ("byline", &ours.byline, "byline"),
        ("excerpt", &ours.excerpt, "excerpt"),
        ("language", &ours.language, "lang"),
        ("site_name", &ours.site_name, "siteName"),
        ("published_time", &ours.published_time, "publishedTime"),
    ];
    if expected.is_null() {
        return Vec::new();
    }
    pairs
        .iter()
        .map(|(field, got, key)| {
            let agrees = expected.get(*key).map(|want| {
                let want = want.as_str().map(normalize).unwrap_or_default();
                let got = got.as_deref().map(normalize).unwrap_or_default();
                want == got
            });
            (*field, agrees)
        })
        .collect()
}
