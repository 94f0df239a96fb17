//! Taking over the runs of a replica that died (docs/runs.md, "Takeover").
//! Each replica holds its runs under a lease it renews every third of
//! [`crate::RunsConfig::lease`]; every replica, once a second, claims
//! running runs whose lease ran out (one UPDATE that only one replica can
//! win per run) and continues each from its recorded events: the agent
//! rebuilds the conversation from the run's checkpoints and results, and
//! readers anywhere get a `resumed` event and then the rest of the run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use data_plane_agent::{Agent, AgentEvent, ChatRequest, Checkpoint, Resume};
use data_plane_registry::{ToolContext, ToolEvent};
use data_plane_store::Scope;
use data_plane_store::runs::{self as store, ApprovalStatus, Claimed, RunRow};

use crate::event::{Event, Resumed};
use crate::live::{AHEAD, LiveRun, drive};
use crate::{Inner, lock};

/// Runs one replica claims per beat; the rest wait for the next.
const CLAIM_AT_ONCE: i64 = 16;

/// What a replica needs to continue a chat run that another began: the
/// server rebuilds the turn from what it saved when the run began
/// ([`crate::Runs::begin`]'s `saved`).
#[async_trait]
pub trait Resumer: Send + Sync {
    /// Whether this server can continue chat turns at all (it has a
    /// model): one that cannot leaves them to a replica that can.
    fn can_continue(&self) -> bool;

    /// The agent, request and context to continue `row` with, or why it
    /// cannot be continued here (the run is then lost).
    async fn chat(&self, row: &RunRow, saved: &serde_json::Value) -> Result<ResumedTurn, String>;
}

/// A chat turn rebuilt for a takeover (see [`Resumer`]).
pub struct ResumedTurn {
    pub agent: Arc<Agent>,
    pub request: ChatRequest,
    pub ctx: ToolContext,
    /// Held until the run ends (a place among its user's runs).
    pub hold: Box<dyn Send + Sync>,
}

/// Claims the runs whose lease ran out and continues each, in a task of
/// its own (the replica's renewals do not wait for it). A replica that
/// cannot continue chat turns (no model, or not serving yet) claims
/// nothing: a run nobody can take over is found lost by its readers.
pub(crate) async fn claim(inner: &Arc<Inner>) {
    if inner.draining.load(std::sync::atomic::Ordering::SeqCst)
        || inner
            .claims_paused
            .load(std::sync::atomic::Ordering::SeqCst)
        || !inner.resumer.get().is_some_and(|r| r.can_continue())
    {
        return;
    }
    let claimed =
        match store::claim(&inner.db, inner.replica, inner.config.lease, CLAIM_AT_ONCE).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for runs to take over");
                return;
            }
        };
    for run in claimed {
        let inner = inner.clone();
        tokio::spawn(async move {
            let run_id = run.row.id;
            tracing::warn!(%run_id, takeovers = run.takeovers, "taking over a run whose server stopped answering");
            if let Err(reason) = adopt(&inner, run).await {
                tracing::warn!(%run_id, %reason, "the run cannot be continued here; it is lost");
                if let Err(e) = store::end_lost(&inner.db, run_id, inner.replica).await {
                    tracing::warn!(%run_id, error = %e, "cannot mark the run lost");
                }
            }
        });
    }
}

/// Continues one claimed run here.
async fn adopt(inner: &Arc<Inner>, claimed: Claimed) -> Result<(), String> {
    let Claimed {
        row,
        request,
        last_seq,
        events,
        ..
    } = claimed;
    if row.tool.is_some() {
        return Err("a task's call is not continued on another server".into());
    }
    let saved = request.ok_or("the run saved nothing to continue from")?;
    let resumer = inner
        .resumer
        .get()
        .cloned()
        .ok_or("this server runs no chat turns")?;
    let recorded = store::events_after(&inner.db, Scope::System, row.id, 0, i64::MAX)
        .await
        .map_err(|e| format!("its events cannot be read: {e}"))?;
    let checkpoints = store::checkpoints_of(&inner.db, row.id)
        .await
        .map_err(|e| format!("its checkpoints cannot be read: {e}"))?;
    let approvals = store::approvals_of(&inner.db, row.id)
        .await
        .map_err(|e| format!("its approvals cannot be read: {e}"))?;
    let mut turn = resumer.chat(&row, &saved).await?;
    let checkpoints = checkpoints
        .into_iter()
        .filter_map(|c| match serde_json::from_value::<Checkpoint>(c.data) {
            Ok(checkpoint) => Some((c.after_seq, checkpoint)),
            Err(e) => {
                tracing::warn!(run_id = %row.id, error = %e, "a checkpoint of this version's runs cannot be read; skipped");
                None
            }
        })
        .collect();
    let read = Read::from_events(
        recorded
            .into_iter()
            .map(|r| (r.seq, Event::from_stored(&r.kind, r.data))),
        checkpoints,
    );
    let mut resume = read.resume;
    for approval in &approvals {
        // A call that waited for an answer, or was refused, never reached
        // its tool.
        if approval.status != ApprovalStatus::Approved {
            resume.not_run.insert(approval.call_id.clone());
        }
    }
    let plan = turn.agent.resume_plan(&resume, &turn.ctx);
    // What readers must drop: the partial answer of the step asked again,
    // or (when calls were running) nothing recorded, only what was sent
    // and never recorded.
    let after = match (plan.asked_before, read.asking.get(&plan.step)) {
        (true, Some(&seq)) => seq,
        _ => last_seq,
    };
    let live = LiveRun::numbered_from(
        row.id,
        row.user_id,
        row.conversation_id,
        false,
        last_seq + AHEAD + 1,
        u64::try_from(events).unwrap_or(0),
    );
    {
        let mut remembered = lock(&live.remembered);
        for approval in &approvals {
            if approval.status == ApprovalStatus::Approved && approval.remember {
                remembered.insert((approval.tool.clone(), approval.why.clone()));
            }
        }
    }
    *lock(&live.announced) = read
        .asked
        .iter()
        .filter(|(call, seq)| **seq <= after && !read.answered.contains(*call))
        .map(|(call, _)| call.clone())
        .collect();
    lock(&inner.live).insert(row.id, live.clone());
    let resumed = Resumed {
        step: plan.step,
        asked_before: plan.asked_before,
        after,
        rerun: plan.rerun.clone(),
        interrupted: plan.interrupted.clone(),
    };
    live.emit(inner, Event::Resumed(resumed)).await;
    // Watched by nobody here yet: the grace period runs unless a reader
    // (here or elsewhere) comes.
    drop(live.watch().with_grace(inner.config.grace));
    turn.request.waiting = None;
    tokio::spawn(drive(
        inner.clone(),
        live,
        turn.agent,
        turn.request,
        turn.ctx,
        turn.hold,
        Some((resume, plan)),
    ));
    Ok(())
}

