//! Remote tool modules: other services that describe their tools in a
//! manifest (`GET {url}/manifest`) and run them on request
//! (`POST {url}/execute`). This crate reads which modules the deployment
//! uses ([`config`]), reads their manifests in either shape a module may
//! answer ([`manifest`]), installs their tools in the registry as
//! `module.tool` with a handler that calls the module ([`client`]), and
//! keeps the manifests fresh and shared between replicas through
//! PostgreSQL ([`Modules`]).

mod catalog;
pub mod client;
pub mod config;
pub mod manifest;

pub use catalog::{ModuleStatus, Modules};
pub use config::{ModuleConfig, ModulesConfig, read_modules};

/// What can go wrong with modules outside a tool call (a call's failures
/// are ToolResults).
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The configuration is wrong; every problem is listed.
    #[error("the module configuration is wrong:\n  - {}", .0.join("\n  - "))]
    Config(Vec<String>),
    #[error("unknown module {name:?}; configured modules: {}", if .known.is_empty() { "none".to_string() } else { .known.join(", ") })]
    Unknown { name: String, known: Vec<String> },
}
