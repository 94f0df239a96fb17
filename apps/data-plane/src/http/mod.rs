//! The HTTP surface: routes, the JSON error body, health and readiness.

mod admin;
mod chat;
mod context;
mod documents;
mod extract;
mod mcp;
mod members;
pub mod metrics;
mod module;
mod openapi;
mod page;
mod runs;
mod sign_in;
pub mod sse;
mod tools;
pub mod ui_stream;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, put};
use serde_json::json;

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Largest accepted upload request, all files together.
pub const MAX_UPLOAD_BYTES: usize = 256 * 1024 * 1024;

/// Largest request body of every other route (tool arguments, chat turns,
/// settings). A larger body is answered 413 with the JSON error body before
/// anything reads it whole.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Every path the router serves; a test holds docs/openapi.json to it.
pub const ROUTES: &[&str] = &[
    "/",
    "/static/{file}",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/v1/auth/config",
    "/manifest",
    "/execute",
    "/v1/tools",
    "/v1/tools/{name}/execute",
    "/v1/chat",
    "/mcp",
    "/v1/runs/{run_id}",
    "/v1/runs/{run_id}/events",
    "/v1/runs/{run_id}/stop",
    "/v1/runs/{run_id}/approvals/{call_id}",
    "/v1/admin/settings",
    "/v1/admin/modules",
    "/v1/admin/modules/refresh",
    "/v1/spaces",
    "/v1/spaces/{space_id}",
    "/v1/spaces/{space_id}/members",
    "/v1/spaces/{space_id}/members/{user_id}",
    "/v1/spaces/{space_id}/sources",
    "/v1/spaces/{space_id}/documents",
    "/v1/sources/{source_id}/documents",
    "/v1/documents/{document_id}",
];

/// What `axum::serve` is given: [`app`] as a service that hands each new
/// connection a clone of one router (an `Arc`). Given the `Router` itself,
/// axum rebuilds its route table for every connection, every route's
/// service and a copy of the state cloned: about 16 KB and seventy
/// allocations held by each open connection with these routes (heaptrack,
/// benches/chat.sh), where the routes here are already built once by
/// `with_state`.
pub fn service(state: AppState) -> axum::routing::IntoMakeService<Router> {
    app(state).into_make_service()
}

/// The whole router; tests drive it directly or bind it to 127.0.0.1:0
/// (through [`service`], as `data-plane serve` does).
pub fn app(state: AppState) -> Router {
    // A replica that serves chat turns continues those of a replica that died.
    state
        .runs
        .resume_with(std::sync::Arc::new(chat::ChatResumer(state.clone())));
    // The MCP endpoint authenticates before the protocol's SDK reads a byte.
    let mcp = Router::new()
        .route_service("/mcp", mcp::service(state.clone()))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            mcp::authenticate,
        ));
    Router::new()
        .merge(mcp)
        .route("/", get(page::index))
        .route("/static/{file}", get(page::asset))
        .route("/metrics", get(metrics::serve_to_service))
        .route("/openapi.json", get(openapi::serve))
        .route(
            "/.well-known/oauth-protected-resource",
            get(sign_in::api_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(sign_in::mcp_metadata),
        )
        .route("/v1/auth/config", get(sign_in::config))
        .route("/manifest", get(module::manifest))
        .route("/execute", post(module::execute))
        .route("/v1/tools", get(tools::list))
        .route("/v1/tools/{name}/execute", post(tools::execute))
        .route("/v1/chat", post(chat::chat))
        .route("/v1/runs/{run_id}", get(runs::get))
        .route("/v1/runs/{run_id}/events", get(runs::events))
        .route("/v1/runs/{run_id}/stop", post(runs::stop))
        .route("/v1/runs/{run_id}/approvals/{call_id}", post(runs::answer))
        .route("/v1/admin/settings", get(admin::get).put(admin::put))
        .route("/v1/admin/modules", get(admin::modules))
        .route("/v1/admin/modules/refresh", post(admin::refresh_modules))
        .route(
            "/v1/spaces",
            get(documents::list_spaces).post(documents::create_space),
        )
        .route("/v1/spaces/{space_id}", delete(documents::delete_space))
        .route(
            "/v1/spaces/{space_id}/members",
            get(members::list).post(members::add),
        )
        .route(
            "/v1/spaces/{space_id}/members/{user_id}",
            put(members::change).delete(members::remove),
        )
        .route(
            "/v1/spaces/{space_id}/sources",
            get(documents::list_sources).post(documents::create_source),
        )
        .route(
            "/v1/spaces/{space_id}/documents",
            get(documents::list_documents),
        )
        .route(
            "/v1/sources/{source_id}/documents",
            post(documents::upload).layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES)),
        )
        .route(
            "/v1/documents/{document_id}",
            delete(documents::delete_document),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            sign_in::point_to_metadata,
        ))
        // The upload route's own limit, set closer to it, takes precedence.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(declared_length))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        // The probes, outside the request log: a balancer asks every
        // second, and a 503 from /readyz (starting, draining) is an answer,
        // not a failure to log.
        .merge(
            Router::new()
                .route("/healthz", get(healthz))
                .route("/readyz", get(readyz))
                .layer(axum::middleware::from_fn(declared_length)),
        )
        .with_state(state)
}

/// Refuses a body whose declared length is over every route's limit at once,
/// without reading it; bodies without a length are counted as they are read.
async fn declared_length(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let limit = if request.uri().path().starts_with("/v1/sources/") {
        MAX_UPLOAD_BYTES
    } else {
        MAX_BODY_BYTES
    };
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(length) if length > limit as u64 => {
            ApiError::payload_too_large(length, limit).into_response()
        }
        _ => next.run(request).await,
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// Ready when PostgreSQL answers, the keyword index has caught up with
/// what was written while this replica was away, and the replica is not
/// stopping: what a balancer's health check asks (503 otherwise, with the
/// reason in `status`). How far the index has come tells how much is being
/// written, so only service tokens see `index_seq`.
async fn readyz(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let db_ok = state.db.ping().await;
    let index_ok = state.readiness.is_index_caught_up();
    let status = if state.readiness.is_draining() {
        "draining"
    } else if !db_ok {
        "unavailable"
    } else if !index_ok {
        "starting"
    } else {
        "ready"
    };
    let code = if status == "ready" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = json!({
        "status": status,
        "database": db_ok,
        "index": if index_ok { "caught_up" } else { "catching_up" },
    });
    let service = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .and_then(|token| state.services.service(token.trim()));
    if service.is_some() {
        body["index_seq"] = json!(state.index.last_seq().ok());
    }
    (code, axum::Json(body))
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this endpoint does not accept that method",
    )
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint")
}
