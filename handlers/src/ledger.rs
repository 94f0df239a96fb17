//! The registry's ledger in PostgreSQL: rate limits counted atomically per
//! user, tool and UTC day (so they hold across replicas), and audit records
//! written in batches by a background task. A call whose caller must not
//! see its answer before its record is stored (`ToolContext::audit_first`)
//! waits for its batch; batches then take what is queued when the last
//! write ends, so waiting callers share their INSERTs.
//! A record the database refuses on every retry goes to a spool on local
//! disk and is replayed into PostgreSQL later, so none is ever dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use data_plane_registry::{AuditRecord, Ledger, LedgerError, RateLimits, Refusal, ToolContext};
use data_plane_store::exchange::{Param, Prepared};
use data_plane_store::{Db, Scope};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

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
/// How often spooled records are offered to the database again.
const REPLAY_EVERY: Duration = Duration::from_secs(30);
/// The spool's file in its directory: one JSON record a line.
const SPOOL_FILE: &str = "records.jsonl";

/// How the audit writer retries, and where it spools what it cannot write.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// Waits before each retry of a record the database refused.
    pub retry_after: Vec<Duration>,
    /// The directory of the spool (`$DATA_PLANE_DATA_DIR/audit-spool` in
    /// the server). Without one, a record refused on every retry survives
    /// only in the logs.
    pub spool_dir: Option<PathBuf>,
    /// How often spooled records are replayed (also at start and after
    /// every write that succeeds).
    pub replay_every: Duration,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            retry_after: RETRY_AFTER.to_vec(),
            spool_dir: None,
            replay_every: REPLAY_EVERY,
        }
    }
}

enum Message {
    Record(Box<AuditRecord>),
    Flush(oneshot::Sender<()>),
    Replay(oneshot::Sender<()>),
    SpoolTo(PathBuf),
}

/// What the audit writer counts; /metrics shows each.
#[derive(Default)]
struct Counters {
    failures: AtomicU64,
    spooled: AtomicU64,
    replayed: AtomicU64,
}

/// Rate limits and audit log over PostgreSQL.
#[derive(Clone)]
pub struct PgLedger {
    db: Db,
    queue: mpsc::Sender<Message>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for PgLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLedger").finish_non_exhaustive()
    }
}

impl PgLedger {
    /// Starts the audit writer on the current runtime with the default
    /// retries and no spool (see `spool_to`). It stops once every
    /// `PgLedger` clone is dropped, after writing what it holds.
    pub fn start(db: Db) -> PgLedger {
        PgLedger::start_with(db, LedgerOptions::default())
    }

