//! From response bytes to readable text: the kind of content (declared or
//! sniffed), then data-plane-extract's charset decoding (BOM, header,
//! `<meta>`, else detected), readable extraction of HTML and PDF text;
//! plain text and JSON as they are.

use schemars::JsonSchema;
use serde::Serialize;
use url::Url;

use data_plane_extract::charset::{self, Hints};
use data_plane_extract::{Error, LimitError, Limits};

use super::Response;
use crate::WebError;
use crate::extract::{self, Link, Metadata};

/// What a response held, as the fetcher read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
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
        let pdf = data_plane_extract::pdf::read(&response.body, limits).map_err(|e| match e {
            Error::Limit(e) => over_limit(final_url, &doc.content_type, e),
            Error::Corrupt(reason) => WebError::Unsupported {
                url: final_url.to_string(),
                content_type: format!("application/pdf ({reason})"),
            },
        })?;
        doc.markdown = pdf.text();
        doc.metadata = Metadata {
            title: pdf.info.title,
            byline: pdf.info.author,
            excerpt: pdf.info.subject,
            published_time: pdf.info.created,
            ..Metadata::default()
        };
        data_plane_extract::check_chars(&doc.markdown, limits)
            .map_err(|e| over_limit(final_url, &doc.content_type, e))?;
        return Ok(doc);
    }
    let tld = final_url
        .domain()
        .and_then(|d| d.trim_end_matches('.').rsplit('.').next());
    let (text, encoding) = charset::decode(
        &response.body,
        Hints {
            content_type: response.content_type.as_deref(),
            html: kind == Kind::Html,
            tld,
        },
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
    if data_plane_extract::pdf::looks_like_pdf(body) {
        return Some((Kind::Pdf, "application/pdf"));
    }
    let head = &body[..body.len().min(1024)];
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
