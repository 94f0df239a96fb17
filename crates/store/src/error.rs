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
    /// Row-level security or a check in the database refused the change.
    #[error("not allowed: {0}")]
    Denied(String),
    /// The change would break a rule of the data, such as a space keeping an owner.
    #[error("conflict: {0}")]
    Conflict(String),
}

impl StoreError {
    /// True when the error is a unique-constraint violation.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }

    /// Turns the database's refusals into `Denied` (insufficient privilege,
    /// which row-level security and the membership functions raise) and
    /// `Conflict` (`DP409`, raised when a space would lose its last owner),
    /// keeping the database's message.
    pub fn classify(self) -> StoreError {
        if let StoreError::Database(sqlx::Error::Database(e)) = &self {
            match e.code().as_deref() {
                Some("42501") => return StoreError::Denied(e.message().to_string()),
                Some("DP409") => return StoreError::Conflict(e.message().to_string()),
                _ => {}
            }
        }
        self
    }
}