    /// `start` with the given retries, spool and replay period.
    pub fn start_with(db: Db, options: LedgerOptions) -> PgLedger {
        let (queue, rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let writer = Writer {
            db: db.clone(),
            counters: counters.clone(),
            spool: options.spool_dir.map(Spool::new),
            retry_after: options.retry_after,
        };
        tokio::spawn(writer.run(rx, options.replay_every));
        PgLedger {
            db,
            queue,
            counters,
        }
    }

    /// Spools records refused on every retry under `dir` from now on, and
    /// replays what an earlier run left there.
    pub async fn spool_to(&self, dir: PathBuf) {
        let _ = self.queue.send(Message::SpoolTo(dir)).await;
    }

    /// Audit writes that failed so far (each retried; /metrics shows it).
    pub fn audit_write_failures(&self) -> u64 {
        self.counters.failures.load(Ordering::Relaxed)
    }

    /// Records refused on every retry and kept in the spool so far.
    pub fn audit_records_spooled(&self) -> u64 {
        self.counters.spooled.load(Ordering::Relaxed)
    }

    /// Spooled records written to the database so far.
    pub fn audit_records_replayed(&self) -> u64 {
        self.counters.replayed.load(Ordering::Relaxed)
    }

    /// Offers the spooled records to the database now, and waits until done.
    pub async fn replay(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Message::Replay(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Waits until every record handed over so far is in the database, or
    /// in the spool when the database refused it on every retry.
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
        let (daily, cooldown_ms) = bounds(limits);
        // One exchange, committed as it returns: counts the call only when
        // both limits allow it.
        let admitted = self
            .db
            .exchange(
                Scope::User(ctx.user_id),
                &ADMIT,
                &[
                    Param::Uuid(ctx.user_id),
                    Param::Text(tool),
                    Param::Int(daily),
                    Param::Int(cooldown_ms),
                ],
            )
            .await
            .map_err(unavailable)?;
        if !admitted.is_empty() {
            return Ok(());
        }
        let mut tx = self
            .db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(unavailable)?;
        let refusal = refusal(&mut tx, ctx.user_id, tool, daily, cooldown_ms)
            .await?
            // Only a day's turn or another call's commit in between (the
            // row read afresh) leaves no reason to give.
            .unwrap_or_else(|| Refusal {
                message: format!("{tool} was called less than {cooldown_ms} ms ago; call it again"),
            });
        Err(LedgerError::Refused(refusal))
    }

    async fn check(
        &self,
        ctx: &ToolContext,
        tool: &str,
        limits: &RateLimits,
    ) -> Result<(), LedgerError> {
        let (daily, cooldown_ms) = bounds(limits);
        let mut tx = self
            .db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        match refusal(&mut tx, ctx.user_id, tool, daily, cooldown_ms).await? {
            None => Ok(()),
            Some(refusal) => Err(LedgerError::Refused(refusal)),
        }
    }

    async fn record(&self, record: AuditRecord) -> Result<(), LedgerError> {
        self.queue
            .send(Message::Record(Box::new(record)))
            .await
            .map_err(|_| LedgerError::Unavailable("the audit writer has stopped".into()))
    }

    async fn written(&self) {
        self.flush().await;
    }
}

/// Counts a call of `$2` by `$1` for today when both limits allow it: `$3`
/// calls a day (a day's first call inserts its row, unless the limit is 0:
/// then nothing is inserted and the call is refused like any other over
/// its limit) and `$4` ms since the last. Answers a row only when counted.
static ADMIT: Prepared = Prepared::new(
    "dp_rate_limit_admit",
    "INSERT INTO rate_limits AS r (user_id, tool, day, count, last_call_at)
     SELECT $1, $2, (now() AT TIME ZONE 'utc')::date, 1, now()
      WHERE $3 > 0
     ON CONFLICT (user_id, tool, day) DO UPDATE
        SET count = r.count + 1, last_call_at = now()
      WHERE r.count < $3
        AND r.last_call_at <= now() - make_interval(secs => $4::double precision / 1000)
     RETURNING count",
    &["uuid", "text", "bigint", "bigint"],
);

/// A tool's daily limit (`i64::MAX` for none) and cooldown in milliseconds
/// (0 for none).
fn bounds(limits: &RateLimits) -> (i64, i64) {
    (
        limits.daily_limit.map(i64::from).unwrap_or(i64::MAX),
        limits.cooldown.map_or(0, |d| d.as_millis() as i64),
    )
}

/// Why the caller's next call of `tool` would be refused now: today's count
/// at the daily limit, or the cooldown still running. `None` when neither.
async fn refusal(
    conn: &mut sqlx::PgConnection,
    user: Uuid,
    tool: &str,
    daily: i64,
    cooldown_ms: i64,
) -> Result<Option<Refusal>, LedgerError> {
    let today: Option<(i32, f64)> = sqlx::query_as(
        "SELECT count, greatest(0, $3::double precision
                    - extract(epoch FROM now() - last_call_at) * 1000)
           FROM rate_limits
          WHERE user_id = $1 AND tool = $2 AND day = (now() AT TIME ZONE 'utc')::date",
    )
    .bind(user)
    .bind(tool)
    .bind(cooldown_ms as f64)
    .fetch_optional(conn)
    .await
    .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
    // No row: the caller has not called the tool today.
    let (count, wait_ms) = today.unwrap_or((0, 0.0));
    let message = if daily <= 0 {
        format!("{tool} is switched off: its daily limit is 0")
    } else if i64::from(count) >= daily {
        format!(
            "{tool} may be called {daily} times per day and that limit is reached; it resets at midnight UTC"
        )
    } else if wait_ms > 0.0 {
        format!(
            "{tool} was called less than {cooldown_ms} ms ago; wait {} ms before calling it again",
            wait_ms.ceil() as i64
        )
    } else {
        return Ok(None);
    };
    Ok(Some(Refusal { message }))
}

/// The background task that owns the audit log's writes and the spool.
struct Writer {
    db: Db,
    counters: Arc<Counters>,
    spool: Option<Spool>,
    retry_after: Vec<Duration>,
}

impl Writer {
    /// Writes queued records in batches until the queue closes, replaying the
    /// spool at start, every `replay_every` while it holds records, and after
    /// every write that succeeds.
    async fn run(mut self, mut rx: mpsc::Receiver<Message>, replay_every: Duration) {
        let mut batch: Vec<AuditRecord> = Vec::with_capacity(BATCH);
        let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
        self.replay().await;
        loop {
            let first = match tokio::time::timeout(replay_every, rx.recv()).await {
                Ok(first) => first,
                Err(_) => {
                    self.replay_pending().await;
                    continue;
                }
            };
            let Some(first) = first else { break };
            let mut next = Some(first);
            let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
            // Someone waits for the batch: it takes only what is queued
            // already, so callers that wait together are written together
            // (one INSERT while the last one ran, whatever the load).
            let mut flushing = false;
            loop {
                match next.take() {
                    Some(Message::Record(r)) => batch.push(*r),
                    Some(Message::Flush(done)) => {
                        waiting.push(done);
                        flushing = true;
                    }
                    Some(Message::Replay(done)) => {
                        self.replay().await;
                        let _ = done.send(());
                    }
                    Some(Message::SpoolTo(dir)) => {
                        self.spool = Some(Spool::new(dir));
                        self.replay().await;
                    }
                    None => {}
                }
                if batch.len() >= BATCH {
                    break;
                }
                if flushing {
                    match rx.try_recv() {
                        Ok(m) => next = Some(m),
                        Err(_) => break,
                    }
                    continue;
                }
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(m)) => next = Some(m),
                    Ok(None) | Err(_) => break,
                }
            }
            if !batch.is_empty() {
                match insert(&self.db, &batch).await {
                    Ok(()) => self.replay_pending().await,
                    Err(e) => {
                        // One bad row (a space deleted meanwhile) must not cost the
                        // others: fall back to one insert per record, each retried.
                        self.counters.failures.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, records = batch.len(), "audit batch failed; writing records one by one");
                        for record in batch.iter_mut() {
                            self.write_one(record).await;
                        }
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
    /// counted and logged; a record still unwritten after the last retry goes
    /// to the spool (or, without one, is logged in full).
    async fn write_one(&mut self, record: &mut AuditRecord) {
        for (attempt, wait) in std::iter::once(None)
            .chain(self.retry_after.iter().map(Some))
            .enumerate()
        {
            if let Some(wait) = wait {
                tokio::time::sleep(*wait).await;
            }
            // A retry may follow a write that committed but whose answer was lost.
            let Err(e) = insert_once(&self.db, record).await else {
                return;
            };
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, attempt, tool = %record.tool, call_id = %record.call_id, "could not write an audit record; retrying");
            forget_missing_space(&e, record);
        }
        let spooled = match self.spool.as_mut() {
            Some(spool) => spool.append(record).await,
            None => Err(std::io::Error::other("no spool directory is configured")),
        };
        match spooled {
            Ok(()) => {
                self.counters.spooled.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    tool = %record.tool,
                    call_id = %record.call_id,
                    "an audit record could not be written after every retry; spooled to disk for a later replay"
                );
            }
            Err(e) => tracing::error!(
                spool_error = %e,
                tool = %record.tool,
                call_id = %record.call_id,
                user = %record.user_id,
                space = ?record.space_id,
                request = %record.request_id,
                success = record.success,
                error = ?record.error,
                args = %record.args,
                "an audit record could not be written after every retry, nor spooled"
            ),
        }
    }

