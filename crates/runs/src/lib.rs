//! Chat turns as runs. A run's task is owned by [`Runs`], not by the HTTP
//! response that started it: its events are numbered, kept in a small ring
//! for readers on this replica and recorded in PostgreSQL (in order, in
//! batches) for readers anywhere; a client that goes away leaves the run
//! going for a grace period; a stop or an approval answered on any replica
//! reaches the replica running it through `NOTIFY data_plane_runs`; and a
//! run whose replica died is taken over by another, which continues it
//! from its recorded events (`takeover`).

mod approver;
mod call;
mod event;
mod live;
mod reader;
mod recorder;
mod takeover;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use data_plane_agent::{Agent, AgentEvent, ChatRequest};
use data_plane_registry::{Registry, ToolContext, ToolEvent, ToolResult};
use data_plane_store::listen::{Heard, Subscription};
use data_plane_store::runs::{self as store, RUNS_CHANNEL};
use data_plane_store::{Db, Scope, StoreError};
use futures::Stream;
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

pub use data_plane_store::runs::{ApprovalRow, ApprovalStatus, RunRow, RunStatus};
pub use event::{Done, DoneReason, Event, Resumed, to_json};
pub use takeover::{ResumedTurn, Resumer};

use live::LiveRun;

/// How a deployment runs its chat turns (docs/runs.md).
#[derive(Debug, Clone)]
pub struct RunsConfig {
    /// How long a run goes on after its last client went away.
    pub grace: Duration,
    /// How long an approval waits for an answer before it counts as denied.
    pub approval_timeout: Duration,
    /// Events one run may send; the run is stopped when it reaches them.
    pub max_events: u64,
    /// How long a finished run's events stay in the database.
    pub retention: Duration,
    /// How long a run's replica may go without renewing its hold on the
    /// run before another replica takes it over (it renews every third of
    /// this).
    pub lease: Duration,
}

impl Default for RunsConfig {
    fn default() -> Self {
        RunsConfig {
            grace: Duration::from_secs(30),
            approval_timeout: Duration::from_secs(600),
            max_events: 20_000,
            retention: Duration::from_secs(7 * 24 * 3600),
            lease: Duration::from_secs(10),
        }
    }
}

/// A running run whose row was not touched for this long (or for three
/// leases, when that is longer: [`Inner::lost_after`]) is lost: its replica
/// died and no other could take it over.
const LOST_AFTER: Duration = Duration::from_secs(60);
/// How often a replica looks for runs whose lease ran out (or every third
/// of the lease, when that is shorter).
const CLAIM_EVERY: Duration = Duration::from_secs(1);
/// How often finished runs past their retention are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// One event as a run sent it: its number (the SSE id) and the event,
/// shared by the ring, the recorder and every reader.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    pub seq: i64,
    pub event: Arc<Event>,
}

