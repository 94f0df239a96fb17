//! What handlers need from the rest of the server, and the scoping helpers
//! every handler uses so no read escapes the caller's spaces.

use std::sync::{Arc, OnceLock, Weak};

use data_plane_agent::AgentConfig;
use data_plane_embed::{Embedder, Reranker};
use data_plane_registry::{Registry, ToolContext, ToolError};
use data_plane_search::KeywordIndex;
use data_plane_store::{Db, Fault, Scope, ScopedTx, StoreError, sqlx_fault};
use data_plane_web::fetch::{FetchConfig, Fetcher};
use data_plane_web::search::WebSearch;
use uuid::Uuid;

/// Shared services, built once at start-up.
pub struct Deps {
    pub db: Db,
    pub index: KeywordIndex,
    pub embedder: Arc<Embedder>,
    /// Fetches web pages behind the SSRF guard (fetch_web_page).
    pub fetcher: Arc<Fetcher>,
    /// The web-search providers the deployment configured (possibly none).
    pub web_search: WebSearch,
    /// The language model, when one is configured. Set once, after the
    /// registry is built (see [`Deps::connect_model`]): the sub-agent runs
    /// tools through the registry, which holds these very Deps.
    model: OnceLock<ModelLink>,
    /// The reranker search_documents asks, when one is configured.
    rerank: OnceLock<Rerank>,
}

/// search_documents' optional rerank stage.
#[derive(Debug, Clone)]
pub struct Rerank {
    pub reranker: Reranker,
    /// How many of the best fused candidates it reorders (at least the
    /// answer's length).
    pub candidates: usize,
}

/// The language model behind analyze_document and query_documents'
/// questions, and the limits of analyze_document's sub-agent.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    /// Endpoint, model name, key and timeouts. Its step limit, token budget
    /// and system prompt are not used: the sub-agent has its own.
    pub agent: AgentConfig,
    pub sub_agent: SubAgentLimits,
}

/// How far one analyze_document sub-agent may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubAgentLimits {
    /// Model requests one analysis may make.
    pub max_steps: u32,
    /// Prompt and completion tokens, summed over the steps, after which it stops.
    pub token_budget: u64,
}

impl Default for SubAgentLimits {
    fn default() -> Self {
        SubAgentLimits {
            max_steps: 8,
            token_budget: 60_000,
        }
    }
}

/// The model and the registry its sub-agents run tools through. Weak, so
/// the registry (which owns the handlers, which own these Deps) is not kept
/// alive by itself.
#[derive(Debug)]
pub(crate) struct ModelLink {
    pub settings: ModelSettings,
    pub registry: Weak<Registry>,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").finish_non_exhaustive()
    }
}

/// A failure a handler could not handle, sorted by whether it may pass on
/// its own: only then does the model (and the agent's automatic retry) get
/// told to try again.
pub trait Failure: std::fmt::Display {
    /// True for a pool timeout, a lost connection, a serialization failure
    /// or a server restarting; false (the default) for everything else.
    fn transient(&self) -> bool {
        false
    }
}

impl Failure for StoreError {
    fn transient(&self) -> bool {
        self.is_transient()
    }
}

impl Failure for sqlx::Error {
    fn transient(&self) -> bool {
        sqlx_fault(self) == Fault::Transient
    }
}

impl Failure for String {}
impl Failure for &str {}
impl Failure for tokio::task::JoinError {}
impl Failure for data_plane_agent::AgentError {}
impl Failure for data_plane_search::SearchError {}

/// Logs a failure and gives the model a message it can act on, without SQL
/// or stack details: `unavailable` (retryable) when the cause may pass on its
/// own, `internal` (not retryable) when calling again would fail the same way.
pub fn internal(tool: &str, error: impl Failure) -> ToolError {
    if error.transient() {
        tracing::warn!(tool, %error, "tool failed on a passing fault");
        ToolError::unavailable(format!(
            "{tool} could not reach its data just now; try again shortly"
        ))
    } else {
        tracing::error!(tool, %error, "tool failed");
        ToolError::internal(format!(
            "{tool} failed on an internal error; calling it again the same way will not help"
        ))
    }
}

impl Deps {
    /// Services without a language model; see [`Deps::connect_model`].
    pub fn new(db: Db, index: KeywordIndex, embedder: Arc<Embedder>) -> Deps {
        Deps {
            db,
            index,
            embedder,
            fetcher: Arc::new(Fetcher::new(FetchConfig::default())),
            web_search: WebSearch::default(),
            model: OnceLock::new(),
            rerank: OnceLock::new(),
        }
    }

    /// Fetches pages through `fetcher` (its limits and allow-list) instead
    /// of the default one.
    pub fn with_fetcher(mut self, fetcher: Arc<Fetcher>) -> Deps {
        self.fetcher = fetcher;
        self
    }

    /// Searches the web through these providers (none by default).
    pub fn with_web_search(mut self, web_search: WebSearch) -> Deps {
        self.web_search = web_search;
        self
    }

    /// Gives the handlers a language model, once the registry built over
    /// these Deps exists. Without it, analyze_document and questions to
    /// query_documents answer that no model is configured. `false` when a
    /// model was already connected (the first one stays).
    pub fn connect_model(&self, settings: ModelSettings, registry: &Arc<Registry>) -> bool {
        self.model
            .set(ModelLink {
                settings,
                registry: Arc::downgrade(registry),
            })
            .is_ok()
    }

    /// Gives search_documents a rerank stage. `false` when one was already
    /// connected (the first one stays).
    pub fn connect_rerank(&self, rerank: Rerank) -> bool {
        self.rerank.set(rerank).is_ok()
    }

    /// The rerank stage, if any.
    pub(crate) fn rerank(&self) -> Option<&Rerank> {
        self.rerank.get()
    }

    /// The connected model, if any.
    pub(crate) fn model(&self) -> Option<&ModelLink> {
        self.model.get()
    }

    /// A transaction acting for the caller: row-level security limits every
    /// read to the spaces they belong to.
    pub async fn read(&self, tool: &str, ctx: &ToolContext) -> Result<ScopedTx, ToolError> {
        self.db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(|e| internal(tool, e))
    }

    /// The spaces a call covers: the context's space when set (refused when
    /// the caller is not a member), else every space the caller may read.
    pub async fn spaces(
        &self,
        tool: &str,
        tx: &mut ScopedTx,
        ctx: &ToolContext,
    ) -> Result<Vec<Uuid>, ToolError> {
        let readable: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM spaces ORDER BY id")
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| internal(tool, e))?;
        match ctx.space_id {
            None => Ok(readable),
            Some(id) if readable.contains(&id) => Ok(vec![id]),
            Some(id) => Err(ToolError::not_found(format!(
                "space {id} does not exist or the caller is not a member of it"
            ))),
        }
    }
}