    async fn replay_pending(&mut self) {
        if self.spool.as_ref().is_some_and(|s| s.pending) {
            self.replay().await;
        }
    }

    /// Writes the spooled records that the database takes now, and keeps
    /// the rest. A record is removed from the spool only once committed, and
    /// written only where it is not already (a replay cut short by a crash
    /// is simply done again).
    async fn replay(&mut self) {
        let Some(spool) = self.spool.as_mut() else {
            return;
        };
        let lines = match spool.read().await {
            Ok(lines) => lines,
            Err(e) => {
                tracing::error!(error = %e, spool = %spool.file.display(), "cannot read the audit spool");
                return;
            }
        };
        if lines.is_empty() {
            spool.pending = false;
            return;
        }
        let mut kept = Vec::new();
        let mut written = 0u64;
        for line in lines {
            let mut record = match serde_json::from_str::<Spooled>(&line) {
                Ok(s) => AuditRecord::from(s),
                Err(e) => {
                    // Kept, never dropped: a person can read and mend it.
                    tracing::error!(error = %e, line = %line, "an audit spool line cannot be read");
                    kept.push(line);
                    continue;
                }
            };
            let mut outcome = insert_once(&self.db, &record).await;
            if let Err(e) = &outcome
                && forget_missing_space(e, &mut record)
            {
                outcome = insert_once(&self.db, &record).await;
            }
            match outcome {
                Ok(()) => written += 1,
                Err(e) => {
                    tracing::warn!(error = %e, call_id = %record.call_id, "a spooled audit record is still refused; kept for the next replay");
                    kept.push(line);
                }
            }
        }
        if let Err(e) = spool.rewrite(&kept).await {
            // The written records stay in the spool too; replaying them again
            // finds them and writes nothing.
            tracing::error!(error = %e, spool = %spool.file.display(), "cannot rewrite the audit spool");
        }
        if written > 0 {
            self.counters.replayed.fetch_add(written, Ordering::Relaxed);
            tracing::info!(
                records = written,
                left = kept.len(),
                "spooled audit records written to the database"
            );
        }
    }
}

/// Drops a deleted space from `record` (naming it in the error) when that
/// is why the write failed; true when it did.
fn forget_missing_space(e: &data_plane_store::StoreError, record: &mut AuditRecord) -> bool {
    if !is_missing_space(e) {
        return false;
    }
    let Some(space) = record.space_id.take() else {
        return false;
    };
    let note = format!("space {space} no longer exists");
    record.error = Some(match record.error.take() {
        Some(error) => format!("{error}; {note}"),
        None => note,
    });
    true
}

/// The audit spool: JSON lines in one file, each appended and synced to disk
/// before the record counts as kept.
struct Spool {
    dir: PathBuf,
    file: PathBuf,
    /// The file may hold records.
    pending: bool,
}

impl Spool {
    fn new(dir: PathBuf) -> Spool {
        let file = dir.join(SPOOL_FILE);
        Spool {
            dir,
            file,
            pending: true,
        }
    }

