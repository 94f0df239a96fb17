//! HTTP to modules: `GET {url}/manifest` and `POST {url}/execute`, with
//! the module's token, no redirects (a module's address is the
//! configuration's, not one a response names), capped bodies, and every
//! failure of a call turned into a [`ToolError`] the model can act on.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use data_plane_registry::{Callbacks, ErrorCode, ToolContext, ToolError, ToolHandler};
use data_plane_store::{Db, Scope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::config::ModuleConfig;

/// The largest manifest read (bytes).
pub const MAX_MANIFEST_BYTES: usize = 1024 * 1024;
/// The largest answer of `/execute` read (bytes).
pub const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;
/// The pause before the one retry of an idempotent call.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The HTTP client every module shares.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
}

impl Client {
    pub fn new() -> Result<Client, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("data-plane/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Client { http })
    }

    /// Reads `module`'s manifest as JSON; an error says why in words fit for
    /// a log line and the admin listing.
    pub async fn manifest(
        &self,
        module: &ModuleConfig,
        timeout: Duration,
    ) -> Result<Value, String> {
        let url = module.endpoint("manifest");
        let mut request = self.http.get(&url).timeout(timeout);
        if let Some(token) = &module.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("GET {url}: {}", describe(&e, timeout)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET {url} answered HTTP {}", status.as_u16()));
        }
        let body = read_capped(response, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| match e {
                Read::TooLarge => format!("the manifest is larger than {MAX_MANIFEST_BYTES} bytes"),
                Read::Failed(e) => format!("GET {url}: {}", describe(&e, timeout)),
            })?;
        serde_json::from_slice(&body).map_err(|e| format!("the manifest is not JSON: {e}"))
    }

    /// One call of `/execute`, retried once on a connection failure or a
    /// 502, 503 or 504 when `retry` (the tool is idempotent), all within
    /// `timeout`.
    pub async fn execute(
        &self,
        module: &ModuleConfig,
        body: &Value,
        timeout: Duration,
        retry: bool,
    ) -> Result<Value, ToolError> {
        let deadline = Instant::now() + timeout;
        let mut retries = u8::from(retry);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = self.execute_once(module, body, left, timeout).await;
            // What is left after this attempt: a retry needs room to run.
            let left = deadline.saturating_duration_since(Instant::now());
            match attempt {
                Err(Attempt::Transient(e)) if retries > 0 && left > RETRY_PAUSE * 2 => {
                    retries -= 1;
                    tracing::info!(module = %module.name, error = %e.message, "retrying an idempotent call once");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(Attempt::Transient(e) | Attempt::Final(e)) => return Err(e),
                Ok(value) => return Ok(value),
            }
        }
    }

    async fn execute_once(
        &self,
        module: &ModuleConfig,
        body: &Value,
        left: Duration,
        timeout: Duration,
    ) -> Result<Value, Attempt> {
        let name = &module.name;
        let mut request = self
            .http
            .post(module.endpoint("execute"))
            .timeout(left)
            .json(body);
        if let Some(token) = &module.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| sent_error(name, &e, timeout))?;
        let status = response.status();
        let bytes = read_capped(response, MAX_RESULT_BYTES)
            .await
            .map_err(|e| match e {
                Read::TooLarge => Attempt::Final(module_error(format!(
                    "module {name} answered more than {MAX_RESULT_BYTES} bytes"
                ))),
                Read::Failed(e) => sent_error(name, &e, timeout),
            })?;
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            let value = parsed.ok_or_else(|| {
                Attempt::Final(module_error(format!(
                    "module {name} answered what is not JSON ({} bytes)",
                    bytes.len()
                )))
            })?;
            return read_result(name, value).map_err(Attempt::Final);
        }
        let said = parsed.as_ref().and_then(error_message);
        let with = |text: String| match &said {
            Some(said) => format!("{text}: {said}"),
            None => text,
        };
        let code = status.as_u16();
        Err(match status {
            StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Attempt::Transient(ToolError::unavailable(with(
                format!("module {name} is unavailable (HTTP {code})"),
            ))),
            StatusCode::TOO_MANY_REQUESTS => Attempt::Final(ToolError::new(
                ErrorCode::RateLimited,
                with(format!("module {name} is rate limiting calls (HTTP 429)")),
            )),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Attempt::Final(module_error(with(
                format!("module {name} refused this server's credentials (HTTP {code})"),
            ))),
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
                Attempt::Final(ToolError::invalid(with(format!(
                    "module {name} refused the call (HTTP {code})"
                ))))
            }
            StatusCode::NOT_FOUND => Attempt::Final(ToolError::new(
                ErrorCode::NotFound,
                with(format!("module {name} does not know the call (HTTP 404)")),
            )),
            _ => Attempt::Final(module_error(with(format!(
                "module {name} failed (HTTP {code})"
            )))),
        })
    }
}

