//! Writes runs' events to the table (as their JSON, [`to_json`]) in the
//! order they were sent, in batches (one transaction, one NOTIFY per run),
//! retrying while the database is away; runs wait when the recorder falls far behind (the
//! queue, shared by this replica's runs, is bounded). A batch the database
//! refuses for good (an event it cannot store, a run deleted with its
//! user) is written event by event, a refused event as a placeholder that
//! keeps its number, so one bad event never holds up the rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use data_plane_store::runs::{self as store, NewEvent, RunStatus};
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
    pub event: RunEvent,
    /// The run's last event: how the run ended, recorded with it.
    pub ends: Option<RunStatus>,
}

pub(crate) async fn run(db: Db, mut rx: mpsc::Receiver<Item>) {
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let rows: Vec<NewEvent> = batch
            .iter()
            .map(|i| NewEvent {
                run_id: i.run.id,
                seq: i.event.seq,
                kind: i.event.event.name().to_string(),
                data: to_json(&*i.event.event),
                ends: i.ends,
            })
            .collect();
        if let Err(e) = write(&db, &rows).await {
            tracing::warn!(error = %e, events = rows.len(), "the database refused a batch of run events; recording them one by one");
            for row in &rows {
                one(&db, row).await;
            }
        }
        let mut highest: HashMap<Uuid, (Arc<LiveRun>, i64)> = HashMap::new();
        for item in batch.drain(..) {
            let entry = highest
                .entry(item.run.id)
                .or_insert_with(|| (item.run.clone(), 0));
            entry.1 = entry.1.max(item.event.seq);
        }
        for (run, seq) in highest.into_values() {
            run.mark_recorded(seq);
        }
    }
}

/// Writes `rows`, retrying while the failure may pass; the error that will
/// not.
async fn write(db: &Db, rows: &[NewEvent]) -> Result<(), StoreError> {
    let mut pause = Duration::from_millis(50);
    loop {
        match store::append(db, rows).await {
            Ok(()) => return Ok(()),
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
async fn one(db: &Db, row: &NewEvent) {
    let Err(e) = write(db, std::slice::from_ref(row)).await else {
        return;
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
    if let Err(e) = write(db, std::slice::from_ref(&placeholder)).await {
        tracing::warn!(run_id = %row.run_id, seq = row.seq, error = %e, "not even a placeholder could be recorded; the run is probably gone");
    }
}
