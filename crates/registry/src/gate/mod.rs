//! The eval gate: an outside judgement on each call of a tool whose
//! metadata says `requires_gate` (the web and the document agent), asked
//! after the rate limit's check and before the approver and the handler.
//! A gate that fails or is slower than [`GATE_TIMEOUT`] lets the call run:
//! the gate guards against misuse, it must not take the tools down with it.

mod policy;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::{ToolContext, ToolEntry};

pub use policy::{Effect, PolicyError, PolicyGate};

/// How long the registry waits for a gate before it lets the call run.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(2);

/// One call as the gate sees it: the whole entry (cost tier, effective
/// annotations, required permission, category), the validated arguments and
/// the context (user, space, caller permission, agent profile).
#[derive(Debug, Clone, Copy)]
pub struct GateCall<'a> {
    pub entry: &'a ToolEntry,
    pub args: &'a Value,
    pub ctx: &'a ToolContext,
}

/// A gate's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    Allow,
    /// The call does not run; the model reads `reason`.
    Deny {
        reason: String,
    },
    /// A person must approve the call first: in a chat run the person of
    /// the run is asked over its stream (the context's approver,
    /// docs/runs.md); where nobody can answer (executeTool, MCP, the
    /// module protocol) the call is refused with `approval_required`.
    Ask {
        reason: String,
    },
}

/// The gate could not decide (it is down, answered nonsense, broke a rule
/// of its own). The call runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GateError {
    pub message: String,
}

impl GateError {
    pub fn new(message: impl Into<String>) -> Self {
        GateError {
            message: message.into(),
        }
    }
}

/// Decides whether one gated call runs.
#[async_trait]
pub trait Gate: Send + Sync {
    async fn check(&self, call: &GateCall<'_>) -> Result<GateDecision, GateError>;
}

/// What the gate step came to for one call, as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateVerdict {
    Allow,
    Deny,
    Ask,
    /// The gate failed or was too slow, and the call ran.
    FailOpen,
}

impl GateVerdict {
    /// The audit column's value (`tool_calls.gate`).
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Allow => "allow",
            GateVerdict::Deny => "deny",
            GateVerdict::Ask => "ask",
            GateVerdict::FailOpen => "fail_open",
        }
    }
}

/// Gates asked in order: the first that does not allow decides, so a later
/// gate sees only what the earlier ones allowed. An error of any of them is
/// the chain's error (the call fails open).
pub struct GateChain(Vec<Arc<dyn Gate>>);

impl GateChain {
    pub fn new(gates: Vec<Arc<dyn Gate>>) -> Self {
        GateChain(gates)
    }
}

#[async_trait]
impl Gate for GateChain {
    async fn check(&self, call: &GateCall<'_>) -> Result<GateDecision, GateError> {
        for gate in &self.0 {
            match gate.check(call).await? {
                GateDecision::Allow => {}
                refusal => return Ok(refusal),
            }
        }
        Ok(GateDecision::Allow)
    }
}