/// How one attempt ended, when it failed.
enum Attempt {
    /// The call may be tried again (it never reached the module, or a
    /// gateway said the module is away).
    Transient(ToolError),
    Final(ToolError),
}

fn module_error(message: String) -> ToolError {
    ToolError::new(ErrorCode::ModuleError, message)
}

/// A request that failed in transit.
fn sent_error(module: &str, e: &reqwest::Error, timeout: Duration) -> Attempt {
    if e.is_timeout() {
        Attempt::Final(ToolError::new(
            ErrorCode::Timeout,
            format!(
                "module {module} did not answer within {} ms",
                timeout.as_millis()
            ),
        ))
    } else if e.is_connect() {
        Attempt::Transient(ToolError::unavailable(format!(
            "module {module} is unreachable ({})",
            describe(e, timeout)
        )))
    } else {
        Attempt::Final(ToolError::unavailable(format!(
            "the call to module {module} failed: {}",
            describe(e, timeout)
        )))
    }
}

/// A transport error in words: its innermost cause ("Connection refused
/// (os error 111)"), which says more than reqwest's own text ("error
/// sending request for url …").
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {} ms", timeout.as_millis());
    }
    let mut innermost: &dyn std::error::Error = e;
    while let Some(cause) = innermost.source() {
        innermost = cause;
    }
    let what = if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else {
        "the request failed"
    };
    if std::ptr::addr_eq(innermost, e as &dyn std::error::Error) {
        format!("{what}: {e}")
    } else {
        format!("{what}: {innermost}")
    }
}

enum Read {
    TooLarge,
    Failed(reqwest::Error),
}

/// The body, refused as soon as it passes `max` bytes.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, Read> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(Read::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Read::Failed)? {
        if body.len() + chunk.len() > max {
            return Err(Read::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A module's answer as a result: `{success, data | result, error}`, the
/// error a string or `{code, message}` (a data-plane ToolResult is one).
fn read_result(module: &str, value: Value) -> Result<Value, ToolError> {
    let Some(obj) = value.as_object() else {
        return Err(module_error(format!(
            "module {module} answered what is not a tool result (a JSON object with success)"
        )));
    };
    let error = obj.get("error").filter(|e| !e.is_null());
    let success = match obj.get("success") {
        Some(Value::Bool(b)) => *b,
        None => error.is_none(),
        Some(other) => {
            return Err(module_error(format!(
                "module {module} answered success = {other}, not true or false"
            )));
        }
    };
    if success {
        return Ok(obj
            .get("data")
            .or_else(|| obj.get("result"))
            .cloned()
            .unwrap_or(Value::Null));
    }
    let message = error
        .and_then(error_message)
        .unwrap_or_else(|| "no reason given".to_string());
    // A data-plane module names the code; a code we also use keeps its
    // meaning (a retryable timeout stays one), anything else is the module's.
    let code = error
        .and_then(|e| e.get("code"))
        .and_then(|c| serde_json::from_value::<ErrorCode>(c.clone()).ok())
        .filter(|c| !matches!(c, ErrorCode::UnknownTool | ErrorCode::Internal))
        .unwrap_or(ErrorCode::ModuleError);
    Err(ToolError::new(code, format!("module {module}: {message}")))
}

/// The words of an error as modules write it: a string, `{message}` or
/// `{error: {message}}`.
fn error_message(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Object(o) => match (o.get("message"), o.get("error")) {
            (Some(Value::String(m)), _) => m.clone(),
            (_, Some(inner)) => return error_message(inner),
            _ => return None,
        },
        _ => return None,
    };
    let text = text.trim();
    // Enough for the model to act on; a module's stack trace is not.
    Some(match text.char_indices().nth(2000) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    })
}

