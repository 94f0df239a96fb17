//! A run's answer to the registry's approval requests: the call is
//! recorded as pending in PostgreSQL, announced on the stream as an
//! `approval_request`, and waits (the run's deadline standing still) for
//! an answer from any replica, or for its expiry, which counts as a denial.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use data_plane_registry::{Approval, ApprovalRequest, Approver};
use data_plane_store::Scope;
use data_plane_store::runs::{self as store, ApprovalRow, ApprovalStatus, NewApproval};
use serde_json::json;

use crate::live::LiveRun;
use crate::{Inner, lock};

/// How often a waiting approval looks at its row without being woken.
const POLL: Duration = Duration::from_secs(5);

pub(crate) struct RunApprover {
    inner: Arc<Inner>,
    run: Arc<LiveRun>,
}

impl RunApprover {
    pub fn new(inner: Arc<Inner>, run: Arc<LiveRun>) -> Self {
        RunApprover { inner, run }
    }
}

/// Counts a call as waiting while it lives.
struct Waiting<'a>(&'a LiveRun, &'a str);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.send_modify(|n| *n = n.saturating_sub(1));
        self.0.forget_waiter(self.1);
    }
}

#[async_trait]
impl Approver for RunApprover {
    async fn approve(&self, request: ApprovalRequest<'_>) -> Approval {
        let ApprovalRequest {
            entry,
            args,
            ctx,
            why,
        } = request;
        let tool = entry.name.as_str();
        let run = &self.run;
        let db = &self.inner.db;
        if lock(&run.remembered).contains(tool) {
            return Approval::Approved;
        }
        match store::remembered(db, run.user_id, run.conversation_id, tool).await {
            Ok(true) => {
                lock(&run.remembered).insert(tool.to_string());
                return Approval::Approved;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(run_id = %run.id, tool, error = %e, "cannot look up remembered approvals")
            }
        }
        let call_id = ctx
            .call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        let timeout = self.inner.config.approval_timeout;
        let expires_at = chrono::Utc::now()
            + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::minutes(10));
        let annotations = serde_json::to_value(entry.annotations).unwrap_or_default();
        let asked = NewApproval {
            run_id: run.id,
            call_id: &call_id,
            tool,
            arguments: args,
            annotations: &annotations,
            why,
            parent_call_id: ctx.parent_call_id.as_deref(),
            expires_at,
        };
        let row = match store::ask(db, &asked).await {
            Ok(row) => row,
            Err(e) => {
                tracing::warn!(run_id = %run.id, tool, error = %e, "cannot record an approval request");
                return Approval::Denied {
                    reason: "the approval request could not be recorded; try again shortly".into(),
                };
            }
        };
        let waiter = run.waiter(&call_id);
        run.waiting.send_modify(|n| *n += 1);
        let _waiting = Waiting(run, &call_id);
        let mut request_event = json!({
            "call_id": call_id,
            "tool": tool,
            "arguments": args,
            "annotations": annotations,
            "why": why,
            "expires_at": row.expires_at,
        });
        if let Some(parent) = &ctx.parent_call_id {
            request_event["parent_call_id"] = json!(parent);
        }
        run.emit(&self.inner, "approval_request", request_event)
            .await;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut row = row;
        loop {
            if row.status != ApprovalStatus::Pending {
                break;
            }
            tokio::select! {
                () = waiter.notified() => {}
                () = tokio::time::sleep_until(deadline) => {
                    let reason = format!("nobody answered within {} s", timeout.as_secs());
                    match store::expire(db, run.id, &call_id, &reason).await {
                        Ok(Some(settled)) => { row = settled; continue; }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(run_id = %run.id, error = %e, "cannot expire an approval"),
                    }
                    row.status = ApprovalStatus::Expired;
                    row.reason = Some(reason);
                    break;
                }
                () = tokio::time::sleep(POLL) => {}
            }
            match store::approval(db, Scope::System, run.id, &call_id).await {
                Ok(Some(now)) => row = now,
                Ok(None) => {}
                Err(e) => tracing::warn!(run_id = %run.id, error = %e, "cannot read an approval"),
            }
        }
        self.settled(&row, ctx.parent_call_id.as_deref()).await
    }
}

impl RunApprover {
    /// Tells the stream how the approval was settled; the registry's answer.
    async fn settled(&self, row: &ApprovalRow, parent: Option<&str>) -> Approval {
        let approved = row.status == ApprovalStatus::Approved;
        if approved && row.remember {
            lock(&self.run.remembered).insert(row.tool.clone());
        }
        let mut event = json!({
            "call_id": row.call_id,
            "tool": row.tool,
            "approved": approved,
            "status": row.status,
            "remember": row.remember,
        });
        if let Some(reason) = &row.reason {
            event["reason"] = json!(reason);
        }
        if let Some(parent) = parent {
            event["parent_call_id"] = json!(parent);
        }
        self.run.emit(&self.inner, "approval_result", event).await;
        if approved {
            return Approval::Approved;
        }
        let reason = match (row.status, &row.reason) {
            (ApprovalStatus::Expired, Some(r)) => format!("the approval expired: {r}"),
            (_, Some(r)) if !r.trim().is_empty() => format!("the user denied it: {r}"),
            _ => "the user denied it".to_string(),
        };
        Approval::Denied { reason }
    }
}
