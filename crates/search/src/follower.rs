//! Keeps the keyword index in step with PostgreSQL by following the ordered
//! change log (`index_log`): on start it catches up from the sequence number
//! stored in the index's last commit, then wakes on NOTIFY (with a slow poll as
//! a safety net) and applies new entries. Replaying an entry is harmless: each
//! one says "make document X look like it does in PostgreSQL now". Each batch
//! applied is also announced to whoever listens on this replica
//! ([`Follower::with_changes`]: MCP's resource subscriptions).

use std::collections::BTreeSet;
use std::time::Duration;

use data_plane_store::content::{self, IndexableChunk};
use data_plane_store::index_log::{self, LogEntry, NOTIFY_CHANNEL};
use data_plane_store::listen::Subscription;
use data_plane_store::{Db, Scope};
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use crate::{ChunkDoc, IndexOp, KeywordIndex, SearchError};

/// How many log entries one step applies.
const STEP: i64 = 500;
/// The poll interval when no notification arrives.
const POLL: Duration = Duration::from_secs(5);
/// After a catch-up that applied something, the next waits this long by
/// default, so an ingest that commits document after document is followed
/// by one index commit per interval instead of one per document (each
/// commit writes and syncs a segment, reloads the reader and feeds the
/// merges). A change after a quiet spell is applied at once.
pub const BATCH: Duration = Duration::from_millis(1000);

/// The documents a batch of the log changed, as the follower applied them
/// (oldest first).
pub type Changes = std::sync::Arc<[LogEntry]>;

/// Told once, with how many entries it applied, when the follower has
/// first caught up (see [`Follower::on_caught_up`]).
type CaughtUp = Box<dyn FnOnce(u64) + Send + Sync>;

pub struct Follower {
    db: Db,
    index: KeywordIndex,
    changes: Option<broadcast::Sender<Changes>>,
    caught_up: Option<CaughtUp>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Follower {
    pub fn new(db: Db, index: KeywordIndex) -> Self {
        Follower {
            db,
            index,
            changes: None,
            caught_up: None,
        }
    }

    /// Calls `then` once [`Follower::run`] has first caught up with the
    /// log, with how many entries that took: until then the index lags
    /// behind PostgreSQL by what was written while this replica was away
    /// (what `/readyz` tells a balancer).
    pub fn on_caught_up(mut self, then: impl FnOnce(u64) + Send + Sync + 'static) -> Self {
        self.caught_up = Some(Box::new(then));
        self
    }

    /// Announces every batch it applies on `changes` (a receiver that falls
    /// behind is told it lagged, and should look again at what it watches).
    pub fn with_changes(mut self, changes: broadcast::Sender<Changes>) -> Self {
        self.changes = Some(changes);
        self
    }

    /// Applies every log entry after the index's last sequence number; returns
    /// how many entries were applied.
    pub async fn catch_up(&self) -> Result<u64, SearchError> {
        let mut applied = 0u64;
        loop {
            let after = self.index.last_seq()?;
            let mut tx = self.db.begin(Scope::System).await?;
            let entries = index_log::entries_after(&mut tx, after, STEP).await?;
            let Some(last) = entries.last().map(|e| e.seq) else {
                return Ok(applied);
            };
            let docs: BTreeSet<Uuid> = entries.iter().map(|e| e.document_id).collect();
            let docs: Vec<Uuid> = docs.into_iter().collect();
            let chunks = content::indexable_chunks(&mut tx, &docs).await?;
            tx.commit()
                .await
                .map_err(data_plane_store::StoreError::from)?;
            let ops = ops_for(&docs, chunks);
            let index = self.index.clone();
            tokio::task::spawn_blocking(move || index.apply(ops, last))
                .await
                .map_err(|e| SearchError::Internal(format!("index task failed: {e}")))??;
            applied += entries.len() as u64;
            let full = entries.len() as i64 >= STEP;
            if let Some(changes) = &self.changes {
                // Nobody listening is no failure.
                let _ = changes.send(entries.into());
            }
            if !full {
                return Ok(applied);
            }
        }
    }

    /// Follows the log until `stop` turns true: catches up at start, on
    /// every notification, after every (re)connection of its subscription
    /// (notifications may have been missed) and at least every [`POLL`].
    pub async fn run(self, stop: watch::Receiver<bool>) {
        self.run_batching(stop, BATCH).await
    }

    /// [`Follower::run`] gathering changes for `batch` after each catch-up
    /// that applied some (zero: none).
    pub async fn run_batching(mut self, mut stop: watch::Receiver<bool>, batch: Duration) {
        let mut subscription = Subscription::new(&self.db, NOTIFY_CHANNEL);
        loop {
            let mut busy = false;
            match self.catch_up().await {
                Ok(applied) => {
                    busy = applied > 0;
                    if let Some(then) = self.caught_up.take() {
                        then(applied);
                    }
                }
                Err(e) => tracing::error!(error = %e, "keyword index follower failed; retrying"),
            }
            // While changes keep coming, what arrives during the interval
            // is applied in one batch after it.
            if busy && !batch.is_zero() {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(batch) => {}
                }
            }
            // A notification or a (re)connection: either way, catch up. A
            // burst of notifications is drained by the one catch-up, since
            // it reads everything committed.
            tokio::select! {
                _ = stop.changed() => return,
                _ = subscription.next() => {
                    // Those queued behind it are drained by the same catch-up.
                    while tokio::time::timeout(Duration::ZERO, subscription.next())
                        .await
                        .is_ok()
                    {}
                }
                _ = tokio::time::sleep(POLL) => {}
            }
            if *stop.borrow() {
                return;
            }
        }
    }

