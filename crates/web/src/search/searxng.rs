//! SearXNG through its JSON API (`GET /search?format=json`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use url::Url;

use super::{ProviderKind, SearchHit, SearchProvider, SearchRequest};
use crate::WebError;

const KIND: ProviderKind = ProviderKind::Searxng;

/// A SearXNG instance with the `json` output format enabled.
#[derive(Debug)]
pub struct Searxng {
    client: reqwest::Client,
    endpoint: Url,
    timeout: Duration,
}

impl Searxng {
    /// `base` is the instance's root, e.g. `http://searxng:8080/` (a path
    /// prefix such as `/searx/` is kept).
    pub fn new(base: &str, timeout: Duration) -> Result<Searxng, WebError> {
        let base = super::base_url(KIND, "DATA_PLANE_SEARXNG_URL", base)?;
        let endpoint = base
            .join("search")
            .map_err(|e| WebError::Config(format!("DATA_PLANE_SEARXNG_URL {base}: {e}")))?;
        Ok(Searxng {
            client: super::client(timeout)?,
            endpoint,
            timeout,
        })
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Hit>,
    /// `[engine, reason]` pairs for the engines that failed this query
    /// (read loosely: only a message depends on them).
    #[serde(default)]
    unresponsive_engines: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Hit {
    url: Option<String>,
    title: Option<String>,
    content: Option<String>,
    #[serde(default, rename = "publishedDate")]
    published_date: Option<String>,
}

#[async_trait]
impl SearchProvider for Searxng {
    fn kind(&self) -> ProviderKind {
        KIND
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, WebError> {
        let mut query = vec![
            ("q", request.query_with_site()),
            ("format", "json".to_string()),
        ];
        if let Some(f) = request.freshness {
            // SearXNG's time_range takes the same four words.
            query.push(("time_range", f.name().to_string()));
        }
        let http = self
            .client
            .get(self.endpoint.clone())
            .query(&query)
            .header(reqwest::header::ACCEPT, "application/json");
        let reply = super::send(KIND, self.timeout, http).await?;
        if reply.status == 403 {
            // An instance answers 403 to every format it has not enabled.
            return Err(WebError::Config(format!(
                "the SearXNG instance at {} answered 403 Forbidden to format=json: it must list \
                 `json` under search.formats in its settings.yml",
                self.endpoint.origin().ascii_serialization()
            )));
        }
        if !reply.ok() {
            return Err(super::status_error(KIND, &reply, None));
        }
        let answer: Answer = reply.json(KIND)?;
        if answer.results.is_empty() && !answer.unresponsive_engines.is_empty() {
            let engines: Vec<String> = answer
                .unresponsive_engines
                .iter()
                .map(|e| match e.as_array().map(Vec::as_slice) {
                    Some([engine, reason]) => format!(
                        "{} ({})",
                        engine.as_str().unwrap_or_default(),
                        reason.as_str().unwrap_or_default()
                    ),
                    _ => e.to_string(),
                })
                .collect();
            return Err(WebError::ProviderUnavailable {
                provider: KIND.to_string(),
                reason: format!("no engine answered: {}", engines.join(", ")),
            });
        }
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
