//! LISTEN/NOTIFY, written once for every subscriber (runs, the module
//! catalogue, the keyword-index follower, the identity cache, the settings
//! cache): one connection policy, one backoff, and one signal that
//! notifications may have been missed.
//!
//! **Connection policy.** Each subscription holds one connection of its own,
//! opened with the pool's options but outside the pool, for as long as it
//! listens. A listener keeps its connection for ever; taken from the shared
//! pool it would shrink the pool by one for every subscriber, and a pool
//! exhausted by requests would keep a listener from reconnecting. Each
//! connection names itself (`application_name` = `data-plane listen
//! CHANNEL`), so an operator sees in `pg_stat_activity` what it is.
//!
//! **Backoff.** A connection that cannot be had, or one that breaks, is
//! tried again after 250 ms, doubling to at most 5 s, and at once after a
//! connection that worked has broken. The wait is kept as a deadline, so a
//! caller that races [`Subscription::next`] against a timer of its own (and
//! so drops the call) does not restart it.
//!
//! **Missed notifications.** PostgreSQL drops what is sent while nobody
//! listens. [`Subscription::next`] therefore answers [`Heard::Missed`] first
//! after every (re)connection, the first included, before any notification:
//! a subscriber re-reads its state then, and takes notifications after.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::time::Instant;

use crate::Db;

/// The first wait before a connection is tried again.
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest wait between two tries.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// How long one try to connect and LISTEN may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);

/// What a subscription heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The subscription has just (re)connected: whatever was notified
    /// before may have been missed. Re-read the state the channel tells of.
    Missed,
    /// A notification, with its payload.
    Notified(String),
}

/// One channel, listened to on a connection of its own.
pub struct Subscription {
    channel: &'static str,
    options: PgConnectOptions,
    listener: Option<PgListener>,
    /// No try to connect before this.
    retry_at: Instant,
    /// The wait after the next failed try.
    backoff: Duration,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channel", &self.channel)
            .field("connected", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// A subscription to `channel` over `db`'s server, connecting on the
    /// first [`Subscription::next`].
    pub fn new(db: &Db, channel: &'static str) -> Subscription {
        let options = (*db.pool().connect_options())
            .clone()
            .application_name(&format!("data-plane listen {channel}"));
        Subscription {
            channel,
            options,
            listener: None,
            retry_at: Instant::now(),
            backoff: FIRST_RETRY,
        }
    }

    /// The channel listened to.
    pub fn channel(&self) -> &'static str {
        self.channel
    }

    /// Whether a connection is listening now.
    pub fn is_connected(&self) -> bool {
        self.listener.is_some()
    }

    /// The next thing heard: [`Heard::Missed`] after each (re)connection,
    /// otherwise the next notification. Never fails: a connection that
    /// cannot be had or breaks is logged and tried again (the module's
    /// backoff). Cancel-safe: dropping the call loses no notification.
    pub async fn next(&mut self) -> Heard {
        loop {
            let Some(listener) = self.listener.as_mut() else {
                tokio::time::sleep_until(self.retry_at).await;
                match self.connect().await {
                    Ok(listener) => {
                        self.listener = Some(listener);
                        self.backoff = FIRST_RETRY;
                        return Heard::Missed;
                    }
                    Err(e) => {
                        tracing::warn!(channel = self.channel, error = %e, retry_in_ms = self.backoff.as_millis() as u64, "cannot LISTEN; trying again");
                        self.retry_at = Instant::now() + self.backoff;
                        self.backoff = (self.backoff * 2).min(MAX_RETRY);
                        continue;
                    }
                }
            };
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    return Heard::Notified(notification.payload().to_string());
                }
                Ok(None) => {
                    tracing::warn!(
                        channel = self.channel,
                        "the LISTEN connection was closed; reconnecting"
                    );
                    self.listener = None;
                    self.retry_at = Instant::now();
                }
                Err(e) => {
                    tracing::warn!(channel = self.channel, error = %e, "the LISTEN connection failed; reconnecting");
                    self.listener = None;
                    self.retry_at = Instant::now();
                }
            }
        }
    }

    /// One try: a connection of its own, listening on the channel.
    async fn connect(&self) -> Result<PgListener, String> {
        // A pool of one that opens its connection when the listener asks:
        // sqlx's listener takes its connection from a pool.
        let own = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(CONNECT_WITHIN)
            .connect_lazy_with(self.options.clone());
        let opened = tokio::time::timeout(CONNECT_WITHIN, async {
            let mut listener = PgListener::connect_with(&own).await?;
            // The listener's own reconnection would hide what was missed:
            // a lost connection ends this one, and `next` starts another
            // and says so.
            listener.eager_reconnect(false);
            listener.listen(self.channel).await?;
            Ok::<_, sqlx::Error>(listener)
        })
        .await;
        match opened {
            Ok(Ok(listener)) => Ok(listener),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no connection within {} s",
                CONNECT_WITHIN.as_secs()
            )),
        }
    }
}
