//! The HTTP gate: each gated call is POSTed to an outside evaluation
//! service, whose answer decides it. Anything but a well-formed answer in
//! time is a [`GateError`], so the registry lets the call run (fail-open).

use async_trait::async_trait;
use data_plane_registry::gate::GATE_TIMEOUT;
use data_plane_registry::{Gate, GateCall, GateDecision, GateError};
use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

/// The most of an answer the gate reads: a decision and a reason.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The gate's URL cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HttpGateError {
    #[error("gate URL {url:?} is not a valid http or https URL")]
    Url { url: String },
    #[error("the gate's HTTP client cannot be built: {0}")]
    Client(#[from] reqwest::Error),
}

/// POSTs calls to one configured URL.
#[derive(Debug, Clone)]
pub struct HttpGate {
    client: reqwest::Client,
    url: Url,
    token: Option<String>,
}

/// The service's answer.
#[derive(Deserialize)]
struct Answer {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Decision {
    Allow,
    Deny,
    Ask,
}

impl HttpGate {
    /// A gate asking `url`, with `token` as a bearer token when given.
    pub fn new(url: &str, token: Option<String>) -> Result<HttpGate, HttpGateError> {
        let parsed = Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| HttpGateError::Url {
                url: url.to_string(),
            })?;
        // The registry stops waiting at GATE_TIMEOUT; the request is given
        // up then too rather than left running.
        let client = reqwest::Client::builder()
            .timeout(GATE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(HttpGate {
            client,
            url: parsed,
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// The URL calls are POSTed to.
    pub fn url(&self) -> &Url {
        &self.url
    }
}

#[async_trait]
impl Gate for HttpGate {
    async fn check(&self, call: &GateCall<'_>) -> Result<GateDecision, GateError> {
        let entry = call.entry;
        let ctx = call.ctx;
        let body = json!({
            "tool": entry.name,
            "category": entry.meta.category,
            "cost": entry.meta.cost,
            "annotations": entry.annotations,
            "permission": entry.meta.permission,
            "caller_permission": ctx.permission,
            "arguments": clipped(call.args),
            "user_id": ctx.user_id,
            "space_id": ctx.space_id,
            "request_id": ctx.request_id,
            "call_id": ctx.call_id,
            "agent": ctx.agent.as_deref(),
        });
        let mut request = self.client.post(self.url.clone()).json(&body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| GateError::new(format!("the gate at {} did not answer: {e}", self.url)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(GateError::new(format!(
                "the gate at {} answered {status}",
                self.url
            )));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            GateError::new(format!(
                "the gate at {} broke off its answer: {e}",
                self.url
            ))
        })? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(GateError::new(format!(
                    "the gate at {} answered more than {MAX_ANSWER_BYTES} bytes",
                    self.url
                )));
            }
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            GateError::new(format!(
                "the gate at {} answered something other than {{\"decision\": \"allow\" | \"deny\" | \"ask\", \"reason\": \"…\"}}: {e}",
                self.url
            ))
        })?;
        let reason = answer
            .reason
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| "the evaluation service gave no reason".to_string());
        Ok(match answer.decision {
            Decision::Allow => GateDecision::Allow,
            Decision::Deny => GateDecision::Deny { reason },
            Decision::Ask => GateDecision::Ask { reason },
        })
    }
}

/// Longest string of the arguments sent to the gate, in characters: a model
/// must not be able to push the gate past its body limit or its time budget
/// (either makes the call fail open) by writing a huge argument.
const MAX_ARGUMENT_CHARS: usize = 4096;

/// The arguments with every string cut to [`MAX_ARGUMENT_CHARS`] (marked
/// with a trailing `…`).
fn clipped(value: &Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > MAX_ARGUMENT_CHARS => {
            let mut cut: String = s.chars().take(MAX_ARGUMENT_CHARS).collect();
            cut.push('…');
            Value::String(cut)
        }
        Value::Array(items) => Value::Array(items.iter().map(clipped).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), clipped(v))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_strings_are_clipped_before_they_reach_the_gate() {
        let long = "x".repeat(MAX_ARGUMENT_CHARS + 10);
        let args = json!({ "query": long, "nested": [{ "q": "short" }], "n": 3 });
        let sent = clipped(&args);
        let query = sent["query"].as_str().unwrap();
        assert_eq!(query.chars().count(), MAX_ARGUMENT_CHARS + 1);
        assert!(query.ends_with('…'));
        assert_eq!(sent["nested"], json!([{ "q": "short" }]));
        assert_eq!(sent["n"], 3);
    }
}
