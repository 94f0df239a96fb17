//! The tool registry: what a tool is (definition, handler, availability,
//! metadata), the context a call runs in and the run-time settings it
//! carries, the events that stream its progress, the result the model sees,
//! `execute_tool`'s pipeline, and tool discovery (the meta-tools that
//! find, describe and run tools not listed up front), and remote modules'
//! tools as entries like the others.
//!
//! Nothing here touches the network or the database: rate limits, the audit
//! log and settings come in through the [`Ledger`] trait.

pub mod approval;
mod callbacks;
mod context;
mod discovery;
mod entry;
pub mod gate;
mod ledger;
mod profile;
mod registry;
mod remote;
mod result;
mod settings;
pub mod suggest;
mod tag;

pub use approval::{Approval, ApprovalRequest, ApprovalRules, Approver};
pub use callbacks::{
    CallLog, Callbacks, ChannelCallbacks, LogLevel, NoCallbacks, Report, Reported, ToolEvent,
    forward_events,
};
pub use context::{Deployment, SideEffects, ToolContext};
pub use discovery::META_TOOLS;
pub use discovery::OfferedTool;
pub use entry::ToolEntry;
pub use entry::{
    AnnotationHints, Annotations, Category, CostTier, DefinitionFile, HandlerEntry,
    RateLimitOverride, RateLimits, TagSpec, ToolHandler, ToolMeta,
};
pub use gate::{Gate, GateCall, GateDecision, GateError, GateVerdict};
pub use ledger::{AuditRecord, Ledger, LedgerError, NoLedger, Refusal};
pub use profile::{AgentProfile, ProfileSpec, Selection, ToolMode, valid_module_name};
pub use registry::{Registry, RegistryError};
pub use remote::{RemoteTool, wire_name};
pub use result::{ErrorCode, ToolError, ToolFailure, ToolResult};
pub use settings::{Settings, SettingsError, ToolSetting, ToolSettings};
pub use tag::Tag;

pub use data_plane_types::Permission;
