//! `/mcp`: the Model Context Protocol over its Streamable HTTP transport
//! (docs/mcp.md). The protocol's own SDK (rmcp) frames JSON-RPC, negotiates
//! the version and streams replies; this module answers for the caller of
//! the request's bearer token, in the space and under the agent profile
//! the URL names: tools from the registry (`tools`), the space's documents
//! as resources (`resources`), the chat agent's instructions as prompts
//! (`prompts`), log lines of a call at the level the client asked for
//! (`logging`), and long calls as tasks that outlive the request
//! (`tasks`).
//!
//! The endpoint is stateless: no session lives on a replica, so any replica
//! answers any request. A call's ToolEvents (analyze_document's sub-agent
//! above all) become progress notifications on the call's own response
//! stream when the client sent a progress token; a client that closes that
//! stream stops the call. (`notifications/cancelled`, which arrives as a
//! request of its own, possibly at another replica, is accepted and has no
//! call to reach: clients of the current revision close the stream.)

mod logging;
mod prompts;
mod resources;
mod subscriptions;
mod tasks;
mod tools;

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use data_plane_registry::ToolContext;
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, Reference, ServerCapabilities, ServerConfig,
};
use rmcp::model::{CancelTaskParams, GetTaskParams, GetTaskResult, UpdateTaskParams};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use uuid::Uuid;

use super::context::{context, default_profile, require_member, with_profile};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// What tells a client what this server is for, sent in `initialize`.
const INSTRUCTIONS: &str = "Tools over the user's documents (navigation, search, reading, \
analysis, SQL over tabular files) and, where enabled, the web. Name a space with \
?spaceId= on the endpoint's URL (or the X-Space-Id header) to work in it; without one, \
tools that need a space are not listed.";

/// The header naming the space, for clients that cannot change the URL.
const SPACE_HEADER: &str = "x-space-id";

