//! A run's answer to the registry's approval requests: the call is
//! recorded as pending in PostgreSQL, announced on the stream as an
//! `approval_request`, and waits (the run's deadline standing still) for
//! an answer from any replica, or for its expiry, which counts as a denial.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use data_plane_agent::AgentEvent;
use data_plane_registry::{Approval, ApprovalRequest, Approver, ToolEvent};
use data_plane_store::Scope;
use data_plane_store::runs::{self as store, ApprovalRow, ApprovalStatus, NewApproval};

use crate::event::Event;
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

/// Counts a call as waiting while it lives. Dropped before the approval
/// was settled (the call was stopped: a stop, the sub-agent's time limit),
/// it settles it as expired and says so on the stream, in the background.
struct Waiting {
    inner: Arc<Inner>,
    run: Arc<LiveRun>,
    call_id: String,
    settled: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.run.waiting.send_modify(|n| *n = n.saturating_sub(1));
        self.run.forget_waiter(&self.call_id);
        // A run handed to another replica keeps its approvals waiting there.
        if self.settled || self.run.handed_off() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let approver = RunApprover::new(self.inner.clone(), self.run.clone());
        let call_id = std::mem::take(&mut self.call_id);
        self.run.settling.send_modify(|n| *n += 1);
        runtime.spawn(async move {
            let reason = store::STOPPED_BEFORE_ANSWER;
            match store::expire(
                &approver.inner.db,
                approver.inner.replica,
                approver.run.id,
                &call_id,
                reason,
            ).await {
                Ok(Some((row, true))) => {
                    approver.settled(&row).await;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(run_id = %approver.run.id, error = %e, "cannot settle a stopped approval")
                }
            }
            approver.run.settling.send_modify(|n| *n = n.saturating_sub(1));
        });
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
            callbacks,
        } = request;
        let tool = entry.name.as_str();
        let run = &self.run;
        let db = &self.inner.db;
        let remembered_as = (tool.to_string(), why.to_string());
        let call_id = ctx
            .call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        // Asked already by the replica this run was taken over from: the
        // readers have the request, and get the answer from here.
        let announced = lock(&run.announced).remove(&call_id);
        if !announced && lock(&run.remembered).contains(&remembered_as) {
            return Approval::Approved;
        }
        match store::remembered(db, run.user_id, run.conversation_id, tool, why).await {
            Ok(true) if !announced => {
                lock(&run.remembered).insert(remembered_as);
                return Approval::Approved;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(run_id = %run.id, tool, error = %e, "cannot look up remembered approvals")
            }
        }
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
        // A call of this run whose approval was settled already (its id
        // asked about again, or answered while no replica ran the run):
        // the same answer, without asking again.
        if row.status != ApprovalStatus::Pending {
            if announced {
                self.remember(&row);
                callbacks.emit(result_event(&row));
            }
            return decision(&row);
        }
        let waiter = run.waiter(&call_id);
        run.waiting.send_modify(|n| *n += 1);
        let mut waiting = Waiting {
            inner: self.inner.clone(),
            run: run.clone(),
            call_id: call_id.clone(),
            settled: false,
        };
        // Through the call's callbacks: after its tool_call, in order.
        if !announced {
            callbacks.emit(ToolEvent::ApprovalRequest {
                call_id: call_id.clone(),
                tool: tool.to_string(),
                arguments: args.clone(),
                annotations: annotations.clone(),
                why: why.to_string(),
                expires_at: row
                    .expires_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                parent_call_id: ctx.parent_call_id.clone(),
            });
        }
        // From the row: a request asked before a takeover keeps its expiry.
        let left = (row.expires_at - chrono::Utc::now())
            .to_std()
            .unwrap_or_default();
        let mut deadline = tokio::time::Instant::now() + left;
        let mut row = row;
        loop {
            if row.status != ApprovalStatus::Pending {
                break;
            }
            tokio::select! {
                () = waiter.notified() => {}
                () = tokio::time::sleep_until(deadline) => {
                    let reason = format!("nobody answered within {} s", timeout.as_secs());
                    match store::expire(db, self.inner.replica, run.id, &call_id, &reason).await {
                        Ok(Some((settled, expired))) => {
                            if !expired && settled.status == ApprovalStatus::Pending {
                                // Another replica holds the run now: this
                                // one lets it go at its next renewal.
                                deadline = tokio::time::Instant::now() + POLL;
                            }
                            row = settled;
                            continue;
                        }
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
        waiting.settled = true;
        drop(waiting);
        self.remember(&row);
        callbacks.emit(result_event(&row));
        decision(&row)
    }
}

/// The stream's `approval_result` for a settled approval.
fn result_event(row: &ApprovalRow) -> ToolEvent {
    let status = serde_json::to_value(row.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    ToolEvent::ApprovalResult {
        call_id: row.call_id.clone(),
        tool: row.tool.clone(),
        approved: row.status == ApprovalStatus::Approved,
        status,
        remember: row.remember,
        reason: row.reason.clone(),
        parent_call_id: row.parent_call_id.clone(),
    }
}

impl RunApprover {
    fn remember(&self, row: &ApprovalRow) {
        if row.status == ApprovalStatus::Approved && row.remember {
            lock(&self.run.remembered).insert((row.tool.clone(), row.why.clone()));
        }
    }

    /// Tells the stream how an approval whose call is gone was settled
    /// (stopped while it waited, or its run ended).
    pub async fn settled(&self, row: &ApprovalRow) {
        self.remember(row);
        let event = AgentEvent::Tool(result_event(row));
        self.run.emit(&self.inner, Event::Agent(event)).await;
    }
}

/// The registry's answer for a settled approval.
fn decision(row: &ApprovalRow) -> Approval {
    if row.status == ApprovalStatus::Approved {
        return Approval::Approved;
    }
    let reason = match (row.status, &row.reason) {
        (ApprovalStatus::Expired, Some(r)) => format!("the approval expired: {r}"),
        (_, Some(r)) if !r.trim().is_empty() => format!("the user denied it: {r}"),
        _ => "the user denied it".to_string(),
    };
    Approval::Denied { reason }
}
