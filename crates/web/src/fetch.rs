//! Fetching a URL: pinned DNS through the guard, redirects re-checked hop by hop, size and time caps, charset decoding.
//!
//! Every hop goes the same way: the URL's form is checked, the host is
//! resolved once by the fetcher's own [`Resolve`], every address is checked,
//! and the request is sent by a client whose DNS is pinned to exactly those
//! addresses (any other lookup fails), so a name cannot resolve to a public
//! address for the check and a private one for the connection. Redirects are
//! never followed by the HTTP client: each `Location` is a new hop.

mod content;
mod window;

use std::collections::HashSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use url::Url;

use crate::WebError;
use crate::guard::{self, AllowList, Target};

pub use content::{Document, Kind};
pub use window::{END_MARKER, NOTICE, Window, frame, window};

/// Limits and exceptions of a fetcher.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Hosts and networks reachable despite the guard.
    pub allow: AllowList,
    /// Largest response body read, in bytes.
    pub max_bytes: u64,
    /// Deadline for the whole fetch: lookups, every hop and the body.
    pub timeout: Duration,
    /// Deadline for one TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// What reading the body may cost: PDF decoding, HTML nesting, characters, time.
    pub extract: data_plane_extract::Limits,
}

impl FetchConfig {
    pub const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_MAX_REDIRECTS: usize = 5;
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow: AllowList::none(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            timeout: Self::DEFAULT_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            max_redirects: Self::DEFAULT_MAX_REDIRECTS,
            extract: data_plane_extract::Limits::default(),
        }
    }
}

/// A lookup's answer, boxed so the trait stays object safe.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Name resolution as the fetcher sees it: one lookup per hop, whose
/// answer is checked and then used for the connection.
pub trait Resolve: Send + Sync + std::fmt::Debug {
    fn lookup<'a>(&'a self, host: &'a str, port: u16) -> Lookup<'a>;
}

/// The operating system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str, port: u16) -> Lookup<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, port)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// Refuses every lookup the HTTP client would make on its own: the only
/// names it may connect to are the ones pinned to checked addresses.
#[derive(Debug)]
struct NoLookup;

impl reqwest::dns::Resolve for NoLookup {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        Box::pin(async move {
            Err(format!("{name} was not resolved through the guard; refusing to look it up").into())
        })
    }
}

/// A response as it came off the wire, after the last redirect.
#[derive(Debug, Clone)]
pub struct Response {
    /// The URL asked for.
    pub url: Url,
    /// The URL that answered, after redirects.
    pub final_url: Url,
    pub status: u16,
    /// The Content-Type header as sent.
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// Every URL redirected to, in order.
    pub redirects: Vec<Url>,
}

/// Fetches web pages for tools, behind the SSRF guard.
#[derive(Debug, Clone)]
pub struct Fetcher {
    config: Arc<FetchConfig>,
    resolver: Arc<dyn Resolve>,
}

