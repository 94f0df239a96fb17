//! Limits on what comes in: extraction of uploads, request sizes, web fetches.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use data_plane_ingest::Limits;
use data_plane_web::fetch::FetchConfig;

use super::GlobalArgs;

/// What extracting one file (an upload, an ingested file, a fetched page) may
/// cost; a file over a limit is refused with an error naming it.
#[derive(Debug, Clone, Args)]
pub struct ExtractArgs {
    /// Most bytes a PDF's streams may decode to, each counted once per reference.
    #[arg(long, env = "DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES", global = true, default_value_t = Limits::DEFAULT_PDF_MAX_INFLATED_BYTES)]
    pub extract_pdf_max_inflated_bytes: u64,

    /// Most objects one PDF may hold.
    #[arg(long, env = "DATA_PLANE_EXTRACT_PDF_MAX_OBJECTS", global = true, default_value_t = Limits::DEFAULT_PDF_MAX_OBJECTS)]
    pub extract_pdf_max_objects: u64,

    /// Deepest HTML nesting handed to the parser; deeper tags are dropped, their text kept.
    #[arg(long, env = "DATA_PLANE_EXTRACT_HTML_MAX_DEPTH", global = true, default_value_t = Limits::DEFAULT_HTML_MAX_DEPTH)]
    pub extract_html_max_depth: usize,

    /// Most characters of text one document may yield.
    #[arg(long, env = "DATA_PLANE_EXTRACT_MAX_CHARS", global = true, default_value_t = Limits::DEFAULT_MAX_CHARS)]
    pub extract_max_chars: u64,

    /// Seconds the extraction of one file may take.
    #[arg(long, env = "DATA_PLANE_EXTRACT_TIMEOUT_SECS", global = true, default_value_t = Limits::DEFAULT_TIMEOUT.as_secs())]
    pub extract_timeout_secs: u64,
}

/// Per-user limits of /v1/chat and where /metrics is served.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Runs one user may have going at once on this replica, chat turns and
    /// MCP tasks together (0: no limit).
    #[arg(
        long,
        env = "DATA_PLANE_CHAT_MAX_CONCURRENT",
        global = true,
        default_value_t = 3
    )]
    pub chat_max_concurrent: u32,

    /// Runs one user may start per minute on this replica, chat turns and
    /// MCP tasks together (0: no limit).
    #[arg(
        long,
        env = "DATA_PLANE_CHAT_TURNS_PER_MINUTE",
        global = true,
        default_value_t = 20
    )]
    pub chat_turns_per_minute: u32,

    /// A second address that serves /metrics without a token, for the
    /// monitoring's private network. Unset: /metrics is served on the main
    /// address to service tokens only.
    #[arg(long, env = "DATA_PLANE_METRICS_ADDR", global = true)]
    pub metrics_addr: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    /// Internal hosts fetch_web_page may reach despite the SSRF guard:
    /// comma-separated names (`wiki.corp`, `*.corp`), addresses and CIDR
    /// networks (`10.1.0.0/16`). Empty: only public addresses.
    #[arg(
        long,
        env = "DATA_PLANE_FETCH_ALLOW",
        global = true,
        default_value = ""
    )]
    pub fetch_allow: String,

    /// Largest response body fetch_web_page reads, in bytes.
    #[arg(long, env = "DATA_PLANE_FETCH_MAX_BYTES", global = true, default_value_t = FetchConfig::DEFAULT_MAX_BYTES)]
    pub fetch_max_bytes: u64,

    /// Seconds fetch_web_page may take for one page, redirects included.
    #[arg(long, env = "DATA_PLANE_FETCH_TIMEOUT_SECS", global = true, default_value_t = FetchConfig::DEFAULT_TIMEOUT.as_secs())]
    pub fetch_timeout_secs: u64,
}

impl GlobalArgs {
    /// The extraction limits; a limit of 0 stops start-up, naming it.
    pub fn extract_limits(&self) -> anyhow::Result<Limits> {
        let e = &self.extract;
        for (name, value) in [
            (
                "DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES",
                e.extract_pdf_max_inflated_bytes,
            ),
            (
                "DATA_PLANE_EXTRACT_PDF_MAX_OBJECTS",
                e.extract_pdf_max_objects,
            ),
            (
                "DATA_PLANE_EXTRACT_HTML_MAX_DEPTH",
                e.extract_html_max_depth as u64,
            ),
            ("DATA_PLANE_EXTRACT_MAX_CHARS", e.extract_max_chars),
            ("DATA_PLANE_EXTRACT_TIMEOUT_SECS", e.extract_timeout_secs),
        ] {
            if value == 0 {
                anyhow::bail!("{name} must be above 0");
            }
        }
        Ok(Limits {
            pdf_max_inflated_bytes: e.extract_pdf_max_inflated_bytes,
            pdf_max_objects: e.extract_pdf_max_objects,
            html_max_depth: e.extract_html_max_depth,
            max_chars: e.extract_max_chars,
            timeout: Duration::from_secs(e.extract_timeout_secs),
        })
    }

    /// The fetcher's limits and allow-list; a malformed allow-list entry
    /// stops start-up, naming the entry.
    pub fn fetch_config(&self) -> anyhow::Result<FetchConfig> {
        let f = &self.fetch;
        if f.fetch_max_bytes == 0 || f.fetch_timeout_secs == 0 {
            anyhow::bail!(
                "DATA_PLANE_FETCH_MAX_BYTES and DATA_PLANE_FETCH_TIMEOUT_SECS must be above 0"
            );
        }
        Ok(FetchConfig {
            allow: f
                .fetch_allow
                .parse()
                .context("reading DATA_PLANE_FETCH_ALLOW")?,
            max_bytes: f.fetch_max_bytes,
            timeout: std::time::Duration::from_secs(f.fetch_timeout_secs),
            extract: self.extract_limits()?,
            ..FetchConfig::default()
        })
    }
}
