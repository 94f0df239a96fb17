//! A run on the replica running it: its numbered events (a ring of the
//! latest, the rest in the table), who watches it, what stops it, the
//! approvals it waits for; and the task that drives the agent.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use data_plane_agent::{
    Agent, AgentError, AgentEvent, ChatRequest, Checkpoint, EventSink, Resume, ResumePlan,
};
use data_plane_registry::ToolContext;
use data_plane_store::runs::{self as store, RunStatus};
use futures::FutureExt;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::approver::RunApprover;
use crate::event::{Done, DoneReason, Event};
use crate::recorder::{Item, What};
use crate::{Inner, RunEvent, lock};

/// Events kept in memory after they are recorded, for readers here that
/// are a little behind; older ones are read from the table.
const RING: usize = 512;

/// How long a run counts as watched after another replica said a client
/// there reads it (they say so every 10 s); its grace period starts after.
const WATCHED_ELSEWHERE_FOR: Duration = Duration::from_secs(15);

/// How long readers here wait for the table to hold the run's last event
/// before they are sent it anyway.
const LAST_EVENT_WAIT: Duration = Duration::from_secs(10);

/// How far a run's events may run ahead of the table. A replica that takes
/// a run over numbers its events from this far after the last recorded
/// one, so that no number a reader saw from the replica that died (sent,
/// never recorded) is ever used again.
pub(crate) const AHEAD: i64 = 1024;

pub(crate) struct LiveRun {
    pub id: Uuid,
    pub user_id: Uuid,
    pub conversation_id: Uuid,
    /// Runs whether anyone reads it or not (one tool call as a task): no
    /// grace period ever stops it.
    pub detached: bool,
    /// Cancels the agent: stop, abandonment, the event limit.
    pub cancel: CancellationToken,
    /// Why the run was cancelled, set before cancelling.
    end_reason: Mutex<Option<RunStatus>>,
    log: Mutex<Log>,
    /// Numbers events and hands them to the recorder in order.
    emitting: tokio::sync::Mutex<()>,
    /// The last event's number, for readers here.
    pub latest: watch::Sender<i64>,
    /// The last number recorded in the table.
    pub recorded: watch::Sender<i64>,
    /// The status the run ended with, once it has (and its last event is
    /// recorded).
    pub ended: watch::Sender<Option<RunStatus>>,
    watchers: AtomicUsize,
    /// Counts the times the last reader here went; a grace timer started
    /// for an earlier time has nothing to decide.
    left: AtomicU64,
    watched_until: Mutex<Option<tokio::time::Instant>>,
    /// Approvals waiting here, by call id.
    approvals: Mutex<HashMap<String, Arc<Notify>>>,
    /// (tool, why) approved with "remember" in this run.
    pub remembered: Mutex<HashSet<(String, String)>>,
    /// How many calls wait for a person (the deadline stands still).
    pub waiting: watch::Sender<usize>,
    /// Approvals of stopped calls being settled in the background; the
    /// run's last event waits for them.
    pub settling: watch::Sender<usize>,
    /// Another replica took the run over: this one lets it go without
    /// ending it or settling its approvals.
    handed_off: std::sync::atomic::AtomicBool,
    /// Approvals whose request readers have had (recorded by the replica
    /// this run was taken over from) and whose answer they have not: asked
    /// again, such a call waits without a second request.
    pub announced: Mutex<HashSet<String>>,
    /// Checkpoints handed to the recorder, and how many it has written.
    checkpoints: AtomicU64,
    checkpointed: watch::Sender<u64>,
}

#[derive(Default)]
struct Log {
    events: VecDeque<RunEvent>,
    next: i64,
    /// Events the run has sent (over every replica that ran it): what its
    /// limit counts.
    count: u64,
    recorded: i64,
    /// Readers here see events up to this number: the last event waits
    /// until the table says how the run ended.
    visible: i64,
    /// No more events: the last one was sent.
    closed: bool,
}

