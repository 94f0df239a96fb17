//! What a tool call returns to the model: success with data, or a failure the
//! model can act on. Never a panic, never an HTTP error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a call failed, as a stable machine-readable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    UnknownTool,
    NotAvailable,
    InvalidArguments,
    PermissionDenied,
    RateLimited,
    ApprovalRequired,
    /// The eval gate refused the call.
    Blocked,
    NotFound,
    Timeout,
    Unavailable,
    /// A remote module failed the call, or answered what is not a result.
    ModuleError,
    /// The server running the call stopped before it returned, and the
    /// call was not run again since it may have had an effect.
    Interrupted,
    Internal,
}

impl ErrorCode {
    /// Whether calling again unchanged may succeed (a limit's refusal:
    /// later, once the limit allows it).
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::RateLimited | ErrorCode::Timeout | ErrorCode::Unavailable
        )
    }

    /// Whether the pipeline's own retry may try again at once: a transient
    /// failure, never a limit's refusal (the same call would be refused
    /// again, and count against the limit once more).
    pub fn retried_at_once(self) -> bool {
        matches!(self, ErrorCode::Timeout | ErrorCode::Unavailable)
    }
}

/// The failure half of a [`ToolResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolFailure {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
}

/// The outcome of one call, stamped by the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub success: bool,
    pub tool: String,
    pub call_id: String,
    /// `Some(null)` stays that when read back (a recorded event replays
    /// as it was sent).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolFailure>,
    pub duration_ms: u64,
    /// What the call did beyond answering (`fetched:URL`, `queried:TABLE`,
    /// `searched:web:QUERY`), as its handler recorded it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_effects: Vec<String>,
    /// How many times the handler ran: 2 when a transient failure was
    /// retried once (docs/events.md, "One call, one id"). Left out when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
}

/// A field that is there, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl ToolResult {
    pub fn ok(tool: &str, call_id: &str, data: Value, duration_ms: u64) -> Self {
        ToolResult {
            success: true,
            tool: tool.into(),
            call_id: call_id.into(),
            data: Some(data),
            error: None,
            duration_ms,
            side_effects: Vec::new(),
            attempts: 1,
        }
    }

    pub fn failed(tool: &str, call_id: &str, error: &ToolError, duration_ms: u64) -> Self {
        ToolResult {
            success: false,
            tool: tool.into(),
            call_id: call_id.into(),
            data: None,
            error: Some(ToolFailure {
                code: error.code,
                message: error.message.clone(),
                retryable: error.code.retryable(),
            }),
            duration_ms,
            side_effects: Vec::new(),
            attempts: 1,
        }
    }

    /// The same result, saying whether calling again may succeed where the
    /// error code alone does not tell (invalid arguments the caller can
    /// write again).
    pub fn retryable(mut self, retryable: bool) -> Self {
        if let Some(error) = &mut self.error {
            error.retryable = retryable;
        }
        self
    }

    /// The error code when the call failed.
    pub fn code(&self) -> Option<ErrorCode> {
        self.error.as_ref().map(|e| e.code)
    }
}

/// An error a handler (or a step of the pipeline) reports.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}