const USER_AGENT: &str = concat!(
    "data-plane/",
    env!("CARGO_PKG_VERSION"),
    " (fetch_web_page)"
);
const ACCEPT_VALUE: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,\
application/json;q=0.9,application/pdf;q=0.8,*/*;q=0.5";

impl Fetcher {
    /// A fetcher that resolves names through the operating system.
    pub fn new(config: FetchConfig) -> Fetcher {
        Fetcher::with_resolver(config, Arc::new(SystemResolver))
    }

    /// A fetcher with its own resolver (tests answer names without DNS).
    pub fn with_resolver(config: FetchConfig, resolver: Arc<dyn Resolve>) -> Fetcher {
        Fetcher {
            config: Arc::new(config),
            resolver,
        }
    }

    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Where a URL would be fetched from: its host resolved once and every
    /// address checked, without connecting anywhere.
    pub async fn resolve(&self, url: &Url) -> Result<Vec<SocketAddr>, WebError> {
        let target = guard::check_url(url)?;
        let port = url.port_or_known_default().unwrap_or(80);
        let allow = &self.config.allow;
        match target {
            Target::Ip(ip) => {
                guard::check_ip(url, ip, allow)?;
                Ok(vec![SocketAddr::new(ip, port)])
            }
            Target::Name(name) => {
                let vouched = allow.allows_name(&name);
                if !vouched && let Some(reason) = guard::blocked_name(&name) {
                    return Err(WebError::Blocked {
                        url: url.to_string(),
                        reason: format!("{name} is a {reason}"),
                    });
                }
                let ips = self
                    .resolver
                    .lookup(name.trim_end_matches('.'), port)
                    .await
                    .map_err(|e| WebError::Network {
                        url: url.to_string(),
                        reason: format!("cannot resolve {name}: {e}"),
                    })?;
                if ips.is_empty() {
                    return Err(WebError::Network {
                        url: url.to_string(),
                        reason: format!("{name} has no addresses"),
                    });
                }
                // One refused address refuses the name: a host that mixes
                // public and private answers is the shape of an attack.
                if !vouched {
                    for ip in &ips {
                        if allow.allows_ip(*ip) {
                            continue;
                        }
                        if let Some(reason) = guard::classify(*ip) {
                            return Err(WebError::Blocked {
                                url: url.to_string(),
                                reason: format!(
                                    "{name} resolves to {ip}, which is not a public address: {reason}"
                                ),
                            });
                        }
                    }
                }
                let mut addrs: Vec<SocketAddr> = ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect();
                addrs.dedup();
                Ok(addrs)
            }
        }
    }

    /// Fetches a URL and reads it into a [`Document`] (HTML through readable
    /// extraction, text, JSON, PDF).
    pub async fn fetch(&self, raw_url: &str) -> Result<Document, WebError> {
        let response = self.get(raw_url).await?;
        content::read(response, self.config.extract.clone()).await
    }

    /// Fetches a URL: every hop checked, redirects followed up to the cap,
    /// the body read up to the size cap, all within the time cap. A status
    /// other than 2xx is an error.
    pub async fn get(&self, raw_url: &str) -> Result<Response, WebError> {
        let url = guard::parse_url(raw_url)?;
        let limit = self.config.timeout;
        match tokio::time::timeout(limit, self.get_unbounded(url.clone())).await {
            Ok(result) => result,
            Err(_) => Err(WebError::Timeout {
                what: format!("fetching {url}"),
                seconds: limit.as_secs_f64().ceil() as u64,
            }),
        }
    }

    async fn get_unbounded(&self, url: Url) -> Result<Response, WebError> {
        let mut current = without_fragment(url.clone());
        let mut redirects = Vec::new();
        let mut seen = HashSet::from([current.to_string()]);
        loop {
            let response = self.hop(&current).await?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let location = location.to_str().map_err(|_| WebError::Network {
                    url: current.to_string(),
                    reason: "the redirect's Location header is not text".to_string(),
                })?;
                let next = current
                    .join(location)
                    .map_err(|e| WebError::InvalidUrl {
                        url: location.to_string(),
                        reason: format!("redirect from {current} does not parse: {e}"),
                    })
                    .map(without_fragment)?;
                if !seen.insert(next.to_string()) {
                    return Err(WebError::RedirectLoop {
                        url: url.to_string(),
                        at: next.to_string(),
                    });
                }
                if redirects.len() >= self.config.max_redirects {
                    return Err(WebError::TooManyRedirects {
                        url: url.to_string(),
                        limit: self.config.max_redirects,
                    });
                }
                tracing::debug!(from = %current, to = %next, status = status.as_u16(), "redirect");
                redirects.push(next.clone());
                current = next;
                continue;
            }
            if !status.is_success() {
                return Err(WebError::Status {
                    url: current.to_string(),
                    status: status.as_u16(),
                });
            }
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = self.read_body(&current, response).await?;
            return Ok(Response {
                url,
                final_url: current,
                status: status.as_u16(),
                content_type,
                body,
                redirects,
            });
        }
    }

    /// One request, to the checked addresses of `url` and nowhere else.
    async fn hop(&self, url: &Url) -> Result<reqwest::Response, WebError> {
        let addrs = self.resolve(url).await?;
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.config.connect_timeout)
            .user_agent(USER_AGENT)
            .dns_resolver(Arc::new(NoLookup));
        if let Some(url::Host::Domain(name)) = url.host() {
            builder = builder.resolve_to_addrs(name, &addrs);
        }
        let client = builder
            .build()
            .map_err(|e| WebError::Config(format!("cannot build the http client: {e}")))?;
        client
            .get(url.clone())
            .header(ACCEPT, ACCEPT_VALUE)
            .send()
            .await
            .map_err(|e| network(url, &e))
    }

    async fn read_body(
        &self,
        url: &Url,
        mut response: reqwest::Response,
    ) -> Result<Vec<u8>, WebError> {
        let limit = self.config.max_bytes;
        let too_large = || WebError::TooLarge {
            url: url.to_string(),
            limit,
        };
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
        while let Some(chunk) = response.chunk().await.map_err(|e| network(url, &e))? {
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn without_fragment(mut url: Url) -> Url {
    url.set_fragment(None);
    url
}

/// A client error as a reason a model can read: the whole chain of causes,
/// since reqwest's own message ("error sending request") says little.
fn network(url: &Url, error: &reqwest::Error) -> WebError {
    if error.is_timeout() {
        return WebError::Network {
            url: url.to_string(),
            reason: "the connection timed out".to_string(),
        };
    }
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !reason.contains(&text) {
            reason.push_str(": ");
            reason.push_str(&text);
        }
        source = cause.source();
    }
    WebError::Network {
        url: url.to_string(),
        reason,
    }
}
