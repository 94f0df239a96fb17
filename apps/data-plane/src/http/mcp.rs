//! `/mcp`: the Model Context Protocol over its Streamable HTTP transport
//! (docs/mcp.md). The protocol's own SDK (rmcp) frames JSON-RPC, negotiates
//! the version and streams replies; this file answers `tools/list` and
//! `tools/call` with the registry, for the caller of the request's bearer
//! token, in the space and under the agent profile the URL names.
//!
//! The endpoint is stateless: no session lives on a replica, so any replica
//! answers any request. A call's ToolEvents (analyze_document's sub-agent
//! above all) become progress notifications on the call's own response
//! stream when the client sent a progress token; a client that closes that
//! stream stops the call. (`notifications/cancelled`, which arrives as a
//! request of its own, possibly at another replica, is accepted and has no
//! call to reach: clients of the current revision close the stream.)

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use data_plane_agent::prompt::{PromptFacts, PromptTool};
use data_plane_registry::{Annotations, ErrorCode, NoCallbacks, ToolContext, ToolEntry, ToolEvent};
use data_plane_store::Scope;
use data_plane_store::content::{self, DocumentEntry};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, EmbeddedResource, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InitializeResult, ListPromptsResult, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, Resource, ResourceContents, Role, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::context::{context, default_profile, require_member, space_facts, with_profile};
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
    StreamableHttpService::new(
        move || Ok(McpServer::new(state.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Authenticates every `/mcp` request as the rest of the API does and hands
/// the caller to the handler; a refusal is answered 401 with
/// `WWW-Authenticate: Bearer`, as the protocol's authorization section asks.
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
        Err(e) => {
            let unauthorized = e.code() == crate::error::ErrorCode::Unauthorized;
            let mut response = e.into_response();
            if unauthorized {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"data-plane\""),
                );
            }
            response
        }
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

    /// Up to `limit` documents of `space` that the caller may read, in
    /// path order: a page, or those at (or beginning with) a path.
    async fn entries(
        &self,
        ctx: &ToolContext,
        space: Uuid,
        which: Entries<'_>,
        limit: i64,
    ) -> Result<Vec<DocumentEntry>, McpError> {
        let mut tx = self
            .state
            .db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(store_fault)?;
        let found = match which {
            Entries::After(after) => content::document_entries(&mut tx, space, after, limit).await,
            Entries::AtPath(path, prefix) => {
                content::document_entries_by_path(&mut tx, space, path, prefix, limit).await
            }
        }
        .map_err(store_fault)?;
        tx.commit().await.map_err(|e| store_fault(e.into()))?;
        Ok(found)
    }

    /// Whether the context may read documents at all (read_document is
    /// offered): resources and completions follow it.
    fn reads_documents(&self, ctx: &ToolContext) -> bool {
        self.state
            .registry
            .available_entries(ctx)
            .iter()
            .any(|e| e.name == READ_DOCUMENT)
    }

    /// A prompt's document argument as a resource URI: a URI as it is, an
    /// id or a path in the endpoint's space as that document's.
    async fn document_uri(&self, ctx: &ToolContext, document: String) -> Result<String, McpError> {
        if document.starts_with("data-plane://") {
            return Ok(document);
        }
        let Some(space) = ctx.space_id else {
            return Err(McpError::invalid_params(
                format!(
                    "{document:?}: without a space on the endpoint, name a document by its resource URI"
                ),
                None,
            ));
        };
        if let Ok(id) = Uuid::parse_str(&document) {
            return Ok(format!("data-plane://spaces/{space}/documents/{id}"));
        }
        let found = self
            .entries(ctx, space, Entries::AtPath(&document, false), 2)
            .await?;
        match found.as_slice() {
            [one] => Ok(format!("data-plane://spaces/{space}/documents/{}", one.id)),
            [] => Err(McpError::resource_not_found(
                format!("no document at {document:?} that you may read here"),
                None,
            )),
            _ => Err(McpError::invalid_params(
                format!(
                    "several documents have the path {document:?} (in different sources): name one by its resource URI"
                ),
                None,
            )),
        }
    }

    /// A document by its resource URI, read as `resources/read` reads it
    /// (see [`ServerHandler::read_resource`]).
    async fn read_text(
        &self,
        rq: &RequestContext<RoleServer>,
        uri: String,
    ) -> Result<ResourceContents, McpError> {
        let Some((space, id)) = document_of(&uri) else {
            return Err(McpError::invalid_params(
                format!("{uri:?} names no document: resources here are {DOCUMENT_URI}"),
                None,
            ));
        };
        let not_found = || {
            McpError::resource_not_found(format!("no document {uri} that you may read here"), None)
        };
        // A space the caller does not read is not found, like a document.
        let ctx = self.tool_context_in(rq, Some(space)).await.map_err(|e| {
            if e.code == rmcp::model::ErrorCode::INTERNAL_ERROR {
                e
            } else {
                not_found()
            }
        })?;
        if ctx.space_id != Some(space) {
            return Err(not_found());
        }
        let call_id = format!("mcp_{}", Uuid::new_v4().simple());
        let ctx = ctx.with_call_id(call_id);
        let args = json!({ "document_id": id, "max_length": RESOURCE_MAX_CHARS });
        let result = self
            .state
            .registry
            .execute_tool(READ_DOCUMENT, args, &ctx, &NoCallbacks)
            .await;
        self.state.metrics.tool_call(&result);
        let read = match (&result.data, &result.error) {
            (Some(data), None) if result.success => data,
            (_, Some(e)) if e.code == ErrorCode::NotFound => return Err(not_found()),
            (_, Some(e)) if e.retryable => {
                return Err(McpError::internal_error(e.message.clone(), None));
            }
            (_, Some(e)) => return Err(McpError::invalid_request(e.message.clone(), None)),
            _ => {
                return Err(McpError::internal_error(
                    "the document could not be read",
                    None,
                ));
            }
        };
        let text = read["text"].as_str().unwrap_or_default().to_string();
        let total = read["total_chars"].as_u64().unwrap_or(0);
        let returned = read["end"].as_u64().unwrap_or(0);
        let meta = (returned < total).then(|| {
            let mut meta = serde_json::Map::new();
            meta.insert("truncated".into(), json!(true));
            meta.insert("totalChars".into(), json!(total));
            meta.insert("returnedChars".into(), json!(returned));
            MetaObject(meta)
        });
        let contents = ResourceContents::TextResourceContents {
            uri,
            mime_type: Some("text/plain".into()),
            text,
            meta,
        };
        Ok(contents)
    }

    /// The chat agent's system prompt, rendered as a chat in this
    /// endpoint's space with its tools would be: the same template, so a
    /// prompt asks what the agent is asked.
    async fn instructions(
        &self,
        rq: &RequestContext<RoleServer>,
        ctx: &ToolContext,
    ) -> Result<String, McpError> {
        let template = self
            .state
            .agent
            .as_ref()
            .and_then(|agent| agent.config().system_prompt.clone())
            .unwrap_or_default();
        let space = match ctx.space_id {
            Some(space) => Some(
                space_facts(&self.state, &caller_of(rq)?, space)
                    .await
                    .map_err(refused)?,
            ),
            None => None,
        };
        let offered = self.state.registry.offered(ctx);
        let tools = PromptTool::offered(&offered);
        let facts = PromptFacts {
            space,
            today: chrono::Utc::now().date_naive(),
        };
        Ok(template.render(&facts, &tools))
    }
}