    /// Empties the index and rebuilds it from every document in PostgreSQL;
    /// returns the number of chunks indexed. Entries that arrive meanwhile are
    /// applied by the next catch-up.
    pub async fn rebuild(&self) -> Result<u64, SearchError> {
        let mut tx = self.db.begin(Scope::System).await?;
        // The head is read first: anything committed after it is replayed later.
        let head = index_log::head(&mut tx).await?;
        let docs = index_log::all_document_ids(&mut tx).await?;
        tx.commit()
            .await
            .map_err(data_plane_store::StoreError::from)?;
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.clear(0))
            .await
            .map_err(|e| SearchError::Internal(format!("index task failed: {e}")))??;
        let mut total = 0u64;
        for batch in docs.chunks(200) {
            let mut tx = self.db.begin(Scope::System).await?;
            let chunks = content::indexable_chunks(&mut tx, batch).await?;
            tx.commit()
                .await
                .map_err(data_plane_store::StoreError::from)?;
            total += chunks.len() as u64;
            let ops = ops_for(batch, chunks);
            let index = self.index.clone();
            // Intermediate commits keep seq 0, so a crash mid-rebuild replays the
            // whole log on the next start instead of trusting a partial index.
            tokio::task::spawn_blocking(move || index.apply(ops, 0))
                .await
                .map_err(|e| SearchError::Internal(format!("index task failed: {e}")))??;
        }
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || index.apply(Vec::new(), head))
            .await
            .map_err(|e| SearchError::Internal(format!("index task failed: {e}")))??;
        self.catch_up().await?;
        Ok(total)
    }
}

/// One op per document: its current chunks, or a delete when it has none left.
fn ops_for(docs: &[Uuid], chunks: Vec<IndexableChunk>) -> Vec<IndexOp> {
    let mut by_doc: std::collections::HashMap<Uuid, Vec<ChunkDoc>> =
        std::collections::HashMap::new();
    for c in chunks {
        by_doc.entry(c.document_id).or_default().push(ChunkDoc {
            chunk_id: c.chunk_id,
            document_id: c.document_id,
            space_id: c.space_id,
            source_id: c.source_id,
            // The index names folders from the root: '/', '/a', '/a/b'.
            folder_path: format!("/{}", c.folder_path),
            document_path: c.document_path,
            language: c.language,
            heading: c.heading,
            title: c.title,
            text: c.text,
        });
    }
    docs.iter()
        .map(|id| match by_doc.remove(id) {
            Some(chunks) => IndexOp::ReplaceDocument {
                document_id: *id,
                chunks,
            },
            None => IndexOp::DeleteDocument { document_id: *id },
        })
        .collect()
}
