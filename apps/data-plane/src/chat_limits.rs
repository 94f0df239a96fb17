//! Per-user limits of runs on this replica (`/v1/chat`'s turns and `/mcp`'s
//! tasks): how many one user may have going at once and how many one user
//! may start per minute. A refused turn is answered 429 with `Retry-After`
//! and costs nothing; a refused task is the call's error.
//!
//! The counts live in this process: with N replicas behind a balancer a user
//! may get up to N times the limits. They are there to keep one user from
//! taking a replica's model capacity, not to meter use (the tools' own
//! limits, kept in PostgreSQL, do that).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::response::{IntoResponse, Response};
use uuid::Uuid;

/// The window turns per minute are counted over.
const WINDOW: Duration = Duration::from_secs(60);

/// What a client waiting for a run of its own to end is told to wait.
const BUSY_RETRY: Duration = Duration::from_secs(5);

/// Users tracked before idle ones are forgotten.
const PRUNE_ABOVE: usize = 10_000;

#[derive(Debug, Default)]
struct UserTurns {
    running: u32,
    /// When each turn of the last minute started, oldest first.
    started: VecDeque<Instant>,
}

/// The limits and the counts behind them. `0` lifts a limit.
#[derive(Debug)]
pub struct ChatLimiter {
    max_concurrent: u32,
    turns_per_minute: u32,
    users: Mutex<HashMap<Uuid, UserTurns>>,
}

/// Held while a run goes on; dropping it (the run ended, or the client went
/// away and the run was cancelled) frees its place.
#[derive(Debug)]
pub struct ChatPermit {
    limiter: Arc<ChatLimiter>,
    user: Uuid,
}

/// Why a turn was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatRefusal {
    /// The user has `max` runs going already.
    Busy { max: u32 },
    /// The user started `max` turns in the last minute.
    TooMany { max: u32, retry_after: Duration },
}

impl ChatLimiter {
    pub const DEFAULT_MAX_CONCURRENT: u32 = 3;
    pub const DEFAULT_TURNS_PER_MINUTE: u32 = 20;

    pub fn new(max_concurrent: u32, turns_per_minute: u32) -> ChatLimiter {
        ChatLimiter {
            max_concurrent,
            turns_per_minute,
            users: Mutex::new(HashMap::new()),
        }
    }

    /// Starts a turn for `user` now, or says why not.
    pub fn admit(self: &Arc<Self>, user: Uuid) -> Result<ChatPermit, ChatRefusal> {
        self.admit_at(user, Instant::now())
    }

