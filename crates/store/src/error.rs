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

/// What an error means to whoever asked, without the driver's details: the
/// one place that reads PostgreSQL's error codes for callers above the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    NotFound(String),
    /// The request's own values: bad input, NUL in text, a broken check.
    Invalid(String),
    /// Row-level security or a permission check refused it.
    Denied(String),
    /// It breaks a rule of the data (a unique name, a space's last owner).
    Conflict(String),
    /// May pass on its own: a pool timeout, a lost connection, a
    /// serialization failure or deadlock, a server starting or stopping.
    /// Trying again later can succeed.
    Transient,
    /// A bug or a broken deployment; trying again gives the same answer.
    Internal,
}

impl StoreError {
    /// Sorts the error for callers: see [`Fault`].
    pub fn fault(&self) -> Fault {
        match self {
            StoreError::NotFound { .. } => Fault::NotFound(self.to_string()),
            StoreError::Invalid(m) => Fault::Invalid(m.clone()),
            StoreError::Denied(m) => Fault::Denied(m.clone()),
            StoreError::Conflict(m) => Fault::Conflict(m.clone()),
            StoreError::Database(e) => sqlx_fault(e),
            StoreError::Migrate(_) | StoreError::UnsafeRole { .. } | StoreError::Schema(_) => {
                Fault::Internal
            }
        }
    }

    /// True when trying again later may succeed (see [`Fault::Transient`]).
    pub fn is_transient(&self) -> bool {
        self.fault() == Fault::Transient
    }

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

/// Sorts a driver error (see [`Fault`]); also for callers holding a bare `sqlx::Error`.
pub fn sqlx_fault(e: &sqlx::Error) -> Fault {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => {
            Fault::Transient
        }
        sqlx::Error::RowNotFound => Fault::NotFound("no such row".into()),
        sqlx::Error::Database(d) => {
            let code = d.code();
            let code = code.as_deref().unwrap_or("");
            match code {
                "42501" => Fault::Denied("not allowed in this space".into()),
                "DP409" => Fault::Conflict(d.message().to_string()),
                // PostgreSQL refuses NUL in text with its own words; say it plainly.
                "22021" => Fault::Invalid("text may not contain NUL (\\u0000) characters".into()),
                // Data exceptions: out-of-range numbers, over-long names, bad formats.
                c if c.starts_with("22") => {
                    Fault::Invalid(format!("invalid value: {}", d.message()))
                }
                "23514" => Fault::Invalid(format!(
                    "a value breaks the rule {}",
                    d.constraint().unwrap_or("of the data")
                )),
                "23505" => Fault::Conflict("already exists".into()),
                // Serialization failure, deadlock, lock not available.
                "40001" | "40P01" | "55P03" => Fault::Transient,
                // Connection exceptions, insufficient resources, operator
                // intervention (shutdown, recovery) other than a cancelled query.
                c if c.starts_with("08") || c.starts_with("53") => Fault::Transient,
                c if c.starts_with("57") && c != "57014" => Fault::Transient,
                _ => Fault::Internal,
            }
        }
        _ => Fault::Internal,
    }
}
