//! The web, as tools see it: fetching a page behind an SSRF guard
//! (`guard`, `fetch`), turning it into readable Markdown with metadata
//! (`extract`), and searching through pluggable providers (`search`).

pub mod extract;
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
    /// The deployment's configuration is incomplete or wrong.
    #[error("web configuration: {0}")]
    Config(String),
}
