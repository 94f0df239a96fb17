//! A reranker over HTTP: a cross-encoder that scores each passage against
//! the query, behind the rerank API that llama.cpp's server (`--reranking`,
//! `POST /v1/rerank`), Cohere (`/v2/rerank`), Jina (`/v1/rerank`) and
//! text-embeddings-inference (`POST /rerank`) speak:
//!
//! - the Cohere form (llama.cpp, Cohere, Jina, and most servers that copy
//!   them): `{"model", "query", "documents": [..], "top_n"}`, answered
//!   `{"results": [{"index", "relevance_score"}, ..]}`;
//! - text-embeddings-inference's own: `{"query", "texts": [..]}`, answered
//!   `[{"index", "score"}, ..]`.
//!
//! Either answer shape is read whichever form was sent.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::remote::excerpt;

/// Which request form the endpoint takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RerankApi {
    /// `documents` and `top_n` (llama.cpp, Cohere, Jina).
    #[default]
    Cohere,
    /// `texts` (text-embeddings-inference).
    Tei,
}

/// Where the reranker is and how to ask it.
#[derive(Clone)]
pub struct RerankConfig {
    /// The endpoint itself, e.g. `http://127.0.0.1:8012/v1/rerank`.
    pub url: String,
    /// Sent as `model` when set (Cohere and Jina need one; a llama.cpp
    /// server serves the one it loaded).
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub api: RerankApi,
    /// The whole request, connection included.
    pub timeout: Duration,
}

impl std::fmt::Debug for RerankConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api", &self.api)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why a rerank did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error("invalid rerank configuration: {0}")]
    InvalidConfig(String),
    #[error("rerank request to {url} timed out after {ms} ms")]
    Timeout { url: String, ms: u128 },
    #[error("rerank request to {url} failed: {reason}")]
    Request { url: String, reason: String },
    #[error("rerank endpoint {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("rerank endpoint {url} sent an unusable response: {reason}")]
    InvalidResponse { url: String, reason: String },
}

impl RerankError {
    /// What a caller of search may be told: the kind of failure, without
    /// the endpoint's address or what its body said (those go to the log).
    pub fn summary(&self) -> String {
        match self {
            RerankError::InvalidConfig(_) => "the reranker is not configured correctly".into(),
            RerankError::Timeout { ms, .. } => format!("the reranker timed out after {ms} ms"),
            RerankError::Request { .. } => "the reranker could not be reached".into(),
            RerankError::Http { status, .. } => format!("the reranker answered HTTP {status}"),
            RerankError::InvalidResponse { .. } => "the reranker sent an unusable response".into(),
        }
    }
}

/// A client for one rerank endpoint; cheap to clone.
#[derive(Clone)]
pub struct Reranker {
    client: reqwest::Client,
    config: RerankConfig,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("url", &self.config.url)
            .field("model", &self.config.model)
            .field("api", &self.config.api)
            .field("timeout", &self.config.timeout)
            .finish_non_exhaustive()
    }
}

/// One scored passage, by its index in the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankScore {
    pub index: usize,
    pub score: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Results { results: Vec<Item> },
    List(Vec<Item>),
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    #[serde(alias = "score")]
    relevance_score: f64,
}

impl Reranker {
    pub fn new(config: RerankConfig) -> Result<Reranker, RerankError> {
        let url = config.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(RerankError::InvalidConfig(format!(
                "rerank url {url:?} must start with http:// or https:// (the endpoint itself, e.g. http://127.0.0.1:8012/v1/rerank)"
            )));
        }
        if config.timeout.is_zero() {
            return Err(RerankError::InvalidConfig(
                "rerank timeout must be at least 1 ms".to_string(),
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| RerankError::InvalidConfig(format!("rerank client: {e}")))?;
        Ok(Reranker {
            client,
            config: RerankConfig {
                url: url.to_string(),
                ..config
            },
        })
    }

    pub fn config(&self) -> &RerankConfig {
        &self.config
    }

    /// Scores `documents` against `query`, best first. An index out of
    /// range or scored twice refuses the whole answer; a server that scores
    /// only some (one that caps `top_n`) leaves the rest out.
    pub async fn rerank(
        &self,
        query: &str,
        documents: &[String],
    ) -> Result<Vec<RerankScore>, RerankError> {
        let url = &self.config.url;
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let mut body = match self.config.api {
            RerankApi::Cohere => json!({
                "query": query,
                "documents": documents,
                "top_n": documents.len(),
            }),
            // TEI refuses a text over the model's length unless told to
            // cut it; the others cut by default.
            RerankApi::Tei => json!({"query": query, "texts": documents, "truncate": true}),
        };
        if let Some(model) = &self.config.model {
            body["model"] = Value::String(model.clone());
        }
        let mut request = self.client.post(url).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| self.failed(e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.failed(e))?;
        if !status.is_success() {
            return Err(RerankError::Http {
                url: url.clone(),
                status: status.as_u16(),
                body: excerpt(&text),
            });
        }
        let invalid = |reason: String| RerankError::InvalidResponse {
            url: url.clone(),
            reason,
        };
        let answer: Answer = serde_json::from_str(&text).map_err(|e| {
            invalid(format!(
                "expected {{\"results\": [{{\"index\", \"relevance_score\"}}]}} or [{{\"index\", \"score\"}}]: {e}; body: {}",
                excerpt(&text)
            ))
        })?;
        let items = match answer {
            Answer::Results { results } => results,
            Answer::List(items) => items,
        };
        let mut seen = vec![false; documents.len()];
        let mut scores = Vec::with_capacity(items.len());
        for item in items {
            if item.index >= documents.len() {
                return Err(invalid(format!(
                    "index {} is out of range for {} documents",
                    item.index,
                    documents.len()
                )));
            }
            if std::mem::replace(&mut seen[item.index], true) {
                return Err(invalid(format!("index {} is scored twice", item.index)));
            }
            scores.push(RerankScore {
                index: item.index,
                score: item.relevance_score,
            });
        }
        if scores.is_empty() {
            return Err(invalid(format!(
                "none of {} documents was scored",
                documents.len()
            )));
        }
        scores.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        Ok(scores)
    }

    fn failed(&self, e: reqwest::Error) -> RerankError {
        if e.is_timeout() {
            RerankError::Timeout {
                url: self.config.url.clone(),
                ms: self.config.timeout.as_millis(),
            }
        } else {
            RerankError::Request {
                url: self.config.url.clone(),
                reason: e.to_string(),
            }
        }
    }
}
