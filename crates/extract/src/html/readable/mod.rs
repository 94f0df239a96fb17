//! Readable extraction: the main content of a web page as Markdown, and its metadata.
//!
//! `html::parse` bounds nesting before parsing, `dom` flattens scraper's tree,
//! `head` reads the metadata, `content` finds the main content and
//! `markdown` renders it. No step recurses on the depth of the page.

mod content;
mod markdown;

use schemars::JsonSchema;
use serde::Serialize;
use url::Url;

use super::dom;
use super::head::Head;
use crate::Limits;

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
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Metadata {
    pub title: Option<String>,
    pub byline: Option<String>,
    pub excerpt: Option<String>,
    pub language: Option<String>,
    pub site_name: Option<String>,
    pub published_time: Option<String>,
}

/// A link of the main content.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Link {
    pub text: String,
    pub url: String,
}

/// Extracts the readable content of `html`; `base_url` resolves relative links.
pub fn extract_html(html: &str, base_url: Option<&Url>) -> Page {
    extract_html_with(html, base_url, &Limits::default())
}

/// `extract_html` under a deployment's limits (the nesting depth handed to the parser).
pub fn extract_html_with(html: &str, base_url: Option<&Url>, limits: &Limits) -> Page {
    let document = super::parse(html, limits);
    let dom = dom::Dom::build(&document);
    let base = document_base(&dom, base_url);
    let mut metadata = Head::read(&dom).page();
    let content = content::find(&dom, metadata.title.as_deref());
    if metadata.byline.is_none() {
        metadata.byline = content.byline.clone();
    }
    if metadata.excerpt.is_none() {
        metadata.excerpt = content::first_paragraph(&dom, &content);
    }
    let rendered = markdown::render(&dom, &content, base.as_ref());
    // Relative links that nothing could resolve are left in the Markdown
    // but are no use to a caller that follows links.
    let links = rendered
        .links
        .into_iter()
        .filter(|l| Url::parse(&l.url).is_ok())
        .collect();
    Page {
        markdown: rendered.markdown,
        metadata,
        links,
    }
}

/// The URL relative links resolve against: `<base href>` over the page's own URL.
fn document_base(dom: &dom::Dom<'_>, base_url: Option<&Url>) -> Option<Url> {
    let href = (0..dom.len())
        .find(|&i| dom.tag(i) == "base" && dom.attr(i, "href").is_some())
        .and_then(|i| dom.attr(i, "href"))
        .map(str::trim);
    match (href, base_url) {
        (Some(h), Some(b)) => b.join(h).ok().or_else(|| Some(b.clone())),
        (Some(h), None) => Url::parse(h).ok(),
        (None, b) => b.cloned(),
    }
}
