//! The configured modules at run time: each one's manifest as last
//! discovered, installed in the registry as `module.tool` entries, cached
//! in PostgreSQL for every replica, and discovered again when it expires.
//!
//! Discovery never blocks start-up and never fails it: at start the cache
//! is read back and what is missing or expired is fetched in the
//! background; a request that finds a module without a fresh manifest asks
//! again (waiting, briefly, only when the module has no tools at all); an
//! admin's refresh fetches at once. One module down or answering garbage
//! is logged with its reason and skipped; the last good manifest of a
//! module keeps serving until a discovery succeeds.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use data_plane_registry::{Annotations, Category, Registry, RemoteTool, ToolEntry};
use data_plane_store::Db;
use data_plane_store::listen::{Heard, Subscription};
use data_plane_store::modules::{self as store, MODULES_CHANNEL, ManifestRow};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::client::{Client, RemoteHandler};
use crate::config::{ModuleConfig, ModulesConfig};
use crate::{ModuleError, manifest};

/// Every configured module.
pub struct Modules {
    config: ModulesConfig,
    client: Client,
    registry: Arc<Registry>,
    db: Db,
    slots: Vec<Slot>,
}

impl std::fmt::Debug for Modules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Modules")
            .field("modules", &self.names())
            .finish_non_exhaustive()
    }
}

struct Slot {
    config: ModuleConfig,
    timeout: Duration,
    state: Mutex<SlotState>,
    /// Counts finished discoveries, for those waiting on one.
    done: watch::Sender<u64>,
    /// One discovery at a time.
    running: tokio::sync::Mutex<()>,
    /// Whether a manifest is newer than the installed one, and installing
    /// it, happen as one step (a discovery and the listener may both try).
    installing: Mutex<()>,
}

#[derive(Default)]
struct SlotState {
    installed: Option<Installed>,
    /// The last attempt on this replica.
    attempted: Option<Instant>,
    attempted_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    /// A discovery is under way (or start-up has not looked yet).
    discovering: bool,
}

/// The manifest whose tools the registry holds.
struct Installed {
    fetched_at: DateTime<Utc>,
    manifest_name: Option<String>,
    version: Option<String>,
    protocol: Option<String>,
    tools: Vec<String>,
    skipped: Vec<String>,
}

/// One module as the admin listing shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModuleStatus {
    pub name: String,
    pub url: String,
    pub slow: bool,
    pub timeout_ms: u64,
    /// `pending` (not discovered yet), `ready`, `stale` (older than the
    /// TTL; discovered again on the next request) or `failed` (the last
    /// attempt failed; `tools` are what the last good manifest still
    /// serves, if any).
    pub state: &'static str,
    /// The tools it offers, as `module.tool`.
    pub tools: Vec<String>,
    /// Tools of its manifest left out, each with why.
    pub skipped: Vec<String>,
    /// What the module calls itself, its version and protocol.
    pub manifest_name: Option<String>,
    pub version: Option<String>,
    pub protocol: Option<String>,
    /// When the manifest it serves was fetched (on any replica).
    pub fetched_at: Option<DateTime<Utc>>,
    /// The last attempt on this replica.
    pub attempted_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// Ends a discovery when dropped (see [`Modules::finish`]).
struct Finishing<'a> {
    modules: &'a Modules,
    slot: &'a Slot,
    /// The attempt made, once it was.
    attempt: Option<(DateTime<Utc>, Option<String>)>,
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.modules.finish(self.slot, self.attempt.take());
    }
}

