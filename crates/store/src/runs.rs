//! Chat runs: one row per turn, the events it sent (numbered from 1 within
//! the run), and the approvals it asked for. What one replica writes, every
//! other hears of on [`RUNS_CHANNEL`].

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::{Db, Scope, StoreError};

/// Where runs' news is announced (`pg_notify`): `e:RUN:SEQ` (events up to
/// SEQ are recorded), `s:RUN` (stop it), `a:RUN:CALL` (an approval was
/// answered), `w:RUN` (a client on another replica watches it).
pub const RUNS_CHANNEL: &str = "data_plane_runs";

/// A run's state as the table keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Done,
    Error,
    /// Someone asked it to stop.
    Stopped,
    /// Its client went away and nobody reattached within the grace period.
    Abandoned,
    /// The replica running it stopped answering.
    Lost,
}

crate::pg_enum!(RunStatus = "run_status" {
    Running = "running",
    Done = "done",
    Error = "error",
    Stopped = "stopped",
    Abandoned = "abandoned",
    Lost = "lost",
});

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub space_id: Option<Uuid>,
    pub conversation_id: Uuid,
    pub status: RunStatus,
    pub created_at: DateTime<Utc>,
    pub alive_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub last_seq: Option<i64>,
    /// The tool of a run that is one tool call (an MCP task); `None` for
    /// a chat turn.
    pub tool: Option<String>,
}
crate::from_row!(RunRow {
    id,
    user_id,
    space_id,
    conversation_id,
    status,
    created_at,
    alive_at,
    finished_at,
    last_seq,
    tool
});

const RUN_COLUMNS: &str = "id, user_id, space_id, conversation_id, status, created_at, alive_at, \
     finished_at, last_seq, tool";

/// One recorded event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub seq: i64,
    pub kind: String,
    pub data: Value,
}
crate::from_row!(EventRow { seq, kind, data });

/// A new run, as [`create`] records it.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub id: Uuid,
    pub user_id: Uuid,
    pub space_id: Option<Uuid>,
    pub conversation_id: Uuid,
    /// The tool of a run that is one call; `None` for a chat turn.
    pub tool: Option<&'a str>,
    /// The replica that runs it.
    pub owner: Uuid,
    /// What another replica needs to continue it, should this one die.
    pub request: Option<&'a Value>,
}

/// Records a new run (running), held by its owner.
pub async fn create(db: &Db, run: &NewRun<'_>) -> Result<(), StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "INSERT INTO runs (id, user_id, space_id, conversation_id, tool, owner, request)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(run.id)
    .bind(run.user_id)
    .bind(run.space_id)
    .bind(run.conversation_id)
    .bind(run.tool)
    .bind(run.owner)
    .bind(run.request)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// A run another replica held until its lease ran out, now claimed by
/// this one ([`claim`]).
#[derive(Debug, Clone)]
pub struct Claimed {
    pub row: RunRow,
    /// What the replica that began it saved for continuing it.
    pub request: Option<Value>,
    /// How many times it was taken over, this time included.
    pub takeovers: i32,
    /// Its last recorded event's number (0: none) and how many it has.
    pub last_seq: i64,
    pub events: i64,
}

/// Claims up to `limit` running runs of other owners whose lease ran out
/// (their owner renewed nothing for `lease`, by the database's clock) for
/// `owner` (its own it renews; one it could not renew for a while is still
/// its own to run; a run of a replica from before leases, with no owner,
/// is left to be found lost). Each
/// run goes to one replica only: the rows are locked and skipped by any
/// other replica claiming at the same moment. The last recorded event is
/// read after the claim, so events the old owner wrote until then count.
pub async fn claim(
    db: &Db,
    owner: Uuid,
    lease: std::time::Duration,
    limit: i64,
) -> Result<Vec<Claimed>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let rows: Vec<(Uuid, Option<Value>, i32)> = sqlx::query_as(
        "UPDATE runs SET owner = $1, alive_at = now(), takeovers = takeovers + 1
         WHERE id IN (
             SELECT id FROM runs
             WHERE status = 'running' AND alive_at < now() - make_interval(secs => $2)
               AND owner IS NOT NULL AND owner <> $1
             ORDER BY alive_at LIMIT $3
             FOR UPDATE SKIP LOCKED)
         RETURNING id, request, takeovers",
    )
    .bind(owner)
    .bind(lease.as_secs_f64())
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    let mut claimed = Vec::with_capacity(rows.len());
    for (id, request, takeovers) in rows {
        let row: RunRow = sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        // A statement of its own: it sees what committed while the claim
        // waited for the row.
        let (last_seq, events): (Option<i64>, i64) =
            sqlx::query_as("SELECT max(seq), count(*) FROM run_events WHERE run_id = $1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        claimed.push(Claimed {
            row,
            request,
            takeovers,
            last_seq: last_seq.unwrap_or(0),
            events,
        });
    }
    tx.commit().await?;
    Ok(claimed)
}

