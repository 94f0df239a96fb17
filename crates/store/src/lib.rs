//! PostgreSQL access for data-plane: the connection pool with its start-up
//! safety checks, transactions scoped to a user (row-level security) or to the
//! system, the repositories, and the migrations runner.

pub mod content;
mod db;
mod error;
pub mod exchange;
pub mod identity;
pub mod index_log;
pub mod listen;
pub mod log_levels;
pub mod migrate;
pub mod modules;
pub mod passages;
pub mod runs;
pub mod settings;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use data_plane_types::{from_row, pg_enum};
pub use db::{Db, Scope, ScopedTx};
pub use error::{Fault, StoreError, sqlx_fault};

/// The dimension of `chunks.embedding` in the schema (`vector(384)`).
pub const SCHEMA_EMBEDDING_DIMENSION: usize = 384;
