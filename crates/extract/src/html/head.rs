//! Metadata from a page's own tags, read once for both readers: `<title>`,
//! `<meta>` (Open Graph, Twitter, Dublin Core, article:*, http-equiv),
//! JSON-LD articles and `<html lang>`. `Head::page` is what a web reader
//! wants (site name, byline, excerpt); `Head::document` what an uploaded
//! file's record keeps (author, description, created and modified dates).

use std::collections::HashMap;

use serde_json::Value;

use super::dom::Dom;
use super::readable::Metadata;

/// What the head declares, before any preference between its sources.
#[derive(Default)]
pub(crate) struct Head {
    /// `<meta>` contents by lowercase key (name, property, itemprop or
    /// http-equiv), the first of each key kept.
    meta: HashMap<String, String>,
    doc_title: Option<String>,
    lang: Option<String>,
    content_language: Option<String>,
    ld: LdArticle,
}

/// An uploaded document's metadata as its head declares it, values as
/// written (dates and language tags unnormalised).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentHead {
    pub title: Option<String>,
    pub description: Option<String>,
    pub author: Option<String>,
    pub created: Option<String>,
    pub modified: Option<String>,
    pub language: Option<String>,
}

impl Head {
    pub(crate) fn read(dom: &Dom<'_>) -> Head {
        let mut head = Head::default();
        for i in 0..dom.len() {
            let Some(el) = dom.element(i) else { continue };
            match el.name() {
                "html" if head.lang.is_none() => {
                    head.lang = el
                        .attr("lang")
                        .or_else(|| el.attr("xml:lang"))
                        .map(clean_value);
                }
                // An SVG's <title> is a tooltip, not the page's.
                "title" if head.doc_title.is_none() && !in_svg(dom, i) => {
                    let raw: String = dom.children(i).filter_map(|c| dom.text(c)).collect();
                    head.doc_title = Some(clean_value(&raw));
                }
                "meta" => {
                    let Some(content) = el.attr("content") else {
                        continue;
                    };
                    let content = clean_value(content);
                    if content.is_empty() {
                        continue;
                    }
                    if el
                        .attr("http-equiv")
                        .is_some_and(|h| h.eq_ignore_ascii_case("content-language"))
                    {
                        head.content_language.get_or_insert_with(|| content.clone());
                    }
                    for attr in ["property", "name", "itemprop", "http-equiv"] {
                        if let Some(keys) = el.attr(attr) {
                            for key in keys.split_ascii_whitespace() {
                                head.meta
                                    .entry(key.to_ascii_lowercase())
                                    .or_insert_with(|| content.clone());
                            }
                        }
                    }
                }
                "script"
                    if el
                        .attr("type")
                        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/ld+json")) =>
                {
                    let raw: String = dom.children(i).filter_map(|c| dom.text(c)).collect();
                    head.ld.read(&raw);
                }
                _ => {}
            }
        }
        head
    }

    fn get(&self, keys: &[&str]) -> Option<String> {
        keys.iter().find_map(|k| self.meta.get(*k).cloned())
    }

    /// What a web reader is told, before content-derived fallbacks.
    pub(crate) fn page(&self) -> Metadata {
        let ld = &self.ld;
        let site_name = ld.publisher.clone().or_else(|| self.get(&["og:site_name"]));
        let title = ld
            .headline
            .clone()
            .or_else(|| {
                self.get(&[
                    "og:title",
                    "twitter:title",
                    "dc.title",
                    "dcterm:title",
                    "dc:title",
                ])
            })
            .or_else(|| self.doc_title.clone().filter(|t| !t.is_empty()))
            .map(|t| strip_site_name(&t, site_name.as_deref()));
        let byline = ld
            .author
            .clone()
            .or_else(|| {
                self.get(&[
                    "dc.creator",
                    "dc:creator",
                    "dcterm:creator",
                    "author",
                    "parsely-author",
                ])
            })
            .or_else(|| {
                self.get(&["article:author", "og:article:author"])
                    .filter(|a| !a.starts_with("http"))
            });
        let excerpt = ld.description.clone().or_else(|| {
            self.get(&[
                "dc.description",
                "dc:description",
                "dcterm:description",
                "og:description",
                "description",
                "twitter:description",
            ])
        });
        let published_time = ld
            .date_published
            .clone()
            .or_else(|| self.get(&["article:published_time", "parsely-pub-date"]));
        Metadata {
            title: title.filter(|t| !t.is_empty()),
            byline,
            excerpt,
            language: self.language(),
            site_name,
            published_time,
        }
    }

    /// What an uploaded document's record keeps: the document's own
    /// `<title>` as written (no site name to strip from a file), the
    /// description a page declares for itself before its social-card one,
    /// and both dates.
    pub(crate) fn document(&self) -> DocumentHead {
        DocumentHead {
            title: self.doc_title.clone().filter(|t| !t.is_empty()),
            description: self
                .get(&["description", "dc.description", "dcterms.description"])
                .or_else(|| self.get(&["og:description", "twitter:description"])),
            author: self.get(&["author", "dc.creator", "dcterms.creator"]),
            created: self.get(&[
                "article:published_time",
                "date",
                "dc.date",
                "dcterms.created",
                "dcterms.date",
                "dc.date.created",
                "pubdate",
            ]),
            modified: self.get(&[
                "article:modified_time",
                "og:updated_time",
                "last-modified",
                "dcterms.modified",
                "dc.date.modified",
            ]),
            language: self.language(),
        }
    }

    fn language(&self) -> Option<String> {
        self.lang
            .clone()
            .filter(|l| !l.is_empty())
            .or_else(|| self.content_language.clone())
    }
}

