//! Run-time settings held on this replica under a lease, so a request does
//! not read them from PostgreSQL, while an admin's change still reaches
//! every replica by its next request.
//!
//! The protocol (tables and trigger in migration 0021):
//! - Every write to `settings` bumps `settings_version` and notifies
//!   [`SETTINGS_CHANNEL`] at commit.
//! - This replica reads the settings with their version and, in the same
//!   transaction, renews its lease: "holds version v, alive until now +
//!   [`LEASE`]". It does so on every notification and every
//!   [`RENEW_EVERY`], so a missed notification costs seconds, never
//!   correctness.
//! - The settings are held before the lease says so, and served only
//!   while the lease that covers them runs (measured from before the
//!   renewal was sent, so it ends on this replica no later than in the
//!   database). A replica that cannot renew reads the database per request
//!   again.
//! - The server that writes a change waits, before it answers, until no
//!   live lease holds an older version ([`SettingsCache::wait_until_heard`]).
//!   A replica that has stopped renewing drops out once its lease ends,
//!   having stopped serving from its cache by then.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use data_plane_registry::Settings;
use data_plane_store::listen::Subscription;
use data_plane_store::{Db, Scope, StoreError};
use serde_json::Value;
use uuid::Uuid;

/// How long one renewal lets this replica serve settings from its cache.
pub const LEASE: Duration = Duration::from_secs(10);
/// How often the lease is renewed, the settings read again with it.
const RENEW_EVERY: Duration = Duration::from_secs(2);
/// Taken off this replica's end of a lease, against clocks that drift.
const MARGIN: Duration = Duration::from_millis(500);
/// Notified with the new version at the commit of every settings change.
pub const SETTINGS_CHANNEL: &str = "data_plane_settings";
/// How long past its end a lease is still waited on: room for the
/// database's clock to be stepped forward a little.
const LEASE_GRACE: Duration = Duration::from_secs(1);
/// Longest pause between two looks at the leases while a writer waits.
const WAIT_STEP: Duration = Duration::from_millis(20);

struct Held {
    settings: Arc<Settings>,
    version: i64,
    /// Until when a lease covers `settings`; `None` before any renewal.
    valid_until: Option<Instant>,
}

/// This replica's copy of the run-time settings and its lease.
pub struct SettingsCache {
    db: Db,
    replica: Uuid,
    held: RwLock<Option<Held>>,
    /// Set by [`SettingsCache::end_lease`]: nothing is renewed after it.
    ended: AtomicBool,
    /// Held through a renewal, and by `end_lease`, so neither overlaps.
    renewing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SettingsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsCache")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl SettingsCache {
    /// An empty cache for a new replica; [`SettingsCache::start`] fills it.
    pub fn new(db: Db) -> Arc<SettingsCache> {
        Arc::new(SettingsCache {
            db,
            replica: Uuid::new_v4(),
            held: RwLock::new(None),
            ended: AtomicBool::new(false),
            renewing: tokio::sync::Mutex::new(()),
        })
    }

    /// The settings held, while a lease covers them; `None` sends the
    /// caller to the database.
    pub fn get(&self) -> Option<Arc<Settings>> {
        let held = self
            .held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = held.as_ref()?;
        (held.valid_until? > Instant::now()).then(|| held.settings.clone())
    }

    /// Reads the settings and renews the lease on them, until the version
    /// renewed is still the newest after the renewal commits.
    async fn refresh(
        &self,
        apply: fn(BTreeMap<String, Value>) -> Settings,
    ) -> Result<(), StoreError> {
        let _renewing = self.renewing.lock().await;
        // A change committed between the read and the renewal may have
        // found no live lease of this replica to wait on (a replica just
        // started, or back after its lease lapsed): the renewal would then
        // cover settings older than an answered change. Such a renewal is
        // not used, and the settings are read again.
        for _ in 0..8 {
            if self.ended.load(Ordering::SeqCst) {
                return Ok(());
            }
            if self.renew_once(apply).await? {
                return Ok(());
            }
        }
        tracing::warn!(
            "settings changed during eight renewals in a row; reading them per request until the next"
        );
        Ok(())
    }

