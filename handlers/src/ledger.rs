//! The registry's ledger in PostgreSQL: rate limits counted atomically per
//! user, tool and UTC day (so they hold across replicas), and audit records
//! written in batches by a background task so a call never waits on them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use data_plane_registry::{AuditRecord, Ledger, LedgerError, RateLimits, Refusal, ToolContext};
use data_plane_store::{Db, Scope};
use tokio::sync::{mpsc, oneshot};

/// Records wait here at most this long before they are written.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Most records written by one INSERT.
const BATCH: usize = 512;
/// Queue length; a full queue makes callers wait rather than lose records.
const QUEUE: usize = 16_384;
/// Waits before each retry of a record that could not be written.
const RETRY_AFTER: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(800),
    Duration::from_millis(3200),
];

enum Message {
    Record(Box<AuditRecord>),
    Flush(oneshot::Sender<()>),
}

/// Rate limits and audit log over PostgreSQL.
#[derive(Clone)]
pub struct PgLedger {
    db: Db,
    queue: mpsc::Sender<Message>,
    failures: Arc<AtomicU64>,
}

impl std::fmt::Debug for PgLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLedger").finish_non_exhaustive()
    }
}

impl PgLedger {
    /// Starts the audit writer on the current runtime. It stops once every
    /// `PgLedger` clone is dropped, after writing what it holds.
    pub fn start(db: Db) -> PgLedger {
        let (queue, rx) = mpsc::channel(QUEUE);
        let failures = Arc::new(AtomicU64::new(0));
        tokio::spawn(write_audit(db.clone(), rx, failures.clone()));
        PgLedger {
            db,
            queue,
            failures,
        }
    }

    /// Audit writes that failed so far (each retried; /metrics shows it).
    pub fn audit_write_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Waits until every record handed over so far is in the database.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Message::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

#[async_trait]
impl Ledger for PgLedger {
    async fn admit(
        &self,
        ctx: &ToolContext,
        tool: &str,
        limits: &RateLimits,
    ) -> Result<(), LedgerError> {
        let unavailable = |e: data_plane_store::StoreError| LedgerError::Unavailable(e.to_string());
        let daily = limits.daily_limit.map(i64::from).unwrap_or(i64::MAX);
        let cooldown_ms = limits.cooldown.map_or(0, |d| d.as_millis() as i64);
        let mut tx = self
            .db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(unavailable)?;
        // One statement: counts the call only when both limits allow it.
        let admitted: Option<i32> = sqlx::query_scalar(
            "INSERT INTO rate_limits AS r (user_id, tool, day, count, last_call_at)
             VALUES ($1, $2, (now() AT TIME ZONE 'utc')::date, 1, now())
             ON CONFLICT (user_id, tool, day) DO UPDATE
                SET count = r.count + 1, last_call_at = now()
              WHERE r.count < $3
                AND r.last_call_at <= now() - make_interval(secs => $4::double precision / 1000)
             RETURNING count",
        )
        .bind(ctx.user_id)
        .bind(tool)
        .bind(daily)
        .bind(cooldown_ms)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        if admitted.is_some() {
            tx.commit()
                .await
                .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
            return Ok(());
        }
        let (count, wait_ms): (i32, f64) = sqlx::query_as(
            "SELECT count, greatest(0, $3::double precision
                        - extract(epoch FROM now() - last_call_at) * 1000)
               FROM rate_limits
              WHERE user_id = $1 AND tool = $2 AND day = (now() AT TIME ZONE 'utc')::date",
        )
        .bind(ctx.user_id)
        .bind(tool)
        .bind(cooldown_ms as f64)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        let message = if i64::from(count) >= daily {
            format!(
                "{tool} may be called {daily} times per day and that limit is reached; it resets at midnight UTC"
            )
        } else {
            format!(
                "{tool} was called less than {cooldown_ms} ms ago; wait {} ms before calling it again",
                wait_ms.ceil() as i64
            )
        };
        Err(LedgerError::Refused(Refusal { message }))
    }