/// What a run's recorded events say for continuing it.
#[derive(Default)]
struct Read {
    resume: Resume,
    /// Where each step's model request began (its `asking` checkpoint).
    asking: HashMap<u32, i64>,
    /// Approvals asked (by call id, the request's number) and answered.
    asked: HashMap<String, i64>,
    answered: HashSet<String>,
}

impl Read {
    /// From the run's events, in order, and its checkpoints, each placed
    /// after the event it names, in order.
    fn from_events(
        events: impl IntoIterator<Item = (i64, Event)>,
        checkpoints: Vec<(i64, Checkpoint)>,
    ) -> Read {
        let mut read = Read::default();
        // What an earlier takeover dropped does not count.
        let events: Vec<(i64, Event)> = events.into_iter().collect();
        let void: Vec<(i64, i64)> = events
            .iter()
            .filter_map(|(seq, event)| match event {
                Event::Resumed(r) => Some((r.after, *seq)),
                _ => None,
            })
            .collect();
        let dropped = |seq: i64| crate::event::dropped(&void, seq);
        let mut checkpoints = checkpoints.into_iter().peekable();
        let mut take_checkpoints = |read: &mut Read, before: i64| {
            while let Some((after, checkpoint)) = checkpoints.next_if(|(after, _)| *after < before)
            {
                if dropped(after) {
                    continue;
                }
                if let Checkpoint::Asking { step, .. } = &checkpoint {
                    read.asking.insert(*step, after);
                }
                read.resume.checkpoints.push(checkpoint);
            }
        };
        for (seq, event) in events {
            take_checkpoints(&mut read, seq);
            if dropped(seq) {
                continue;
            }
            match event {
                Event::Agent(AgentEvent::Tool(ToolEvent::ToolCall { call_id, .. })) => {
                    read.resume.started.insert(call_id);
                }
                Event::Agent(AgentEvent::Tool(ToolEvent::ToolResult {
                    call_id, result, ..
                })) => {
                    read.resume.results.insert(call_id, result);
                }
                Event::Agent(AgentEvent::Tool(ToolEvent::ApprovalRequest { call_id, .. })) => {
                    read.asked.insert(call_id, seq);
                }
                Event::Agent(AgentEvent::Tool(ToolEvent::ApprovalResult { call_id, .. })) => {
                    read.answered.insert(call_id);
                }
                _ => {}
            }
        }
        take_checkpoints(&mut read, i64::MAX);
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use data_plane_registry::ToolResult;
    use serde_json::json;

    fn call(id: &str) -> Event {
        Event::Agent(AgentEvent::Tool(ToolEvent::ToolCall {
            call_id: id.into(),
            name: "search".into(),
            arguments: json!({}),
        }))
    }

    fn result(id: &str) -> Event {
        Event::Agent(AgentEvent::Tool(ToolEvent::ToolResult {
            call_id: id.into(),
            name: "search".into(),
            result: ToolResult::ok("search", id, json!({}), 1),
        }))
    }

    fn asking(step: u32) -> Checkpoint {
        Checkpoint::Asking {
            step,
            asked_again: false,
        }
    }

    #[test]
    fn what_an_earlier_takeover_dropped_does_not_count() {
        let events = vec![
            (3, call("a")),
            (4, result("a")),
            // The first server died here; the second dropped 4..1029.
            (
                1029,
                Event::Resumed(Resumed {
                    step: 1,
                    asked_before: true,
                    after: 3,
                    rerun: vec![],
                    interrupted: vec![],
                }),
            ),
            (1030, call("b")),
        ];
        // Step 1 asked after event 2; step 2 after event 5 (dropped).
        let read = Read::from_events(events, vec![(2, asking(1)), (5, asking(2))]);
        assert!(read.resume.started.contains("a"));
        assert!(read.resume.started.contains("b"));
        assert!(
            read.resume.results.is_empty(),
            "a's result came after the point the takeover went on from"
        );
        assert_eq!(read.asking.get(&1), Some(&2));
        assert_eq!(read.asking.get(&2), None);
        assert_eq!(read.resume.checkpoints, vec![asking(1)]);
    }
}
