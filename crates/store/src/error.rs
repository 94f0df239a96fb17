//! The error type of the store crate.

/// What can go wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The connecting role could read past row-level security; the server refuses to serve.
    #[error("unsafe database role {role:?}: {reason}")]
    UnsafeRole { role: String, reason: String },
    #[error("schema mismatch: {0}")]
    Schema(String),
    #[error("{what} not found: {name}")]
    NotFound { what: &'static str, name: String },
    #[error("invalid input: {0}")]
    Invalid(String),
}

impl StoreError {
    /// True when the error is a unique-constraint violation.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}
