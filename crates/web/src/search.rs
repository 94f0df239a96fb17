//! Web-search providers behind one trait, with normalised results.
//!
//! A provider turns a [`SearchRequest`] into the hits its API answers;
//! [`WebSearch`] holds the providers the deployment configured, picks the one
//! asked for, and normalises what it answers (plain-text snippets, ISO dates,
//! http(s) URLs only, no duplicates, at most `count`, provider order kept).

mod brave;
mod searxng;
mod tavily;

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

pub use brave::Brave;
pub use searxng::Searxng;
pub use tavily::Tavily;

use crate::WebError;

/// The official Brave Search API.
pub const BRAVE_DEFAULT_URL: &str = "https://api.search.brave.com";
/// The official Tavily API.
pub const TAVILY_DEFAULT_URL: &str = "https://api.tavily.com";
/// How long one provider request may take, body included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Results when the caller does not say.
pub const DEFAULT_COUNT: usize = 5;
/// The most results one search returns (Brave and Tavily cap at 20 too).
pub const MAX_COUNT: usize = 20;
/// The longest query sent to a provider, in characters.
pub const MAX_QUERY_CHARS: usize = 500;
/// A provider's JSON is a few tens of kilobytes; anything far larger is not
/// a search answer and is not read to the end.
const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// Snippets are teasers; a provider that sends whole pages (Tavily's
/// `content` can be long) is cut so one search does not flood the context.
const MAX_SNIPPET_CHARS: usize = 600;

/// The providers this crate speaks to; also web_search's setting, by which
/// an admin chooses one (SearXNG unless chosen otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// A SearXNG instance (self-hosted, no key).
    #[default]
    Searxng,
    /// The Brave Search API.
    Brave,
    /// The Tavily API.
    Tavily,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [
        ProviderKind::Searxng,
        ProviderKind::Brave,
        ProviderKind::Tavily,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Searxng => "searxng",
            ProviderKind::Brave => "brave",
            ProviderKind::Tavily => "tavily",
        }
    }

    /// The environment variable that configures this provider, for messages
    /// telling an operator what to set.
    pub fn env_var(self) -> &'static str {
        match self {
            ProviderKind::Searxng => "DATA_PLANE_SEARXNG_URL",
            ProviderKind::Brave => "DATA_PLANE_BRAVE_API_KEY",
            ProviderKind::Tavily => "DATA_PLANE_TAVILY_API_KEY",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProviderKind {
    type Err = WebError;

    fn from_str(s: &str) -> Result<Self, WebError> {
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                WebError::Config(format!(
                    "unknown web search provider {s:?} (known: searxng, brave, tavily)"
                ))
            })
    }
}

/// How recent results must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Day,
    Week,
    Month,
    Year,
}

impl Freshness {
    pub fn name(self) -> &'static str {
        match self {
            Freshness::Day => "day",
            Freshness::Week => "week",
            Freshness::Month => "month",
            Freshness::Year => "year",
        }
    }
}

impl FromStr for Freshness {
    type Err = WebError;

    fn from_str(s: &str) -> Result<Self, WebError> {
        match s {
            "day" => Ok(Freshness::Day),
            "week" => Ok(Freshness::Week),
            "month" => Ok(Freshness::Month),
            "year" => Ok(Freshness::Year),
            _ => Err(WebError::InvalidSearch {
                field: "freshness",
                value: s.to_string(),
                reason: "expected day, week, month or year".into(),
            }),
        }
    }
}

/// One search, checked: what every provider is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// The search terms, trimmed, without any `site:` operator added.
    pub query: String,
    /// How many results are wanted (1 to [`MAX_COUNT`]).
    pub count: usize,
    pub freshness: Option<Freshness>,
    /// A domain name (lowercase, IDNs in punycode) results must come from.
    pub site: Option<String>,
}