/// One event to record: its run, number, type and body.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub run_id: Uuid,
    pub seq: i64,
    pub kind: String,
    /// The event's JSON text (an object).
    pub data: String,
    /// The run's last event: the run ends with this status in the same
    /// transaction (unless it had ended already).
    pub ends: Option<RunStatus>,
}

/// A run's checkpoint to record: placed after its event `after_seq`.
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    pub run_id: Uuid,
    pub after_seq: i64,
    /// Its JSON text (an object).
    pub data: String,
}

/// One recorded checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRow {
    pub after_seq: i64,
    pub data: Value,
}
crate::from_row!(CheckpointRow { after_seq, data });

/// Records events and checkpoints of any runs `owner` holds in one
/// transaction and announces, per run, the highest number now recorded.
/// Events already recorded (a retried batch) are skipped, and so is
/// everything of a run another replica took over: those runs are answered.
/// The rows of the runs written are locked (`FOR SHARE`) until the
/// transaction ends, so a claim ([`claim`] skips locked rows) never lands
/// between this check and these writes.
pub async fn append(
    db: &Db,
    owner: Uuid,
    events: &[NewEvent],
    checkpoints: &[NewCheckpoint],
) -> Result<Vec<Uuid>, StoreError> {
    if events.is_empty() && checkpoints.is_empty() {
        return Ok(Vec::new());
    }
    let runs: Vec<Uuid> = events.iter().map(|e| e.run_id).collect();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
    let mut tx = db.begin(Scope::System).await?;
    let mut named: Vec<Uuid> = runs.clone();
    named.extend(checkpoints.iter().map(|c| c.run_id));
    named.sort_unstable();
    named.dedup();
    let held: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM runs WHERE id = ANY($1) AND owner IS NOT DISTINCT FROM $2
         ORDER BY id FOR SHARE",
    )
    .bind(&named)
    .bind(owner)
    .fetch_all(&mut *tx)
    .await?;
    let refused: Vec<Uuid> = named.into_iter().filter(|id| !held.contains(id)).collect();
    // Only the runs `owner` still holds: a replica whose run was taken
    // over (it stalled past its lease) writes nothing more into it.
    sqlx::query(
        "INSERT INTO run_events (run_id, seq, kind, data)
         SELECT t.r, t.s, t.k, t.d::jsonb
         FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[]) AS t(r, s, k, d)
         WHERE EXISTS (SELECT 1 FROM runs
                       WHERE runs.id = t.r AND runs.owner IS NOT DISTINCT FROM $5)
         ON CONFLICT DO NOTHING",
    )
    .bind(&runs)
    .bind(&seqs)
    .bind(&kinds)
    .bind(&data)
    .bind(owner)
    .execute(&mut *tx)
    .await?;
    if !checkpoints.is_empty() {
        let runs: Vec<Uuid> = checkpoints.iter().map(|c| c.run_id).collect();
        let after: Vec<i64> = checkpoints.iter().map(|c| c.after_seq).collect();
        let data: Vec<&str> = checkpoints.iter().map(|c| c.data.as_str()).collect();
        // In the batch's order: `id` keeps it among checkpoints placed
        // after the same event. A retried batch may write one twice; a
        // reader takes the later of equal ones.
        sqlx::query(
            "INSERT INTO run_checkpoints (run_id, after_seq, data)
             SELECT t.r, t.a, t.d::jsonb
             FROM UNNEST($1::uuid[], $2::bigint[], $3::text[]) WITH ORDINALITY AS t(r, a, d, n)
             WHERE EXISTS (SELECT 1 FROM runs
                           WHERE runs.id = t.r AND runs.owner IS NOT DISTINCT FROM $4)
             ORDER BY t.n",
        )
        .bind(&runs)
        .bind(&after)
        .bind(&data)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
    }
    for event in events {
        if let Some(status) = event.ends {
            sqlx::query(
                "UPDATE runs SET status = $2, finished_at = now(), last_seq = $3
                 WHERE id = $1 AND status = 'running' AND owner IS NOT DISTINCT FROM $4",
            )
            .bind(event.run_id)
            .bind(status)
            .bind(event.seq)
            .bind(owner)
            .execute(&mut *tx)
            .await?;
        }
    }
    sqlx::query(
        "SELECT pg_notify($1, 'e:' || r || ':' || max(s))
         FROM UNNEST($2::uuid[], $3::bigint[]) AS t(r, s) GROUP BY r",
    )
    .bind(RUNS_CHANNEL)
    .bind(&runs)
    .bind(&seqs)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(refused)
}

