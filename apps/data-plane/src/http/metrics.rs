//! Prometheus metrics: HTTP requests by route and status with latency, tool
//! calls by tool and outcome with latency, how far the keyword index is, and
//! the chat runs running here with the calls waiting for an approval.
//! Served on the main listener to service tokens only, and without a token
//! on a separate listener when `DATA_PLANE_METRICS_ADDR` is set.

use std::sync::Mutex;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use data_plane_registry::{ErrorCode, ToolResult};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::auth::Service;
use crate::state::AppState;

/// The label every call of a tool that does not exist is counted under: the
/// names callers make up must not each become a time series.
pub const UNKNOWN_TOOL: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolName {
    tool: String,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms to about 65 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// The server's metrics.
pub struct Metrics {
    registry: Mutex<Registry>,
    http_requests: Family<HttpLabels, Counter>,
    http_seconds: Family<HttpLabels, Histogram, fn() -> Histogram>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_seconds: Family<ToolName, Histogram, fn() -> Histogram>,
    index_seq: Gauge,
    runs_running: Gauge,
    approvals_waiting: Gauge,
    audit_write_failures: Counter,
    audit_records_spooled: Counter,
    audit_records_replayed: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("data_plane");
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_seconds: Family<HttpLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let tool_calls = Family::<ToolLabels, Counter>::default();
        let tool_seconds: Family<ToolName, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let index_seq = Gauge::default();
        let audit_write_failures = Counter::default();
        registry.register(
            "audit_write_failures",
            "audit-record writes that failed and were retried",
            audit_write_failures.clone(),
        );
        let audit_records_spooled = Counter::default();
        registry.register(
            "audit_records_spooled",
            "audit records refused on every retry and kept in the local spool",
            audit_records_spooled.clone(),
        );
        let audit_records_replayed = Counter::default();
        registry.register(
            "audit_records_replayed",
            "spooled audit records written to the database",
            audit_records_replayed.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests answered",
            http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "time to answer an HTTP request (to the first byte of a stream)",
            http_seconds.clone(),
        );
        registry.register("tool_calls", "tool calls by outcome", tool_calls.clone());
        registry.register(
            "tool_call_duration_seconds",
            "time a tool call took, as the registry measured it",
            tool_seconds.clone(),
        );
        registry.register(
            "keyword_index_seq",
            "last change-log entry applied to the keyword index",
            index_seq.clone(),
        );
        let runs_running = Gauge::default();
        registry.register(
            "chat_runs_running",
            "chat runs this replica is running",
            runs_running.clone(),
        );
        let approvals_waiting = Gauge::default();
        registry.register(
            "chat_approvals_waiting",
            "calls of this replica's chat runs waiting for a person's approval",
            approvals_waiting.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            http_requests,
            http_seconds,
            tool_calls,
            tool_seconds,
            index_seq,
            runs_running,
            approvals_waiting,
            audit_write_failures,
            audit_records_spooled,
            audit_records_replayed,
        }
    }

    /// Counts one tool call.
    pub fn tool_call(&self, result: &ToolResult) {
        let unknown = result
            .error
            .as_ref()
            .is_some_and(|e| e.code == ErrorCode::UnknownTool);
        let tool = if unknown {
            UNKNOWN_TOOL.to_string()
        } else {
            result.tool.clone()
        };
        let outcome = match &result.error {
            None => "success".to_string(),
            Some(e) => serde_json::to_value(e.code)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "error".into()),
        };
        self.tool_calls
            .get_or_create(&ToolLabels {
                tool: tool.clone(),
                outcome,
            })
            .inc();
        self.tool_seconds
            .get_or_create(&ToolName { tool })
            .observe(result.duration_ms as f64 / 1000.0);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let registry = match self.registry.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            tracing::error!(error = %e, "could not encode metrics");
        }
        out
    }
}

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
    let labels = HttpLabels {
        method,
        route,
        status: response.status().as_u16(),
    };
    state.metrics.http_requests.get_or_create(&labels).inc();
    state
        .metrics
        .http_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
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
        .fallback(|| async { super::ApiError::not_found("this listener serves /metrics only") })
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
    state
        .metrics
        .index_seq
        .set(state.index.last_seq().unwrap_or(0));
    let (running, waiting) = state.runs.load_here();
    let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    state.metrics.runs_running.set(gauge(running));
    state.metrics.approvals_waiting.set(gauge(waiting));
    // The ledger counts; the counters shown catch up to it.
    let ledger = &state.ledger;
    for (shown, now) in [
        (
            &state.metrics.audit_write_failures,
            ledger.audit_write_failures(),
        ),
        (
            &state.metrics.audit_records_spooled,
            ledger.audit_records_spooled(),
        ),
        (
            &state.metrics.audit_records_replayed,
            ledger.audit_records_replayed(),
        ),
    ] {
        shown.inc_by(now.saturating_sub(shown.get()));
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics.render(),
    )
}