/// What readers here find for "after N".
pub(crate) enum Found {
    Events(Vec<RunEvent>),
    /// Older than the ring: read them from the table.
    InTable,
    Nothing,
}

impl LiveRun {
    pub fn new(id: Uuid, user_id: Uuid, conversation_id: Uuid, detached: bool) -> Arc<LiveRun> {
        Self::numbered_from(id, user_id, conversation_id, detached, 1, 0)
    }

    /// A run taken over: its events are numbered from `next` (everything
    /// before counts as recorded), `count` sent already.
    pub fn numbered_from(
        id: Uuid,
        user_id: Uuid,
        conversation_id: Uuid,
        detached: bool,
        next: i64,
        count: u64,
    ) -> Arc<LiveRun> {
        Arc::new(LiveRun {
            id,
            user_id,
            conversation_id,
            detached,
            cancel: CancellationToken::new(),
            end_reason: Mutex::new(None),
            log: Mutex::new(Log {
                next,
                count,
                recorded: next - 1,
                visible: next - 1,
                ..Log::default()
            }),
            emitting: tokio::sync::Mutex::new(()),
            latest: watch::channel(next - 1).0,
            recorded: watch::channel(next - 1).0,
            ended: watch::channel(None).0,
            watchers: AtomicUsize::new(0),
            left: AtomicU64::new(0),
            watched_until: Mutex::new(None),
            approvals: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashSet::new()),
            waiting: watch::channel(0).0,
            settling: watch::channel(0).0,
            handed_off: std::sync::atomic::AtomicBool::new(false),
            announced: Mutex::new(HashSet::new()),
            checkpoints: AtomicU64::new(0),
            checkpointed: watch::channel(0).0,
        })
    }

    /// Lets the run go: another replica took it over. Its agent is
    /// stopped; nothing more of it is recorded, and readers here go on
    /// from the table.
    pub fn hand_off(&self) {
        self.handed_off.store(true, Ordering::SeqCst);
        self.stop(RunStatus::Running);
    }

    /// Lets the run go to another replica (a stopping replica's hand-over),
    /// unless it is ending already: `false` for a run that was stopped, or
    /// whose agent has returned ([`LiveRun::finishing`]), so that a run
    /// that ended is never handed over to be continued.
    pub fn try_hand_off(&self) -> bool {
        {
            let mut end = lock(&self.end_reason);
            if end.is_some() || lock(&self.log).closed {
                return false;
            }
            *end = Some(RunStatus::Running);
            self.handed_off.store(true, Ordering::SeqCst);
        }
        self.cancel.cancel();
        true
    }

    /// The run's agent has returned and the run now ends as `status`;
    /// `false` when it was handed off first (another replica ends it).
    pub fn finishing(&self, status: RunStatus) -> bool {
        let mut end = lock(&self.end_reason);
        if self.handed_off() {
            return false;
        }
        end.get_or_insert(status);
        true
    }

    pub fn handed_off(&self) -> bool {
        self.handed_off.load(Ordering::SeqCst)
    }

    /// Numbers and sends one event: to readers here at once, to the
    /// recorder in order (waiting while it is far behind). `false` when
    /// the run may send no more (its limit, or it has ended).
    pub async fn emit(self: &Arc<Self>, inner: &Inner, event: Event) -> bool {
        self.push(inner, event, None).await.is_some()
    }

    /// Hands the run's last event, saying how it ended, to the recorder,
    /// which records both in one transaction; readers here see it once
    /// [`LiveRun::publish_last`] is called. Its number, unless the run had
    /// ended already.
    pub async fn emit_last(
        self: &Arc<Self>,
        inner: &Inner,
        event: Event,
        status: RunStatus,
    ) -> Option<i64> {
        self.push(inner, event, Some(status)).await
    }

    /// Records where the agent stands, after the events sent so far (in
    /// their order: the recorder writes both in one transaction), and
    /// answers once it is written, with the events before it: what the
    /// agent does next may have effects, and a replica that takes the run
    /// over must know it may have. `false` when the run may send no more.
    pub async fn checkpoint(self: &Arc<Self>, inner: &Inner, at: &Checkpoint) -> bool {
        let n = {
            let _order = self.emitting.lock().await;
            let after = {
                let log = lock(&self.log);
                if log.closed || self.handed_off() {
                    return false;
                }
                log.next - 1
            };
            let n = self.checkpoints.fetch_add(1, Ordering::SeqCst) + 1;
            let data = crate::event::to_json(at);
            let item = Item {
                run: self.clone(),
                what: What::Checkpoint { after, data, n },
            };
            if inner.recorder.send(item).await.is_err() {
                tracing::error!(run_id = %self.id, "the run recorder is gone; checkpoints are no longer recorded");
                return true;
            }
            n
        };
        let mut written = self.checkpointed.subscribe();
        let _ = written.wait_for(|w| *w >= n).await;
        !self.handed_off()
    }

    /// The recorder wrote the run's checkpoints up to the `n`th.
    pub fn mark_checkpointed(&self, n: u64) {
        raise(&self.checkpointed, n);
    }

    /// Shows readers here the last event.
    pub fn publish_last(&self, seq: i64) {
        lock(&self.log).visible = seq;
        self.latest.send_replace(seq);
    }

    async fn push(
        self: &Arc<Self>,
        inner: &Inner,
        event: Event,
        ends: Option<RunStatus>,
    ) -> Option<i64> {
        let last = ends.is_some();
        let _order = self.emitting.lock().await;
        // Never further ahead of the table than a takeover skips (waiting
        // only when it would be).
        let (next, ahead) = {
            let log = lock(&self.log);
            (log.next, log.next - log.recorded)
        };
        if ahead > AHEAD {
            let mut recorded = self.recorded.subscribe();
            let _ = recorded.wait_for(|r| next - *r <= AHEAD).await;
        }
        let event = {
            let mut log = lock(&self.log);
            if log.closed || self.handed_off() {
                return None;
            }
            let seq = log.next;
            log.count += 1;
            if !last && log.count > inner.config.max_events {
                drop(log);
                if self.stop(RunStatus::Error) {
                    tracing::warn!(run_id = %self.id, max = inner.config.max_events, "the run reached its event limit and was stopped");
                }
                return None;
            }
            log.next += 1;
            log.closed = last;
            if !last {
                log.visible = seq;
            }
            let event = RunEvent {
                seq,
                event: Arc::new(event),
            };
            log.events.push_back(event.clone());
            trim(&mut log);
            event
        };
        let seq = event.seq;
        if !last {
            self.latest.send_replace(seq);
        }
        if inner
            .recorder
            .send(Item {
                run: self.clone(),
                what: What::Event { event, ends },
            })
            .await
            .is_err()
        {
            tracing::error!(run_id = %self.id, "the run recorder is gone; events are no longer recorded");
        }
        Some(seq)
    }

    /// Waits until every event sent so far is recorded, or until `until`;
    /// `false` when time ran out first.
    pub async fn all_recorded(&self, until: tokio::time::Instant) -> bool {
        let sent = lock(&self.log).next - 1;
        let mut recorded = self.recorded.subscribe();
        tokio::time::timeout_at(until, recorded.wait_for(|r| *r >= sent))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The recorder wrote events up to `seq`.
    pub fn mark_recorded(&self, seq: i64) {
        {
            let mut log = lock(&self.log);
            log.recorded = log.recorded.max(seq);
            trim(&mut log);
        }
        raise(&self.recorded, seq);
    }

    /// Events after `after`, as far as the ring holds them.
    pub fn after(&self, after: i64) -> Found {
        let log = lock(&self.log);
        let Some(first) = log.events.front().map(|e| e.seq) else {
            return if after + 1 < log.next {
                Found::InTable
            } else {
                Found::Nothing
            };
        };
        if after + 1 < first {
            return Found::InTable;
        }
        let skip = usize::try_from(after + 1 - first).unwrap_or(usize::MAX);
        let events: Vec<_> = log
            .events
            .iter()
            .skip(skip)
            .take_while(|e| e.seq <= log.visible)
            .cloned()
            .collect();
        if events.is_empty() {
            Found::Nothing
        } else {
            Found::Events(events)
        }
    }

    /// Cancels the run for `reason` unless it was cancelled already;
    /// `true` when this call did.
    pub fn stop(&self, reason: RunStatus) -> bool {
        let first = {
            let mut end = lock(&self.end_reason);
            let first = end.is_none();
            if first {
                *end = Some(reason);
            }
            first
        };
        self.cancel.cancel();
        first
    }

    pub(crate) fn end_reason(&self) -> Option<RunStatus> {
        *lock(&self.end_reason)
    }

    pub fn watch(self: &Arc<Self>) -> WatchGuard {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        WatchGuard {
            run: self.clone(),
            grace: None,
        }
    }

    pub fn watched_elsewhere(&self) {
        *lock(&self.watched_until) = Some(tokio::time::Instant::now() + WATCHED_ELSEWHERE_FOR);
    }

    /// A waiter for the answer to `call_id`.
    pub fn waiter(&self, call_id: &str) -> Arc<Notify> {
        lock(&self.approvals)
            .entry(call_id.to_string())
            .or_default()
            .clone()
    }

    pub fn forget_waiter(&self, call_id: &str) {
        lock(&self.approvals).remove(call_id);
    }

    /// Someone answered `call_id` (on any replica).
    pub fn answered(&self, call_id: &str) {
        if let Some(n) = lock(&self.approvals).get(call_id) {
            n.notify_one();
        }
    }

    pub fn answered_all(&self) {
        for n in lock(&self.approvals).values() {
            n.notify_one();
        }
    }
}