/// Marks the run lost when it is still running and its replica has not
/// touched it for `after` (by the database's clock); `true` when it did.
pub async fn mark_lost(db: &Db, id: Uuid, after: std::time::Duration) -> Result<bool, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let done = sqlx::query(
        "UPDATE runs SET status = 'lost', finished_at = now()
         WHERE id = $1 AND status = 'running' AND alive_at < now() - make_interval(secs => $2)",
    )
    .bind(id)
    .bind(after.as_secs_f64())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(done == 1)
}

/// Marks the run lost, when `owner` holds it and it is still running: a
/// replica that took it over and cannot continue it.
pub async fn end_lost(db: &Db, id: Uuid, owner: Uuid) -> Result<bool, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let done = sqlx::query(
        "UPDATE runs SET status = 'lost', finished_at = now()
         WHERE id = $1 AND status = 'running' AND owner = $2",
    )
    .bind(id)
    .bind(owner)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(done == 1)
}

/// Renews `owner`'s lease on the runs; answers those still running that
/// it no longer holds (another replica took them over).
pub async fn touch(db: &Db, owner: Uuid, ids: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "UPDATE runs SET alive_at = now()
         WHERE id = ANY($1) AND status = 'running' AND owner IS NOT DISTINCT FROM $2",
    )
    .bind(ids)
    .bind(owner)
    .execute(&mut *tx)
    .await?;
    let taken: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM runs
         WHERE id = ANY($1) AND status = 'running' AND owner IS DISTINCT FROM $2",
    )
    .bind(ids)
    .bind(owner)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(taken)
}

/// Ends `owner`'s lease on `ids` now (their runs still running): their
/// `alive_at` goes back by `lease`, so another replica's next claim takes
/// them without waiting the lease out, while a reader still counts them
/// as far from lost, and their owner becomes the nil id, so that nothing
/// `owner` still has under way (a renewal, a recorder batch) applies to
/// them. What a replica that stops does with the runs it hands over. How
/// many it let go.
pub async fn release(
    db: &Db,
    owner: Uuid,
    ids: &[Uuid],
    lease: std::time::Duration,
) -> Result<u64, StoreError> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut tx = db.begin(Scope::System).await?;
    let released = sqlx::query(
        "UPDATE runs SET alive_at = now() - make_interval(secs => $3),
                         owner = '00000000-0000-0000-0000-000000000000'
         WHERE id = ANY($1) AND status = 'running' AND owner = $2",
    )
    .bind(ids)
    .bind(owner)
    .bind(lease.as_secs_f64())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(released)
}

/// The run, if `scope` may see it (its user, an admin, the system).
pub async fn get(db: &Db, scope: Scope, id: Uuid) -> Result<Option<RunRow>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let row = sqlx::query_as(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(row)
}

/// Up to `limit` recorded events numbered after `after`, in order.
pub async fn events_after(
    db: &Db,
    scope: Scope,
    id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<EventRow>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let rows = sqlx::query_as(
        "SELECT seq, kind, data FROM run_events WHERE run_id = $1 AND seq > $2
         ORDER BY seq LIMIT $3",
    )
    .bind(id)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// The run's checkpoints, in the order they were recorded.
pub async fn checkpoints_of(db: &Db, id: Uuid) -> Result<Vec<CheckpointRow>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let rows = sqlx::query_as(
        "SELECT after_seq, data FROM run_checkpoints WHERE run_id = $1 ORDER BY after_seq, id",
    )
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// The run's recorded events of `kind`, in order.
pub async fn events_of_kind(db: &Db, id: Uuid, kind: &str) -> Result<Vec<EventRow>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let rows = sqlx::query_as(
        "SELECT seq, kind, data FROM run_events WHERE run_id = $1 AND kind = $2 ORDER BY seq",
    )
    .bind(id)
    .bind(kind)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// The body of the run's last recorded event of `kind` (its last
/// `tool_result`, say), if `scope` may see the run.
pub async fn last_event_of(
    db: &Db,
    scope: Scope,
    id: Uuid,
    kind: &str,
) -> Result<Option<Value>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let data = sqlx::query_scalar(
        "SELECT data FROM run_events WHERE run_id = $1 AND kind = $2 ORDER BY seq DESC LIMIT 1",
    )
    .bind(id)
    .bind(kind)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(data)
}

