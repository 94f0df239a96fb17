//! Tavily through its search API (`POST /search`).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use url::Url;

use super::{MAX_COUNT, ProviderKind, SearchHit, SearchProvider, SearchRequest};
use crate::WebError;

const KIND: ProviderKind = ProviderKind::Tavily;

/// The Tavily API with an API key.
pub struct Tavily {
    client: reqwest::Client,
    endpoint: Url,
    key: String,
    timeout: Duration,
}

impl std::fmt::Debug for Tavily {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tavily")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl Tavily {
    /// `base` is the API's root, [`super::TAVILY_DEFAULT_URL`] in production.
    pub fn new(base: &str, key: &str, timeout: Duration) -> Result<Tavily, WebError> {
        let base = super::base_url(KIND, "DATA_PLANE_TAVILY_URL", base)?;
        let endpoint = base
            .join("search")
            .map_err(|e| WebError::Config(format!("DATA_PLANE_TAVILY_URL {base}: {e}")))?;
        Ok(Tavily {
            client: super::client(timeout)?,
            endpoint,
            key: key.to_string(),
            timeout,
        })
    }
}

#[derive(Serialize)]
struct Body<'a> {
    query: &'a str,
    max_results: usize,
    search_depth: &'static str,
    topic: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_range: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    include_domains: Vec<&'a str>,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    title: Option<String>,
    url: Option<String>,
    content: Option<String>,
    published_date: Option<String>,
}

/// Tavily's errors: `{"detail": {"error": "..."}}`.
#[derive(Deserialize)]
struct ErrorBody {
    detail: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    error: String,
}

#[async_trait]
impl SearchProvider for Tavily {
    fn kind(&self) -> ProviderKind {
        KIND
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, WebError> {
        let body = Body {
            query: &request.query,
            max_results: request.count.min(MAX_COUNT),
            search_depth: "basic",
            topic: "general",
            time_range: request.freshness.map(|f| f.name()),
            include_domains: request.site.as_deref().into_iter().collect(),
        };
        let http = self
            .client
            .post(self.endpoint.clone())
            .bearer_auth(&self.key)
            .json(&body);
        let reply = super::send(KIND, self.timeout, http).await?;
        if !reply.ok() {
            let detail = serde_json::from_slice::<ErrorBody>(&reply.body)
                .ok()
                .map(|b| b.detail.error);
            // 432 and 433: the plan's or the pay-as-you-go limit is used up,
            // which only the account's owner can change.
            if matches!(reply.status, 432 | 433) {
                return Err(WebError::ProviderAccount {
                    provider: KIND.to_string(),
                    reason: format!(
                        "HTTP {}: {}",
                        reply.status,
                        detail.unwrap_or_else(|| "the usage limit is reached".into())
                    ),
                });
            }
            return Err(super::status_error(KIND, &reply, detail));
        }
        let answer: Answer = reply.json(KIND)?;
        Ok(answer
            .results
            .into_iter()
            .map(|h| SearchHit {
                title: h.title.unwrap_or_default(),
                url: h.url.unwrap_or_default(),
                snippet: h.content.unwrap_or_default(),
                published: h.published_date,
            })
            .collect())
    }
}