    fn admit_at(self: &Arc<Self>, user: Uuid, now: Instant) -> Result<ChatPermit, ChatRefusal> {
        let mut users = self.lock();
        if users.len() > PRUNE_ABOVE {
            users.retain(|_, u| {
                forget_before(u, now);
                u.running > 0 || !u.started.is_empty()
            });
        }
        let turns = users.entry(user).or_default();
        forget_before(turns, now);
        if self.max_concurrent > 0 && turns.running >= self.max_concurrent {
            return Err(ChatRefusal::Busy {
                max: self.max_concurrent,
            });
        }
        if self.turns_per_minute > 0 && turns.started.len() >= self.turns_per_minute as usize {
            let oldest = turns.started.front().copied().unwrap_or(now);
            return Err(ChatRefusal::TooMany {
                max: self.turns_per_minute,
                retry_after: (oldest + WINDOW).saturating_duration_since(now),
            });
        }
        turns.running += 1;
        if self.turns_per_minute > 0 {
            turns.started.push_back(now);
        }
        Ok(ChatPermit {
            limiter: self.clone(),
            user,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, UserTurns>> {
        // The map stays consistent whatever panicked while holding it.
        self.users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for ChatLimiter {
    fn default() -> Self {
        ChatLimiter::new(Self::DEFAULT_MAX_CONCURRENT, Self::DEFAULT_TURNS_PER_MINUTE)
    }
}

fn forget_before(turns: &mut UserTurns, now: Instant) {
    while turns
        .started
        .front()
        .is_some_and(|&t| now.saturating_duration_since(t) >= WINDOW)
    {
        turns.started.pop_front();
    }
}

impl Drop for ChatPermit {
    fn drop(&mut self) {
        let mut users = self.limiter.lock();
        if let Some(turns) = users.get_mut(&self.user) {
            turns.running = turns.running.saturating_sub(1);
            if turns.running == 0 && turns.started.is_empty() {
                users.remove(&self.user);
            }
        }
    }
}

impl ChatRefusal {
    /// Whole seconds to wait, at least one.
    pub fn retry_after(&self) -> u64 {
        let wait = match self {
            ChatRefusal::Busy { .. } => BUSY_RETRY,
            ChatRefusal::TooMany { retry_after, .. } => *retry_after,
        };
        (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
    }
}

impl ChatRefusal {
    /// What the caller is told.
    pub fn message(&self) -> String {
        match self {
            ChatRefusal::Busy { max } => format!(
                "{max} runs of yours (chat turns and tasks) are going on this server already; \
                 wait for one to end (or close its stream) and try again"
            ),
            ChatRefusal::TooMany { max, .. } => format!(
                "you started {max} runs (chat turns and tasks) in the last minute, the most \
                 allowed; try again in {} s",
                self.retry_after()
            ),
        }
    }
}

impl IntoResponse for ChatRefusal {
    fn into_response(self) -> Response {
        crate::error::ApiError::new(crate::error::ErrorCode::RateLimited, self.message())
            .retry_after(self.retry_after())
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(max: u32, per_minute: u32) -> Arc<ChatLimiter> {
        Arc::new(ChatLimiter::new(max, per_minute))
    }

    #[test]
    fn runs_at_once_are_capped_and_freed_when_a_permit_drops() {
        let l = limiter(2, 0);
        let (alice, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let a = l.admit(alice).unwrap();
        let _b = l.admit(alice).unwrap();
        assert_eq!(l.admit(alice).unwrap_err(), ChatRefusal::Busy { max: 2 });
        let _other = l.admit(bob).expect("another user has places of their own");
        drop(a);
        let _c = l.admit(alice).expect("a dropped permit frees its place");
    }

    #[test]
    fn turns_per_minute_slide_and_say_how_long_to_wait() {
        let l = limiter(0, 3);
        let alice = Uuid::new_v4();
        let t0 = Instant::now();
        for s in [0, 10, 20] {
            drop(l.admit_at(alice, t0 + Duration::from_secs(s)).unwrap());
        }
        let refused = l.admit_at(alice, t0 + Duration::from_secs(30)).unwrap_err();
        assert_eq!(
            refused,
            ChatRefusal::TooMany {
                max: 3,
                retry_after: Duration::from_secs(30)
            }
        );
        assert_eq!(refused.retry_after(), 30);
        // A refused turn is not counted: the oldest leaves at 60 s.
        let _ok = l.admit_at(alice, t0 + Duration::from_secs(60)).unwrap();
        assert!(l.admit_at(alice, t0 + Duration::from_secs(61)).is_err());
    }

    #[test]
    fn retry_after_is_whole_seconds_and_never_zero() {
        let check = |wait: Duration, expected: u64| {
            let r = ChatRefusal::TooMany {
                max: 1,
                retry_after: wait,
            };
            assert_eq!(r.retry_after(), expected, "{wait:?}");
        };
        check(Duration::ZERO, 1);
        check(Duration::from_millis(1), 1);
        check(Duration::from_millis(1000), 1);
        check(Duration::from_millis(1001), 2);
        check(Duration::from_secs(59), 59);
        assert_eq!(ChatRefusal::Busy { max: 3 }.retry_after(), 5);
    }

    #[test]
    fn idle_users_are_forgotten() {
        let l = limiter(1, 0);
        drop(l.admit(Uuid::new_v4()).unwrap());
        assert!(l.lock().is_empty());
    }
}
