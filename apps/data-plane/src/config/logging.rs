//! How the server logs: format and colour.

use clap::ValueEnum;

use super::GlobalArgs;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogColor {
    Auto,
    Always,
    Never,
}

impl LogColor {
    /// Whether human-readable logs written to a stream that is (or is not)
    /// a terminal carry colour codes; `no_color`: NO_COLOR is set to
    /// something (no-color.org).
    pub fn colours(self, terminal: bool, no_color: bool) -> bool {
        match self {
            LogColor::Always => true,
            LogColor::Never => false,
            LogColor::Auto => terminal && !no_color,
        }
    }
}

/// Logs to standard error, human-readable (coloured only where
/// `--log-color` says) or as JSON (never coloured).
pub fn init_tracing(args: &GlobalArgs) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tantivy=warn,hyper=warn"));
    let colour = args.log_color.colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Human => builder.with_ansi(colour).init(),
        LogFormat::Json => builder.with_ansi(false).json().init(),
    }
}
