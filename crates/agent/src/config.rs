//! How the agent reaches its model and how far one run may go.

use std::time::Duration;

use crate::textcalls::ThinkStart;

/// The model endpoint and the limits of one run. A nested agent gets its
/// own copy with a smaller step limit and a token budget.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Base URL of the OpenAI-compatible API, up to and including `/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; local servers often need none.
    pub api_key: Option<String>,
    /// Model name sent with every request.
    pub model: String,
    /// Model requests one run may make (each one is a step).
    pub max_steps: u32,
    /// Tokens (prompt and completion, summed over the steps, as the endpoint
    /// reports them) after which the run stops; `None`: no budget.
    pub token_budget: Option<u64>,
    /// Longest answer one model request may produce.
    pub max_completion_tokens: Option<u32>,
    /// Prepended as a system message when the conversation has none.
    pub system_prompt: Option<String>,
    /// Time to open the connection.
    pub connect_timeout: Duration,
    /// Time from sending the request to the first streamed chunk.
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks once the answer is streaming.
    pub idle_timeout: Duration,
    /// Whether the model's chat template opens `<think>` in the prompt.
    /// `Closed` (the default) streams text from the first byte; `Open`
    /// drops everything up to the first `</think>`; `Unknown` holds the
    /// start of every reply back until it can tell (safe, but slow).
    pub think_start: ThinkStart,
    /// Whether tool calls written in the reply's text are read as calls
    /// (on by default). Off for endpoints that always return native
    /// `tool_calls`: then no text, quoted or not, can call a tool.
    pub text_calls: bool,
}

impl AgentConfig {
    /// The defaults for `model` at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        AgentConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            max_steps: 12,
            token_budget: None,
            max_completion_tokens: None,
            system_prompt: None,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            think_start: ThinkStart::Closed,
            text_calls: true,
        }
    }
}
