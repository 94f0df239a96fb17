//! What every request handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use data_plane_agent::{Agent, AgentConfig, AgentError};
use data_plane_embed::Embedder;
use data_plane_handlers::{Deps, ModelSettings, PgLedger};
use data_plane_ingest::pipeline::Pipeline;
use data_plane_modules::{Modules, ModulesConfig};
use data_plane_registry::{Deployment, Gate, Registry, RegistryError, Settings, SettingsError};
use data_plane_runs::{Runs, RunsConfig};
use data_plane_search::KeywordIndex;
use data_plane_store::Db;
use data_plane_web::fetch::Fetcher;
use data_plane_web::search::WebSearch;

use crate::access::Identities;
use crate::auth::{JwtKeys, ServiceTokens};
use crate::chat_limits::ChatLimiter;
use crate::config::LOOPBACK_ORIGINS;
use crate::metrics::Metrics;
use crate::settings_cache::SettingsCache;

/// Batches of document changes kept for subscribers that are behind.
const DOCUMENT_CHANGES: usize = 64;

/// Everything a request handler reaches, behind one `Arc`: axum clones the
/// state for every extractor and middleware of every request, so a clone
/// is one reference count, not one per field.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds.
#[derive(Clone, Debug)]
pub struct Shared {
    pub db: Db,
    pub index: KeywordIndex,
    pub pipeline: Arc<Pipeline>,
    pub jwt: JwtKeys,
    pub services: ServiceTokens,
    /// The OpenID Connect provider whose tokens are accepted beside the
    /// server's own (docs/auth.md); `None` when none is configured.
    pub oidc: Option<crate::auth::oidc::Oidc>,
    /// The URL clients reach this server at (`DATA_PLANE_PUBLIC_URL`),
    /// without a trailing slash; `None`: each request's Host.
    pub public_url: Option<Arc<str>>,
    pub registry: Arc<Registry>,
    pub ledger: PgLedger,
    pub metrics: Arc<Metrics>,
    /// The model loop behind /v1/chat; `None` when no model is configured.
    pub agent: Option<Arc<Agent>>,
    /// What the handlers share; kept to connect the language model.
    pub deps: Arc<Deps>,
    /// Per-user limits of /v1/chat on this replica.
    pub chat_limits: Arc<ChatLimiter>,
    /// Each user's permission and space roles, from the database.
    pub identities: Arc<Identities>,
    /// What the deployment can do now, as agent profiles read it.
    pub deployment: Arc<DeploymentState>,
    /// Remote tool modules, their tools installed in `registry`.
    pub modules: Arc<Modules>,
    /// Chat runs: this replica's, and the way to reach others'.
    pub runs: Runs,
    /// The run-time settings, held under a lease.
    pub settings_cache: Arc<SettingsCache>,
    /// Browser origins `/mcp` answers; `None`: any (docs/mcp.md).
    pub allowed_origins: Option<Arc<[String]>>,
    /// The documents changed, as this replica's keyword-index follower
    /// applies them ([`data_plane_search::follower::Follower::with_changes`]):
    /// what MCP's resource subscriptions hear.
    pub document_changes: tokio::sync::broadcast::Sender<data_plane_search::follower::Changes>,
    /// Cancelled when the server begins to shut down: streams that would
    /// stay open (MCP's subscriptions) end, so the shutdown can finish.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// MCP subscriptions open on this replica, by caller (each caller may
    /// hold a few: docs/mcp.md).
    pub mcp_listens: Arc<std::sync::Mutex<std::collections::HashMap<uuid::Uuid, usize>>>,
    /// Whether this replica should get traffic (what `/readyz` says).
    pub readiness: Arc<Readiness>,
}

/// What keeps a replica from being ready besides its database: its keyword
/// index still catching up at start, or a stop under way. A state built
/// for tests is ready; `serve` marks it [`Readiness::starting`] until its
/// index has caught up.
#[derive(Debug)]
pub struct Readiness {
    index_caught_up: AtomicBool,
    draining: AtomicBool,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            index_caught_up: AtomicBool::new(true),
            draining: AtomicBool::new(false),
        }
    }
}

impl Readiness {
    /// The keyword index is catching up with what was written while this
    /// replica was away.
    pub fn starting(&self) {
        self.index_caught_up.store(false, Ordering::SeqCst);
    }

    pub fn index_caught_up(&self) {
        self.index_caught_up.store(true, Ordering::SeqCst);
    }

