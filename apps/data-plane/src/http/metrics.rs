//! The metrics' routes: the middleware that counts every request, `/metrics`
//! on the main listener for service tokens, and the optional token-free
//! listener (`DATA_PLANE_METRICS_ADDR`). What is counted is `crate::metrics`.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::auth::Service;
use crate::error::ApiError;
use crate::metrics::Now;
use crate::state::AppState;

/// Middleware: counts and times every request by its route pattern (never
/// the raw path, so ids do not explode the label set).
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    state.metrics.http_request(
        method,
        route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics` on the main listener: what it tells (tool names, traffic,
/// how far the index is) is for the deployment's monitoring, which calls
/// with a service token.
pub async fn serve_to_service(
    _service: Service,
    State(state): State<AppState>,
) -> impl IntoResponse {
    serve(State(state)).await
}

/// The router of the metrics listener (`DATA_PLANE_METRICS_ADDR`): `/metrics`
/// without a token, meant for an address only the monitoring can reach.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(serve))
        .fallback(|| async { ApiError::not_found("this listener serves /metrics only") })
        .with_state(state)
}

/// Binds `addr` (a failure stops start-up) and serves [`app`] there in the
/// background until the process ends.
pub async fn spawn_listener(addr: &str, state: AppState) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics without a token");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app(state).into_make_service()).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(())
}

/// `GET /metrics` in Prometheus' text format.
pub async fn serve(State(state): State<AppState>) -> impl IntoResponse {
    let (runs_running, approvals_waiting) = state.runs.load_here();
    let ledger = &state.ledger;
    let now = Now {
        index_seq: state.index.last_seq().unwrap_or(0),
        runs_running,
        approvals_waiting,
        audit_write_failures: ledger.audit_write_failures(),
        audit_records_spooled: ledger.audit_records_spooled(),
        audit_records_replayed: ledger.audit_records_replayed(),
    };
    (
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics.render(&now),
    )
}