/// Raises a count that only grows to `n`, waking its waiters only when it
/// did grow.
fn raise<T: PartialOrd + Copy>(count: &watch::Sender<T>, n: T) {
    count.send_if_modified(|at| {
        let higher = n > *at;
        if higher {
            *at = n;
        }
        higher
    });
}

fn trim(log: &mut Log) {
    while log.events.len() > RING && log.events.front().is_some_and(|e| e.seq <= log.recorded) {
        log.events.pop_front();
    }
}

/// Held by each reader here; when the last goes and the run has not ended,
/// the grace period starts.
pub(crate) struct WatchGuard {
    run: Arc<LiveRun>,
    grace: Option<Duration>,
}

impl WatchGuard {
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let left = self.run.watchers.fetch_sub(1, Ordering::SeqCst) - 1;
        let Some(grace) = self.grace.filter(|_| !self.run.detached) else {
            return;
        };
        if left > 0 || self.run.ended.borrow().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let run = self.run.clone();
        let this_time = run.left.fetch_add(1, Ordering::SeqCst) + 1;
        runtime.spawn(async move {
            let mut until = tokio::time::Instant::now() + grace;
            loop {
                tokio::time::sleep_until(until).await;
                if run.watchers.load(Ordering::SeqCst) > 0
                    || run.ended.borrow().is_some()
                    || run.left.load(Ordering::SeqCst) != this_time
                {
                    // Someone reads it, it ended, or a later leave has its
                    // own timer.
                    return;
                }
                // Read elsewhere: the grace period runs from when that stops.
                match *lock(&run.watched_until) {
                    Some(elsewhere) if elsewhere + grace > tokio::time::Instant::now() => {
                        until = elsewhere + grace;
                        continue;
                    }
                    _ => {}
                }
                if run.stop(RunStatus::Abandoned) {
                    tracing::info!(run_id = %run.id, grace_secs = grace.as_secs_f64(), "nobody watched the run for its grace period; it was stopped");
                }
                return;
            }
        });
    }
}

