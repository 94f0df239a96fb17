//! The tool registry: what a tool is (definition, handler, availability,
//! metadata), the context a call runs in, the callbacks that stream its
//! progress, the result the model sees, and `execute_tool`'s pipeline.
//!
//! Nothing here touches the network or the database: rate limits, the audit
//! log and settings come in through the [`Ledger`] trait.

mod callbacks;
mod context;
mod entry;
mod ledger;
mod registry;
mod result;
pub mod suggest;

pub use callbacks::{Callbacks, ChannelCallbacks, NoCallbacks, ToolEvent};
pub use context::{Settings, ToolContext, WebSearchProvider};
pub use entry::{
    Annotations, Category, CostTier, DefinitionFile, HandlerEntry, RateLimitOverride, RateLimits,
    ToolHandler, ToolMeta,
};
pub use ledger::{AuditRecord, Ledger, LedgerError, NoLedger, Refusal};
pub use registry::{Registry, RegistryError, ToolEntry};
pub use result::{ErrorCode, ToolError, ToolFailure, ToolResult};

pub use data_plane_types::Permission;