    async fn record(&self, record: AuditRecord) -> Result<(), LedgerError> {
        self.queue
            .send(Message::Record(Box::new(record)))
            .await
            .map_err(|_| LedgerError::Unavailable("the audit writer has stopped".into()))
    }
}

/// Writes queued records in batches until the queue closes.
async fn write_audit(db: Db, mut rx: mpsc::Receiver<Message>, failures: Arc<AtomicU64>) {
    let mut batch: Vec<AuditRecord> = Vec::with_capacity(BATCH);
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        let first = rx.recv().await;
        let Some(first) = first else { break };
        let mut next = Some(first);
        let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
        loop {
            match next.take() {
                Some(Message::Record(r)) => batch.push(*r),
                Some(Message::Flush(done)) => {
                    waiting.push(done);
                    break;
                }
                None => {}
            }
            if batch.len() >= BATCH {
                break;
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(m)) => next = Some(m),
                Ok(None) | Err(_) => break,
            }
        }
        if !batch.is_empty() {
            if let Err(e) = insert(&db, &batch).await {
                // One bad row (a space deleted meanwhile) must not cost the
                // others: fall back to one insert per record, each retried.
                failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, records = batch.len(), "audit batch failed; writing records one by one");
                for record in batch.iter_mut() {
                    write_one(&db, record, &failures).await;
                }
            }
            batch.clear();
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Writes one record, retrying with growing waits. A space that no longer
/// exists (deleted while the call ran) is kept in the record's error and the
/// record written without it, rather than lost. Every failed attempt is
/// counted and logged; a record still unwritten after the last retry is
/// logged in full, so it survives at least in the logs.
async fn write_one(db: &Db, record: &mut AuditRecord, failures: &AtomicU64) {
    for (attempt, wait) in std::iter::once(None)
        .chain(RETRY_AFTER.iter().map(Some))
        .enumerate()
    {
        if let Some(wait) = wait {
            tokio::time::sleep(*wait).await;
        }
        let Err(e) = insert(db, std::slice::from_ref(record)).await else {
            return;
        };
        failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, attempt, tool = %record.tool, call_id = %record.call_id, "could not write an audit record; retrying");
        if is_missing_space(&e)
            && let Some(space) = record.space_id.take()
        {
            let note = format!("space {space} no longer exists");
            record.error = Some(match record.error.take() {
                Some(error) => format!("{error}; {note}"),
                None => note,
            });
        }
    }
    tracing::error!(
        tool = %record.tool,
        call_id = %record.call_id,
        user = %record.user_id,
        space = ?record.space_id,
        request = %record.request_id,
        success = record.success,
        error = ?record.error,
        "an audit record could not be written after every retry"
    );
}

fn is_missing_space(e: &data_plane_store::StoreError) -> bool {
    matches!(
        e,
        data_plane_store::StoreError::Database(sqlx::Error::Database(d))
            if d.is_foreign_key_violation()
                && d.constraint() == Some("tool_calls_space_id_fkey")
    )
}

async fn insert(db: &Db, batch: &[AuditRecord]) -> Result<(), data_plane_store::StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let mut q = sqlx::QueryBuilder::new(
        "INSERT INTO tool_calls (call_id, ts, tool, duration_ms, user_id, space_id, request_id, parent_call_id, success, error, args) ",
    );
    q.push_values(batch, |mut row, r| {
        row.push_bind(&r.call_id)
            .push_bind(r.ts)
            .push_bind(&r.tool)
            .push_bind(r.duration_ms.min(i32::MAX as u64) as i32)
            .push_bind(r.user_id)
            .push_bind(r.space_id)
            .push_bind(&r.request_id)
            .push_bind(&r.parent_call_id)
            .push_bind(r.success)
            .push_bind(&r.error)
            .push_bind(sqlx::types::Json(&r.args));
    });
    q.build()
        .execute(&mut *tx)
        .await
        .map_err(data_plane_store::StoreError::from)?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    Ok(())
}
