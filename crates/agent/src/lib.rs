//! The agent: a model loop over an OpenAI-compatible endpoint that runs
//! tools through the registry, and the parser for tool calls that local
//! models write as text.
//!
//! [`Agent::run`] streams one conversation: it asks the model, shows its text
//! as [`AgentEvent::TextDelta`], runs the tools it calls through
//! `Registry::execute_tool` (reporting each as events), feeds the results
//! back and asks again, until the model answers without calling a tool, the
//! step limit, token budget or turn deadline is reached, the reply loops,
//! or the caller cancels. It never
//! emits `done` or `error` itself: the caller turns the returned outcome into
//! those, so a nested agent's end is its parent's tool result.

mod agent;
mod citations;
mod complete;
mod config;
mod error;
mod events;
mod model;
pub mod prompt;
mod repetition;
mod resume;
pub mod textcalls;

#[cfg(feature = "testing")]
pub mod testing;

pub use agent::{Agent, ChatRequest, FinishReason, RunOutcome, Usage};
pub use citations::Citation;
pub use complete::{Completion, complete};
pub use config::{AgentConfig, MaxTokensField};
pub use error::AgentError;
pub use events::{AgentEvent, EventSink, SubAgentSink};
pub use resume::{Checkpoint, PlannedStep, Resume, ResumePlan, StepCall};

/// OpenAI's message type, as requests carry it.
pub use async_openai::types::chat::ChatCompletionRequestMessage as Message;
