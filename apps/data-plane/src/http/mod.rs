//! The HTTP surface: routes, the JSON error body, health and readiness.

mod documents;
mod error;
mod extract;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use serde_json::json;

pub use error::ApiError;

use crate::state::AppState;

/// Largest accepted upload request, all files together.
pub const MAX_UPLOAD_BYTES: usize = 256 * 1024 * 1024;

/// The whole router; tests drive it directly or bind it to 127.0.0.1:0.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/v1/spaces",
            get(documents::list_spaces).post(documents::create_space),
        )
        .route("/v1/spaces/{space_id}", delete(documents::delete_space))
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
        .fallback(not_found)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

/// Ready when PostgreSQL answers; reports how far the keyword index trails the log.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let db_ok = sqlx::query("SELECT 1")
        .execute(state.db.pool())
        .await
        .is_ok();
    let index_seq = state.index.last_seq().ok();
    let status = if db_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(json!({
            "status": if db_ok { "ready" } else { "unavailable" },
            "database": db_ok,
            "index_seq": index_seq,
        })),
    )
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}