impl SearchRequest {
    /// Checks and normalises a request: a non-empty query of at most
    /// [`MAX_QUERY_CHARS`], a count within 1..=[`MAX_COUNT`] (default
    /// [`DEFAULT_COUNT`]), and a site that is a bare domain name (a scheme
    /// or trailing slash is tolerated and dropped).
    pub fn new(
        query: &str,
        count: Option<usize>,
        freshness: Option<Freshness>,
        site: Option<&str>,
    ) -> Result<SearchRequest, WebError> {
        let invalid = |field, value: &str, reason: &str| WebError::InvalidSearch {
            field,
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = query.trim();
        if trimmed.is_empty() {
            return Err(invalid("query", query, "the query is empty"));
        }
        if trimmed.chars().count() > MAX_QUERY_CHARS {
            return Err(invalid(
                "query",
                &trimmed.chars().take(40).collect::<String>(),
                &format!("the query is longer than {MAX_QUERY_CHARS} characters"),
            ));
        }
        let count = count.unwrap_or(DEFAULT_COUNT);
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(invalid(
                "count",
                &count.to_string(),
                &format!("expected 1 to {MAX_COUNT}"),
            ));
        }
        let site = site
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                site_domain(s).ok_or_else(|| {
                    invalid(
                        "site",
                        s,
                        "expected a domain name such as postgresql.org, without a path",
                    )
                })
            })
            .transpose()?;
        Ok(SearchRequest {
            query: trimmed.to_string(),
            count,
            freshness,
            site,
        })
    }

    /// The query with a `site:` operator, for providers that filter by site
    /// in the query text (SearXNG, Brave).
    pub fn query_with_site(&self) -> String {
        match &self.site {
            Some(site) => format!("{} site:{site}", self.query),
            None => self.query.clone(),
        }
    }
}

/// The domain of `site` when it names a host and nothing else.
fn site_domain(site: &str) -> Option<String> {
    let bare = site
        .strip_prefix("https://")
        .or_else(|| site.strip_prefix("http://"))
        .unwrap_or(site);
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    if bare.is_empty() || bare.contains(['/', '?', '#', '@', ' ', ':']) {
        return None;
    }
    let url = Url::parse(&format!("http://{bare}/")).ok()?;
    match url.host()? {
        url::Host::Domain(d) if d.contains('.') || d == "localhost" => {
            let d = d.trim_end_matches('.');
            (!d.is_empty() && !d.starts_with('.')).then(|| d.to_string())
        }
        _ => None,
    }
}

/// One result, as the tool returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// The publication date as `YYYY-MM-DD`, where the provider gives one.
    pub published: Option<String>,
}

/// A search engine behind its own API.
#[async_trait]
pub trait SearchProvider: Send + Sync + fmt::Debug {
    fn kind(&self) -> ProviderKind;

    /// The hits the provider answers, in its order, as it sent them (the
    /// caller normalises them).
    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, WebError>;
}

