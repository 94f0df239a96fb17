//! The web, as tools see it: fetching a page behind an SSRF guard
//! (`guard`, `fetch`), turning it into readable Markdown with metadata
//! (`extract`, data-plane-extract's readable extraction, which ingestion
//! shares), and searching through pluggable providers (`search`).

pub use data_plane_extract::html::readable as extract;
pub mod fetch;
pub mod guard;
pub mod search;
#[cfg(feature = "testing")]
pub mod testing;

/// Everything that can go wrong on the web side; each message names the
/// offending value so a model can act on it.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The URL does not parse, or uses a scheme or form that is refused.
    #[error("invalid url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The SSRF guard refused the destination.
    #[error("refused to fetch {url}: {reason}")]
    Blocked { url: String, reason: String },
    /// The response (or the page behind it) could not be had in time.
    #[error("{what} timed out after {seconds} s")]
    Timeout { what: String, seconds: u64 },
    /// The response body is larger than allowed.
    #[error("{url}: the response is larger than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    /// More redirects than allowed.
    #[error("{url}: more than {limit} redirects")]
    TooManyRedirects { url: String, limit: usize },
    /// A redirect led back to a URL already visited.
    #[error("{url}: redirect loop at {at}")]
    RedirectLoop { url: String, at: String },
    /// A character range outside the content.
    #[error("start {start} is beyond the end of the content ({total} characters)")]
    Range { start: u64, total: u64 },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    /// A content type the fetcher cannot turn into text.
    #[error("{url}: cannot read content of type {content_type:?}")]
    Unsupported { url: String, content_type: String },
    /// The connection failed (DNS, TCP, TLS, a broken body).
    #[error("{url}: {reason}")]
    Network { url: String, reason: String },
    /// A web-search provider failed or answered something unreadable.
    #[error("web search provider {provider}: {reason}")]
    Provider { provider: String, reason: String },
    /// A web-search provider is down or cannot be reached (5xx, refused
    /// connection); asking again later may work.
    #[error("web search provider {provider} is unavailable: {reason}")]
    ProviderUnavailable { provider: String, reason: String },
    /// A web-search provider refused the deployment's credentials or account
    /// (bad key, exhausted plan); only an operator can fix it.
    #[error("web search provider {provider} refused the account: {reason}")]
    ProviderAccount { provider: String, reason: String },
    /// A web-search provider refused the request itself (a query or filter
    /// it cannot handle).
    #[error("web search provider {provider} refused the request: {reason}")]
    ProviderRejected { provider: String, reason: String },
    /// A web-search provider is rate limiting this deployment.
    #[error("web search provider {provider} is rate limiting requests{}", retry_hint(*retry_after))]
    RateLimited {
        provider: String,
        /// Seconds to wait, when the provider said.
        retry_after: Option<u64>,
    },
    /// A search request that no provider should be sent.
    #[error("invalid search {field} {value:?}: {reason}")]
    InvalidSearch {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// The deployment's configuration is incomplete or wrong.
    #[error("web configuration: {0}")]
    Config(String),
}

fn retry_hint(seconds: Option<u64>) -> String {
    match seconds {
        Some(s) => format!("; retry in {s} s"),
        None => "; retry later".to_string(),
    }
}
