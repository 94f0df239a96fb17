//! The pool, the start-up checks that keep row-level security meaningful, and
//! transactions that say whom they act for.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::StoreError;
use crate::exchange::{Prepared, prepare_each};

/// A pooled connection idle at least this long is pinged before use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(10);

/// The statements that make the current transaction act for `scope`, for
/// the start of a simple query (`Db::begin`, `Db::exchange`): the identity
/// is a UUID's canonical text (hex digits and dashes only) or a constant,
/// so nothing from outside reaches the SQL.
pub(crate) fn set_scope(scope: Scope) -> String {
    match scope {
        Scope::User(id) => format!(
            "SET LOCAL data_plane.user_id = '{}'; SET LOCAL data_plane.system = 'off'",
            id.hyphenated()
        ),
        Scope::System => {
            "SET LOCAL data_plane.user_id = ''; SET LOCAL data_plane.system = 'on'".to_string()
        }
    }
}

/// Whom a transaction acts for. Row-level security decides what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A person or service user: sees the spaces they are a member of.
    User(Uuid),
    /// Trusted internal work (index follower, ingest CLI, admin bootstrap):
    /// sees everything. Never used for anything a user's input can steer.
    System,
}

/// A transaction with its scope already set, transaction-locally.
pub type ScopedTx = Transaction<'static, Postgres>;

/// The server's handle to PostgreSQL.
#[derive(Clone, Debug)]
pub struct Db {
    pool: PgPool,
    /// The statements of one-exchange reads used so far: each connection
    /// the pool opens prepares them (see `exchange`).
    prepared: Arc<Mutex<Vec<&'static Prepared>>>,
}

impl Db {
    /// Connects as the server's role and refuses roles that would make
    /// row-level security meaningless (superuser, BYPASSRLS, table owner).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options: PgConnectOptions = url.parse()?;
        let prepared: Arc<Mutex<Vec<&'static Prepared>>> = Arc::default();
        let to_prepare = prepared.clone();
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            // sqlx pings every connection it hands out by default: a round
            // trip before each transaction, as many as a one-row tool's own
            // work. A connection that was in use moments ago is live; one
            // idle for a while (a restart, a dropped socket) is still
            // checked before use.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_AFTER_IDLE {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .after_connect(move |conn, _| {
                let statements = prepare_each(&to_prepare.lock().unwrap_or_else(|p| p.into_inner()));
                Box::pin(async move {
                    // One by one, and never failing the connection: a
                    // statement that cannot be prepared (a migration dropped
                    // a column it reads) fails its own uses, not the pool.
                    for statement in statements {
                        if let Err(error) =
                            sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(&statement)).await
                        {
                            tracing::warn!(%error, statement = %statement, "cannot prepare a statement on a new connection");
                        }
                    }
                    Ok(())
                })
            })
            // JIT compilation costs up to a second on the large plans of tree
            // and search queries that run in milliseconds; nothing here
            // runs long enough to repay it.
            .connect_with(
                options
                    .application_name("data-plane")
                    .options([("jit", "off")]),
            )
            .await?;
        let db = Db { pool, prepared };
        db.check_role().await?;
        Ok(db)
    }

    /// Wraps an existing pool without the role checks (tests that deliberately
    /// connect as another role use this).
    pub fn from_pool_unchecked(pool: PgPool) -> Self {
        Db {
            pool,
            prepared: Arc::default(),
        }
    }

    /// Adds `statement` to those every new connection prepares; refuses a
    /// second statement under a name already taken.
    pub(crate) fn register(&self, statement: &'static Prepared) -> Result<(), StoreError> {
        let mut list = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        match list.iter().find(|s| s.name() == statement.name()) {
            Some(known) if known.sql() == statement.sql() && known.types() == statement.types() => {
                Ok(())
            }
            Some(_) => Err(StoreError::Schema(format!(
                "two different statements are named {}",
                statement.name()
            ))),
            None => {
                list.push(statement);
                Ok(())
            }
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether PostgreSQL answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    /// Fails when the connected role could bypass row-level security.
    pub async fn check_role(&self) -> Result<(), StoreError> {
        let (role, superuser, bypass): (String, bool, bool) = sqlx::query_as(
            "SELECT rolname::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user",
        )
        .fetch_one(&self.pool)
        .await?;
        if superuser {
            return Err(StoreError::UnsafeRole {
                role,
                reason: "it is a superuser".into(),
            });
        }
        if bypass {
            return Err(StoreError::UnsafeRole {
                role,
                reason: "it has BYPASSRLS".into(),
            });
        }
        let owned: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')
               AND pg_has_role(current_user, c.relowner, 'USAGE')
             ORDER BY 1",
        )
        .fetch_all(&self.pool)
        .await?;
        if !owned.is_empty() {
            return Err(StoreError::UnsafeRole {
                role,
                reason: format!(
                    "it owns (or is a member of the owner of) tables: {}",
                    owned.join(", ")
                ),
            });
        }
        Ok(())
    }

    /// Checks that `chunks.embedding` has the dimension the embedder produces.
    pub async fn check_embedding_dimension(&self, dimension: usize) -> Result<(), StoreError> {
        let typmod: Option<i32> = sqlx::query_scalar(
            "SELECT atttypmod FROM pg_attribute
             WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'",
        )
        .fetch_optional(&self.pool)
        .await?;
        match typmod {
            Some(d) if d as usize == dimension => Ok(()),
            Some(d) => Err(StoreError::Schema(format!(
                "the embedding model produces {dimension}-dimensional vectors but chunks.embedding is vector({d}); \
                 use a model with {d} dimensions or add a migration that changes the column"
            ))),
            None => Err(StoreError::Schema(
                "chunks.embedding is missing: run `data-plane migrate`".into(),
            )),
        }
    }

    /// Begins a transaction acting for `scope`, in one round trip: `BEGIN`
    /// and the transaction-local identity go to the server as one simple
    /// query.
    pub async fn begin(&self, scope: Scope) -> Result<ScopedTx, StoreError> {
        Ok(self
            .pool
            .begin_with(format!("BEGIN; {}", set_scope(scope)))
            .await?)
    }
}