/// The HTTP request an MCP request came in.
fn request_parts(rq: &RequestContext<RoleServer>) -> Result<&axum::http::request::Parts, McpError> {
    rq.extensions
        .get::<axum::http::request::Parts>()
        .ok_or_else(|| McpError::internal_error("the HTTP request is missing", None))
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

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .enable_completions()
                .build(),
        )
        .with_server_info(Implementation::new("data-plane", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    /// The documents of the endpoint's space the caller may read, a page
    /// at a time in path order; without a space, none (as tools that need
    /// one are not listed).
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        // Listed only where they can be read: a profile or a setting that
        // takes read_document away takes the resources too.
        let Some(space) = ctx.space_id.filter(|_| self.reads_documents(&ctx)) else {
            return Ok(ListResourcesResult::default());
        };
        let after = match request.and_then(|r| r.cursor) {
            Some(cursor) => Some(read_cursor(&cursor)?),
            None => None,
        };
        let after = after.as_ref().map(|(id, path)| (path.as_str(), *id));
        let mut entries = self
            .entries(&ctx, space, Entries::After(after), RESOURCES_PAGE + 1)
            .await?;
        let more = entries.len() > RESOURCES_PAGE as usize;
        entries.truncate(RESOURCES_PAGE as usize);
        let next = more
            .then(|| entries.last().map(|d| format!("{}/{}", d.id, d.path)))
            .flatten();
        let mut result =
            ListResourcesResult::with_all_items(entries.iter().map(resource).collect());
        result.next_cursor = next;
        Ok(result)
    }

    /// A document's extracted text by its URI: a call of read_document
    /// (the same profile, settings, gate, limits and audit as any call,
    /// under the caller's row-level security), in the URI's space, which
    /// must be the endpoint's when it names one. A longer document than
    /// one read returns is cut, its `_meta` saying where.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = self.read_text(&rq, request.uri).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    /// The prompts: requests a person starts from, with the instructions
    /// the chat agent follows (docs/mcp.md, "Prompts").
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.tool_context(&rq).await?;
        let argument = |name: &str, description: &str| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(true)
        };
        let document = "The document: its path in the endpoint's space (completed as you type), its resource URI, or its id.";
        let prompts = vec![
            Prompt::new(
                ANSWER,
                Some("Answer a question from the space's documents, citing the passages used."),
                Some(vec![argument("question", "What to answer.")]),
            )
            .with_title("Answer with citations"),
            Prompt::new(
                SUMMARISE,
                Some("Summarise one document, citing the passages used."),
                Some(vec![argument("document", document)]),
            )
            .with_title("Summarise a document"),
            Prompt::new(
                COMPARE,
                Some("Compare two documents: what they share, where they differ."),
                Some(vec![
                    argument("first", document),
                    argument("second", document),
                ]),
            )
            .with_title("Compare two documents"),
        ];
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    /// A prompt's messages: the chat agent's own instructions, rendered
    /// for this endpoint (its space, the tools it offers), then the
    /// request, with the documents it names embedded as read_document
    /// reads them.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let arguments = request.arguments.unwrap_or_default();
        let argument = |name: &str| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    McpError::invalid_params(
                        format!("the prompt {:?} needs the argument {name:?}", request.name),
                        None,
                    )
                })
        };
        let (task, documents) = match request.name.as_str() {
            ANSWER => (argument("question")?, Vec::new()),
            SUMMARISE => (
                "Summarise this document: its subject, its main points and its conclusions."
                    .to_string(),
                vec![argument("document")?],
            ),
            COMPARE => (
                "Compare these two documents: what they agree on, where they differ, and what only one of them covers."
                    .to_string(),
                vec![argument("first")?, argument("second")?],
            ),
            other => {
                return Err(McpError::invalid_params(
                    format!("no prompt {other:?}; prompts/list names them"),
                    None,
                ));
            }
        };
        let mut messages = vec![PromptMessage::new_text(
            Role::User,
            self.instructions(&rq, &ctx).await?,
        )];
        for document in documents {
            let uri = self.document_uri(&ctx, document).await?;
            let contents = self.read_text(&rq, uri).await?;
            messages.push(PromptMessage::new(
                Role::User,
                ContentBlock::Resource(EmbeddedResource::new(contents)),
            ));
        }
        messages.push(PromptMessage::new_text(Role::User, task));
        Ok(GetPromptResult::new(messages).into())
    }

    /// Completes the prompts' document arguments with the paths of the
    /// space's documents that begin with what was typed (case aside), as
    /// far as the caller may read them; other arguments have nothing to
    /// complete.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let Reference::Prompt(prompt) = &request.r#ref else {
            return Err(McpError::invalid_params(
                "this server has no resource templates to complete",
                None,
            ));
        };
        let documents = match prompt.name.as_str() {
            ANSWER => false,
            SUMMARISE => request.argument.name == "document",
            COMPARE => ["first", "second"].contains(&request.argument.name.as_str()),
            other => {
                return Err(McpError::invalid_params(
                    format!("no prompt {other:?}; prompts/list names them"),
                    None,
                ));
            }
        };
        let empty = || CompleteResult::new(CompletionInfo::default());
        let Some(space) = ctx
            .space_id
            .filter(|_| documents && self.reads_documents(&ctx))
        else {
            return Ok(empty());
        };
        let limit = CompletionInfo::MAX_VALUES as i64;
        let typed = Entries::AtPath(request.argument.value.trim(), true);
        let mut found = self.entries(&ctx, space, typed, limit + 1).await?;
        let more = found.len() > CompletionInfo::MAX_VALUES;
        found.truncate(CompletionInfo::MAX_VALUES);
        let values = found.into_iter().map(|d| d.path).collect();
        let info = CompletionInfo::with_pagination(values, None, more)
            .map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        let tools = self
            .state
            .registry
            .available_entries(&ctx)
            .iter()
            .map(|entry| mcp_tool(entry, &ctx))
            .collect::<Result<Vec<Tool>, _>>()
            .map_err(|e| McpError::internal_error(format!("a tool cannot be listed: {e}"), None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let ctx = match self.tool_context(&rq).await {
            Ok(ctx) => ctx,
            // The call cannot run here: the client's model reads why.
            Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e.message)]).into()),
        };
        let call_id = format!("mcp_{}", Uuid::new_v4().simple());
        let ctx = ctx.with_call_id(call_id.clone());
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let progress = rq.meta.get_progress_token();
        let mut sent = 0u32;
        // A notification that cannot be delivered is logged; the call goes
        // on (its result may still reach the client).
        let peer = &rq.peer;
        let forward = |event: ToolEvent| {
            let note = progress
                .as_ref()
                .filter(|_| !is_the_call_itself(&event, &call_id))
                .map(|token| {
                    sent += 1;
                    let message = serde_json::to_string(&event).unwrap_or_default();
                    ProgressNotificationParam::new(token.clone(), f64::from(sent))
                        .with_message(message)
                });
            async move {
                if let Some(note) = note
                    && let Err(e) = peer.notify_progress(note).await
                {
                    tracing::debug!(error = %e, "a progress notification was not delivered");
                }
                true
            }
        };
        let call = self
            .state
            .registry
            .execute_streaming(&request.name, args, &ctx, forward);
        let result = tokio::select! {
            result = call => result,
            // Dropping the call stops it (a model request, a fetch, a
            // remote module's call); the client hears nothing more.
            () = rq.ct.cancelled() => None,
        };
        let Some(result) = result else {
            return Err(McpError::internal_error("the call was cancelled", None));
        };
        self.state.metrics.tool_call(&result);
        Ok(call_result(&result).into())
    }
}