/// Where each provider lives and its key, from the deployment's
/// configuration. A provider is configured when its URL (SearXNG) or key
/// (Brave, Tavily) is set.
#[derive(Clone)]
pub struct SearchConfig {
    pub searxng_url: Option<String>,
    pub brave_api_key: Option<String>,
    pub brave_url: String,
    pub tavily_api_key: Option<String>,
    pub tavily_url: String,
    pub timeout: Duration,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            searxng_url: None,
            brave_api_key: None,
            brave_url: BRAVE_DEFAULT_URL.into(),
            tavily_api_key: None,
            tavily_url: TAVILY_DEFAULT_URL.into(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl fmt::Debug for SearchConfig {
    // Keys stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |k: &Option<String>| k.as_ref().map(|_| "<set>");
        f.debug_struct("SearchConfig")
            .field("searxng_url", &self.searxng_url)
            .field("brave_api_key", &key(&self.brave_api_key))
            .field("brave_url", &self.brave_url)
            .field("tavily_api_key", &key(&self.tavily_api_key))
            .field("tavily_url", &self.tavily_url)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The configured providers, one of which each search picks.
#[derive(Debug, Clone, Default)]
pub struct WebSearch {
    providers: Vec<Arc<dyn SearchProvider>>,
}

impl WebSearch {
    /// The providers `config` sets up. Base URLs are the deployment's own
    /// configuration, so they are not held to the fetch SSRF guard (a
    /// SearXNG on the local network is normal), but they must be http(s).
    pub fn new(config: &SearchConfig) -> Result<WebSearch, WebError> {
        fn set(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let mut providers: Vec<Arc<dyn SearchProvider>> = Vec::new();
        if let Some(url) = set(&config.searxng_url) {
            providers.push(Arc::new(Searxng::new(url, config.timeout)?));
        }
        if let Some(key) = set(&config.brave_api_key) {
            providers.push(Arc::new(Brave::new(
                &config.brave_url,
                key,
                config.timeout,
            )?));
        }
        if let Some(key) = set(&config.tavily_api_key) {
            providers.push(Arc::new(Tavily::new(
                &config.tavily_url,
                key,
                config.timeout,
            )?));
        }
        Ok(WebSearch { providers })
    }

    /// Any providers, e.g. one of another kind of engine.
    pub fn from_providers(providers: Vec<Arc<dyn SearchProvider>>) -> WebSearch {
        WebSearch { providers }
    }

    /// The kinds configured, in configuration order.
    pub fn configured(&self) -> Vec<ProviderKind> {
        self.providers.iter().map(|p| p.kind()).collect()
    }

    /// The provider of `kind`, or an error naming what to set.
    pub fn provider(&self, kind: ProviderKind) -> Result<&Arc<dyn SearchProvider>, WebError> {
        self.providers
            .iter()
            .find(|p| p.kind() == kind)
            .ok_or_else(|| {
                WebError::Config(format!(
                    "web search provider {kind} is not configured: set {}",
                    kind.env_var()
                ))
            })
    }

    /// Searches with the provider of `kind` and normalises its answer.
    pub async fn search(
        &self,
        kind: ProviderKind,
        request: &SearchRequest,
    ) -> Result<Vec<SearchHit>, WebError> {
        let hits = self.provider(kind)?.search(request).await?;
        Ok(normalise(hits, request.count))
    }
}

/// Plain-text titles and snippets, ISO dates, http(s) URLs without their
/// fragment, the first hit of each URL, at most `count`, in provider order.
pub fn normalise(hits: Vec<SearchHit>, count: usize) -> Vec<SearchHit> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for hit in hits {
        if out.len() == count {
            break;
        }
        let Ok(mut url) = Url::parse(hit.url.trim()) else {
            continue;
        };
        // A result is something to fetch; javascript:, data: and the like are not.
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            continue;
        }
        url.set_fragment(None);
        let url = url.to_string();
        if !seen.insert(url.clone()) {
            continue;
        }
        let title = plain_text(&hit.title);
        out.push(SearchHit {
            title: if title.is_empty() { url.clone() } else { title },
            snippet: truncate(&plain_text(&hit.snippet), MAX_SNIPPET_CHARS),
            published: hit.published.as_deref().and_then(iso_date),
            url,
        });
    }
    out
}

/// Text without HTML tags or entities (SearXNG and Brave mark matches with
/// `<strong>`), whitespace collapsed.
pub fn plain_text(s: &str) -> String {
    let text = if s.contains(['<', '&']) {
        let fragment = scraper::Html::parse_fragment(s);
        fragment.root_element().text().collect::<String>()
    } else {
        s.to_string()
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((end, _)) => format!("{}…", s[..end].trim_end()),
    }
}

/// `YYYY-MM-DD` from the date forms providers use: RFC 3339, ISO without a
/// zone (Brave's `page_age`, SearXNG's `publishedDate`), a bare date, or
/// RFC 2822 (Tavily's news results). Anything else is dropped rather than
/// passed on as a date.
pub fn iso_date(s: &str) -> Option<String> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let s = s.trim();
    let date = DateTime::parse_from_rfc3339(s)
        .map(|d| d.date_naive())
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").map(|d| d.date()))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").map(|d| d.date()))
        .or_else(|_| NaiveDate::parse_from_str(s, "%Y-%m-%d"))
        .or_else(|_| DateTime::parse_from_rfc2822(s).map(|d| d.date_naive()))
        .ok()?;
    Some(date.format("%Y-%m-%d").to_string())
}

// --- HTTP plumbing shared by the providers ---------------------------------

