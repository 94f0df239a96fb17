//! Reading a run's events after a given number, exactly once and in
//! order: from the ring of the replica running it, from the table for
//! what the ring no longer holds, and from the table alone on another
//! replica, woken by the recorder's NOTIFY (and every 2 s regardless).

use std::sync::Arc;
use std::time::Duration;

use data_plane_store::Scope;
use data_plane_store::runs::{self as store, RunStatus};
use futures::{Stream, StreamExt};
use tokio::sync::watch;
use uuid::Uuid;

use crate::event::Event;
use crate::live::{Found, LiveRun, WatchGuard};
use crate::{Inner, RunEvent};

/// Events read from the table at a time.
const PAGE: i64 = 256;
/// How often a reader here of another replica's run says it watches.
const WATCHING_EVERY: Duration = Duration::from_secs(10);
/// How often a reader of another replica's run looks without being woken.
const POLL: Duration = Duration::from_secs(2);

struct Reader {
    inner: Arc<Inner>,
    run_id: Uuid,
    last: i64,
    done: bool,
    local: Option<Arc<LiveRun>>,
    _guard: Option<WatchGuard>,
    wake: Option<watch::Receiver<i64>>,
    said_watching: Option<tokio::time::Instant>,
    /// What takeovers dropped (after, resumed): `None` until the table is
    /// first read.
    void: Option<Vec<(i64, i64)>>,
}

pub(crate) fn events(
    inner: Arc<Inner>,
    run_id: Uuid,
    after: i64,
) -> impl Stream<Item = RunEvent> + Send + 'static {
    // Watched from now on, even before the response's first poll: a
    // response never polled still starts the grace period when dropped.
    let local = inner.live(run_id);
    let guard = local
        .as_ref()
        .map(|live| live.watch().with_grace(inner.config.grace));
    let reader = Reader {
        inner,
        run_id,
        last: after,
        done: false,
        local,
        _guard: guard,
        wake: None,
        said_watching: None,
        void: None,
    };
    futures::stream::unfold(reader, |mut r| async move {
        let batch = r.next_batch().await?;
        Some((futures::stream::iter(batch), r))
    })
    .flatten()
}

impl Reader {
    async fn next_batch(&mut self) -> Option<Vec<RunEvent>> {
        if self.done {
            return None;
        }
        loop {
            if let Some(live) = self.local.clone() {
                let mut latest = live.latest.subscribe();
                let mut ended = live.ended.subscribe();
                match live.after(self.last) {
                    Found::Events(events) => {
                        return Some(self.take(events));
                    }
                    Found::InTable => {
                        if let Some(rows) = self.page().await
                            && !rows.is_empty()
                        {
                            return Some(self.take(rows));
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Found::Nothing => {
                        // Ended: the last event was published before, so one
                        // more look here finds it; after that the table has
                        // the rest (or says there is none).
                        if ended.borrow_and_update().is_some() {
                            if let Found::Events(events) = live.after(self.last) {
                                return Some(self.take(events));
                            }
                            self.local = None;
                            continue;
                        }
                        tokio::select! {
                            _ = latest.changed() => {}
                            _ = ended.changed() => {}
                        }
                    }
                }
                continue;
            }
            if let Some(batch) = self.look_in_table().await {
                return Some(batch);
            }
            if self.done {
                return None;
            }
        }
    }

    /// One look at the table: new events, the run's end without them, or
    /// `None` after waiting for news.
    async fn look_in_table(&mut self) -> Option<Vec<RunEvent>> {
        let inner = self.inner.clone();
        let wake = self
            .wake
            .get_or_insert_with(|| inner.follow(self.run_id))
            .clone();
        let mut wake = wake;
        wake.borrow_and_update();
        if self
            .said_watching
            .is_none_or(|at| at.elapsed() >= WATCHING_EVERY)
        {
            self.said_watching = Some(tokio::time::Instant::now());
            if let Err(e) = store::notify(&inner.db, &format!("w:{}", self.run_id)).await {
                tracing::debug!(error = %e, "cannot say a run is watched");
            }
        }
        if let Some(rows) = self.page().await
            && !rows.is_empty()
        {
            return Some(self.take(rows));
        }
        match store::get(&inner.db, Scope::System, self.run_id).await {
            Ok(None) => {
                self.done = true;
                return None;
            }
            Ok(Some(row)) => {
                // Marks it lost when its replica stopped touching it (the
                // database's clock decides).
                let lost = row.status == RunStatus::Lost
                    || (row.status == RunStatus::Running
                        && store::mark_lost(&inner.db, self.run_id, inner.lost_after())
                            .await
                            .unwrap_or(false));
                if row.status != RunStatus::Running || lost {
                    // Its last event is recorded before the row says it
                    // ended; a run that was lost may have none.
                    match self.page().await {
                        Some(rows) if !rows.is_empty() => return Some(self.take(rows)),
                        Some(_) => {}
                        // The table did not answer: look again.
                        None => return None,
                    }
                    self.done = true;
                    if !lost {
                        // The client has every event already.
                        return None;
                    }
                    return Some(vec![RunEvent {
                        seq: self.last + 1,
                        event: Arc::new(Event::Error {
                            code: "run_lost".into(),
                            message: "the server running this run stopped answering; its last events are lost".into(),
                        }),
                    }]);
                }
            }
            Err(e) => tracing::warn!(run_id = %self.run_id, error = %e, "cannot read the run"),
        }
        let _ = tokio::time::timeout(POLL, wake.changed()).await;
        None
    }

    async fn page(&mut self) -> Option<Vec<RunEvent>> {
        if self.void.is_none() {
            // Events a takeover dropped are not replayed: a reader that
            // comes later reads the run as if it had never stopped.
            match store::events_of_kind(&self.inner.db, self.run_id, "resumed").await {
                Ok(rows) => {
                    let void = rows
                        .into_iter()
                        .filter_map(|r| match Event::from_stored(&r.kind, r.data) {
                            Event::Resumed(resumed) => Some((resumed.after, r.seq)),
                            _ => None,
                        })
                        .collect();
                    self.void = Some(void);
                }
                Err(e) => {
                    tracing::warn!(run_id = %self.run_id, error = %e, "cannot read the run's takeovers");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return None;
                }
            }
        }
        match store::events_after(&self.inner.db, Scope::System, self.run_id, self.last, PAGE).await
        {
            Ok(rows) => Some(
                rows.into_iter()
                    .map(|r| RunEvent {
                        seq: r.seq,
                        event: Arc::new(Event::from_stored(&r.kind, r.data)),
                    })
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, error = %e, "cannot read the run's events");
                tokio::time::sleep(Duration::from_millis(500)).await;
                None
            }
        }
    }

    /// The events after the last one read, up to the run's last.
    fn take(&mut self, events: Vec<RunEvent>) -> Vec<RunEvent> {
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            if event.seq <= self.last {
                continue;
            }
            self.last = event.seq;
            let dropped = self
                .void
                .as_ref()
                .is_some_and(|void| crate::event::dropped(void, event.seq));
            if dropped {
                continue;
            }
            let last = event.is_last();
            out.push(event);
            if last {
                self.done = true;
                break;
            }
        }
        out
    }
}
