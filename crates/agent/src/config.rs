//! How the agent reaches its model and how far one run may go.

use std::time::Duration;

use crate::prompt::PromptTemplate;
use crate::textcalls::ThinkStart;

/// Which request field carries the output limit. OpenAI's current API and
/// most servers read `max_completion_tokens`; some older local servers read
/// only `max_tokens` (and OpenAI's reasoning models refuse it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    #[default]
    MaxCompletionTokens,
    MaxTokens,
}

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
    /// Longest answer one model request may produce (tokens).
    pub max_completion_tokens: Option<u32>,
    /// The request field that carries `max_completion_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// Wall-clock limit of one run; reaching it ends the run with
    /// `FinishReason::Deadline`. `None`: only the other limits apply.
    pub turn_deadline: Option<Duration>,
    /// Rendered and sent first on every run; a request's own system
    /// messages follow it. `None`: the conversation goes as it is.
    pub system_prompt: Option<PromptTemplate>,
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
            max_completion_tokens: Some(4096),
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            turn_deadline: Some(Duration::from_secs(300)),
            system_prompt: None,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            think_start: ThinkStart::Closed,
            text_calls: true,
        }
    }
}
