//! The context every tool call runs in.

use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

use crate::{Approver, Permission, RateLimits, Settings, ToolMode};

/// Who calls, where, and under which settings.
#[derive(Clone)]
pub struct ToolContext {
    pub user_id: Uuid,
    /// `None`: across every space the user may read.
    pub space_id: Option<Uuid>,
    pub request_id: String,
    pub permission: Permission,
    pub settings: Arc<Settings>,
    /// The id of the call being executed; the registry fills it in when the
    /// caller did not (an agent passes the model's tool-call id).
    pub call_id: Option<String>,
    /// The tool call that started the sub-agent making this call.
    pub parent_call_id: Option<String>,
    /// When set, only these tools are offered and may run: the agent
    /// profile's allow-list resolved for this deployment
    /// (`Registry::resolve_profile`), or a test's own list.
    pub allow_list: Option<Arc<[String]>>,
    /// With an allow-list, the remote modules whose tools (`module.tool`)
    /// are allowed too (`*`: every module); without one, every module's.
    pub modules: Arc<[String]>,
    /// The agent profile the allow-list came from, for logs and the audit.
    pub agent: Option<Arc<str>>,
    /// What the deployment can do right now (a local model, embeddings).
    pub deployment: Deployment,
    /// The model gets the discovery meta-tools (search_tools,
    /// describe_tool, execute_tool) instead of the whole list.
    pub tool_search: bool,
    /// How the model calls tools: natively or as one-line tags.
    pub tool_mode: ToolMode,
    /// What the call being executed did beyond answering; the registry
    /// gives every call a fresh one and copies it into the result.
    pub side_effects: SideEffects,
    /// When set, every call may reach only this document: the registry pins
    /// the `document_id` argument to it (refusing another) and refuses tools
    /// that take none (analyze_document's sub-agent).
    pub document_scope: Option<Uuid>,
    /// Who answers calls that need a person's approval (a chat run);
    /// `None`: nobody can (see [`crate::approval`]).
    pub approver: Option<Arc<dyn Approver>>,
    /// The handler of an idempotent tool is run once more when it fails
    /// transiently (a timeout, a dependency unavailable), inside the one
    /// call: the agent asks for it, a client calling a tool directly
    /// retries by itself.
    pub retry_once: bool,
    /// The call's audit record is written before its result is announced
    /// (a chat run, which another replica may take over: a result on
    /// record then always has its audit row). Otherwise the record is
    /// queued and written within moments, and the call never waits.
    pub audit_first: bool,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("user_id", &self.user_id)
            .field("space_id", &self.space_id)
            .field("request_id", &self.request_id)
            .field("permission", &self.permission)
            .field("call_id", &self.call_id)
            .field("parent_call_id", &self.parent_call_id)
            .field("agent", &self.agent)
            .field("document_scope", &self.document_scope)
            .field("approver", &self.approver.is_some())
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    pub fn new(user_id: Uuid, space_id: Option<Uuid>, permission: Permission) -> Self {
        ToolContext {
            user_id,
            space_id,
            request_id: Uuid::new_v4().to_string(),
            permission,
            settings: Arc::new(Settings::default()),
            call_id: None,
            parent_call_id: None,
            allow_list: None,
            modules: Arc::from([]),
            agent: None,
            deployment: Deployment::default(),
            tool_search: false,
            tool_mode: ToolMode::Native,
            side_effects: SideEffects::default(),
            document_scope: None,
            approver: None,
            retry_once: false,
            audit_first: false,
        }
    }

    pub fn with_settings(mut self, settings: Arc<Settings>) -> Self {
        self.settings = settings;
        self
    }

    pub fn with_request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = request_id.into();
        self
    }

    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// Retries a transient failure of an idempotent tool once (see
    /// `retry_once`).
    pub fn with_retry_once(mut self) -> Self {
        self.retry_once = true;
        self
    }

    /// Offers and allows only `tools` (a resolved profile named `agent`),
    /// and no remote module's tool until [`ToolContext::with_modules`]
    /// names the module.
    pub fn with_allow_list(mut self, agent: &str, tools: Arc<[String]>) -> Self {
        self.agent = Some(Arc::from(agent));
        self.allow_list = Some(tools);
        self.modules = Arc::from([]);
        self
    }

    /// Beside the allow-list, allows the tools of these remote modules
    /// (`*`: every module).
    pub fn with_modules(mut self, modules: Arc<[String]>) -> Self {
        self.modules = modules;
        self
    }

    pub fn with_deployment(mut self, deployment: Deployment) -> Self {
        self.deployment = deployment;
        self
    }

    /// Records what the running call did beyond answering, in the
    /// `kind:what` form (`fetched:https://example.org/`,
    /// `queried:document_tables`, `searched:web:vacuum full`).
    pub fn side_effect(&self, effect: impl Into<String>) {
        self.side_effects.push(effect.into());
    }

    /// Limits every call to one document (see `document_scope`).
    pub fn with_document_scope(mut self, document_id: Uuid) -> Self {
        self.document_scope = Some(document_id);
        self
    }

    /// The limits that hold for `tool` in this context: its metadata's
    /// defaults with the admin's override, if any, applied.
    pub fn rate_limits(&self, tool: &str, defaults: RateLimits) -> RateLimits {
        match self.settings.tool_rate_limits.get(tool) {
            Some(o) => o.apply(defaults),
            None => defaults,
        }
    }

    /// Whether the allow-list (if any) names `tool`; a remote tool
    /// (`module.tool`) is allowed when its module is.
    pub fn allows(&self, tool: &str) -> bool {
        let Some(list) = &self.allow_list else {
            return true;
        };
        match tool.split_once('.') {
            Some((module, _)) => self.allows_module(module),
            None => list.iter().any(|t| t == tool),
        }
    }

    /// Whether the tools of remote module `module` may be offered.
    pub fn allows_module(&self, module: &str) -> bool {
        self.allow_list.is_none() || self.modules.iter().any(|m| m == "*" || m == module)
    }
}

/// What the deployment can do, as profiles' conditions and tools'
/// definitions read it. Set by the server per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployment {
    /// The language model runs on the deployment's own machines (a
    /// setting): profiles may offer fewer or other tools to it.
    pub local_model: bool,
    /// An embedding engine is configured and answering: without one, vector
    /// and hybrid search are not offered, keyword search is.
    pub embedding_ok: bool,
}

impl Default for Deployment {
    /// A hosted model with embeddings answering.
    fn default() -> Self {
        Deployment {
            local_model: false,
            embedding_ok: true,
        }
    }
}

/// The side effects of one call, collected while it runs (a call's
/// handler may record them from several tasks).
#[derive(Debug, Clone, Default)]
pub struct SideEffects(Arc<Mutex<Vec<String>>>);

impl SideEffects {
    pub fn push(&self, effect: String) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A tool that fetches the same page twice did one thing, once said.
        if !list.contains(&effect) && list.len() < 64 {
            list.push(effect);
        }
    }

    /// What was recorded so far.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