/// Announces `payload` on [`RUNS_CHANNEL`].
pub async fn notify(db: &Db, payload: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(RUNS_CHANNEL)
        .bind(payload)
        .execute(db.pool())
        .await?;
    Ok(())
}

/// Deletes runs that ended before `before`, with their events and
/// approvals; returns how many.
pub async fn purge(db: &Db, before: DateTime<Utc>) -> Result<u64, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let n = sqlx::query("DELETE FROM runs WHERE finished_at IS NOT NULL AND finished_at < $1")
        .bind(before)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(n)
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
}

crate::pg_enum!(ApprovalStatus = "approval_status" {
    Pending = "pending",
    Approved = "approved",
    Denied = "denied",
    Expired = "expired",
});

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub run_id: Uuid,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub annotations: Value,
    pub why: String,
    pub parent_call_id: Option<String>,
    pub status: ApprovalStatus,
    pub reason: Option<String>,
    pub remember: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub answered_at: Option<DateTime<Utc>>,
    pub answered_by: Option<Uuid>,
}
crate::from_row!(ApprovalRow {
    run_id,
    call_id,
    tool,
    arguments,
    annotations,
    why,
    parent_call_id,
    status,
    reason,
    remember,
    created_at,
    expires_at,
    answered_at,
    answered_by
});

const APPROVAL_COLUMNS: &str = "run_id, call_id, tool, arguments, annotations, why, parent_call_id, \
     status, reason, remember, created_at, expires_at, answered_at, answered_by";

/// A call waiting for a person.
#[derive(Debug, Clone)]
pub struct NewApproval<'a> {
    pub run_id: Uuid,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub annotations: &'a Value,
    pub why: &'a str,
    pub parent_call_id: Option<&'a str>,
    pub expires_at: DateTime<Utc>,
}

/// Records a pending approval. A retried call (same id, tool and
/// arguments) keeps the first, settled or not; a settled row of another
/// call that reused the id (some models number calls afresh each step)
/// becomes this call's, pending.
pub async fn ask(db: &Db, a: &NewApproval<'_>) -> Result<ApprovalRow, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    sqlx::query(
        "INSERT INTO run_approvals (run_id, call_id, tool, arguments, annotations, why, parent_call_id, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (run_id, call_id) DO UPDATE SET tool = EXCLUDED.tool,
             arguments = EXCLUDED.arguments, annotations = EXCLUDED.annotations,
             why = EXCLUDED.why, parent_call_id = EXCLUDED.parent_call_id,
             status = 'pending', reason = NULL, remember = false, created_at = now(),
             expires_at = EXCLUDED.expires_at, answered_at = NULL, answered_by = NULL
         WHERE run_approvals.status <> 'pending'
           AND (run_approvals.tool <> EXCLUDED.tool OR run_approvals.arguments <> EXCLUDED.arguments)",
    )
    .bind(a.run_id)
    .bind(a.call_id)
    .bind(a.tool)
    .bind(a.arguments)
    .bind(a.annotations)
    .bind(a.why)
    .bind(a.parent_call_id)
    .bind(a.expires_at)
    .execute(&mut *tx)
    .await?;
    let row = approval_in(&mut tx, a.run_id, a.call_id)
        .await?
        .ok_or_else(|| StoreError::Invalid("the approval just recorded is not there".into()))?;
    tx.commit().await?;
    Ok(row)
}

/// One approval, if `scope` may see it.
pub async fn approval(
    db: &Db,
    scope: Scope,
    run_id: Uuid,
    call_id: &str,
) -> Result<Option<ApprovalRow>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let row = approval_in(&mut tx, run_id, call_id).await?;
    tx.commit().await?;
    Ok(row)
}

async fn approval_in(
    tx: &mut crate::ScopedTx,
    run_id: Uuid,
    call_id: &str,
) -> Result<Option<ApprovalRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM run_approvals WHERE run_id = $1 AND call_id = $2"
    ))
    .bind(run_id)
    .bind(call_id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// A run's approvals still waiting, oldest first.
pub async fn pending(db: &Db, scope: Scope, run_id: Uuid) -> Result<Vec<ApprovalRow>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let rows = sqlx::query_as(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM run_approvals WHERE run_id = $1 AND status = 'pending'
         ORDER BY created_at, call_id"
    ))
    .bind(run_id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Every approval the run asked for, in the order asked.
pub async fn approvals_of(db: &Db, run_id: Uuid) -> Result<Vec<ApprovalRow>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let rows = sqlx::query_as(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM run_approvals WHERE run_id = $1
         ORDER BY created_at, call_id"
    ))
    .bind(run_id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// A person's answer to one approval.
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    pub approved: bool,
    pub reason: Option<&'a str>,
    pub remember: bool,
    pub by: Uuid,
}

