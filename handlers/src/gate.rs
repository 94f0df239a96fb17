//! The HTTP gate: each gated call is POSTed to an outside evaluation
//! service, whose answer decides it. Anything but a well-formed answer in
//! time is a [`GateError`], so the registry lets the call run (fail-open).
//! What is posted has a hard size: arguments are cut to bounds, the cuts
//! listed, and a call whose arguments cannot be cut to fit is refused here
//! rather than sent where it would fail, and so run, unjudged.

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
        // Arguments the gate cannot be sent whole are judged here: refused,
        // never let through unjudged.
        let (arguments, cuts) = match bounded_arguments(call.args) {
            Ok(bounded) => bounded,
            Err(why) => {
                return Ok(GateDecision::Deny {
                    reason: format!("{why}; the call cannot be checked, so it does not run"),
                });
            }
        };
        let body = json!({
            "tool": entry.name,
            "category": entry.meta.category,
            "cost": entry.meta.cost,
            "annotations": entry.annotations,
            "permission": entry.meta.permission,
            "caller_permission": ctx.permission,
            "arguments": arguments,
            "arguments_cut": cuts,
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

/// Longest string of the arguments sent to the gate, in characters.
const MAX_ARGUMENT_CHARS: usize = 4096;
/// Most items of one array, or members of one object, sent to the gate.
const MAX_ARGUMENT_ITEMS: usize = 256;
/// Deepest nesting of arrays and objects the gate is sent; deeper
/// arguments cannot be judged and the call is refused.
const MAX_ARGUMENT_DEPTH: usize = 32;
/// Most bytes of the arguments and the list of cuts together, as JSON, the
/// gate is sent; larger arguments cannot be judged and the call is refused.
const MAX_ARGUMENT_BYTES: usize = 256 * 1024;
/// Most cuts listed one by one in `arguments_cut`; the rest are counted.
const MAX_CUTS_LISTED: usize = 64;
/// Longest path of a listed cut, in characters (a member's name may be
/// long); a longer one is cut and ends in `…`.
const MAX_CUT_PATH_CHARS: usize = 512;

/// What a gate request is allowed to weigh. A model, or a caller of a tool
/// whose schema takes an unbounded array, must not be able to push the
/// gate past its body limit or its time budget, since either would let the
/// call run unjudged (fail-open): whatever is sent has a hard size.
#[derive(Debug, Default)]
struct Bounded {
    /// Where the arguments were cut (JSON pointers), listed up to
    /// [`MAX_CUTS_LISTED`].
    cuts: Vec<Value>,
    /// Cuts beyond those listed.
    unlisted: usize,
    /// How deep the arguments went.
    depth: usize,
}

impl Bounded {
    fn cut(&mut self, path: &str, unit: &str, kept: usize, total: usize) {
        if self.cuts.len() < MAX_CUTS_LISTED {
            let path = if path.chars().count() > MAX_CUT_PATH_CHARS {
                let mut short: String = path.chars().take(MAX_CUT_PATH_CHARS).collect();
                short.push('…');
                short
            } else {
                path.to_string()
            };
            self.cuts
                .push(json!({ "path": path, "unit": unit, "kept": kept, "total": total }));
        } else {
            self.unlisted += 1;
        }
    }

    /// `value` at `path` with every string, array and object cut to its
    /// bound; nesting deeper than [`MAX_ARGUMENT_DEPTH`] is noted, not kept.
    fn walk(&mut self, value: &Value, path: &mut String, depth: usize) -> Value {
        self.depth = self.depth.max(depth);
        match value {
            Value::String(s) => {
                let total = s.chars().count();
                if total <= MAX_ARGUMENT_CHARS {
                    return value.clone();
                }
                self.cut(path, "chars", MAX_ARGUMENT_CHARS, total);
                let mut kept: String = s.chars().take(MAX_ARGUMENT_CHARS).collect();
                kept.push('…');
                Value::String(kept)
            }
            Value::Array(_) | Value::Object(_) if depth >= MAX_ARGUMENT_DEPTH => {
                self.depth = depth + 1;
                Value::Null
            }
            Value::Array(items) => {
                if items.len() > MAX_ARGUMENT_ITEMS {
                    self.cut(path, "items", MAX_ARGUMENT_ITEMS, items.len());
                }
                let at = path.len();
                let kept = items
                    .iter()
                    .take(MAX_ARGUMENT_ITEMS)
                    .enumerate()
                    .map(|(i, item)| {
                        path.push_str(&format!("/{i}"));
                        let item = self.walk(item, path, depth + 1);
                        path.truncate(at);
                        item
                    })
                    .collect();
                Value::Array(kept)
            }
            Value::Object(map) => {
                if map.len() > MAX_ARGUMENT_ITEMS {
                    self.cut(path, "members", MAX_ARGUMENT_ITEMS, map.len());
                }
                let at = path.len();
                let kept = map
                    .iter()
                    .take(MAX_ARGUMENT_ITEMS)
                    .map(|(key, item)| {
                        // A JSON pointer escapes `~` and `/` in a member's name.
                        path.push('/');
                        path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                        let item = self.walk(item, path, depth + 1);
                        path.truncate(at);
                        (key.clone(), item)
                    })
                    .collect();
                Value::Object(kept)
            }
            other => other.clone(),
        }
    }
}

/// The arguments as the gate is sent them, and the list of cuts made
/// (`arguments_cut`: each string past [`MAX_ARGUMENT_CHARS`] ends in `…`,
/// each array or object past [`MAX_ARGUMENT_ITEMS`] keeps its first
/// entries), or why they cannot be judged at all: nested deeper than
/// [`MAX_ARGUMENT_DEPTH`], or larger than [`MAX_ARGUMENT_BYTES`] even cut
/// (the arguments and the list of cuts together: what the request weighs
/// beside them is bounded already).
fn bounded_arguments(args: &Value) -> Result<(Value, Value), String> {
    let mut bounded = Bounded::default();
    let sent = bounded.walk(args, &mut String::new(), 0);
    if bounded.depth > MAX_ARGUMENT_DEPTH {
        return Err(format!(
            "its arguments are nested deeper than the {MAX_ARGUMENT_DEPTH} levels the gate can judge"
        ));
    }
    let mut cuts = bounded.cuts;
    if bounded.unlisted > 0 {
        cuts.push(json!({ "unlisted": bounded.unlisted }));
    }
    let cuts = Value::Array(cuts);
    let weight = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    let bytes = weight(&sent).saturating_add(weight(&cuts));
    if bytes > MAX_ARGUMENT_BYTES {
        return Err(format!(
            "its arguments take {bytes} bytes even cut, more than the {MAX_ARGUMENT_BYTES} the gate can judge"
        ));
    }
    Ok((sent, cuts))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_strings_are_clipped_before_they_reach_the_gate() {
        let long = "x".repeat(MAX_ARGUMENT_CHARS + 10);
        let args = json!({ "query": long, "nested": [{ "q": "short" }], "n": 3 });
        let (sent, cuts) = bounded_arguments(&args).unwrap();
        let query = sent["query"].as_str().unwrap();
        assert_eq!(query.chars().count(), MAX_ARGUMENT_CHARS + 1);
        assert!(query.ends_with('…'));
        assert_eq!(sent["nested"], json!([{ "q": "short" }]));
        assert_eq!(sent["n"], 3);
        assert_eq!(
            cuts,
            json!([{ "path": "/query", "unit": "chars", "kept": MAX_ARGUMENT_CHARS,
                     "total": MAX_ARGUMENT_CHARS + 10 }])
        );
    }

    #[test]
    fn long_arrays_and_wide_objects_keep_their_first_entries() {
        let items: Vec<Value> = (0..1000).map(|i| json!(i)).collect();
        let wide: serde_json::Map<String, Value> =
            (0..300).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let args = json!({ "a/b": { "items": items }, "wide": wide });
        let (sent, cuts) = bounded_arguments(&args).unwrap();
        assert_eq!(
            sent["a/b"]["items"].as_array().unwrap().len(),
            MAX_ARGUMENT_ITEMS
        );
        assert_eq!(sent["a/b"]["items"][255], 255);
        assert_eq!(sent["wide"].as_object().unwrap().len(), MAX_ARGUMENT_ITEMS);
        assert_eq!(
            cuts,
            json!([
                { "path": "/a~1b/items", "unit": "items", "kept": 256, "total": 1000 },
                { "path": "/wide", "unit": "members", "kept": 256, "total": 300 },
            ])
        );
    }

    #[test]
    fn arguments_that_cannot_be_cut_to_fit_are_refused() {
        let mut deep = json!("bottom");
        for _ in 0..MAX_ARGUMENT_DEPTH + 1 {
            deep = json!([deep]);
        }
        let why = bounded_arguments(&json!({ "deep": deep })).unwrap_err();
        assert!(why.contains("nested deeper than the 32 levels"), "{why}");
        // Just deep enough passes.
        let mut fits = json!("bottom");
        for _ in 0..MAX_ARGUMENT_DEPTH - 1 {
            fits = json!([fits]);
        }
        assert!(bounded_arguments(&json!({ "deep": fits })).is_ok());

        // 256 strings of 4,096 characters, each cut to fit, still weigh
        // about a megabyte.
        let big: Vec<Value> = (0..MAX_ARGUMENT_ITEMS)
            .map(|_| json!("y".repeat(MAX_ARGUMENT_CHARS * 2)))
            .collect();
        let why = bounded_arguments(&json!({ "big": big })).unwrap_err();
        assert!(
            why.contains("more than the 262144 the gate can judge"),
            "{why}"
        );
    }

    #[test]
    fn long_member_names_count_against_the_bound() {
        let key = "k".repeat(100_000);
        // 64 cut arrays under one long name: each cut's path is shortened,
        // so the list of cuts stays small, and the whole fits the bound.
        let arrays: Vec<Value> = (0..64).map(|_| json!(vec![0; 257])).collect();
        let (sent, cuts) = bounded_arguments(&json!({ key.clone(): arrays })).unwrap();
        let weight =
            serde_json::to_vec(&sent).unwrap().len() + serde_json::to_vec(&cuts).unwrap().len();
        assert!(weight <= MAX_ARGUMENT_BYTES, "{weight}");
        assert_eq!(cuts.as_array().unwrap().len(), 64);
        let path = cuts[0]["path"].as_str().unwrap();
        assert_eq!(path.chars().count(), MAX_CUT_PATH_CHARS + 1);
        assert!(path.starts_with("/kkk") && path.ends_with('…'), "{path}");
        // Names alone past the bound: refused.
        let wide: serde_json::Map<String, Value> = (0..3)
            .map(|i| (format!("{i}{}", "n".repeat(100_000)), json!(i)))
            .collect();
        let why = bounded_arguments(&Value::Object(wide)).unwrap_err();
        assert!(why.contains("the gate can judge"), "{why}");
    }

    #[test]
    fn the_list_of_cuts_is_bounded_too() {
        // 100 arrays of 300 numbers: each is cut, the first 64 cuts listed
        // and the rest counted.
        let many: Vec<Value> = (0..100).map(|_| json!(vec![0; 300])).collect();
        let (sent, cuts) = bounded_arguments(&json!({ "many": many })).unwrap();
        assert_eq!(
            sent["many"][99].as_array().unwrap().len(),
            MAX_ARGUMENT_ITEMS
        );
        let cuts = cuts.as_array().unwrap();
        assert_eq!(cuts.len(), MAX_CUTS_LISTED + 1);
        assert_eq!(cuts[0]["path"], "/many/0");
        assert_eq!(
            cuts[MAX_CUTS_LISTED],
            json!({ "unlisted": 100 - MAX_CUTS_LISTED })
        );
    }
}
