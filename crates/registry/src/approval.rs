//! The decision point for tools whose annotations require confirmation:
//! the registry asks an [`Approver`] before such a call runs, and refuses
//! the call with `approval_required` when it has none.

use async_trait::async_trait;
use serde_json::Value;

use crate::{ToolContext, ToolEntry};

/// A person's (or a policy's) answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved,
    Denied { reason: String },
}

/// Decides whether one call of a tool that requires confirmation runs.
/// It may wait (for a person), under the tool's own timeout.
#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, entry: &ToolEntry, args: &Value, ctx: &ToolContext) -> Approval;
}