fn in_svg(dom: &Dom<'_>, i: usize) -> bool {
    let mut at = dom.parent(i);
    while let Some(p) = at {
        if dom.tag(p) == "svg" {
            return true;
        }
        at = dom.parent(p);
    }
    false
}

/// An attribute value with whitespace folded and entities that were
/// escaped twice (`&amp;#39;`) decoded.
fn clean_value(v: &str) -> String {
    let folded = v.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
    unescape(&folded)
}

/// Decodes numeric and the five XML character references.
fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(semi) = rest[1..].find(';').map(|p| p + 1).filter(|&p| p <= 12) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..semi];
        let decoded = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                let num = if let Some(hex) =
                    name.strip_prefix("#x").or_else(|| name.strip_prefix("#X"))
                {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse::<u32>().ok()
                } else {
                    None
                };
                num.map(|n| match char::from_u32(n) {
                    Some(c) if n != 0 => c,
                    _ => '\u{fffd}',
                })
                .or_else(|| {
                    // A reference too large to be a code point.
                    name.starts_with('#')
                        .then(|| name[1..].trim_start_matches(['x', 'X']))
                        .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit()))
                        .map(|_| '\u{fffd}')
                })
            }
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Drops a " | Site Name" suffix (or "Site Name: " prefix) when it repeats
/// the site name.
fn strip_site_name(title: &str, site: Option<&str>) -> String {
    let title = title.trim();
    let Some(site) = site.map(str::trim).filter(|s| !s.is_empty()) else {
        return title.to_string();
    };
    let is_sep = |c: char| {
        !c.is_alphanumeric()
            && !c.is_whitespace()
            && !matches!(c, '"' | '\'' | '?' | '!' | '.' | ')' | '(')
    };
    let lower = title.to_lowercase();
    let site_lower = site.to_lowercase();
    if lower.len() == title.len() && site_lower.len() == site.len() {
        if let Some(head) = lower.strip_suffix(&site_lower) {
            let head = &title[..head.len()];
            if let Some(kept) = cut_separator(head, is_sep, true) {
                return kept;
            }
        }
        if let Some(tail) = lower.strip_prefix(&site_lower) {
            let tail = &title[title.len() - tail.len()..];
            if let Some(kept) = cut_separator(tail, is_sep, false) {
                return kept;
            }
        }
    }
    title.to_string()
}

/// `part` minus the separator that joined it to the site name, when it is
/// one: separator characters with whitespace on the side of the text.
fn cut_separator(part: &str, is_sep: impl Fn(char) -> bool, at_end: bool) -> Option<String> {
    let trimmed = if at_end {
        part.trim_end()
    } else {
        part.trim_start()
    };
    let without = if at_end {
        trimmed.trim_end_matches(&is_sep)
    } else {
        trimmed.trim_start_matches(&is_sep)
    };
    if without.len() == trimmed.len() {
        return None;
    }
    let spaced = if at_end {
        without.ends_with(char::is_whitespace)
    } else {
        without.starts_with(char::is_whitespace)
    };
    let kept = without.trim();
    (spaced && kept.split_whitespace().count() >= 1).then(|| kept.to_string())
}

#[derive(Default)]
struct LdArticle {
    headline: Option<String>,
    author: Option<String>,
    date_published: Option<String>,
    publisher: Option<String>,
    description: Option<String>,
}

impl LdArticle {
    fn read(&mut self, raw: &str) {
        let raw = raw.trim();
        let raw = raw.strip_prefix("<![CDATA[").unwrap_or(raw);
        let raw = raw
            .strip_suffix("]]>")
            .unwrap_or(raw)
            .trim()
            .trim_end_matches(';');
        let Ok(value) = serde_json::from_str::<Value>(raw) else {
            return;
        };
        // Breadth-first over arrays and @graph, without recursion.
        let mut queue = vec![&value];
        let mut k = 0;
        while k < queue.len() && k < 1000 {
            let v = queue[k];
            k += 1;
            match v {
                Value::Array(items) => queue.extend(items.iter()),
                Value::Object(obj) => {
                    if let Some(graph) = obj.get("@graph") {
                        queue.push(graph);
                    }
                    if is_article(obj.get("@type")) && self.headline.is_none() {
                        self.take(obj);
                    }
                }
                _ => {}
            }
        }
    }

    fn take(&mut self, obj: &serde_json::Map<String, Value>) {
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .map(clean_value)
                .filter(|s| !s.is_empty())
        };
        self.headline = text(obj.get("headline")).or_else(|| text(obj.get("name")));
        self.description = text(obj.get("description"));
        self.date_published = text(obj.get("datePublished"));
        self.author = obj.get("author").and_then(|a| {
            let names: Vec<String> = match a {
                Value::Array(items) => items.iter().filter_map(person_name).collect(),
                other => person_name(other).into_iter().collect(),
            };
            (!names.is_empty()).then(|| names.join(", "))
        });
        self.publisher = obj.get("publisher").and_then(person_name);
    }
}

fn person_name(v: &Value) -> Option<String> {
    let name = match v {
        Value::String(s) => Some(s.as_str()),
        Value::Object(o) => o.get("name").and_then(Value::as_str),
        _ => None,
    }?;
    let name = clean_value(name);
    (!name.is_empty()).then_some(name)
}

fn is_article(t: Option<&Value>) -> bool {
    let matches = |s: &str| {
        s.ends_with("Article")
            || s.ends_with("Posting")
            || matches!(s, "Report" | "APIReference" | "Blog")
    };
    match t {
        Some(Value::String(s)) => matches(s),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).any(matches),
        _ => false,
    }
}
