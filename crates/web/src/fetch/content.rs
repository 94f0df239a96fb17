//! From response bytes to readable text: the kind of content (declared or
//! sniffed), the character set (BOM, header, `<meta>`, else detected), and
//! HTML, plain text, JSON or PDF turned into Markdown.

use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind};

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};
use serde::Serialize;
use url::Url;

use data_plane_extract::{LimitError, Limits};

use super::Response;
use crate::WebError;
use crate::extract::{self, Link, Metadata};

/// What a response held, as the fetcher read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Html,
    Text,
    Json,
    Pdf,
}

/// A fetched page, readable.
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    pub url: String,
    pub final_url: String,
    pub status: u16,
    /// The media type as declared (without parameters), or as sniffed when
    /// the server declared none or a generic one.
    pub content_type: String,
    pub kind: Kind,
    /// The character set the text was decoded from (absent for PDF).
    pub charset: Option<String>,
    pub metadata: Metadata,
    /// The content as Markdown (plain text and PDF text as they are, JSON in
    /// a fenced block).
    pub markdown: String,
    pub links: Vec<Link>,
}

/// Reads a response into a document. Parsing runs off the async threads:
/// a large page or PDF takes real CPU time, within the extraction limits.
pub(super) async fn read(response: Response, limits: Limits) -> Result<Document, WebError> {
    let url = response.final_url.to_string();
    let failed = |reason: String| WebError::Network {
        url: url.clone(),
        reason: format!("reading the content failed: {reason}"),
    };
    let outcome = tokio::task::spawn_blocking(move || {
        let inner = limits.clone();
        data_plane_extract::with_time_limit(&limits, move || read_blocking(response, &inner))
    })
    .await
    .map_err(|e| failed(e.to_string()))?;
    match outcome {
        Ok(document) => document,
        Err(LimitError::Timeout { seconds }) => Err(WebError::Timeout {
            what: format!("reading the content of {url}"),
            seconds,
        }),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// A limit the content broke: never readable as it is, so a content type the
/// fetcher cannot read.
fn over_limit(url: &Url, content_type: &str, error: LimitError) -> WebError {
    WebError::Unsupported {
        url: url.to_string(),
        content_type: format!("{content_type} ({error})"),
    }
}

fn read_blocking(response: Response, limits: &Limits) -> Result<Document, WebError> {
    let declared = response
        .content_type
        .as_deref()
        .map(essence)
        .unwrap_or_default();
    let (kind, content_type) = match kind_of(&declared) {
        Some(kind) => (kind, declared),
        None if declared.is_empty() || is_generic(&declared) => match sniff(&response.body) {
            Some((kind, sniffed)) => (kind, sniffed.to_string()),
            None => return Err(unsupported(&response, &declared)),
        },
        None => return Err(unsupported(&response, &declared)),
    };
    let final_url = &response.final_url;
    let mut doc = Document {
        url: response.url.to_string(),
        final_url: final_url.to_string(),
        status: response.status,
        content_type,
        kind,
        charset: None,
        metadata: Metadata::default(),
        markdown: String::new(),
        links: Vec::new(),
    };
    if kind == Kind::Pdf {
        data_plane_extract::pdf::prescan(&response.body, limits)
            .map_err(|e| over_limit(final_url, &doc.content_type, e))?;
        doc.markdown = pdf_text(final_url, &response.body)?;
        data_plane_extract::check_chars(&doc.markdown, limits)
            .map_err(|e| over_limit(final_url, &doc.content_type, e))?;
        return Ok(doc);
    }
    let (text, encoding) = decode_text(
        &response.body,
        response.content_type.as_deref(),
        kind == Kind::Html,
        final_url,
    );
    doc.charset = Some(encoding.name().to_ascii_lowercase());
    match kind {
        Kind::Html => {
            let page = extract::extract_html_with(&text, Some(final_url), limits);
            doc.markdown = page.markdown;
            doc.metadata = page.metadata;
            doc.links = page.links;
        }
        Kind::Json => {
            doc.markdown = match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(value) => {
                    let pretty = serde_json::to_string_pretty(&value).unwrap_or(text.to_string());
                    format!("```json\n{pretty}\n```")
                }
                // Declared JSON that is not: the text itself is still worth reading.
                Err(_) => text.into_owned(),
            };
        }
        Kind::Text | Kind::Pdf => doc.markdown = text.into_owned(),
    }
    data_plane_extract::check_chars(&doc.markdown, limits)
        .map_err(|e| over_limit(final_url, &doc.content_type, e))?;
    Ok(doc)
}

fn unsupported(response: &Response, declared: &str) -> WebError {
    WebError::Unsupported {
        url: response.final_url.to_string(),
        content_type: if declared.is_empty() {
            "none declared, and the bytes are not text, HTML, JSON or PDF".to_string()
        } else {
            declared.to_string()
        },
    }
}

/// `text/html; charset=utf-8` → `text/html`.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn kind_of(essence: &str) -> Option<Kind> {
    match essence {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        "application/json" | "text/json" => Some(Kind::Json),
        e if e.ends_with("+json") => Some(Kind::Json),
        "application/pdf" | "application/x-pdf" => Some(Kind::Pdf),
        "application/xml"
        | "application/javascript"
        | "application/x-yaml"
        | "application/yaml"
        | "application/toml" => Some(Kind::Text),
        e if e.starts_with("text/") || e.ends_with("+xml") => Some(Kind::Text),
        _ => None,
    }
}

