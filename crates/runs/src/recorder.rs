//! Writes runs' events (and their agents' checkpoints, placed between
//! them) to the tables (as their JSON, [`to_json`]) in the
//! order they were sent, in batches (one transaction, one NOTIFY per run),
//! retrying while the database is away; runs wait when the recorder falls far behind (the
//! queue, shared by this replica's runs, is bounded). A batch the database
//! refuses for good (an event it cannot store, a run deleted with its
//! user) is written event by event, a refused event as a placeholder that
//! keeps its number, so one bad event never holds up the rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use data_plane_store::runs::{self as store, NewCheckpoint, NewEvent, RunStatus};
use data_plane_store::{Db, StoreError};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::RunEvent;
use crate::event::to_json;
use crate::live::LiveRun;

/// Events waiting to be written, across runs, before runs wait.
pub(crate) const QUEUE: usize = 4096;
/// Most events written in one transaction.
const BATCH: usize = 512;

pub(crate) struct Item {
    pub run: Arc<LiveRun>,
    pub what: What,
}

pub(crate) enum What {
    Event {
        event: RunEvent,
        /// The run's last event: how the run ended, recorded with it.
        ends: Option<RunStatus>,
    },
    /// Where the agent stands, after the run's event `after` (JSON); the
    /// run's `n`th checkpoint.
    Checkpoint { after: i64, data: String, n: u64 },
}

/// Records for `owner` (this replica): events of a run another replica
/// took over are not written.
pub(crate) async fn run(db: Db, owner: Uuid, mut rx: mpsc::Receiver<Item>) {
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let mut rows: Vec<NewEvent> = Vec::with_capacity(batch.len());
        let mut checkpoints: Vec<NewCheckpoint> = Vec::new();
        for item in &batch {
            match &item.what {
                What::Event { event, ends } => rows.push(NewEvent {
                    run_id: item.run.id,
                    seq: event.seq,
                    kind: event.event.name().to_string(),
                    data: to_json(&*event.event),
                    ends: *ends,
                }),
                What::Checkpoint { after, data, .. } => checkpoints.push(NewCheckpoint {
                    run_id: item.run.id,
                    after_seq: *after,
                    data: data.clone(),
                }),
            }
        }
        let mut refused: Vec<Uuid> = Vec::new();
        match write(&db, owner, &rows, &checkpoints).await {
            Ok(taken) => refused = taken,
            Err(e) => {
                tracing::warn!(error = %e, events = rows.len(), "the database refused a batch of run events; recording them one by one");
                for row in &rows {
                    refused.extend(one(&db, owner, row).await);
                }
                match write(&db, owner, &[], &checkpoints).await {
                    Ok(taken) => refused.extend(taken),
                    Err(e) => {
                        tracing::warn!(error = %e, "run checkpoints could not be recorded; a takeover of these runs goes on from an earlier step")
                    }
                }
            }
        }
        let mut highest: HashMap<Uuid, (Arc<LiveRun>, i64, u64)> = HashMap::new();
        for item in batch.drain(..) {
            let entry = highest
                .entry(item.run.id)
                .or_insert_with(|| (item.run.clone(), 0, 0));
            match &item.what {
                What::Event { event, .. } => entry.1 = entry.1.max(event.seq),
                What::Checkpoint { n, .. } => entry.2 = entry.2.max(*n),
            }
        }
        for (id, (run, seq, checkpoint)) in highest {
            if refused.contains(&id) {
                // Another replica holds it: nothing of it was written, and
                // this replica lets it go.
                if !run.handed_off() {
                    tracing::warn!(run_id = %id, "another replica took this run over; letting it go");
                }
                run.hand_off();
            } else if seq > 0 {
                run.mark_recorded(seq);
            }
            run.mark_checkpointed(checkpoint);
        }
    }
}

/// Writes `rows`, retrying while the failure may pass; the error that will
/// not.
async fn write(
    db: &Db,
    owner: Uuid,
    rows: &[NewEvent],
    checkpoints: &[NewCheckpoint],
) -> Result<Vec<Uuid>, StoreError> {
    let mut pause = Duration::from_millis(50);
    loop {
        match store::append(db, owner, rows, checkpoints).await {
            Ok(refused) => return Ok(refused),
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, events = rows.len(), "cannot record run events; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes one event, or in its place a placeholder saying it could not be
/// recorded; nothing when even that is refused (the run is gone).
async fn one(db: &Db, owner: Uuid, row: &NewEvent) -> Vec<Uuid> {
    let e = match write(db, owner, std::slice::from_ref(row), &[]).await {
        Ok(refused) => return refused,
        Err(e) => e,
    };
    tracing::warn!(run_id = %row.run_id, seq = row.seq, kind = %row.kind, error = %e, "a run event could not be recorded; a placeholder keeps its place");
    let placeholder = NewEvent {
        run_id: row.run_id,
        seq: row.seq,
        kind: row.kind.clone(),
        data: serde_json::json!({
            "type": row.kind,
            "unrecorded": "this event could not be stored; it was sent live only",
        })
        .to_string(),
        ends: row.ends,
    };
    match write(db, owner, std::slice::from_ref(&placeholder), &[]).await {
        Ok(refused) => refused,
        Err(e) => {
            tracing::warn!(run_id = %row.run_id, seq = row.seq, error = %e, "not even a placeholder could be recorded; the run is probably gone");
            Vec::new()
        }
    }
}
