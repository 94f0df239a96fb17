//! The data-plane server as a library, so integration tests can drive the
//! router and the commands directly; `main.rs` is a thin entry point.

pub mod access;
pub mod auth;
pub mod chat_limits;
pub mod cli;
pub mod config;
pub mod error;
pub mod http;
pub mod metrics;
pub mod settings_cache;
pub mod state;
