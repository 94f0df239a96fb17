//! The data-plane server as a library, so integration tests can drive the
//! router and the commands directly; `main.rs` is a thin entry point.

/// The allocator of everything that links the server (the binary, its
/// tests and benchmarks): glibc's malloc and free took a fifth of the
/// server's CPU on the cheap call, mimalloc's about a third of that
/// (docs/operations.md, "The cheap call").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
