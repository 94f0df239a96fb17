//! The registry's link to durable state: rate limits and the audit log.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::{Annotations, RateLimits, ToolContext};

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
}

/// One audit row, stamped by the registry after every call.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    pub tool: String,
    pub call_id: String,
    pub duration_ms: u64,
    pub ts: DateTime<Utc>,
    pub user_id: Uuid,
    pub space_id: Option<Uuid>,
    pub request_id: String,
    pub parent_call_id: Option<String>,
    pub success: bool,
    pub error: Option<String>,
    pub args: Value,
    /// The tool's annotations; `None` for a name no tool has.
    pub annotations: Option<Annotations>,
    /// What the call did beyond answering (see `ToolResult::side_effects`).
    pub side_effects: Vec<String>,
    /// What the gate decided, for tools that pass it: `allow`, `deny`,
    /// `ask` or `fail_open` (the gate failed or was too slow, and the call
    /// ran).
    pub gate: Option<String>,
    /// The agent profile the call ran under.
    pub agent: Option<String>,
    /// The remote module that ran the call; `None` for the server's own tools.
    pub module: Option<String>,
    /// How many times the handler ran (2 when it was retried once).
    pub attempts: u32,
}

/// Rate-limit state and the audit log, kept where every replica sees them.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Counts the call against `limits`, or refuses it. Only called for tools
    /// that have limits, just before the handler runs.
    async fn admit(
        &self,
        ctx: &ToolContext,
        tool: &str,
        limits: &RateLimits,
    ) -> Result<(), LedgerError>;

    /// Refuses the call as `admit` would now, counting nothing: asked before
    /// the eval gate or a person is, so that neither judges a call its limits
    /// would refuse, and a call they refuse is never counted.
    async fn check(
        &self,
        ctx: &ToolContext,
        tool: &str,
        limits: &RateLimits,
    ) -> Result<(), LedgerError>;

    /// Stores the audit record (it may be queued and written later).
    async fn record(&self, record: AuditRecord) -> Result<(), LedgerError>;

    /// Waits until every record handed to `record` so far is stored.
    async fn written(&self) {}
}

/// What can go wrong in the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{}", .0.message)]
    Refused(Refusal),
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
}

/// Admits everything, records nothing (unit tests, tools listings).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoLedger;

#[async_trait]
impl Ledger for NoLedger {
    async fn admit(&self, _: &ToolContext, _: &str, _: &RateLimits) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn check(&self, _: &ToolContext, _: &str, _: &RateLimits) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn record(&self, _: AuditRecord) -> Result<(), LedgerError> {
        Ok(())
    }
}