/// The call's own tool_call and tool_result: the client made the call and
/// gets the result; only what happens inside is progress.
fn is_the_call_itself(event: &ToolEvent, call_id: &str) -> bool {
    match event {
        ToolEvent::ToolCall { call_id: id, .. } | ToolEvent::ToolResult { call_id: id, .. } => {
            id == call_id
        }
        _ => false,
    }
}

/// Documents per `resources/list` page.
const RESOURCES_PAGE: i64 = 100;

/// The tool a resource is read with.
const READ_DOCUMENT: &str = "read_document";

/// The most characters `resources/read` returns of one document: what one
/// read_document call returns at most.
const RESOURCE_MAX_CHARS: u64 = data_plane_handlers::MAX_READ_CHARS;

/// Which documents [`McpServer::entries`] reads.
enum Entries<'a> {
    /// The page after this (path, id).
    After(Option<(&'a str, Uuid)>),
    /// At this path, or (`true`) beginning with it.
    AtPath(&'a str, bool),
}

/// The prompts' names.
const ANSWER: &str = "answer_with_citations";
const SUMMARISE: &str = "summarise_document";
const COMPARE: &str = "compare_documents";

/// How a document is named as a resource.
const DOCUMENT_URI: &str = "data-plane://spaces/{space_id}/documents/{document_id}";

/// A document as a resource: its URI, its path as the name, its title
/// (else the file's name), and the size of the text a read returns.
fn resource(d: &DocumentEntry) -> Resource {
    let title = d
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| d.path.rsplit('/').next().unwrap_or(&d.path).to_string());
    Resource::new(
        format!("data-plane://spaces/{}/documents/{}", d.space_id, d.id),
        d.path.clone(),
    )
    .with_title(title)
    .with_mime_type("text/plain")
    .with_size(u64::try_from(d.text_bytes).unwrap_or(0))
}

/// The space and document a resource URI names.
fn document_of(uri: &str) -> Option<(Uuid, Uuid)> {
    let (space, document) = uri
        .strip_prefix("data-plane://spaces/")?
        .split_once("/documents/")?;
    Some((space.parse().ok()?, document.parse().ok()?))
}

/// A `resources/list` cursor: the last document of the page before, as
/// `ID/PATH`.
fn read_cursor(cursor: &str) -> Result<(Uuid, String), McpError> {
    cursor
        .split_once('/')
        .and_then(|(id, path)| Some((id.parse().ok()?, path.to_string())))
        .ok_or_else(|| {
            McpError::invalid_params(format!("{cursor:?} is not a cursor this server gave"), None)
        })
}

/// A store error as the rest of the API answers it (the cause logged
/// there), then as MCP's error.
fn store_fault(e: data_plane_store::StoreError) -> McpError {
    refused(e.into())
}

/// A ToolResult as MCP's CallToolResult: the data as structured content
/// (and its JSON as text, for clients that read only text), or a failure
/// as `isError` with the error's message (and its code in the structured
/// content), which the client's model reads.
fn call_result(result: &data_plane_registry::ToolResult) -> CallToolResult {
    if !result.success {
        let message = result
            .error
            .as_ref()
            .map_or("the tool failed", |e| e.message.as_str());
        let mut out = CallToolResult::error(vec![ContentBlock::text(message.to_string())]);
        out.structured_content = Some(json!({ "error": result.error }));
        return out;
    }
    match &result.data {
        Some(data @ Value::Object(_)) => CallToolResult::structured(data.clone()),
        Some(other) => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
        None => CallToolResult::success(Vec::new()),
    }
}

/// A registry entry as an MCP tool: the name and parameters the model is
/// offered in `ctx`, a title, and the annotations as MCP's hints.
fn mcp_tool(entry: &ToolEntry, ctx: &ToolContext) -> Result<Tool, serde_json::Error> {
    let definition = entry.definition_for(ctx);
    let name = definition["name"]
        .as_str()
        .unwrap_or(&entry.name)
        .to_string();
    let mut schema = definition
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }));
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    let title = title(&entry.name);
    let Annotations {
        read_only,
        destructive,
        idempotent,
        open_world,
        ..
    } = entry.annotations;
    let mut tool = json!({
        "name": name,
        "title": title,
        "description": definition["description"],
        "inputSchema": schema,
        "annotations": {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": open_world,
        },
    });
    if let Some(output) = &entry.output_schema {
        tool["outputSchema"] = Value::clone(output);
    }
    serde_json::from_value(tool)
}

/// `search_documents` → "Search documents"; a remote module's tool keeps
/// its module in front ("weather: Get forecast").
fn title(name: &str) -> String {
    let (module, tool) = match name.split_once('.') {
        Some((module, tool)) => (Some(module), tool),
        None => (None, name),
    };
    let words = tool.replace(['_', '-'], " ");
    let mut chars = words.chars();
    let sentence: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    match module {
        Some(module) => format!("{module}: {sentence}"),
        None => sentence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_as_words() {
        assert_eq!(title("search_documents"), "Search documents");
        assert_eq!(title("analyze_document"), "Analyze document");
        assert_eq!(title("weather.get_forecast"), "weather: Get forecast");
        assert_eq!(title(""), "");
    }
}
