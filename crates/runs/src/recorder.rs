//! Writes runs' events to the table in the order they were sent, in
//! batches (one transaction, one NOTIFY per run), retrying while the
//! database is away: an event is never dropped, and a run whose recorder
//! falls far behind waits for it (the queue is bounded).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use data_plane_store::Db;
use data_plane_store::runs::{self as store, NewEvent};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::RunEvent;
use crate::live::LiveRun;

/// Events waiting to be written, across runs, before runs wait.
pub(crate) const QUEUE: usize = 4096;
/// Most events written in one transaction.
const BATCH: usize = 512;

pub(crate) struct Item {
    pub run: Arc<LiveRun>,
    pub event: Arc<RunEvent>,
}

pub(crate) async fn run(db: Db, mut rx: mpsc::Receiver<Item>) {
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let rows: Vec<NewEvent> = batch
            .iter()
            .map(|i| NewEvent {
                run_id: i.run.id,
                seq: i.event.seq,
                kind: i.event.kind.clone(),
                data: i.event.data.clone(),
            })
            .collect();
        let mut pause = Duration::from_millis(50);
        while let Err(e) = store::append(&db, &rows).await {
            tracing::warn!(error = %e, events = rows.len(), "cannot record run events; retrying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
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