/// A base URL from configuration: absolute http(s), ending in `/` so that
/// joining keeps any path prefix (a SearXNG under `/searx/`).
fn base_url(kind: ProviderKind, setting: &str, value: &str) -> Result<Url, WebError> {
    let mut url = Url::parse(value.trim()).map_err(|e| {
        WebError::Config(format!(
            "{setting} {value:?} is not a URL for web search provider {kind}: {e}"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(WebError::Config(format!(
            "{setting} {value:?} must be an http or https URL"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(WebError::Config(format!(
            "{setting} {value:?} must not carry a query or fragment"
        )));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

fn client(timeout: Duration) -> Result<reqwest::Client, WebError> {
    reqwest::Client::builder()
        .timeout(timeout)
        // A search API answers in place; following a redirect would only
        // hide a wrong base URL.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("data-plane/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| WebError::Config(format!("cannot build the web search client: {e}")))
}

/// A provider's answer, read in full (up to a cap).
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON of type `T`, or an error quoting the start of what
    /// came instead.
    fn json<T: serde::de::DeserializeOwned>(&self, kind: ProviderKind) -> Result<T, WebError> {
        serde_json::from_slice(&self.body).map_err(|e| WebError::Provider {
            provider: kind.to_string(),
            reason: format!(
                "answered something other than its JSON search format ({e}): {:?}",
                self.preview()
            ),
        })
    }

    /// The start of the body as plain text, for messages.
    fn preview(&self) -> String {
        truncate(&plain_text(&String::from_utf8_lossy(&self.body)), 200)
    }

    /// Seconds to wait from `Retry-After` (the delta-seconds form).
    fn retry_after(&self) -> Option<u64> {
        self.headers
            .get(reqwest::header::RETRY_AFTER)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Sends `request` and reads the answer; timeouts and transport failures
/// become errors naming the provider.
async fn send(
    kind: ProviderKind,
    timeout: Duration,
    request: reqwest::RequestBuilder,
) -> Result<Reply, WebError> {
    let failed = |e: reqwest::Error| {
        if e.is_timeout() {
            WebError::Timeout {
                what: format!("web search provider {kind}"),
                seconds: timeout.as_secs().max(1),
            }
        } else {
            WebError::ProviderUnavailable {
                provider: kind.to_string(),
                reason: error_chain(&e),
            }
        }
    };
    let mut response = request.send().await.map_err(failed)?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(WebError::Provider {
                provider: kind.to_string(),
                reason: format!("answered more than {MAX_RESPONSE_BYTES} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// The error and its causes, without the request URL (it may carry the query).
fn error_chain(e: &reqwest::Error) -> String {
    let mut parts = vec![if e.is_connect() {
        "cannot connect".to_string()
    } else if e.is_body() || e.is_decode() {
        "the answer broke off".to_string()
    } else {
        "the request failed".to_string()
    }];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// The error for a non-success status, with the provider's own explanation
/// (`detail`) where it gave one.
fn status_error(kind: ProviderKind, reply: &Reply, detail: Option<String>) -> WebError {
    let status = reply.status;
    let detail = detail
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| reply.preview());
    let provider = kind.to_string();
    match status {
        401 | 403 => WebError::ProviderAccount {
            provider,
            reason: format!(
                "HTTP {status}: {detail} (check {} of this deployment)",
                kind.env_var()
            ),
        },
        429 => WebError::RateLimited {
            provider,
            retry_after: reply.retry_after(),
        },
        400..=499 => WebError::ProviderRejected {
            provider,
            reason: format!("HTTP {status}: {detail}"),
        },
        500..=599 => WebError::ProviderUnavailable {
            provider,
            reason: format!("HTTP {status}: {detail}"),
        },
        _ => {
            let location = reply
                .headers
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(|l| format!(" to {l}"))
                .unwrap_or_default();
            WebError::Provider {
                provider,
                reason: format!(
                    "answered HTTP {status}{location} instead of search results; check its base URL"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_bare_domains() {
        let check = |input: &str, expected: Option<&str>| {
            assert_eq!(site_domain(input).as_deref(), expected, "{input:?}");
        };
        check("postgresql.org", Some("postgresql.org"));
        check("https://Docs.RS/", Some("docs.rs"));
        check("http://example.com", Some("example.com"));
        check("bücher.de", Some("xn--bcher-kva.de"));
        check("example.com.", Some("example.com"));
        check("docs.rs/serde", None);
        check("example.com:8080", None);
        check("user@example.com", None);
        check("two words.com", None);
        check("127.0.0.1", None);
        check("[::1]", None);
        check("intranet", None);
        check(".", None);
        check("", None);
    }

    #[test]
    fn dates_become_iso_days() {
        let check = |input: &str, expected: Option<&str>| {
            assert_eq!(iso_date(input).as_deref(), expected, "{input:?}");
        };
        check("2024-03-12T08:15:00", Some("2024-03-12"));
        check("2024-03-12T08:15:00.123456", Some("2024-03-12"));
        check("2024-03-12T23:15:00+02:00", Some("2024-03-12"));
        check("2024-03-12T08:15:00Z", Some("2024-03-12"));
        check("2024-03-12 08:15:00", Some("2024-03-12"));
        check("2024-03-12", Some("2024-03-12"));
        check("Tue, 12 Mar 2024 08:15:00 GMT", Some("2024-03-12"));
        check("2 days ago", None);
        check("March 12, 2024", None);
        check("", None);
    }

    #[test]
    fn snippets_lose_markup() {
        let check = |input: &str, expected: &str| assert_eq!(plain_text(input), expected);
        check(
            "The <strong>VACUUM</strong> command &amp; its options",
            "The VACUUM command & its options",
        );
        check("  spread \n over\tlines ", "spread over lines");
        check("a < b and c > d", "a < b and c > d");
        check("caf&eacute; &#8212; &lt;b&gt;", "café — <b>");
        check("<script>alert(1)</script>text", "alert(1)text");
        check("", "");
    }
}