/// Settles a pending, unexpired approval with `answer` (acting as `scope`,
/// so only those who may see the run can) and announces it. `Ok(None)`: no
/// such approval for `scope`; a row that is not pending any more comes back
/// as it is, unchanged.
pub async fn answer(
    db: &Db,
    scope: Scope,
    run_id: Uuid,
    call_id: &str,
    answer: &Answer<'_>,
) -> Result<Option<(ApprovalRow, bool)>, StoreError> {
    let mut tx = db.begin(scope).await?;
    let status = if answer.approved {
        ApprovalStatus::Approved
    } else {
        ApprovalStatus::Denied
    };
    let settled: Option<ApprovalRow> = sqlx::query_as(&format!(
        "UPDATE run_approvals SET status = $3, reason = $4, remember = $5, answered_at = now(), answered_by = $6
         WHERE run_id = $1 AND call_id = $2 AND status = 'pending' AND expires_at > now()
         RETURNING {APPROVAL_COLUMNS}"
    ))
    .bind(run_id)
    .bind(call_id)
    .bind(status)
    .bind(answer.reason)
    .bind(answer.approved && answer.remember)
    .bind(answer.by)
    .fetch_optional(&mut *tx)
    .await?;
    let result = match settled {
        Some(row) => {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(RUNS_CHANNEL)
                .bind(format!("a:{run_id}:{call_id}"))
                .execute(&mut *tx)
                .await?;
            Some((row, true))
        }
        None => approval_in(&mut tx, run_id, call_id)
            .await?
            .map(|row| (row, false)),
    };
    tx.commit().await?;
    Ok(result)
}

/// Settles a pending approval as expired (or stopped, by `reason`): the
/// row as it stands afterwards, which an answer that came first decides,
/// and whether this call settled it.
pub async fn expire(
    db: &Db,
    owner: Uuid,
    run_id: Uuid,
    call_id: &str,
    reason: &str,
) -> Result<Option<(ApprovalRow, bool)>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    // Only by the replica that holds the run: one whose run was taken over
    // leaves its approvals to the new owner.
    let settled: Option<ApprovalRow> = sqlx::query_as(&format!(
        "UPDATE run_approvals SET status = 'expired', reason = $3, answered_at = now()
         WHERE run_id = $1 AND call_id = $2 AND status = 'pending'
           AND EXISTS (SELECT 1 FROM runs WHERE runs.id = $1
                       AND runs.owner IS NOT DISTINCT FROM $4)
         RETURNING {APPROVAL_COLUMNS}"
    ))
    .bind(run_id)
    .bind(call_id)
    .bind(reason)
    .bind(owner)
    .fetch_optional(&mut *tx)
    .await?;
    let row = match settled {
        Some(row) => Some((row, true)),
        None => approval_in(&mut tx, run_id, call_id)
            .await?
            .map(|row| (row, false)),
    };
    tx.commit().await?;
    Ok(row)
}

/// Whether `user` approved `tool`, asked for the same reason `why`, with
/// "remember" in a run of the conversation (for fetch_web_page the reason
/// names the host, so a remembered approval covers that host only).
pub async fn remembered(
    db: &Db,
    user_id: Uuid,
    conversation_id: Uuid,
    tool: &str,
    why: &str,
) -> Result<bool, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let found: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM run_approvals a JOIN runs r ON r.id = a.run_id
         WHERE r.conversation_id = $1 AND r.user_id = $2 AND a.tool = $3 AND a.why = $4
           AND a.status = 'approved' AND a.remember)",
    )
    .bind(conversation_id)
    .bind(user_id)
    .bind(tool)
    .bind(why)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(found)
}

/// Why an approval whose call (or run) was stopped has no answer.
pub const STOPPED_BEFORE_ANSWER: &str = "the call was stopped before an answer";

/// Settles what a run that ended still waited for as expired; the rows it
/// settled.
pub async fn settle_pending(
    db: &Db,
    owner: Uuid,
    run_id: Uuid,
) -> Result<Vec<ApprovalRow>, StoreError> {
    let mut tx = db.begin(Scope::System).await?;
    let rows = sqlx::query_as(&format!(
        "UPDATE run_approvals SET status = 'expired', reason = $2, answered_at = now()
         WHERE run_id = $1 AND status = 'pending'
           AND EXISTS (SELECT 1 FROM runs WHERE runs.id = $1
                       AND runs.owner IS NOT DISTINCT FROM $3)
         RETURNING {APPROVAL_COLUMNS}"
    ))
    .bind(run_id)
    .bind(STOPPED_BEFORE_ANSWER)
    .bind(owner)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}
