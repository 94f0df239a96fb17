//! The decision point for calls a person must approve first: the tool's
//! annotations require confirmation, the gate policy says "ask", an
//! admin's approval rules name the tool, or the tool itself asks for these
//! arguments. The registry asks the context's [`Approver`] (a chat run has
//! one) before such a call runs; without one, annotations and the gate
//! refuse the call with `approval_required`, and the rest let it run (a
//! service calling a tool directly has made its own decision).

use async_trait::async_trait;
use serde_json::Value;

use crate::{ToolContext, ToolEntry};

/// A person's (or a policy's) answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved,
    Denied { reason: String },
}

/// One call waiting for an answer.
#[derive(Clone, Copy)]
pub struct ApprovalRequest<'a> {
    pub entry: &'a ToolEntry,
    /// The validated arguments the call will run with.
    pub args: &'a Value,
    pub ctx: &'a ToolContext,
    /// Why it asks, for the person who answers.
    pub why: &'a str,
    /// The call's callbacks: the approval's events go where its other
    /// events go, in order with them.
    pub callbacks: &'a dyn crate::Callbacks,
}

impl std::fmt::Debug for ApprovalRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalRequest")
            .field("tool", &self.entry.name)
            .field("args", self.args)
            .field("why", &self.why)
            .finish_non_exhaustive()
    }
}

/// Decides whether one call that needs approval runs. It may wait (for a
/// person); the tool's own timeout starts only after it answers.
#[async_trait]
pub trait Approver: Send + Sync {
    async fn approve(&self, request: ApprovalRequest<'_>) -> Approval;
}

/// What makes a call ask for approval besides its annotations and the
/// gate: an admin's rules (a setting), shared by every tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalRules {
    /// Tool names (`module.*` for every tool of a module).
    pub tools: Vec<String>,
    pub categories: Vec<crate::Category>,
    /// Annotation names (`destructive`, `open_world`, ...): a tool with any
    /// of them set asks.
    pub annotations: Vec<AnnotationName>,
}

/// An annotation as approval rules name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnnotationName {
    ReadOnly,
    Destructive,
    Idempotent,
    OpenWorld,
    RequiresConfirmation,
}

impl ApprovalRules {
    /// Why `entry` asks under these rules, if it does.
    pub fn why(&self, entry: &ToolEntry) -> Option<String> {
        let name = entry.name.as_str();
        let by_name = self.tools.iter().any(|t| match t.strip_suffix(".*") {
            Some(module) => entry.module.as_deref() == Some(module),
            None => t == name,
        });
        if by_name {
            return Some(format!("the approval rules name {name}"));
        }
        if self.categories.contains(&entry.meta.category) {
            return Some(format!(
                "the approval rules name the category {}",
                entry.meta.category.as_str()
            ));
        }
        let a = &entry.annotations;
        self.annotations
            .iter()
            .find(|n| match n {
                AnnotationName::ReadOnly => a.read_only,
                AnnotationName::Destructive => a.destructive,
                AnnotationName::Idempotent => a.idempotent,
                AnnotationName::OpenWorld => a.open_world,
                AnnotationName::RequiresConfirmation => a.requires_confirmation,
            })
            .map(|n| {
                let n = serde_json::to_value(n).unwrap_or_default();
                format!(
                    "the approval rules name the annotation {}",
                    n.as_str().unwrap_or_default()
                )
            })
    }
}