    /// The replica is stopping: it takes no new work.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_index_caught_up(&self) -> bool {
        self.index_caught_up.load(Ordering::SeqCst)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Whether the model is local (configuration) and whether the embedding
/// engine answers (kept current by [`AppState::watch_embeddings`]).
#[derive(Debug)]
pub struct DeploymentState {
    local_model: AtomicBool,
    embedding_ok: AtomicBool,
}

impl Default for DeploymentState {
    fn default() -> Self {
        DeploymentState {
            local_model: AtomicBool::new(false),
            embedding_ok: AtomicBool::new(true),
        }
    }
}

impl DeploymentState {
    pub fn now(&self) -> Deployment {
        Deployment {
            local_model: self.local_model.load(Ordering::Relaxed),
            embedding_ok: self.embedding_ok.load(Ordering::Relaxed),
        }
    }

    pub fn set_local_model(&self, local: bool) {
        self.local_model.store(local, Ordering::Relaxed);
    }

    /// Records whether the embedding engine answered; logs a change.
    pub fn set_embedding_ok(&self, ok: bool) {
        let was = self.embedding_ok.swap(ok, Ordering::Relaxed);
        if was && !ok {
            tracing::warn!("the embedding engine does not answer: search offers keyword mode only");
        } else if !was && ok {
            tracing::info!("the embedding engine answers again: vector and hybrid search are back");
        }
    }
}

/// How often a remote embedding engine is asked whether it answers.
const EMBEDDING_PROBE_EVERY: Duration = Duration::from_secs(30);

impl AppState {
    /// Holds uploads to the deployment's extraction limits.
    pub fn with_extract_limits(mut self, limits: data_plane_ingest::Limits) -> Self {
        let pipeline = Pipeline::new(self.db.clone(), self.pipeline.embedder().clone());
        self.shared_mut().pipeline = Arc::new(pipeline.with_limits(limits));
        self
    }

    /// Builds the registry (every definition joined with its handler) and
    /// starts the audit writer. Must run inside the Tokio runtime.
    pub fn new(
        db: Db,
        index: KeywordIndex,
        embedder: Arc<Embedder>,
        jwt: JwtKeys,
        services: ServiceTokens,
        fetcher: Arc<Fetcher>,
        web_search: WebSearch,
    ) -> Result<AppState, RegistryError> {
        let deps = Arc::new(
            Deps::new(db.clone(), index.clone(), embedder.clone())
                .with_fetcher(fetcher)
                .with_web_search(web_search),
        );
        let ledger = PgLedger::start(db.clone());
        let registry = Arc::new(data_plane_handlers::registry(
            &deps,
            Arc::new(ledger.clone()),
        )?);
        let identities = Arc::new(Identities::new(db.clone()));
        identities.listen();
        let settings_cache = SettingsCache::new(db.clone());
        settings_cache.start(settings_from);
        let modules = Modules::new(ModulesConfig::default(), registry.clone(), db.clone());
        Ok(AppState(Arc::new(Shared {
            allowed_origins: Some(LOOPBACK_ORIGINS.map(String::from).into()),
            document_changes: tokio::sync::broadcast::channel(DOCUMENT_CHANGES).0,
            shutdown: tokio_util::sync::CancellationToken::new(),
            mcp_listens: Arc::default(),
            readiness: Arc::default(),
            modules,
            runs: Runs::start(db.clone(), RunsConfig::default()),
            identities,
            settings_cache,
            pipeline: Arc::new(Pipeline::new(db.clone(), embedder)),
            db,
            index,
            jwt,
            services,
            oidc: None,
            public_url: None,
            registry,
            ledger,
            metrics: Arc::new(Metrics::new()),
            agent: None,
            deps,
            chat_limits: Arc::new(ChatLimiter::default()),
            deployment: Arc::new(DeploymentState::default()),
        })))
    }

