//! The parts of a tool: its definition file, its handler, and the metadata
//! the registry enforces.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::{Callbacks, Permission, ToolContext, ToolError};

/// Where a tool shows up in listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Navigation,
    Search,
    Document,
    Web,
}

/// Hints for clients and models (MCP's tool annotations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    /// Reaches beyond the deployment's own data (the web).
    pub open_world: bool,
    pub requires_confirmation: bool,
}

impl Annotations {
    /// A tool that only reads the deployment's own data.
    pub const READ_ONLY: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        requires_confirmation: false,
    };
    /// A tool that only reads, but from the open web.
    pub const READ_ONLY_OPEN_WORLD: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: false,
        open_world: true,
        requires_confirmation: false,
    };
}

/// Rough cost of one call, for agents that budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostTier {
    /// One or two indexed database reads.
    Cheap,
    /// Search, scans, embedding a query.
    Moderate,
    /// Calls a model or an outside service.
    Expensive,
}

/// Per-user limits, kept in PostgreSQL so they hold across replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RateLimits {
    /// Least time between two calls of the tool by one user.
    #[serde(with = "millis")]
    pub cooldown: Option<Duration>,
    /// Most calls of the tool by one user per UTC day.
    pub daily_limit: Option<u32>,
}

impl RateLimits {
    pub const NONE: RateLimits = RateLimits {
        cooldown: None,
        daily_limit: None,
    };
    pub fn is_none(&self) -> bool {
        self.cooldown.is_none() && self.daily_limit.is_none()
    }
}

/// An admin's change to a tool's [`RateLimits`]: a field left out keeps the
/// tool's default, `null` lifts that limit, a number replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitOverride {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cooldown_ms: Option<Option<u64>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub daily_limit: Option<Option<u32>>,
}

impl RateLimitOverride {
    pub fn apply(&self, defaults: RateLimits) -> RateLimits {
        RateLimits {
            cooldown: match self.cooldown_ms {
                Some(ms) => ms.filter(|&ms| ms > 0).map(Duration::from_millis),
                None => defaults.cooldown,
            },
            daily_limit: self.daily_limit.unwrap_or(defaults.daily_limit),
        }
    }
}

/// A field that is present, even as `null`, is `Some`; serde's default
/// makes an absent one `None`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

mod millis {
    use std::time::Duration;

    use serde::Serializer;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }
}

/// Everything about a tool besides its definition and handler.
#[derive(Debug, Clone, Serialize)]
pub struct ToolMeta {
    pub category: Category,
    pub short_description: &'static str,
    /// When the tool is offered, in words ("a space is selected"); used in
    /// the error for a call outside that context.
    pub available_when: &'static str,
    pub aliases: &'static [&'static str],
    pub annotations: Annotations,
    pub cost: CostTier,
    pub permission: Permission,
    #[serde(rename = "timeout_ms", serialize_with = "timeout_ms")]
    pub timeout: Duration,
    pub limits: RateLimits,
    /// Calls wait for a person's approval before they run.
    pub needs_approval: bool,
    /// Offered to the model only on request (tool search), not up front.
    pub defer_loading: bool,
}

fn timeout_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Runs one tool. Arguments arrive already validated against the definition.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    async fn call(
        &self,
        args: Value,
        ctx: &ToolContext,
        callbacks: &dyn Callbacks,
    ) -> Result<Value, ToolError>;
}

/// A handler as the handlers crate lists it.
#[derive(Clone)]
pub struct HandlerEntry {
    pub name: &'static str,
    /// The source file, for start-up errors that name it.
    pub file: &'static str,
    pub meta: ToolMeta,
    pub available: fn(&ToolContext) -> bool,
    pub handler: Arc<dyn ToolHandler>,
    /// JSON Schema of the handler's argument type, compared with the
    /// definition by a test.
    pub args_schema: Value,
}

impl std::fmt::Debug for HandlerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerEntry")
            .field("name", &self.name)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// A definition file's name and text.
#[derive(Debug, Clone)]
pub struct DefinitionFile {
    pub file: String,
    pub text: String,
}