/// The agent's events, into the run.
struct RunSink {
    inner: Arc<Inner>,
    run: Arc<LiveRun>,
}

#[async_trait]
impl EventSink for RunSink {
    async fn emit(&self, event: AgentEvent) -> bool {
        self.run.emit(&self.inner, Event::Agent(event)).await
    }

    async fn checkpoint(&self, at: &Checkpoint) -> bool {
        self.run.checkpoint(&self.inner, at).await
    }
}

/// Runs the agent to its end (from where `resume` says, for a run taken
/// over), sends the last event, waits for it to be recorded, and records
/// how the run ended.
pub(crate) async fn drive(
    inner: Arc<Inner>,
    run: Arc<LiveRun>,
    agent: Arc<Agent>,
    mut request: ChatRequest,
    mut ctx: ToolContext,
    hold: Box<dyn Send + Sync>,
    resume: Option<(Resume, ResumePlan)>,
) {
    ctx.approver = Some(Arc::new(RunApprover::new(inner.clone(), run.clone())));
    // A result on record has its audit row, so a takeover that goes on
    // from it never leaves a call that ran unaudited.
    ctx.audit_first = true;
    request.waiting = Some(run.waiting.subscribe());
    let request_id = ctx.request_id.clone();
    let sink = RunSink {
        inner: inner.clone(),
        run: run.clone(),
    };
    let work = async {
        match resume {
            Some((resume, plan)) => {
                agent
                    .resume(request, resume, plan, &ctx, &sink, &run.cancel)
                    .await
            }
            None => agent.run(request, &ctx, &sink, &run.cancel).await,
        }
    };
    let outcome = AssertUnwindSafe(work).catch_unwind().await;
    let stopped = |status, reason| {
        let done = Done {
            reason,
            steps: None,
            usage: None,
        };
        (status, Event::Done(done))
    };
    let failed = |code: &str, message: String| Event::Error {
        code: code.to_string(),
        message,
    };
    let (status, last) = match outcome {
        Ok(Ok(outcome)) => (
            RunStatus::Done,
            Event::Done(Done {
                reason: DoneReason::Finished(outcome.reason),
                steps: Some(outcome.steps),
                usage: Some(outcome.usage),
            }),
        ),
        Ok(Err(AgentError::Cancelled)) => match run.end_reason() {
            Some(RunStatus::Error) => (
                RunStatus::Error,
                failed(
                    "event_limit",
                    format!(
                        "the run reached its limit of {} events and was stopped",
                        inner.config.max_events
                    ),
                ),
            ),
            Some(RunStatus::Abandoned) => stopped(RunStatus::Abandoned, DoneReason::Abandoned),
            _ => stopped(RunStatus::Stopped, DoneReason::Stopped),
        },
        Ok(Err(e)) => {
            tracing::warn!(run_id = %run.id, %request_id, code = e.code(), error = %e, "chat ended with an error");
            (RunStatus::Error, failed(e.code(), public_message(&e)))
        }
        Err(_panic) => {
            tracing::error!(run_id = %run.id, %request_id, "the run panicked");
            (
                RunStatus::Error,
                failed(
                    "internal",
                    "the run failed unexpectedly; the error was logged".into(),
                ),
            )
        }
    };
    drop(ctx);
    finish(&inner, &run, last, status, hold).await;
}

