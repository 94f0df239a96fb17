//! The context every tool call runs in.

use std::sync::Arc;

use uuid::Uuid;

use crate::{Permission, RateLimits, Settings};

/// Who calls, where, and under which settings.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub user_id: Uuid,
    /// `None`: across every space the user may read.
    pub space_id: Option<Uuid>,
    pub request_id: String,
    pub permission: Permission,
    pub settings: Arc<Settings>,
    /// The id of the call being executed; the registry fills it in when the
    /// caller did not (an agent passes the model's tool-call id).
    pub call_id: Option<String>,
    /// The tool call that started the sub-agent making this call.
    pub parent_call_id: Option<String>,
    /// When set, only these tools are offered and may run (a sub-agent's
    /// allow-list).
    pub allow_list: Option<Arc<[String]>>,
    /// When set, every call may reach only this document: the registry pins
    /// the `document_id` argument to it (refusing another) and refuses tools
    /// that take none (analyze_document's sub-agent).
    pub document_scope: Option<Uuid>,
}

impl ToolContext {
    pub fn new(user_id: Uuid, space_id: Option<Uuid>, permission: Permission) -> Self {
        ToolContext {
            user_id,
            space_id,
            request_id: Uuid::new_v4().to_string(),
            permission,
            settings: Arc::new(Settings::default()),
            call_id: None,
            parent_call_id: None,
            allow_list: None,
            document_scope: None,
        }
    }

    pub fn with_settings(mut self, settings: Arc<Settings>) -> Self {
        self.settings = settings;
        self
    }

    pub fn with_request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = request_id.into();
        self
    }

    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// Limits every call to one document (see `document_scope`).
    pub fn with_document_scope(mut self, document_id: Uuid) -> Self {
        self.document_scope = Some(document_id);
        self
    }

    /// The limits that hold for `tool` in this context: its metadata's
    /// defaults with the admin's override, if any, applied.
    pub fn rate_limits(&self, tool: &str, defaults: RateLimits) -> RateLimits {
        match self.settings.tool_rate_limits.get(tool) {
            Some(o) => o.apply(defaults),
            None => defaults,
        }
    }

    /// Whether the allow-list (if any) names `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.allow_list
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}
