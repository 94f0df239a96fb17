//! One model request without tools, its answer collected whole: for callers
//! that need a single completion rather than a conversation (query_documents
//! turning a question into SQL).

use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionStreamOptions, CreateChatCompletionRequest,
    FinishReason as ModelFinish,
};

use crate::model::ModelClient;
use crate::textcalls::{Segment, StreamParser};
use crate::{AgentConfig, AgentError, Usage};

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// What the model wrote for the user (`<think>` sections removed).
    pub text: String,
    pub usage: Usage,
    /// The answer was cut at its token limit.
    pub truncated: bool,
}

/// Sends `messages` to the model of `config` (no tools offered) and collects
/// the streamed answer, under the same connection, first-byte and idle
/// timeouts as a run. Dropping the future closes the connection.
pub async fn complete(
    config: &AgentConfig,
    messages: Vec<ChatCompletionRequestMessage>,
    temperature: Option<f32>,
) -> Result<Completion, AgentError> {
    if messages.is_empty() {
        return Err(AgentError::InvalidRequest("messages is empty".into()));
    }
    let client = ModelClient::new(config)?;
    let request = CreateChatCompletionRequest {
        model: config.model.clone(),
        messages,
        stream: Some(true),
        stream_options: Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        }),
        temperature,
        max_completion_tokens: config.max_completion_tokens,
        ..Default::default()
    };
    let mut stream = client.open(&request).await?;
    let mut parser = StreamParser::new(Vec::new());
    let mut segments = Vec::new();
    let mut usage = Usage::default();
    let mut truncated = false;
    while let Some(chunk) = stream.next().await? {
        if let Some(u) = &chunk.usage {
            usage.prompt_tokens = u64::from(u.prompt_tokens);
            usage.completion_tokens = u64::from(u.completion_tokens);
        }
        for choice in chunk.choices.iter().filter(|c| c.index == 0) {
            if let Some(text) = &choice.delta.content {
                segments.extend(parser.push(text));
            }
            if choice.finish_reason == Some(ModelFinish::Length) {
                truncated = true;
            }
        }
    }
    segments.extend(parser.finish());
    // With no tools offered, anything read as a call is the model's text.
    let text = segments
        .into_iter()
        .map(|s| match s {
            Segment::Text(t) => t,
            Segment::Call(call) => format!("{} {}", call.name, call.arguments),
            Segment::Malformed { raw, .. } => raw,
            Segment::Tag(tag) => tag.line,
        })
        .collect();
    Ok(Completion {
        text,
        usage,
        truncated,
    })
}