/// Ends a run: settles the approvals still open, frees its place
/// (`hold`), sends its last event, waits for it to be recorded, and says
/// how it ended.
pub(crate) async fn finish(
    inner: &Arc<Inner>,
    run: &Arc<LiveRun>,
    last: Event,
    status: RunStatus,
    hold: Box<dyn Send + Sync>,
) {
    if !run.finishing(status) {
        // Another replica runs it now and will end it.
        drop(hold);
        release(inner, run);
        return;
    }
    // Calls still waiting for an answer will get none: say so first.
    let mut settling = run.settling.subscribe();
    let _ = tokio::time::timeout(Duration::from_secs(5), settling.wait_for(|n| *n == 0)).await;
    match store::settle_pending(&inner.db, inner.replica, run.id).await {
        Ok(rows) => {
            let approver = RunApprover::new(inner.clone(), run.clone());
            for row in rows {
                approver.settled(&row).await;
            }
        }
        Err(e) => {
            tracing::warn!(run_id = %run.id, error = %e, "cannot settle the run's open approvals")
        }
    }
    // The run's place (a per-user limit) is free before its client hears
    // it ended: a next turn sent at once is admitted.
    drop(hold);
    // The recorder writes the last event and the run's end in one
    // transaction, so whoever reads `done` finds the run ended; readers
    // here wait for it too, unless the database is away for long.
    let last = match run.emit_last(inner, last, status).await {
        Some(seq) => seq,
        None => lock(&run.log).next - 1,
    };
    let mut recorded = run.recorded.subscribe();
    let in_time = tokio::time::timeout(LAST_EVENT_WAIT, recorded.wait_for(|r| *r >= last))
        .await
        .is_ok_and(|r| r.is_ok());
    run.publish_last(last);
    run.ended.send_replace(Some(status));
    if in_time {
        lock(&inner.live).remove(&run.id);
        return;
    }
    // The recorder still has it and records the end with it when the
    // database lets it; readers elsewhere wait for that, readers here need
    // not. The run stays this replica's (its lease renewed) until then, so
    // that no other replica takes over a run that has ended.
    tracing::warn!(run_id = %run.id, "the run's last event is not recorded yet; sending it to readers here anyway");
    let (inner, run) = (inner.clone(), run.clone());
    tokio::spawn(async move {
        let _ = recorded.wait_for(|r| *r >= last).await;
        lock(&inner.live).remove(&run.id);
    });
}

