//! The agent: a model loop over an OpenAI-compatible endpoint that runs
//! tools through the registry, and the parser for tool calls that local
//! models write as text.

pub mod textcalls;