    /// The fields, for the builders below (before the state is shared; a
    /// state already cloned is copied first).
    fn shared_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.0)
    }

    /// Keeps `deployment.embedding_ok` current: a remote embedding engine
    /// is asked to embed one word now and every 30 s (a local model, once
    /// loaded, always answers). Ends with the runtime.
    pub fn watch_embeddings(&self) {
        let embedder = self.pipeline.embedder().clone();
        if !matches!(*embedder, Embedder::Remote(_)) {
            return;
        }
        let deployment = self.deployment.clone();
        tokio::spawn(async move {
            loop {
                let answer =
                    tokio::time::timeout(Duration::from_secs(10), embedder.embed_query("health"))
                        .await;
                deployment.set_embedding_ok(matches!(answer, Ok(Ok(_))));
                tokio::time::sleep(EMBEDDING_PROBE_EVERY).await;
            }
        });
    }

    /// Puts `gate` before every call of a tool that requires it. Rebuilds
    /// the registry, so it comes before [`AppState::with_agent`] and
    /// [`AppState::connect_model`], which hold on to the registry.
    pub fn with_gate(mut self, gate: Arc<dyn Gate>) -> Result<AppState, RegistryError> {
        let registry = data_plane_handlers::registry(&self.deps, Arc::new(self.ledger.clone()))?;
        let registry = Arc::new(registry.with_gate(gate));
        let modules = Modules::new(
            self.modules.config().clone(),
            registry.clone(),
            self.db.clone(),
        );
        let shared = self.shared_mut();
        shared.registry = registry;
        shared.modules = modules;
        Ok(self)
    }

    /// Answers `/mcp` only for pages of these origins (`None`: any).
    /// Accepts the tokens of an OpenID Connect provider too.
    pub fn with_oidc(mut self, oidc: crate::auth::oidc::Oidc) -> AppState {
        self.shared_mut().oidc = Some(oidc);
        self
    }

    /// The URL clients reach this server at; refuses one that is not an
    /// `http(s)://` URL.
    pub fn with_public_url(mut self, url: Option<&str>) -> anyhow::Result<AppState> {
        self.shared_mut().public_url = match url.map(str::trim).filter(|u| !u.is_empty()) {
            None => None,
            Some(url) => {
                let parsed = url::Url::parse(url)
                    .map_err(|e| anyhow::anyhow!("DATA_PLANE_PUBLIC_URL {url:?}: {e}"))?;
                anyhow::ensure!(
                    matches!(parsed.scheme(), "http" | "https")
                        && parsed.query().is_none()
                        && parsed.fragment().is_none(),
                    "DATA_PLANE_PUBLIC_URL {url:?} must be an http(s):// URL without query or fragment"
                );
                Some(Arc::from(url.trim_end_matches('/')))
            }
        };
        Ok(self)
    }

    pub fn with_allowed_origins(mut self, origins: Option<Vec<String>>) -> AppState {
        self.shared_mut().allowed_origins = origins.map(Into::into);
        self
    }

    /// Uses the remote modules of `config`, their tools installed in this
    /// state's registry (so after [`AppState::with_gate`]); discovery
    /// starts with [`Modules::start`].
    pub fn with_modules(mut self, config: ModulesConfig) -> AppState {
        let modules = Modules::new(config, self.registry.clone(), self.db.clone());
        self.shared_mut().modules = modules;
        self
    }

    /// Runs chat turns under `config` (grace period, approval timeout,
    /// limits).
    pub fn with_runs(mut self, config: RunsConfig) -> AppState {
        let runs = Runs::start(self.db.clone(), config);
        self.shared_mut().runs = runs;
        self
    }

    /// Puts a model behind /v1/chat, offering this state's registry.
    pub fn with_agent(mut self, config: AgentConfig) -> Result<AppState, AgentError> {
        let agent = Agent::new(config, self.registry.clone())?;
        self.shared_mut().agent = Some(Arc::new(agent));
        Ok(self)
    }

    /// Limits each user to `max_concurrent` chat runs at once and
    /// `turns_per_minute` turns (0 lifts either).
    pub fn with_chat_limits(mut self, max_concurrent: u32, turns_per_minute: u32) -> AppState {
        self.shared_mut().chat_limits =
            Arc::new(ChatLimiter::new(max_concurrent, turns_per_minute));
        self
    }

    /// Gives analyze_document and query_documents' questions their language
    /// model. Without this call they answer that none is configured.
    pub fn connect_model(&self, settings: ModelSettings) {
        if !self.deps.connect_model(settings, &self.registry) {
            tracing::warn!("a language model was already connected; keeping the first");
        }
    }

    /// The run-time settings, as every replica applies them: from this
    /// replica's cache while its lease runs, else from the database. A
    /// change is answered only once every live lease holds it
    /// (`settings_cache`), so the next request sees it here too.
    pub async fn settings(&self) -> Result<Arc<Settings>, data_plane_store::StoreError> {
        match self.settings_cache.get() {
            Some(settings) => Ok(settings),
            None => self.stored_settings().await.map(Arc::new),
        }
    }

    /// The run-time settings read from the database now.
    pub async fn stored_settings(&self) -> Result<Settings, data_plane_store::StoreError> {
        let stored = data_plane_store::settings::load_unscoped(self.db.pool()).await?;
        Ok(settings_from(stored))
    }
}

/// Applies stored values over the defaults, key by key; a value that does
/// not fit its setting (written by another version) is skipped with a warning.
pub fn settings_from(stored: std::collections::BTreeMap<String, serde_json::Value>) -> Settings {
    let mut settings = data_plane_handlers::settings();
    for (key, value) in stored {
        let change = serde_json::Map::from_iter([(key.clone(), value.clone())]);
        match settings.apply(&change) {
            Ok(applied) => settings = applied,
            Err(SettingsError::Unknown { .. }) => {
                tracing::warn!(%key, "ignoring an unknown stored setting");
            }
            Err(SettingsError::InvalidValue { .. }) => {
                tracing::warn!(%key, %value, "ignoring a stored setting of the wrong type");
            }
        }
    }
    settings
}