/// Forgets a run this replica no longer runs: readers here go on from the
/// table (their run "ended here", still running elsewhere).
pub(crate) fn release(inner: &Inner, run: &LiveRun) {
    lock(&inner.live).remove(&run.id);
    run.ended.send_replace(Some(RunStatus::Running));
}

/// What the client is told; the endpoint's address stays in the log.
fn public_message(e: &AgentError) -> String {
    match e {
        AgentError::Unreachable { .. } => "the language model cannot be reached".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(seqs: std::ops::RangeInclusive<i64>, recorded: i64) -> Arc<LiveRun> {
        let run = LiveRun::new(Uuid::nil(), Uuid::nil(), Uuid::nil(), false);
        {
            let mut log = lock(&run.log);
            for seq in seqs {
                log.events.push_back(RunEvent {
                    seq,
                    event: Arc::new(Event::Agent(AgentEvent::TextDelta { text: "x".into() })),
                });
                log.next = seq + 1;
                log.visible = seq;
            }
            log.recorded = recorded;
            trim(&mut log);
        }
        run
    }

    fn seqs(found: Found) -> Result<Vec<i64>, &'static str> {
        match found {
            Found::Events(events) => Ok(events.iter().map(|e| e.seq).collect()),
            Found::InTable => Err("table"),
            Found::Nothing => Err("nothing"),
        }
    }

    #[test]
    fn the_ring_answers_what_it_holds_and_sends_older_reads_to_the_table() {
        // 2,000 events, all recorded: the ring keeps the last 512.
        let run = run_with(1..=2000, 2000);
        assert_eq!(lock(&run.log).events.len(), RING);
        assert_eq!(
            seqs(run.after(1995)),
            Ok(vec![1996, 1997, 1998, 1999, 2000])
        );
        assert_eq!(seqs(run.after(1488)).unwrap().len(), 512);
        assert_eq!(seqs(run.after(1487)), Err("table"));
        assert_eq!(seqs(run.after(0)), Err("table"));
        assert_eq!(seqs(run.after(2000)), Err("nothing"));
        assert_eq!(seqs(run.after(2500)), Err("nothing"));
        // Nothing is trimmed before the recorder has it.
        let run = run_with(1..=2000, 100);
        assert_eq!(lock(&run.log).events.len(), 1900);
        assert_eq!(seqs(run.after(100)).unwrap().len(), 1900);
        assert_eq!(seqs(run.after(99)), Err("table"));
    }
}
