//! Prometheus metrics: HTTP requests by route and status with latency, tool
//! calls by tool and outcome with latency, how far the keyword index is, and
//! the chat runs running here with the calls waiting for an approval. The
//! routes that serve them are `http/metrics.rs`.

use std::sync::Mutex;

use data_plane_registry::{ErrorCode, ToolResult};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

    /// Counts and times one answered HTTP request, by its route pattern.
    pub fn http_request(&self, method: String, route: String, status: u16, seconds: f64) {
        let labels = HttpLabels {
            method,
            route,
            status,
        };
        self.http_requests.get_or_create(&labels).inc();
        self.http_seconds.get_or_create(&labels).observe(seconds);
    }

    /// The metrics in Prometheus' text format, the gauges and the ledger's
    /// counts first brought to `now`.
    pub fn render(&self, now: &Now) -> String {
        self.index_seq.set(now.index_seq);
        self.runs_running.set(clamp(now.runs_running as u64));
        self.approvals_waiting
            .set(clamp(now.approvals_waiting as u64));
        // The ledger counts; the counters shown catch up to it.
        for (shown, count) in [
            (&self.audit_write_failures, now.audit_write_failures),
            (&self.audit_records_spooled, now.audit_records_spooled),
            (&self.audit_records_replayed, now.audit_records_replayed),
        ] {
            shown.inc_by(count.saturating_sub(shown.get()));
        }
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

/// What the gauges and the ledger's counters read at the moment of a scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct Now {
    pub index_seq: i64,
    pub runs_running: usize,
    pub approvals_waiting: usize,
    pub audit_write_failures: u64,
    pub audit_records_spooled: u64,
    pub audit_records_replayed: u64,
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
