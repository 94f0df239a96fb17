//! Brave Search through its Web Search API (`GET /res/v1/web/search`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use url::Url;

use super::{Freshness, MAX_COUNT, ProviderKind, Reply, SearchHit, SearchProvider, SearchRequest};
use crate::WebError;

const KIND: ProviderKind = ProviderKind::Brave;

/// The Brave Search API with a subscription token.
pub struct Brave {
    client: reqwest::Client,
    endpoint: Url,
    key: String,
    timeout: Duration,
}

impl std::fmt::Debug for Brave {
    // The token stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brave")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl Brave {
    /// `base` is the API's root, [`super::BRAVE_DEFAULT_URL`] in production.
    pub fn new(base: &str, key: &str, timeout: Duration) -> Result<Brave, WebError> {
        let base = super::base_url(KIND, "DATA_PLANE_BRAVE_URL", base)?;
        let endpoint = base
            .join("res/v1/web/search")
            .map_err(|e| WebError::Config(format!("DATA_PLANE_BRAVE_URL {base}: {e}")))?;
        Ok(Brave {
            client: super::client(timeout)?,
            endpoint,
            key: key.to_string(),
            timeout,
        })
    }
}

#[derive(Deserialize)]
struct Answer {
    /// Absent when the query found nothing on the web.
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    url: Option<String>,
    description: Option<String>,
    /// ISO date-time the page was published or last changed.
    page_age: Option<String>,
    /// The same, for people ("2 days ago", "March 12, 2024").
    age: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    code: String,
    #[serde(default)]
    detail: String,
}

fn freshness(f: Freshness) -> &'static str {
    match f {
        Freshness::Day => "pd",
        Freshness::Week => "pw",
        Freshness::Month => "pm",
        Freshness::Year => "py",
    }
}

/// Brave gives one `X-RateLimit-Remaining` and `X-RateLimit-Reset` entry per
/// window (per second, per month); the wait is the reset of the longest
/// window that is used up.
fn rate_limit_wait(reply: &Reply) -> Option<u64> {
    let list = |name: &str| -> Vec<Option<u64>> {
        reply
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_default()
    };
    let remaining = list("x-ratelimit-remaining");
    let reset = list("x-ratelimit-reset");
    remaining
        .iter()
        .zip(&reset)
        .filter_map(|(left, reset)| (*left == Some(0)).then_some(*reset).flatten())
        .max()
        .or_else(|| reply.retry_after())
}

#[async_trait]
impl SearchProvider for Brave {
    fn kind(&self) -> ProviderKind {
        KIND
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, WebError> {
        let mut query = vec![
            ("q", request.query_with_site()),
            ("count", request.count.min(MAX_COUNT).to_string()),
            // Only the web results: no news, videos or discussions blocks.
            ("result_filter", "web".to_string()),
        ];
        if let Some(f) = request.freshness {
            query.push(("freshness", freshness(f).to_string()));
        }
        let http = self
            .client
            .get(self.endpoint.clone())
            .query(&query)
            .header(reqwest::header::ACCEPT, "application/json")
            .header("X-Subscription-Token", &self.key);
        let reply = super::send(KIND, self.timeout, http).await?;
        if !reply.ok() {
            if reply.status == 429 {
                return Err(WebError::RateLimited {
                    provider: KIND.to_string(),
                    retry_after: rate_limit_wait(&reply),
                });
            }
            let detail = serde_json::from_slice::<ErrorBody>(&reply.body)
                .ok()
                .map(
                    |b| match (b.error.code.is_empty(), b.error.detail.is_empty()) {
                        (false, false) => format!("{} ({})", b.error.detail, b.error.code),
                        (true, _) => b.error.detail,
                        (false, true) => b.error.code,
                    },
                );
            return Err(super::status_error(KIND, &reply, detail));
        }
        let answer: Answer = reply.json(KIND)?;
        Ok(answer
            .web
            .map(|w| w.results)
            .unwrap_or_default()
            .into_iter()
            .map(|h| SearchHit {
                title: h.title.unwrap_or_default(),
                url: h.url.unwrap_or_default(),
                snippet: h.description.unwrap_or_default(),
                published: h
                    .page_age
                    .filter(|p| super::iso_date(p).is_some())
                    .or(h.age),
            })
            .collect())
    }
}