/// The `/mcp` service. Stateless (any replica answers any request) and
/// answering with an event stream, so that progress notifications reach the
/// client before the result. A request from a browser page of an origin the
/// deployment did not allow is refused 403 by the transport, as the
/// protocol requires (the check is the SDK's; a request without `Origin`,
/// from a program, passes). The transport's Host check is off: every
/// request carries a bearer token, which a page rebinding a name to this
/// server cannot attach, and the deployment's own names are not known here.
pub fn service(state: AppState) -> StreamableHttpService<McpServer, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let mut config = match &state.allowed_origins {
        Some(origins) => config
            .with_allowed_origins(origins.iter().cloned())
            .enforce_origin_validation(),
        None => config.disable_allowed_origins(),
    };
    config.legacy_session_mode = false;
    config.json_response = false;
    config.max_request_body_bytes = super::MAX_BODY_BYTES;
    // A shutdown ends the streams that would stay open (subscriptions).
    let config = config.with_cancellation_token(state.shutdown.child_token());
    StreamableHttpService::new(
        move || Ok(McpServer::new(state.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Authenticates every `/mcp` request as the rest of the API does and hands
/// the caller to the handler; a refusal is answered 401 with
/// `WWW-Authenticate: Bearer` (and, where an OpenID provider is configured,
/// the metadata that says how to sign in), as the protocol's authorization
/// section asks.
pub async fn authenticate(
    caller: Result<Caller, ApiError>,
    mut request: Request,
    next: Next,
) -> Response {
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// Answers one request's MCP messages.
#[derive(Clone)]
pub struct McpServer {
    state: AppState,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointQuery {
    space_id: Option<String>,
    agent: Option<String>,
}

impl McpServer {
    fn new(state: AppState) -> Self {
        McpServer { state }
    }

    /// The tool context of the request behind `rq`: its caller, the space
    /// and profile its URL (or header) names, settings as stored now.
    async fn tool_context(&self, rq: &RequestContext<RoleServer>) -> Result<ToolContext, McpError> {
        self.tool_context_in(rq, None).await
    }

    /// [`McpServer::tool_context`], in `fallback` when the request names
    /// no space.
    async fn tool_context_in(
        &self,
        rq: &RequestContext<RoleServer>,
        fallback: Option<Uuid>,
    ) -> Result<ToolContext, McpError> {
        let parts = request_parts(rq)?;
        let caller = caller_of(rq)?;
        // Read with the same rules as axum's `Query` on other routes.
        let query = axum::extract::Query::<EndpointQuery>::try_from_uri(&parts.uri)
            .map(|q| q.0)
            .map_err(|e| McpError::invalid_params(format!("the endpoint's query: {e}"), None))?;
        let space = query.space_id.or_else(|| {
            parts
                .headers
                .get(SPACE_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_string())
        });
        let space_id = match space.filter(|s| !s.is_empty()) {
            None => fallback,
            Some(text) => Some(Uuid::parse_str(&text).map_err(|_| {
                McpError::invalid_params(
                    format!("spaceId: {text:?} is not a space id (a UUID)"),
                    None,
                )
            })?),
        };
        if let Some(space_id) = space_id {
            require_member(&self.state, &caller, space_id)
                .await
                .map_err(refused)?;
        }
        let ctx = context(&self.state, &caller, space_id, &parts.headers)
            .await
            .map_err(refused)?;
        let agent = query.agent.as_deref().unwrap_or(default_profile(&caller));
        with_profile(&self.state, &caller, ctx, agent, "agent").map_err(refused)
    }
}

/// The HTTP request an MCP request came in.
fn request_parts(rq: &RequestContext<RoleServer>) -> Result<&axum::http::request::Parts, McpError> {
    rq.extensions
        .get::<axum::http::request::Parts>()
        .ok_or_else(|| McpError::internal_error("the HTTP request is missing", None))
}

impl McpServer {
    /// A transaction in `user`'s scope: their row-level security.
    async fn scoped(&self, user: Uuid) -> Result<data_plane_store::ScopedTx, McpError> {
        self.state
            .db
            .begin(data_plane_store::Scope::User(user))
            .await
            .map_err(store_fault)
    }
}

/// Commits a transaction of [`McpServer::scoped`].
async fn commit(tx: data_plane_store::ScopedTx) -> Result<(), McpError> {
    tx.commit().await.map_err(|e| store_fault(e.into()))
}

/// A new id for a call made over /mcp (`mcp_…`, in the audit log and the
/// call's events).
fn call_id() -> String {
    format!("mcp_{}", Uuid::new_v4().simple())
}

/// Who sent it (the layer in front authenticated them).
fn caller_of(rq: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    request_parts(rq)?
        .extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

/// A refusal of the caller's request as the client's own mistake; a fault
/// on our side (the database away) as an internal error.
fn refused(e: ApiError) -> McpError {
    match e.code() {
        crate::error::ErrorCode::Internal | crate::error::ErrorCode::Unavailable => {
            McpError::internal_error(e.message().to_string(), None)
        }
        _ => McpError::invalid_params(e.message().to_string(), None),
    }
}

/// A store error as the rest of the API answers it (the cause logged
/// there), then as MCP's error.
fn store_fault(e: data_plane_store::StoreError) -> McpError {
    refused(e.into())
}

impl ServerHandler for McpServer {
    /// A handshake-era session is offered no resource subscriptions: they
    /// would need a stream that outlives a request (see `subscribe`).
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, McpError> {
        rq.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Some(resources) = result.capabilities.resources.as_mut() {
            resources.subscribe = None;
            resources.list_changed = None;
        }
        Ok(result)
    }

    #[allow(deprecated)] // logging: see logging.rs
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("data-plane", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.resource_page(request, rq).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.resource_read(request, rq).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.prompt_list(request, rq).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.prompt_get(request, rq).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(self.subscription_filter(requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        self.listen_for(subscription).await
    }

    /// A handshake-era subscription would need a stream that outlives its
    /// request, which this stateless endpoint does not keep.
    #[allow(deprecated)] // resources/subscribe is legacy-only in rmcp
    async fn subscribe(
        &self,
        _request: rmcp::model::SubscribeRequestParams,
        _rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(McpError::invalid_request(
            "resources/subscribe needs a session, which this endpoint does not keep: \
             subscribe with subscriptions/listen (protocol 2026-07-28), or read again",
            None,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.resource_templates(rq).await
    }

    /// A prompt's or a resource template's argument, completed from what
    /// was typed: at most 100 values, `hasMore` saying whether there are
    /// others.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let mut values = match &request.r#ref {
            Reference::Prompt(prompt) => self.complete_prompt(&prompt.name, &request, &ctx).await?,
            Reference::Resource(template) => {
                self.complete_template(&template.uri, &request, &ctx)
                    .await?
            }
            _ => {
                return Err(McpError::invalid_params(
                    "completion completes a prompt's or a resource template's argument",
                    None,
                ));
            }
        };
        let more = values.len() > CompletionInfo::MAX_VALUES;
        values.truncate(CompletionInfo::MAX_VALUES);
        let info = CompletionInfo::with_pagination(values, None, more)
            .map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    #[allow(deprecated)] // logging: see logging.rs
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.keep_log_level(request, rq).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.tool_list(request, rq).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.tool_call(request, rq).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.task_get(request, rq).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_cancel(request, rq).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.task_update(request, rq).await
    }
}