fn lock(state: &Mutex<SlotState>) -> MutexGuard<'_, SlotState> {
    // A panic while holding the lock leaves a state that is still whole.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Modules {
    /// The modules of `config`, none discovered yet. Start-up only: a
    /// client that cannot be built (no TLS backend) stops the server.
    pub fn new(config: ModulesConfig, registry: Arc<Registry>, db: Db) -> Arc<Modules> {
        #[allow(clippy::expect_used)] // start-up: nothing can run without it
        let client = Client::new().expect("the HTTP client for modules cannot be built");
        let slots = config
            .modules
            .iter()
            .map(|m| Slot {
                config: m.clone(),
                timeout: config.timeout_for(m),
                state: Mutex::new(SlotState::default()),
                done: watch::Sender::new(0),
                running: tokio::sync::Mutex::new(()),
                installing: Mutex::new(()),
            })
            .collect();
        Arc::new(Modules {
            config,
            client,
            registry,
            db,
            slots,
        })
    }

    /// The configuration it runs under.
    pub fn config(&self) -> &ModulesConfig {
        &self.config
    }

    /// Whether any module is configured.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The configured modules' names.
    pub fn names(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.config.name.clone()).collect()
    }

    /// Reads the cache back and discovers what is missing or expired, in
    /// the background; then follows the other replicas' discoveries.
    pub fn start(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        if self.is_empty() {
            return None;
        }
        // Until start-up has looked at the cache, requests wait for it
        // rather than start discoveries of their own.
        for slot in &self.slots {
            lock(&slot.state).discovering = true;
        }
        let this = self.clone();
        Some(tokio::spawn(async move {
            this.load_cache().await;
            let stale: Vec<&Slot> = this
                .slots
                .iter()
                .filter(|slot| !this.is_fresh(slot))
                .collect();
            for slot in &this.slots {
                if this.is_fresh(slot) {
                    this.finish(slot, None);
                }
            }
            futures::future::join_all(stale.into_iter().map(|slot| this.discover(slot, false)))
                .await;
            this.listen().await;
        }))
    }

    /// Installs what the cache holds and nothing else (no discovery): how
    /// the modules stand for every replica, as `data-plane modules` shows.
    pub async fn read_cache(&self) {
        self.load_cache().await;
        for slot in &self.slots {
            self.finish(slot, None);
        }
    }

    /// Installs every cached manifest fetched from a module's configured URL.
    async fn load_cache(&self) {
        let rows = match store::load_all(&self.db).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the cached module manifests; discovering every module");
                return;
            }
        };
        for row in rows {
            if let Some(slot) = self.slot(&row.module) {
                self.absorb_row(slot, &row);
            }
        }
    }

    /// Takes up a cached row of the slot's URL: its manifest when newer than
    /// the one installed, and its last attempt (another replica's, maybe)
    /// when later than the last one known here. Answers whether it installed
    /// a manifest.
    fn absorb_row(&self, slot: &Slot, row: &ManifestRow) -> bool {
        if row.url != slot.config.url {
            return false;
        }
        let installed = match (&row.manifest, row.fetched_at) {
            (Some(manifest), Some(fetched_at)) => {
                match self.install_if_newer(slot, manifest, fetched_at) {
                    Ok(installed) => installed,
                    Err(e) => {
                        tracing::warn!(module = %slot.config.name, reason = %e, "the cached manifest cannot be used");
                        false
                    }
                }
            }
            _ => false,
        };
        let mut state = lock(&slot.state);
        if state.attempted_at.is_none_or(|at| at < row.attempted_at) {
            state.attempted_at = Some(row.attempted_at);
            state.last_error = row.last_error.clone();
        }
        installed
    }

    fn slot(&self, name: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| s.config.name == name)
    }

    fn is_fresh(&self, slot: &Slot) -> bool {
        lock(&slot.state)
            .installed
            .as_ref()
            .is_some_and(|i| self.fresh(i.fetched_at))
    }

    fn fresh(&self, fetched_at: DateTime<Utc>) -> bool {
        let age = Utc::now().signed_duration_since(fetched_at);
        age.to_std().map_or(true, |age| age < self.config.ttl)
    }

    /// Makes sure every module has a fresh manifest, or is being asked for
    /// one: a request calls it before listing or running tools. A module
    /// with an expired manifest is asked in the background (its tools keep
    /// serving meanwhile); one without any is waited for, up to the
    /// discovery timeout. After a failure a module is asked again only
    /// once `retry_after` has passed.
    pub async fn ensure_fresh(self: &Arc<Self>) {
        let waits = self.start_discoveries();
        if !waits.is_empty() {
            let limit = self.config.discovery_timeout + Duration::from_millis(500);
            let _ = tokio::time::timeout(limit, futures::future::join_all(waits)).await;
        }
    }

    /// [`Modules::ensure_fresh`] without the wait: for the module
    /// protocol's `/manifest`, which another server may ask while it
    /// discovers this one (two servers using each other would otherwise
    /// wait on each other's discovery).
    pub fn ensure_fresh_later(self: &Arc<Self>) {
        drop(self.start_discoveries());
    }

    /// Starts the discoveries a request should; answers a wait for each
    /// module that has no tools yet and is being discovered.
    fn start_discoveries(self: &Arc<Self>) -> Vec<impl std::future::Future<Output = ()> + use<>> {
        let mut waits = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let (start, wait) = {
                let mut state = lock(&slot.state);
                let fresh = state
                    .installed
                    .as_ref()
                    .is_some_and(|inst| self.fresh(inst.fetched_at));
                let resting = state
                    .attempted
                    .is_some_and(|at| at.elapsed() < self.config.retry_after);
                let start = !fresh && !state.discovering && !resting;
                if start {
                    state.discovering = true;
                }
                // Only a module never asked yet (start-up is at it) is
                // waited for: one that failed since is asked again in the
                // background, and no request pays for it again.
                let wait =
                    state.installed.is_none() && state.discovering && state.attempted.is_none();
                (start, wait.then(|| slot.done.subscribe()))
            };
            if start {
                let this = self.clone();
                tokio::spawn(async move { this.discover(&this.slots[i], false).await });
            }
            if let Some(mut done) = wait {
                waits.push(async move {
                    let _ = done.changed().await;
                });
            }
        }
        waits
    }

    /// Discovers every module (or the one named) now, whatever the cache
    /// says, and answers how each stands afterwards.
    pub async fn refresh(
        self: &Arc<Self>,
        only: Option<&str>,
    ) -> Result<Vec<ModuleStatus>, ModuleError> {
        let indexes: Vec<usize> = match only {
            None => (0..self.slots.len()).collect(),
            Some(name) => vec![
                self.slots
                    .iter()
                    .position(|s| s.config.name == name)
                    .ok_or_else(|| ModuleError::Unknown {
                        name: name.to_string(),
                        known: self.names(),
                    })?,
            ],
        };
        // Tasks of their own: a caller that gives up waiting does not cut
        // a discovery short.
        let tasks: Vec<_> = indexes
            .iter()
            .map(|&i| {
                lock(&self.slots[i].state).discovering = true;
                let this = self.clone();
                tokio::spawn(async move { this.discover(&this.slots[i], true).await })
            })
            .collect();
        for task in futures::future::join_all(tasks).await {
            if let Err(e) = task {
                tracing::error!(error = %e, "a module discovery failed unexpectedly");
            }
        }
        Ok(indexes
            .iter()
            .map(|&i| self.status_of(&self.slots[i]))
            .collect())
    }

    /// How every module stands, in configuration order.
    pub fn status(&self) -> Vec<ModuleStatus> {
        self.slots.iter().map(|slot| self.status_of(slot)).collect()
    }

    fn status_of(&self, slot: &Slot) -> ModuleStatus {
        let state = lock(&slot.state);
        let installed = state.installed.as_ref();
        let label = match (installed, &state.last_error) {
            (_, Some(_)) => "failed",
            (None, None) => "pending",
            (Some(i), None) if self.fresh(i.fetched_at) => "ready",
            (Some(_), None) => "stale",
        };
        ModuleStatus {
            name: slot.config.name.clone(),
            url: slot.config.url.clone(),
            slow: slot.config.slow,
            timeout_ms: slot.timeout.as_millis() as u64,
            state: label,
            tools: installed.map(|i| i.tools.clone()).unwrap_or_default(),
            skipped: installed.map(|i| i.skipped.clone()).unwrap_or_default(),
            manifest_name: installed.and_then(|i| i.manifest_name.clone()),
            version: installed.and_then(|i| i.version.clone()),
            protocol: installed.and_then(|i| i.protocol.clone()),
            fetched_at: installed.map(|i| i.fetched_at),
            attempted_at: state.attempted_at,
            last_error: state.last_error.clone(),
        }
    }

    /// Fetches the slot's manifest and installs it, or records why not.
    /// Unless `forced`, a manifest another replica fetched meanwhile (and
    /// cached) is taken instead of asking the module again.
    async fn discover(&self, slot: &Slot, forced: bool) {
        // Whatever happens (a request that gave up, a panic), the discovery
        // ends: nobody waits on it for ever and the next one can start.
        let mut finishing = Finishing {
            modules: self,
            slot,
            attempt: None,
        };
        let _running = slot.running.lock().await;
        let name = slot.config.name.as_str();
        if !forced {
            match store::load(&self.db, name).await {
                Ok(Some(row))
                    if row.fetched_at.is_some_and(|at| self.fresh(at))
                        && self.absorb_row(slot, &row) =>
                {
                    tracing::debug!(
                        module = name,
                        "took the manifest another replica discovered"
                    );
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(module = name, error = %e, "cannot read the module's cached manifest")
                }
            }
        }
        let attempted_at = Utc::now();
        let outcome = match self
            .client
            .manifest(&slot.config, self.config.discovery_timeout)
            .await
        {
            Ok(value) => self
                .install_if_newer(slot, &value, attempted_at)
                .map(|_| value),
            Err(e) => Err(e),
        };
        let saved = match &outcome {
            Ok(value) => {
                store::save_manifest(&self.db, name, &slot.config.url, value, attempted_at).await
            }
            Err(reason) => {
                let serving = lock(&slot.state).installed.is_some();
                tracing::warn!(
                    module = name,
                    url = %slot.config.url,
                    %reason,
                    "module discovery failed; {}",
                    if serving { "its last manifest keeps serving" } else { "it offers no tools" }
                );
                store::save_failure(&self.db, name, &slot.config.url, reason, attempted_at).await
            }
        };
        if let Err(e) = saved {
            tracing::warn!(module = name, error = %e, "cannot cache the module's manifest");
        }
        finishing.attempt = Some((attempted_at, outcome.err()));
    }

    /// Ends a discovery (or start-up's look at the cache): records the
    /// attempt, if one was made, and wakes whoever waits.
    fn finish(&self, slot: &Slot, attempt: Option<(DateTime<Utc>, Option<String>)>) {
        {
            let mut state = lock(&slot.state);
            state.discovering = false;
            if let Some((at, error)) = attempt {
                state.attempted = Some(Instant::now());
                state.attempted_at = Some(at);
                state.last_error = error;
            }
        }
        slot.done.send_modify(|n| *n += 1);
    }

    /// Installs `value` unless the manifest installed was fetched later;
    /// answers whether it did.
    fn install_if_newer(
        &self,
        slot: &Slot,
        value: &Value,
        fetched_at: DateTime<Utc>,
    ) -> Result<bool, String> {
        let _installing = slot
            .installing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let newer = lock(&slot.state)
            .installed
            .as_ref()
            .is_none_or(|i| i.fetched_at < fetched_at);
        if newer {
            self.install(slot, value, fetched_at)?;
        }
        Ok(newer)
    }

    /// Reads `value` as the slot's manifest and puts its tools in the
    /// registry in place of the module's previous ones.
    fn install(&self, slot: &Slot, value: &Value, fetched_at: DateTime<Utc>) -> Result<(), String> {
        let module = &slot.config.name;
        let parsed = manifest::parse(value)?;
        let mut skipped = parsed.skipped;
        let mut entries = Vec::new();
        for tool in parsed.tools {
            let remote_name = tool.remote_name.clone();
            let idempotent = Annotations::derive(Category::Module, tool.hints).idempotent;
            let handler = RemoteHandler {
                client: self.client.clone(),
                module: slot.config.clone(),
                remote_name: tool.remote_name,
                timeout: slot.timeout,
                idempotent,
                db: self.db.clone(),
            };
            let entry = ToolEntry::remote(RemoteTool {
                module: module.clone(),
                name: tool.name,
                description: tool.description,
                summary: tool.summary,
                parameters: tool.parameters,
                permission: tool.permission,
                hints: tool.hints,
                // The handler keeps to the module's timeout (a retry
                // included); this only catches what it could not.
                timeout: slot.timeout + Duration::from_secs(1),
                source: format!("module {module}: {}", slot.config.endpoint("manifest")),
                handler: Arc::new(handler),
            });
            match entry {
                Ok(entry) => entries.push(entry),
                Err(e) => skipped.push(format!("{remote_name}: {e}")),
            }
        }
        skipped.extend(self.registry.set_module_tools(module, entries));
        let tools: Vec<String> = self
            .registry
            .module_tools(module)
            .iter()
            .map(|e| e.name.clone())
            .collect();
        if !skipped.is_empty() {
            tracing::warn!(module = %module, ?skipped, "some of the module's tools are left out");
        }
        tracing::info!(module = %module, tools = tools.len(), %fetched_at, "module manifest installed");
        let mut state = lock(&slot.state);
        // A good manifest, whoever fetched it, ends the failure it followed.
        state.last_error = None;
        state.installed = Some(Installed {
            fetched_at,
            manifest_name: parsed.name,
            version: parsed.version,
            protocol: parsed.protocol,
            tools,
            skipped,
        });
        Ok(())
    }

    /// Follows [`MODULES_CHANNEL`]: a module another replica (or the CLI)
    /// discovered is read back from the cache and installed here too; after
    /// each (re)connection the whole cache is read again, for what changed
    /// while nobody listened.
    async fn listen(&self) {
        let mut subscription = Subscription::new(&self.db, MODULES_CHANNEL);
        loop {
            let module = match subscription.next().await {
                Heard::Missed => {
                    self.load_cache().await;
                    continue;
                }
                Heard::Notified(module) => module,
            };
            let Some(slot) = self.slot(&module) else {
                continue;
            };
            match store::load(&self.db, &module).await {
                Ok(Some(row)) => {
                    self.absorb_row(slot, &row);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(module, error = %e, "cannot read the module's cached manifest")
                }
            }
        }
    }
}
