//! fetch_web_page: readable content of a web page.

use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, ErrorCode, Permission, RateLimits, TagSpec,
    ToolContext, ToolError, ToolMeta, ToolSetting,
};
use data_plane_web::extract::{Link, Metadata};
use data_plane_web::fetch::{self, Kind};
use data_plane_web::{WebError, guard};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Deps;
use crate::deps::internal;

/// The arguments, as definitions/fetch_web_page.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The http or https URL to fetch.
    pub url: String,
    /// Character offset in the extracted text to start at.
    pub start: Option<u64>,
    /// Most characters to return.
    pub max_length: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Web,
    short_description: "readable content of a web page",
    available_when: "fetching web pages is switched on (the default)",
    aliases: &["fetch", "open_url"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Expensive,
    permission: Permission::User,
    timeout: Duration::from_millis(30000),
    limits: RateLimits {
        cooldown: None,
        daily_limit: Some(2000),
    },
    requires_gate: true,
    defer_loading: false,
    tag: Some(TagSpec {
        tag_prefix: "FETCH",
        pattern: r"(?P<url>\S+)",
        example: "FETCH: https://www.postgresql.org/docs/current/sql-vacuum.html",
        strip_from_display: true,
    }),
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.settings.fetch_web_page_enabled
}

/// Hosts a chat run may fetch from without asking (an admin's setting):
/// `docs.python.org` that host, `*.postgresql.org` every host under it.
/// Empty (the default): every fetch in a chat run asks, since the URL a
/// model writes can carry what it read out to any server.
pub const TRUSTED_HOSTS: ToolSetting<Vec<String>> =
    ToolSetting::new("fetch_web_page_trusted_hosts");

/// Asks a person before reaching a host outside [`TRUSTED_HOSTS`]. A URL
/// that does not parse does not ask: the call refuses it.
pub fn asks(args: &serde_json::Value, ctx: &ToolContext) -> Option<String> {
    let url = url::Url::parse(args.get("url")?.as_str()?).ok()?;
    let host = url.host_str()?.trim_end_matches('.').to_ascii_lowercase();
    let trusted = ctx.settings.get(&TRUSTED_HOSTS);
    if trusted.iter().any(|t| host_matches(t, &host)) {
        return None;
    }
    Some(format!(
        "fetch_web_page would reach {host}, which is not among the trusted hosts"
    ))
}

fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim().trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(parent) => host
            .strip_suffix(parent)
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => host == pattern,
    }
}

/// Characters returned when the call does not say (the definition's default).
pub const DEFAULT_LENGTH: u64 = 10_000;
/// The most characters one call returns, whatever max_length asks for.
pub const MAX_LENGTH: u64 = 50_000;
/// Links returned with each part: enough to navigate, not a page of its own.
pub const MAX_LINKS: usize = 50;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// Always true: everything below `notice` came from the page.
    pub untrusted: bool,
    pub notice: &'static str,
    pub url: String,
    /// Where the page was found, after redirects.
    pub final_url: String,
    pub status: u16,
    pub content_type: String,
    pub kind: Kind,
    pub title: Option<String>,
    pub metadata: Metadata,
    /// The requested range of the page's Markdown, framed between markers.
    pub content: String,
    /// Character range of `content` in the page's Markdown, end exclusive.
    pub start: u64,
    pub end: u64,
    pub total_chars: u64,
    /// Where the next part starts; null at the end of the page.
    pub next_start: Option<u64>,
    pub hint: String,
    pub links: Vec<Link>,
    pub links_total: usize,
}

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let start = args.start.unwrap_or(0);
    let max_length = args
        .max_length
        .unwrap_or(DEFAULT_LENGTH)
        .clamp(1, MAX_LENGTH);
    let doc = match deps.fetcher.fetch(&args.url).await {
        Ok(doc) => doc,
        Err(e) => {
            // A request that left the server is a side effect, answered or
            // not; a refusal at a redirect means the first request went out.
            match requested(&e) {
                Some(url) => ctx.side_effect(format!("fetched:{url}")),
                None if refused_elsewhere(&e, &args.url) => {
                    ctx.side_effect(format!("fetched:{}", args.url));
                }
                None => {}
            }
            return Err(tool_error(e));
        }
    };
    ctx.side_effect(format!("fetched:{}", doc.url));
    if doc.final_url != doc.url {
        ctx.side_effect(format!("fetched:{}", doc.final_url));
    }
    let part = fetch::window(&doc.markdown, start, max_length).map_err(tool_error)?;
    let links_total = doc.links.len();
    let mut links = doc.links;
    links.truncate(MAX_LINKS);
    Ok(Output {
        untrusted: true,
        notice: fetch::NOTICE,
        content: fetch::frame(&doc.final_url, &part.text),
        url: doc.url,
        final_url: doc.final_url,
        status: doc.status,
        content_type: doc.content_type,
        kind: doc.kind,
        title: doc.metadata.title.clone(),
        metadata: doc.metadata,
        start: part.start,
        end: part.end,
        total_chars: part.total_chars,
        next_start: part.next_start,
        hint: part.hint,
        links,
        links_total,
    })
}