/// Types that say nothing about the content, so the bytes decide.
fn is_generic(essence: &str) -> bool {
    matches!(
        essence,
        "application/octet-stream"
            | "binary/octet-stream"
            | "application/unknown"
            | "unknown/unknown"
    )
}

/// The kind of an undeclared body, from its first bytes.
fn sniff(body: &[u8]) -> Option<(Kind, &'static str)> {
    let head = &body[..body.len().min(1024)];
    if head.windows(5).any(|w| w == b"%PDF-") {
        return Some((Kind::Pdf, "application/pdf"));
    }
    if head.contains(&0) {
        return None;
    }
    let lower = String::from_utf8_lossy(head).to_ascii_lowercase();
    let trimmed = lower.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with("<!doctype html")
        || trimmed.starts_with("<html")
        || lower.contains("<head")
        || lower.contains("<body")
    {
        return Some((Kind::Html, "text/html"));
    }
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_slice::<serde_json::Value>(body).is_ok()
    {
        return Some((Kind::Json, "application/json"));
    }
    // Text in some encoding: control characters other than whitespace mean binary.
    let binary = head
        .iter()
        .any(|&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c | 0x1b));
    (!binary).then_some((Kind::Text, "text/plain"))
}

/// Decodes text the way browsers choose its encoding: a byte-order mark,
/// else the Content-Type's charset, else (for HTML) a `<meta>` declaration
/// in the first kilobyte, else a guess from the bytes (chardetng, told the
/// URL's top-level domain).
pub fn decode_text<'a>(
    body: &'a [u8],
    content_type: Option<&str>,
    html: bool,
    url: &Url,
) -> (Cow<'a, str>, &'static Encoding) {
    let encoding = Encoding::for_bom(body)
        .map(|(e, _)| e)
        .or_else(|| content_type.and_then(header_charset))
        .or_else(|| if html { meta_charset(body) } else { None })
        .unwrap_or_else(|| guess(body, url));
    let (text, used, _) = encoding.decode(body);
    (text, used)
}

fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        Encoding::for_label(value.trim().trim_matches(['"', '\'']).as_bytes())
    })
}

/// The charset a `<meta charset>` or `<meta http-equiv=content-type>` tag
/// declares in the first 1024 bytes (the HTML standard's prescan window).
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(1024)];
    let lower = head.to_ascii_lowercase();
    let mut rest = lower.as_slice();
    while let Some(at) = find(rest, b"<meta") {
        let tag_start = &rest[at + 5..];
        let tag_end = tag_start
            .iter()
            .position(|&b| b == b'>')
            .unwrap_or(tag_start.len());
        let tag = &tag_start[..tag_end];
        if let Some(c) = find(tag, b"charset") {
            let value = tag[c + 7..]
                .iter()
                .skip_while(|b| b.is_ascii_whitespace())
                .skip_while(|&&b| b == b'=')
                .skip_while(|b| b.is_ascii_whitespace() || **b == b'"' || **b == b'\'')
                .take_while(|&&b| !(b.is_ascii_whitespace() || b"\"';>/".contains(&b)))
                .copied()
                .collect::<Vec<u8>>();
            if let Some(encoding) = Encoding::for_label(&value) {
                // The standard: a page that says UTF-16 in ASCII bytes is not UTF-16.
                let encoding =
                    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                        UTF_8
                    } else if encoding == encoding_rs::X_USER_DEFINED {
                        WINDOWS_1252
                    } else {
                        encoding
                    };
                return Some(encoding);
            }
        }
        rest = &tag_start[tag_end..];
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn guess(body: &[u8], url: &Url) -> &'static Encoding {
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(body, true);
    let tld = url
        .domain()
        .and_then(|d| d.trim_end_matches('.').rsplit('.').next())
        .filter(|t| {
            !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    detector.guess(tld.map(str::as_bytes), Utf8Detection::Allow)
}

/// The text of a PDF, page by page. pdf-extract panics on some malformed
/// files; that must be an error for this URL, not a lost worker thread.
fn pdf_text(url: &Url, body: &[u8]) -> Result<String, WebError> {
    let broken = |reason: String| WebError::Unsupported {
        url: url.to_string(),
        content_type: format!("application/pdf ({reason})"),
    };
    let pages = catch_unwind(AssertUnwindSafe(|| {
        pdf_extract::extract_text_from_mem_by_pages(body)
    }))
    .map_err(|_| broken("the parser gave up on its structure".to_string()))?
    .map_err(|e| broken(format!("no text could be extracted: {e}")))?;
    let mut out = String::new();
    for page in pages {
        let page = clean_page(&page);
        if page.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&page);
    }
    Ok(out)
}

/// pdf-extract lays text out by position: trailing spaces on every line and
/// runs of blank lines, which only cost the reader's context.
fn clean_page(page: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    for line in page.replace('\0', "").lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}