/// Runs one remote tool: its arguments, already checked against the
/// manifest's schema by the registry, go to the module's `/execute`.
pub struct RemoteHandler {
    pub client: Client,
    pub module: ModuleConfig,
    /// The name the manifest gave the tool.
    pub remote_name: String,
    pub timeout: Duration,
    /// Retried once on a connection failure or a gateway's 502-504.
    pub idempotent: bool,
    /// Where the caller's membership of the call's space is checked: a
    /// module acts on the space id it is given, with no row-level security
    /// of ours behind it, so the check is made here, as of now, whatever
    /// door the call came through and whatever a replica cached.
    pub db: Db,
}

#[async_trait]
impl ToolHandler for RemoteHandler {
    async fn call(
        &self,
        args: Value,
        ctx: &ToolContext,
        _callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError> {
        if let Some(space) = ctx.space_id {
            let member = member_of(&self.db, ctx.user_id, space).await.map_err(|e| {
                tracing::warn!(module = %self.module.name, error = %e, "cannot check the caller's space");
                ToolError::unavailable(format!(
                    "module {}: the caller's space could not be checked just now; try again shortly",
                    self.module.name
                ))
            })?;
            if !member {
                return Err(ToolError::not_found(format!(
                    "space {space} does not exist or the caller is not a member of it"
                )));
            }
        }
        let body = json!({
            "tool_name": self.remote_name,
            "arguments": args,
            "user_id": ctx.user_id,
            "space_id": ctx.space_id,
            "request_id": ctx.request_id,
            "call_id": ctx.call_id,
        });
        ctx.side_effect(format!("called:{}", self.module.name));
        self.client
            .execute(&self.module, &body, self.timeout, self.idempotent)
            .await
    }
}

/// Whether `user` may read `space`, as the database says now (row-level
/// security shows a user only the spaces they belong to).
async fn member_of(db: &Db, user: Uuid, space: Uuid) -> Result<bool, data_plane_store::StoreError> {
    let mut tx = db.begin(Scope::User(user)).await?;
    let found = data_plane_store::identity::space_by_id(&mut tx, space).await?;
    tx.commit().await?;
    Ok(found.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_results() {
        let check = |answer: Value, expected: Result<Value, (ErrorCode, &str)>| match (
            read_result("crm", answer.clone()),
            expected,
        ) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{answer}"),
            (Err(e), Err((code, words))) => {
                assert_eq!(e.code, code, "{answer}: {e}");
                assert!(e.message.contains(words), "{answer}: {e}");
            }
            (got, want) => panic!("{answer}: got {got:?}, expected {want:?}"),
        };
        check(
            json!({"success": true, "data": {"n": 1}}),
            Ok(json!({"n": 1})),
        );
        check(json!({"success": true, "result": [1]}), Ok(json!([1])));
        check(
            json!({"tool_name": "crm.x", "result": "ok"}),
            Ok(json!("ok")),
        );
        check(json!({"success": true}), Ok(Value::Null));
        check(
            json!({"success": false, "error": "customer not found"}),
            Err((ErrorCode::ModuleError, "module crm: customer not found")),
        );
        check(
            json!({"success": false, "error": {"code": "timeout", "message": "slow db", "retryable": true}}),
            Err((ErrorCode::Timeout, "module crm: slow db")),
        );
        check(
            json!({"success": false, "error": {"code": "internal", "message": "boom"}}),
            Err((ErrorCode::ModuleError, "boom")),
        );
        check(
            json!({"error": {"error": {"code": "x", "message": "nested"}}}),
            Err((ErrorCode::ModuleError, "nested")),
        );
        check(
            json!({"success": false}),
            Err((ErrorCode::ModuleError, "no reason given")),
        );
        check(
            json!({"success": "yes"}),
            Err((ErrorCode::ModuleError, "success = \"yes\"")),
        );
        check(
            json!([1]),
            Err((ErrorCode::ModuleError, "not a tool result")),
        );
    }
}