    async fn append(&mut self, record: &AuditRecord) -> std::io::Result<()> {
        let line = serde_json::to_string(&Spooled::from(record))?;
        let (dir, file) = (self.dir.clone(), self.file.clone());
        tokio::task::spawn_blocking(move || append_line(&dir, &file, &line))
            .await
            .map_err(std::io::Error::other)??;
        self.pending = true;
        Ok(())
    }

    async fn read(&self) -> std::io::Result<Vec<String>> {
        let file = self.file.clone();
        tokio::task::spawn_blocking(move || match std::fs::read_to_string(&file) {
            Ok(text) => Ok(text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Replaces the spool with `kept`, atomically: a crash leaves the old
    /// file or the new one, never half of either.
    async fn rewrite(&mut self, kept: &[String]) -> std::io::Result<()> {
        let (dir, file) = (self.dir.clone(), self.file.clone());
        let text: String = kept.iter().map(|l| format!("{l}\n")).collect();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if text.is_empty() {
                match std::fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                    Err(e) => return Err(e),
                }
            } else {
                let tmp = dir.join(format!("{SPOOL_FILE}.tmp"));
                let mut out = std::fs::File::create(&tmp)?;
                out.write_all(text.as_bytes())?;
                out.sync_all()?;
                std::fs::rename(&tmp, &file)?;
            }
            std::fs::File::open(&dir)?.sync_all()
        })
        .await
        .map_err(std::io::Error::other)??;
        self.pending = !kept.is_empty();
        Ok(())
    }
}

/// Appends one line and syncs it (and, for a new file, its directory) to disk.
fn append_line(dir: &Path, file: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir)?;
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(file)?;
    let len = out.metadata()?.len();
    let mut text = String::with_capacity(line.len() + 2);
    // A crash mid-append leaves a torn last line; the new one starts on its own.
    let mut last = [0u8; 1];
    if len > 0 && out.read_at(&mut last, len - 1)? == 1 && last[0] != b'\n' {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.sync_all()?;
    if len == 0 {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// An audit record as the spool keeps it.
#[derive(Serialize, Deserialize)]
struct Spooled {
    tool: String,
    call_id: String,
    duration_ms: u64,
    ts: DateTime<Utc>,
    user_id: Uuid,
    space_id: Option<Uuid>,
    request_id: String,
    parent_call_id: Option<String>,
    success: bool,
    error: Option<String>,
    args: serde_json::Value,
    // Written by servers since the governance columns; older spools lack them.
    #[serde(default)]
    annotations: Option<data_plane_registry::Annotations>,
    #[serde(default)]
    side_effects: Vec<String>,
    #[serde(default)]
    gate: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    module: Option<String>,
    // Written since retries became one call; older spools count one.
    #[serde(default = "one_attempt")]
    attempts: u32,
}

fn one_attempt() -> u32 {
    1
}

impl From<&AuditRecord> for Spooled {
    fn from(r: &AuditRecord) -> Spooled {
        Spooled {
            tool: r.tool.clone(),
            call_id: r.call_id.clone(),
            duration_ms: r.duration_ms,
            ts: r.ts,
            user_id: r.user_id,
            space_id: r.space_id,
            request_id: r.request_id.clone(),
            parent_call_id: r.parent_call_id.clone(),
            success: r.success,
            error: r.error.clone(),
            args: r.args.clone(),
            annotations: r.annotations,
            side_effects: r.side_effects.clone(),
            gate: r.gate.clone(),
            agent: r.agent.clone(),
            module: r.module.clone(),
            attempts: r.attempts,
        }
    }
}

impl From<Spooled> for AuditRecord {
    fn from(s: Spooled) -> AuditRecord {
        AuditRecord {
            tool: s.tool,
            call_id: s.call_id,
            duration_ms: s.duration_ms,
            ts: s.ts,
            user_id: s.user_id,
            space_id: s.space_id,
            request_id: s.request_id,
            parent_call_id: s.parent_call_id,
            success: s.success,
            error: s.error,
            args: s.args,
            annotations: s.annotations,
            side_effects: s.side_effects,
            gate: s.gate,
            agent: s.agent,
            module: s.module,
            attempts: s.attempts,
        }
    }
}

fn is_missing_space(e: &data_plane_store::StoreError) -> bool {
    matches!(
        e,
        data_plane_store::StoreError::Database(sqlx::Error::Database(d))
            if d.is_foreign_key_violation()
                && d.constraint() == Some("tool_calls_space_id_fkey")
    )
}

/// Writes a batch with one statement in one round trip: the records as one
/// JSON array bound to `dp_write_audit` (migration 0027), which sets the
/// system scope for its own transaction and inserts them all; PostgreSQL
/// commits it before the answer comes back.
async fn insert(db: &Db, batch: &[AuditRecord]) -> Result<(), data_plane_store::StoreError> {
    use chrono::SubsecRound;
    // Whole microseconds, as PostgreSQL keeps them and as `insert_once`
    // binds them: a retry after a write whose answer was lost finds the row.
    let rows: Vec<Spooled> = batch
        .iter()
        .map(|r| Spooled {
            ts: r.ts.trunc_subsecs(6),
            ..Spooled::from(r)
        })
        .collect();
    sqlx::query("SELECT dp_write_audit($1)")
        .bind(sqlx::types::Json(&rows))
        .execute(db.pool())
        .await?;
    Ok(())
}

/// Writes one record unless the log already holds it (the same call, request,
/// tool and time): retries and replays are safe to repeat.
async fn insert_once(db: &Db, r: &AuditRecord) -> Result<(), data_plane_store::StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "INSERT INTO tool_calls (call_id, ts, tool, duration_ms, user_id, space_id, request_id, parent_call_id, success, error, args, annotations, side_effects, gate, agent, module, attempts)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17
          WHERE NOT EXISTS (SELECT 1 FROM tool_calls
                             WHERE call_id = $1 AND ts = $2 AND tool = $3 AND request_id = $7)",
    )
    .bind(&r.call_id)
    .bind(r.ts)
    .bind(&r.tool)
    .bind(r.duration_ms.min(i32::MAX as u64) as i32)
    .bind(r.user_id)
    .bind(r.space_id)
    .bind(&r.request_id)
    .bind(&r.parent_call_id)
    .bind(r.success)
    .bind(&r.error)
    .bind(sqlx::types::Json(&r.args))
    .bind(r.annotations.map(sqlx::types::Json))
    .bind(&r.side_effects)
    .bind(&r.gate)
    .bind(&r.agent)
    .bind(&r.module)
    .bind(r.attempts.min(i16::MAX as u32) as i16)
    .execute(&mut *tx)
    .await
    .map_err(data_plane_store::StoreError::from)?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    // Test helpers report failure by panicking, like the tests that call them.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use data_plane_store::identity::{self, Permission};
    use data_plane_store::testing::TestDatabase;

    /// A record written by a batch and then again by a retry (its first
    /// answer lost) is one row, whatever the precision of its time; the
    /// batch's system scope ends with it.
    #[tokio::test]
    async fn a_retry_after_a_batch_that_was_written_adds_nothing() {
        let test = TestDatabase::create().await;
        let mut tx = test.db.begin(Scope::System).await.unwrap();
        let user = identity::upsert_user(&mut tx, "a@example.com", Some(Permission::User))
            .await
            .unwrap()
            .id;
        tx.commit().await.unwrap();
        let ts = DateTime::parse_from_rfc3339("2026-12-07T10:00:00.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        let record = AuditRecord {
            tool: "document_info".into(),
            call_id: "call-1".into(),
            duration_ms: u64::MAX,
            ts,
            user_id: user,
            space_id: None,
            request_id: "req-1".into(),
            parent_call_id: None,
            success: true,
            error: None,
            args: serde_json::Value::Null,
            annotations: None,
            side_effects: vec![],
            gate: None,
            agent: None,
            module: None,
            attempts: u32::MAX,
        };
        // One connection, so that the check below runs where the batch did.
        let db = Db::connect(&test.app_url, 1).await.unwrap();
        insert(&db, std::slice::from_ref(&record)).await.unwrap();
        let scope: String =
            sqlx::query_scalar("SELECT coalesce(current_setting('data_plane.system', true), '')")
                .fetch_one(db.pool())
                .await
                .unwrap();
        assert_ne!(scope, "on", "the system scope ends with the batch");
        insert_once(&db, &record).await.unwrap();
        let mut tx = test.db.begin(Scope::System).await.unwrap();
        let rows: Vec<(i32, i16, Option<serde_json::Value>)> =
            sqlx::query_as("SELECT duration_ms, attempts, args FROM tool_calls")
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        assert_eq!(rows, [(i32::MAX, i16::MAX, Some(serde_json::Value::Null))]);
        drop(tx);
        test.destroy().await.unwrap();
    }
}