impl RunEvent {
    /// `done` and `error` end a run's stream.
    pub fn is_last(&self) -> bool {
        self.event.is_last()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run's task failed: {0}")]
    Task(String),
}

/// A run just started, watched until `watching` is dropped: a request
/// cancelled before it read the run's events starts its grace period.
#[derive(Debug)]
pub struct Started {
    pub run_id: Uuid,
    pub conversation_id: Uuid,
    pub watching: Watching,
}

/// Counts as a reader of a run while held (see [`Started`]).
// The guard is held for what its Drop does (the grace period), never read.
pub struct Watching(#[allow(dead_code)] live::WatchGuard);

impl std::fmt::Debug for Watching {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watching")
    }
}

/// Every run of this replica, and the way to reach others'.
#[derive(Clone)]
pub struct Runs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct Inner {
    db: Db,
    config: RunsConfig,
    /// This replica, as the owner of the runs it runs.
    replica: Uuid,
    /// Continues chat runs taken over from a replica that died; without
    /// one they are marked lost.
    resumer: OnceLock<Arc<dyn Resumer>>,
    /// Runs this replica is running.
    live: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// Readers here of runs another replica runs, woken when that replica
    /// records new events.
    followed: Mutex<HashMap<Uuid, watch::Sender<i64>>>,
    recorder: mpsc::Sender<recorder::Item>,
    /// The replica is stopping: it takes over no run.
    draining: std::sync::atomic::AtomicBool,
    /// The replica is not ready yet (its keyword index catches up): it
    /// takes over no run until it is.
    claims_paused: std::sync::atomic::AtomicBool,
    /// Cancelled when the last handle goes: ends the listener and upkeep.
    closed: tokio_util::sync::CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Runs {
    /// Starts the recorder, the listener and the upkeep; must run inside
    /// the Tokio runtime.
    pub fn start(db: Db, config: RunsConfig) -> Runs {
        let (tx, rx) = mpsc::channel(recorder::QUEUE);
        let inner = Arc::new(Inner {
            db: db.clone(),
            config,
            replica: Uuid::now_v7(),
            resumer: OnceLock::new(),
            live: Mutex::new(HashMap::new()),
            followed: Mutex::new(HashMap::new()),
            recorder: tx,
            draining: std::sync::atomic::AtomicBool::new(false),
            claims_paused: std::sync::atomic::AtomicBool::new(false),
            closed: tokio_util::sync::CancellationToken::new(),
        });
        tokio::spawn(recorder::run(db.clone(), inner.replica, rx));
        for task in [listen as fn(_) -> _, upkeep, purge] {
            let weak = Arc::downgrade(&inner);
            let closed = inner.closed.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = closed.cancelled() => {}
                    () = task(weak) => {}
                }
            });
        }
        Runs { inner }
    }

    pub fn config(&self) -> &RunsConfig {
        &self.inner.config
    }

    pub fn db(&self) -> &Db {
        &self.inner.db
    }

    /// How this replica continues the chat runs it takes over; set once
    /// (a second call changes nothing).
    pub fn resume_with(&self, resumer: Arc<dyn Resumer>) {
        let _ = self.inner.resumer.set(resumer);
    }

    /// Records a new run and starts it: `agent` runs `request` under `ctx`
    /// (with this run as the approver), holding `hold` until it ends. The
    /// run's first event is `run` (its id and conversation). `saved` is
    /// kept with the run for the [`Resumer`] of a replica that takes it
    /// over, should this one die.
    pub async fn begin(
        &self,
        agent: Arc<Agent>,
        request: ChatRequest,
        ctx: ToolContext,
        conversation_id: Option<Uuid>,
        saved: serde_json::Value,
        hold: Box<dyn Send + Sync>,
    ) -> Result<Started, RunsError> {
        let inner = self.inner.clone();
        // Its own task: a request cancelled half-way through must not leave
        // a run recorded and never driven.
        tokio::spawn(async move {
            let (live, run_id, conversation_id) =
                opened(&inner, &ctx, conversation_id, None, Some(&saved)).await?;
            let watching = Watching(live.watch().with_grace(inner.config.grace));
            tokio::spawn(live::drive(
                inner.clone(),
                live,
                agent,
                request,
                ctx,
                hold,
                None,
            ));
            Ok(Started {
                run_id,
                conversation_id,
                watching,
            })
        })
        .await
        .unwrap_or_else(|e| Err(RunsError::Task(e.to_string())))
    }

    /// Records a run that is one call of `tool` (an MCP task) and starts
    /// it: the call goes through `registry`'s pipeline under `ctx`, which
    /// names its call id, holding `hold` until it ends. It runs whether
    /// anyone reads it or not; only a stop (from any replica) or its end
    /// ends it. Answers once the run is recorded, so that whoever asks
    /// for it next, on any replica, finds it. The call's `ended` is handed its result once it returned (not when
    /// the run was stopped first).
    pub async fn begin_call(
        &self,
        registry: Arc<Registry>,
        call: Call,
        ctx: ToolContext,
        hold: Box<dyn Send + Sync>,
    ) -> Result<Uuid, RunsError> {
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let (live, run_id, _) = opened(&inner, &ctx, None, Some(&call.tool), None).await?;
            tokio::spawn(call::drive(inner.clone(), live, registry, call, ctx, hold));
            Ok(run_id)
        })
        .await
        .unwrap_or_else(|e| Err(RunsError::Task(e.to_string())))
    }

    /// A run that is one tool call, as far as `scope` may see it: its row
    /// and, once it ended, how (its call's result, or the run's error).
    /// `None` for a run `scope` may not see, and for a chat turn.
    pub async fn call(&self, scope: Scope, run_id: Uuid) -> Result<Option<CallRun>, RunsError> {
        let db = &self.inner.db;
        let Some(row) = store::get(db, scope, run_id)
            .await?
            .filter(|r| r.tool.is_some())
        else {
            return Ok(None);
        };
        let outcome = match row.status {
            RunStatus::Running => None,
            RunStatus::Done => {
                let data = store::last_event_of(db, scope, run_id, "tool_result").await?;
                let result = data.map(|data| Event::from_stored("tool_result", data));
                match result {
                    Some(Event::Agent(AgentEvent::Tool(ToolEvent::ToolResult {
                        result, ..
                    }))) => Some(CallOutcome::Result(Box::new(result))),
                    // The call ended, but its result could not be recorded
                    // (the recorder's placeholder stands in its place).
                    _ => Some(CallOutcome::Failed {
                        code: "result_unrecorded".into(),
                        message: "the task's call ended, but its result could not be recorded"
                            .into(),
                    }),
                }
            }
            RunStatus::Error => {
                let data = store::last_event_of(db, scope, run_id, "error").await?;
                let (code, message) = match data.map(|d| Event::from_stored("error", d)) {
                    Some(Event::Error { code, message }) => (code, message),
                    _ => ("internal".into(), "the task failed".into()),
                };
                Some(CallOutcome::Failed { code, message })
            }
            RunStatus::Stopped | RunStatus::Abandoned => Some(CallOutcome::Stopped),
            RunStatus::Lost => Some(CallOutcome::Failed {
                code: "run_lost".into(),
                message: "the server running this task stopped answering; its call did not finish"
                    .into(),
            }),
        };
        Ok(Some(CallRun { row, outcome }))
    }

    /// The run's events numbered after `after`, then its new ones as they
    /// come, until its last; from this replica's memory while it runs
    /// here, else from the table. While the stream is held, the run counts
    /// as watched (no grace period starts). The caller has checked that
    /// whoever reads may.
    pub fn events(
        &self,
        run_id: Uuid,
        after: i64,
    ) -> impl Stream<Item = RunEvent> + Send + 'static {
        reader::events(self.inner.clone(), run_id, after.max(0))
    }

    /// Stops the run at once (model request, tools, sub-agents) and
    /// answers once it has stopped, with the status it ended with. A run
    /// another replica runs is asked through NOTIFY; one whose replica is
    /// gone is marked lost.
    pub async fn stop(&self, run_id: Uuid) -> Result<RunStatus, RunsError> {
        let inner = &self.inner;
        let local = lock(&inner.live).get(&run_id).cloned();
        if let Some(live) = local {
            let mut ended = live.ended.subscribe();
            live.stop(RunStatus::Stopped);
            if let Ok(status) =
                tokio::time::timeout(Duration::from_secs(10), ended.wait_for(|s| s.is_some())).await
                && let Ok(status) = status
                && let Some(status) = *status
            {
                return Ok(status);
            }
        } else {
            store::notify(&inner.db, &format!("s:{run_id}")).await?;
        }
        // Wait for the row to say it ended (the other replica's answer).
        // A run whose replica died is taken over within its lease: the
        // stop is said again until a replica runs it and hears it.
        let until = tokio::time::Instant::now() + Duration::from_secs(10) + inner.config.lease;
        let mut said = tokio::time::Instant::now();
        loop {
            let Some(row) = store::get(&inner.db, data_plane_store::Scope::System, run_id).await?
            else {
                return Ok(RunStatus::Stopped);
            };
            if row.status != RunStatus::Running {
                return Ok(row.status);
            }
            if store::mark_lost(&inner.db, run_id, inner.lost_after()).await? {
                return Ok(RunStatus::Lost);
            }
            if tokio::time::Instant::now() >= until {
                return Ok(RunStatus::Running);
            }
            if said.elapsed() >= Duration::from_secs(1) {
                said = tokio::time::Instant::now();
                if let Some(live) = inner.live(run_id) {
                    // Taken over by this replica meanwhile.
                    live.stop(RunStatus::Stopped);
                } else {
                    store::notify(&inner.db, &format!("s:{run_id}")).await?;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Lets this replica's tool-call runs (tasks, which no stream keeps
    /// open) finish for up to `within`, then stops those still going, and
    /// answers once each has ended: what a replica does before it exits,
    /// so that no task is left to be found lost.
    pub async fn finish_calls(&self, within: Duration) {
        let calls = || -> Vec<Arc<LiveRun>> {
            lock(&self.inner.live)
                .values()
                .filter(|run| run.detached)
                .cloned()
                .collect()
        };
        let until = tokio::time::Instant::now() + within;
        for run in calls() {
            let mut ended = run.ended.subscribe();
            let _ = tokio::time::timeout_at(until, ended.wait_for(|s| s.is_some())).await;
        }
        let left = calls();
        if !left.is_empty() {
            tracing::warn!(
                tasks = left.len(),
                "tasks still running at shutdown are stopped"
            );
        }
        for run in left {
            if let Err(e) = self.stop(run.id).await {
                tracing::warn!(run_id = %run.id, error = %e, "a task could not be stopped at shutdown");
            }
        }
    }

    /// The replica is stopping: from now on it takes over no run of
    /// another (it would only have to hand it on).
    pub fn drain(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    /// While `paused`, this replica takes over no run of another: one whose
    /// keyword index is still catching up would run their tools on a
    /// stale index.
    pub fn pause_claims(&self, paused: bool) {
        self.inner.claims_paused.store(paused, Ordering::SeqCst);
    }

    /// Whether [`Runs::drain`] was called.
    pub fn draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Hands the chat runs still going here to the other replicas, at
    /// once: what a stopping replica does with the runs that outlast its
    /// drain. Each run's agent stops where it is (nothing more of it is
    /// sent), what it sent is recorded (waiting up to `within`), and its
    /// lease ends now, so another replica takes it over at its next claim
    /// (within a second) as after a death, without waiting out the lease.
    /// Tasks are left to [`Runs::finish_calls`]. How many runs it let go.
    pub async fn hand_over(&self, within: Duration) -> usize {
        // Runs already ending (stopped, or their agent returned) end here.
        let runs: Vec<Arc<LiveRun>> = lock(&self.inner.live)
            .values()
            .filter(|run| !run.detached && run.try_hand_off())
            .cloned()
            .collect();
        if runs.is_empty() {
            return 0;
        }
        let until = tokio::time::Instant::now() + within;
        for run in &runs {
            if !run.all_recorded(until).await {
                tracing::warn!(run_id = %run.id, "not every event of a run handed over was recorded in time; the replica that takes it over goes on from its last checkpoint");
            }
        }
        let ids: Vec<Uuid> = runs.iter().map(|run| run.id).collect();
        // No longer renewed here.
        lock(&self.inner.live).retain(|id, _| !ids.contains(id));
        match store::release(
            &self.inner.db,
            self.inner.replica,
            &ids,
            self.inner.config.lease,
        )
        .await
        {
            Ok(n) => {
                tracing::warn!(
                    runs = n,
                    "runs still going at shutdown were handed to the other replicas"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, runs = ids.len(), "cannot end the lease of the runs handed over; another replica takes them over once the lease runs out");
            }
        }
        runs.len()
    }

    /// Runs running on this replica now, and their calls waiting for a
    /// person's approval.
    pub fn load_here(&self) -> (usize, usize) {
        let live = lock(&self.inner.live);
        let waiting = live.values().map(|run| *run.waiting.borrow()).sum();
        (live.len(), waiting)
    }
}

/// Records a new run for `ctx`'s caller and space, keeps it among this
/// replica's, and sends its first event, `run`: (the run, its id, its
/// conversation).
async fn opened(
    inner: &Arc<Inner>,
    ctx: &ToolContext,
    conversation_id: Option<Uuid>,
    tool: Option<&str>,
    saved: Option<&serde_json::Value>,
) -> Result<(Arc<LiveRun>, Uuid, Uuid), RunsError> {
    let run_id = Uuid::now_v7();
    let conversation_id = conversation_id.unwrap_or(run_id);
    let new = store::NewRun {
        id: run_id,
        user_id: ctx.user_id,
        space_id: ctx.space_id,
        conversation_id,
        tool,
        owner: inner.replica,
        request: saved,
    };
    store::create(&inner.db, &new).await?;
    let live = LiveRun::new(run_id, ctx.user_id, conversation_id, tool.is_some());
    lock(&inner.live).insert(run_id, live.clone());
    live.emit(
        inner,
        Event::Run {
            run_id,
            conversation_id,
        },
    )
    .await;
    Ok((live, run_id, conversation_id))
}

/// The call a run that is one tool call makes (see [`Runs::begin_call`]).
pub struct Call {
    pub tool: String,
    pub args: serde_json::Value,
    /// Handed the call's result once it returned.
    pub ended: Box<dyn FnOnce(&ToolResult) + Send>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

/// A run that is one tool call (see [`Runs::call`]).
#[derive(Debug, Clone)]
pub struct CallRun {
    pub row: RunRow,
    /// How it ended; `None` while it runs.
    pub outcome: Option<CallOutcome>,
}

/// How a run that is one tool call ended.
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The call returned this result (a success or the tool's failure).
    Result(Box<ToolResult>),
    /// It was stopped before the call returned.
    Stopped,
    /// The run itself failed: its event limit, or its replica died.
    Failed { code: String, message: String },
}

/// Hears what other replicas (and this one's endpoints) announce.
fn listen(inner: std::sync::Weak<Inner>) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(listen_loop(inner))
}

async fn listen_loop(inner: std::sync::Weak<Inner>) {
    let Some(db) = inner.upgrade().map(|i| i.db.clone()) else {
        return;
    };
    let mut subscription = Subscription::new(&db, RUNS_CHANNEL);
    drop(db);
    loop {
        let heard = subscription.next().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match heard {
            // What was missed while nobody listened: wake every waiter to look.
            Heard::Missed => inner.wake_all(),
            Heard::Notified(payload) => inner.dispatch(&payload),
        }
    }
}

impl Inner {
    fn dispatch(&self, payload: &str) {
        let mut parts = payload.splitn(3, ':');
        let (Some(what), Some(run)) = (parts.next(), parts.next()) else {
            return;
        };
        let Ok(run_id) = run.parse::<Uuid>() else {
            return;
        };
        match what {
            "e" => {
                let seq = parts
                    .next()
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(0);
                if let Some(tx) = lock(&self.followed).get(&run_id) {
                    tx.send_if_modified(|last| {
                        let newer = seq > *last;
                        if newer {
                            *last = seq;
                        }
                        newer
                    });
                }
            }
            "s" => {
                if let Some(live) = self.live(run_id) {
                    live.stop(RunStatus::Stopped);
                }
            }
            "a" => {
                if let (Some(live), Some(call)) = (self.live(run_id), parts.next()) {
                    live.answered(call);
                }
            }
            "w" => {
                if let Some(live) = self.live(run_id) {
                    live.watched_elsewhere();
                }
            }
            _ => {}
        }
    }

    /// How long a running run may go untouched before it counts as lost:
    /// well past the lease, so that another replica had every chance to
    /// take it over.
    fn lost_after(&self) -> Duration {
        LOST_AFTER.max(self.config.lease * 3)
    }

    fn live(&self, run_id: Uuid) -> Option<Arc<LiveRun>> {
        lock(&self.live).get(&run_id).cloned()
    }

    fn wake_all(&self) {
        for tx in lock(&self.followed).values() {
            tx.send_modify(|_| {});
        }
        for live in lock(&self.live).values() {
            live.answered_all();
        }
    }

    /// A wake-up for readers here of a run another replica runs.
    fn follow(&self, run_id: Uuid) -> watch::Receiver<i64> {
        lock(&self.followed)
            .entry(run_id)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }
}

/// Renews this replica's hold on its runs (letting go of any another
/// replica took over while this one stalled), takes over runs whose
/// replica stopped renewing, and forgets followers that left.
fn upkeep(inner: std::sync::Weak<Inner>) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let lease = inner
            .upgrade()
            .map_or(Duration::from_secs(10), |i| i.config.lease);
        let renew_every = (lease / 3).max(Duration::from_millis(200));
        // Looking for runs to take over is one indexed UPDATE: done more
        // often than renewing, a dead replica's runs go on at most a
        // second after their lease ran out.
        let claim_every = renew_every.min(CLAIM_EVERY);
        let mut tick = tokio::time::interval(claim_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed: Option<tokio::time::Instant> = None;
        loop {
            tick.tick().await;
            let Some(inner) = inner.upgrade() else {
                return;
            };
            if renewed.is_none_or(|at| at.elapsed() + claim_every / 2 >= renew_every) {
                renewed = Some(tokio::time::Instant::now());
                renew(&inner).await;
                lock(&inner.followed).retain(|_, tx| tx.receiver_count() > 0);
            }
            takeover::claim(&inner).await;
        }
    })
}

/// Renews this replica's hold on its runs, and lets go of those another
/// replica took over meanwhile.
async fn renew(inner: &Inner) {
    let ids: Vec<Uuid> = lock(&inner.live).keys().copied().collect();
    match store::touch(&inner.db, inner.replica, &ids).await {
        Ok(taken) => {
            for id in taken {
                if let Some(live) = inner.live(id) {
                    tracing::warn!(run_id = %id, "another replica took this run over while this one did not answer; letting it go");
                    live.hand_off();
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, runs = ids.len(), "cannot renew this replica's hold on its runs")
        }
    }
}

/// Deletes runs past their retention, hourly (apart from the touches, so a
/// long delete never makes this replica's runs look lost).
fn purge(inner: std::sync::Weak<Inner>) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let mut tick = tokio::time::interval(PURGE_EVERY);
        loop {
            tick.tick().await;
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let retention =
                chrono::Duration::from_std(inner.config.retention).unwrap_or(chrono::Duration::MAX);
            let before = chrono::Utc::now()
                .checked_sub_signed(retention)
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
            match store::purge(&inner.db, before).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(runs = n, "deleted runs past their retention"),
                Err(e) => tracing::warn!(error = %e, "cannot delete runs past their retention"),
            }
        }
    })
}
