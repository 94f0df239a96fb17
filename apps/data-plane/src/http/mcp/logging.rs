//! MCP's logging: the level a caller asked for (a request's own, or the
//! one `logging/setLevel` kept for the caller), and a call's log lines as
//! `notifications/message`. The protocol deprecates logging (SEP-2577),
//! and rmcp marks its types so; it is still how a client hears what
//! happens inside a call (its start, the gate's decision, a retry, its
//! end), so this module allows what is deprecated.
#![allow(deprecated)]

use data_plane_registry::{CallLog, LogLevel};
use data_plane_store::log_levels;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, SetLevelRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer, ServiceError};

use super::{McpServer, caller_of, commit, store_fault};

impl McpServer {
    /// The least level of log lines the caller hears during a call: the
    /// request's own (its `_meta`, from 2026-07-28 on), else, for a
    /// request of a handshake-era version, the one `logging/setLevel` kept
    /// for the caller; `None`: no log notifications.
    pub(super) async fn log_level(&self, rq: &RequestContext<RoleServer>) -> Option<LogLevel> {
        if let Some(level) = rq.meta.log_level() {
            return Some(from_mcp(level));
        }
        if rq.meta.protocol_version().is_some() {
            return None;
        }
        let caller = caller_of(rq).ok()?;
        let service = caller.service.as_deref().unwrap_or_default();
        let stored = async {
            let mut tx = self.scoped(caller.user_id).await?;
            let level = log_levels::get(&mut tx, caller.user_id, service)
                .await
                .map_err(store_fault)?;
            commit(tx).await?;
            Ok::<_, McpError>(level)
        };
        // Unreadable (the database away): the call goes on without logs;
        // the cause was logged where the store error was mapped.
        stored
            .await
            .ok()
            .flatten()
            .as_deref()
            .and_then(LogLevel::named)
    }

    /// Keeps the level of log notifications for the caller's later calls
    /// (on any replica: the endpoint keeps no session, so the level is the
    /// caller's, not a connection's).
    #[allow(deprecated)] // see Note::Log
    pub(super) async fn keep_log_level(
        &self,
        request: SetLevelRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = caller_of(&rq)?;
        let service = caller.service.as_deref().unwrap_or_default();
        let level = from_mcp(request.level).name();
        let mut tx = self.scoped(caller.user_id).await?;
        log_levels::set(&mut tx, caller.user_id, service, level)
            .await
            .map_err(store_fault)?;
        commit(tx).await
    }
}

/// What a call's report becomes for the client.
pub(super) enum Note {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

impl Note {
    /// Sends it on the call's own response stream.
    pub(super) async fn deliver(self, peer: &Peer<RoleServer>) -> Result<(), ServiceError> {
        match self {
            Note::Progress(note) => peer.notify_progress(note).await,
            Note::Log(note) => peer.notify_logging_message(note).await,
        }
    }
}

/// A call's log line, when it is at or above `least`, as MCP's
/// `notifications/message`: its level, the logger `data-plane`, and the
/// line with the call and tool it is about.
pub(super) fn log_note(line: &CallLog, least: Option<LogLevel>) -> Option<Note> {
    least.filter(|least| line.level >= *least)?;
    let data = serde_json::to_value(line).ok()?;
    let mut note = LoggingMessageNotificationParam::new(to_mcp(line.level), data);
    note.logger = Some("data-plane".into());
    Some(Note::Log(note))
}

/// MCP's level as ours.
fn from_mcp(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

/// Ours as MCP's.
fn to_mcp(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_is_the_same_level_both_ways() {
        for level in LogLevel::ALL {
            assert_eq!(from_mcp(to_mcp(level)), level);
            assert_eq!(serde_json::to_value(to_mcp(level)).unwrap(), level.name());
        }
    }
}
