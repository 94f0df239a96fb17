//! The remote engine: any OpenAI-compatible `POST /embeddings` endpoint.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::EmbedError;
use crate::vector::normalise;

/// How much of an error body is quoted back; enough to read the reason,
/// short enough for a log line.
const BODY_EXCERPT_CHARS: usize = 300;

/// A client for one model on one endpoint; cheap to clone.
#[derive(Clone)]
pub struct RemoteEmbedder {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    model: String,
    dimension: usize,
    batch_size: usize,
}

impl std::fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    index: usize,
}

impl RemoteEmbedder {
    /// Prepares the client; `base_url` is the API root such as `https://api.openai.com/v1`.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        model: &str,
        dimension: usize,
        batch_size: usize,
        timeout: Duration,
    ) -> Result<Self, EmbedError> {
        let base = base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EmbedError::InvalidConfig(format!(
                "embeddings base url {base_url:?} must start with http:// or https://"
            )));
        }
        if model.trim().is_empty() {
            return Err(EmbedError::InvalidConfig(
                "embeddings model name is empty".to_owned(),
            ));
        }
        if dimension == 0 {
            return Err(EmbedError::InvalidConfig(format!(
                "embeddings dimension 0 for model {model} must be at least 1"
            )));
        }
        if batch_size == 0 {
            return Err(EmbedError::InvalidConfig(
                "remote batch size 0 must be at least 1".to_owned(),
            ));
        }
        if timeout.is_zero() {
            return Err(EmbedError::InvalidConfig(
                "embeddings timeout 0s must be positive".to_owned(),
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| EmbedError::InvalidConfig(format!("cannot build http client: {e}")))?;
        Ok(Self {
            client,
            url: format!("{base}/embeddings"),
            api_key: api_key.filter(|key| !key.is_empty()),
            model: model.to_owned(),
            dimension,
            batch_size,
        })
    }

    /// One L2-normalised vector per text, in order, one request per batch.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = self.client.post(&self.url).json(&Request {
            model: &self.model,
            input: texts,
        });
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| self.request_error(&e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| self.request_error(&e))?;
        if !status.is_success() {
            return Err(EmbedError::Http {
                url: self.url.clone(),
                status: status.as_u16(),
                body: excerpt(&body),
            });
        }
        let parsed: Response =
            serde_json::from_str(&body).map_err(|e| EmbedError::InvalidResponse {
                url: self.url.clone(),
                reason: format!("{e} in {}", excerpt(&body)),
            })?;
        self.reorder(texts.len(), parsed.data)
    }

    /// Puts vectors back in input order by their `index`, checking that each
    /// input got exactly one vector of the configured dimension.
    fn reorder(&self, expected: usize, items: Vec<Item>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if items.len() != expected {
            return Err(self.invalid(format!("{} vectors for {expected} inputs", items.len())));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
        for item in items {
            if item.embedding.len() != self.dimension {
                return Err(EmbedError::DimensionMismatch {
                    model: self.model.clone(),
                    expected: self.dimension,
                    actual: item.embedding.len(),
                });
            }
            let slot = slots
                .get_mut(item.index)
                .ok_or_else(|| self.invalid(format!("index {} out of range", item.index)))?;
            if slot.is_some() {
                return Err(self.invalid(format!("index {} appears twice", item.index)));
            }
            let mut vector = item.embedding;
            normalise(&mut vector);
            *slot = Some(vector);
        }
        // Every slot is filled: counts match and no index repeats.
        Ok(slots.into_iter().flatten().collect())
    }

    fn invalid(&self, reason: String) -> EmbedError {
        EmbedError::InvalidResponse {
            url: self.url.clone(),
            reason,
        }
    }

    fn request_error(&self, error: &reqwest::Error) -> EmbedError {
        let reason = if error.is_timeout() {
            "timed out".to_owned()
        } else if error.is_connect() {
            format!("cannot connect: {error}")
        } else {
            error.to_string()
        };
        EmbedError::Request {
            url: self.url.clone(),
            reason,
        }
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    pub fn model_id(&self) -> &str {
        &self.model
    }
}

pub(crate) fn excerpt(body: &str) -> String {
    let trimmed = body.trim();
    let mut out: String = trimmed.chars().take(BODY_EXCERPT_CHARS).collect();
    if out.len() < trimmed.len() {
        out.push('…');
    }
    out
}