/// The URL a failed fetch had an answer from (the guard's refusals and bad
/// URLs never leave the server; a network failure may have happened before
/// anything was sent, and is not counted).
fn requested(error: &WebError) -> Option<&str> {
    match error {
        WebError::Status { url, .. }
        | WebError::TooLarge { url, .. }
        | WebError::TooManyRedirects { url, .. }
        | WebError::RedirectLoop { url, .. }
        | WebError::Unsupported { url, .. } => Some(url),
        _ => None,
    }
}

/// Whether the guard refused a URL other than the one asked for: a
/// redirect's target, so the asked URL was fetched.
fn refused_elsewhere(error: &WebError, asked: &str) -> bool {
    match error {
        WebError::Blocked { url, .. } | WebError::InvalidUrl { url, .. } => {
            match (guard::parse_url(url), guard::parse_url(asked)) {
                (Ok(refused), Ok(asked)) => refused != asked,
                _ => false,
            }
        }
        _ => false,
    }
}

/// What the model is told when a fetch fails: the reason, and whether the
/// same call may succeed later (a timeout, a network error, a server error)
/// or never will (a refused address, a bad URL, a page too large).
fn tool_error(error: WebError) -> ToolError {
    let message = error.to_string();
    match &error {
        WebError::InvalidUrl { .. }
        | WebError::TooLarge { .. }
        | WebError::TooManyRedirects { .. }
        | WebError::RedirectLoop { .. }
        | WebError::Unsupported { .. }
        | WebError::Range { .. } => ToolError::invalid(message),
        WebError::Blocked { .. } => ToolError::invalid(format!(
            "{message}; fetch_web_page only reaches public internet addresses"
        )),
        WebError::Timeout { .. } => ToolError::new(ErrorCode::Timeout, message),
        WebError::Status {
            status: 404 | 410, ..
        } => ToolError::not_found(message),
        WebError::Status { status, .. } if *status == 408 || *status == 429 || *status >= 500 => {
            ToolError::unavailable(message)
        }
        WebError::Status { .. } => ToolError::invalid(message),
        WebError::Network { .. } => ToolError::unavailable(message),
        // Web-search failures; the fetcher never produces them.
        WebError::Provider { .. }
        | WebError::ProviderUnavailable { .. }
        | WebError::ProviderAccount { .. }
        | WebError::ProviderRejected { .. }
        | WebError::RateLimited { .. }
        | WebError::InvalidSearch { .. }
        | WebError::Config(_) => internal(NAME, message),
    }
}

const NAME: &str = "fetch_web_page";

#[cfg(test)]
mod tests {
    use super::*;
    use data_plane_registry::{Permission, Settings};
    use serde_json::json;
    use std::sync::Arc;

    fn asks_for(url: &str, trusted: &[&str]) -> bool {
        let settings = Settings::default().declare(&TRUSTED_HOSTS).with(
            &TRUSTED_HOSTS,
            trusted.iter().map(|t| t.to_string()).collect(),
        );
        let ctx = ToolContext::new(uuid::Uuid::nil(), None, Permission::User)
            .with_settings(Arc::new(settings));
        asks(&json!({ "url": url }), &ctx).is_some()
    }

    #[test]
    fn a_fetch_asks_unless_its_host_is_trusted() {
        let trusted = ["docs.python.org", "*.postgresql.org"];
        for (url, expected) in [
            ("https://docs.python.org/3/library/", false),
            ("https://DOCS.python.org./3/", false),
            ("https://www.postgresql.org/docs/", false),
            ("https://a.b.postgresql.org/", false),
            // The apex is not under the wildcard, nor a name that only ends alike.
            ("https://postgresql.org/", true),
            ("https://evilpostgresql.org/", true),
            ("https://python.org/", true),
            ("https://docs.python.org.evil.example/", true),
            ("http://127.0.0.1:8080/?q=secret", true),
            ("https://user@docs.python.org@evil.example/", true),
        ] {
            assert_eq!(asks_for(url, &trusted), expected, "{url}");
        }
        assert!(asks_for("https://docs.python.org/", &[]));
        // The call itself refuses what does not parse.
        assert!(!asks_for("not a url", &[]));
    }
}
