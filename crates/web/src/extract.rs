//! Readable extraction: the main content of an HTML page as Markdown, and its metadata.

use scraper::Html;
use serde::Serialize;
use url::Url;

/// What a reader gets from a page.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Page {
    /// The main content as Markdown.
    pub markdown: String,
    pub metadata: Metadata,
    /// Links in the main content, in order, with absolute URLs.
    pub links: Vec<Link>,
}

/// Metadata from the page's own tags and structured data.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metadata {
    pub title: Option<String>,
    pub byline: Option<String>,
    pub excerpt: Option<String>,
    pub language: Option<String>,
    pub site_name: Option<String>,
    pub published_time: Option<String>,
}

/// A link of the main content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub text: String,
    pub url: String,
}

/// Extracts the readable content of `html`; `base_url` resolves relative links.
pub fn extract_html(html: &str, base_url: Option<&Url>) -> Page {
    let _ = base_url;
    let document = Html::parse_document(html);
    let text: Vec<&str> = document
        .root_element()
        .text()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    Page {
        markdown: text.join("\n"),
        ..Page::default()
    }
}
