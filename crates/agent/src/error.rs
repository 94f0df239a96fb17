//! The agent's one error type: everything that ends a run early.

/// Why a run stopped without an answer. Tool failures are not here: they go
/// back to the model as results.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the model endpoint {url} cannot be reached: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the model endpoint sent nothing within {secs} s")]
    FirstByteTimeout { secs: u64 },
    #[error("the model endpoint went silent for {secs} s in the middle of its answer")]
    IdleTimeout { secs: u64 },
    #[error("the model endpoint answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the model endpoint reported an error: {0}")]
    Upstream(String),
    #[error("the model endpoint sent something that is not a chat completion chunk: {0}")]
    BadResponse(String),
    #[error("the model stream broke off before it finished: {0}")]
    Truncated(String),
    #[error("invalid agent configuration: {0}")]
    Config(String),
    #[error("invalid chat request: {0}")]
    InvalidRequest(String),
    #[error("the run was cancelled")]
    Cancelled,
}

impl AgentError {
    /// A stable machine-readable code for the client's `error` event.
    pub fn code(&self) -> &'static str {
        match self {
            AgentError::Unreachable { .. } => "model_unreachable",
            AgentError::FirstByteTimeout { .. } | AgentError::IdleTimeout { .. } => "model_timeout",
            AgentError::Status { .. } | AgentError::Upstream(_) => "model_error",
            AgentError::BadResponse(_) | AgentError::Truncated(_) => "model_bad_response",
            AgentError::Config(_) => "agent_config",
            AgentError::InvalidRequest(_) => "invalid_request",
            AgentError::Cancelled => "cancelled",
        }
    }
}