    /// One renewal; `true` when the version it covers is still the newest.
    async fn renew_once(
        &self,
        apply: fn(BTreeMap<String, Value>) -> Settings,
    ) -> Result<bool, StoreError> {
        let started = Instant::now();
        let mut tx = self.db.begin(Scope::System).await?;
        let (version, stored) = data_plane_store::settings::load_versioned(&mut tx).await?;
        // Held before the lease says so: a writer waiting on this replica
        // answers once the renewal below commits, and a request that
        // follows must find the new settings here by then. Until the
        // commit, the old lease's end still applies.
        self.hold(version, apply(stored));
        data_plane_store::settings::renew_lease(&mut tx, self.replica, version, LEASE).await?;
        tx.commit().await.map_err(StoreError::from)?;
        let mut tx = self.db.begin(Scope::System).await?;
        let newest = data_plane_store::settings::version(&mut tx).await?;
        tx.commit().await.map_err(StoreError::from)?;
        if newest != version {
            return Ok(false);
        }
        let mut held = self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(held) = held.as_mut().filter(|h| h.version == version) {
            held.valid_until = Some(started + LEASE - MARGIN);
        }
        Ok(true)
    }

    fn hold(&self, version: i64, settings: Settings) {
        let mut held = self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match held.as_mut() {
            Some(h) if h.version >= version => {}
            Some(h) => {
                h.settings = Arc::new(settings);
                h.version = version;
            }
            None => {
                *held = Some(Held {
                    settings: Arc::new(settings),
                    version,
                    valid_until: None,
                })
            }
        }
    }

    /// Keeps the cache and its lease current until every handle to the
    /// cache is dropped, then gives the lease up. `apply` turns stored
    /// values into settings (defaults for what is not stored).
    pub fn start(
        self: &Arc<Self>,
        apply: fn(BTreeMap<String, Value>) -> Settings,
    ) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let (db, replica) = (self.db.clone(), self.replica);
        let mut subscription = Subscription::new(&db, SETTINGS_CHANNEL);
        tokio::spawn(async move {
            loop {
                {
                    let Some(cache) = weak.upgrade() else { break };
                    if cache.ended.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Err(e) = cache.refresh(apply).await {
                        tracing::warn!(error = %e, "cannot renew the settings lease; reading settings per request until it is renewed");
                    }
                }
                // A change, a (re)connection (a change may have been
                // missed) or the lease's timer: either way, refresh.
                tokio::select! {
                    _ = subscription.next() => {}
                    () = tokio::time::sleep(RENEW_EVERY) => {}
                }
            }
            give_up(&db, replica).await;
        })
    }

    /// Stops serving from the cache and gives the lease up now (a server
    /// shutting down), so writers no longer wait on this replica.
    pub async fn end_lease(&self) {
        self.ended.store(true, Ordering::SeqCst);
        let _renewing = self.renewing.lock().await;
        *self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        give_up(&self.db, self.replica).await;
    }

    /// Waits until no live lease holds settings older than `version`: then
    /// every replica's next request applies them. Bounded by one lease: a
    /// replica that has not renewed by then has stopped serving its copy.
    /// `false` when leases were still behind at the end, which the lease's
    /// bounds leave only to a database clock stepped by seconds.
    pub async fn wait_until_heard(&self, version: i64) -> Result<bool, StoreError> {
        let deadline = Instant::now() + LEASE + LEASE_GRACE + Duration::from_secs(1);
        let mut pause = Duration::from_millis(1);
        loop {
            let mut tx = self.db.begin(Scope::System).await?;
            let behind =
                data_plane_store::settings::leases_behind(&mut tx, version, LEASE_GRACE).await?;
            tx.commit().await.map_err(StoreError::from)?;
            if behind == 0 {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    version,
                    behind,
                    "replicas still hold older settings after a whole lease"
                );
                return Ok(false);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(WAIT_STEP);
        }
    }
}

/// Deletes `replica`'s lease; a failure leaves it to end on its own.
async fn give_up(db: &Db, replica: Uuid) {
    let ended = async {
        let mut tx = db.begin(Scope::System).await?;
        data_plane_store::settings::end_lease(&mut tx, replica).await?;
        tx.commit().await.map_err(StoreError::from)
    };
    if let Err(e) = ended.await {
        tracing::debug!(error = %e, "could not give the settings lease up; it ends on its own");
    }
}
