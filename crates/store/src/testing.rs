//! A fresh, migrated database per test, reached both as the owner and as the
//! server's real role, so tests exercise the same row-level security the
//! server runs under.
//!
//! Reads `DATA_PLANE_TEST_OWNER_URL` (a URL for the owner role, any database)
//! and `DATA_PLANE_TEST_APP_PASSWORD`; `make test` sets both.

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor, PgPool};

use crate::Db;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A database created for one test.
#[derive(Debug)]
pub struct TestDatabase {
    pub name: String,
    /// Connected as the owner role (bypasses nothing: RLS is forced).
    pub owner: PgPool,
    /// Connected as `data_plane_app`, checked like the server checks it.
    pub db: Db,
    /// Connection URL of the app role to this database.
    pub app_url: String,
    /// Connection URL of the owner role to this database.
    pub owner_url: String,
}

impl TestDatabase {
    /// Creates and migrates a new database.
    ///
    /// # Panics
    /// When the environment is not set up: tests need the real PostgreSQL.
    pub async fn create() -> TestDatabase {
        let owner_url = owner_url();
        let base: PgConnectOptions = owner_url.parse().unwrap_or_else(|e| {
            panic!("DATA_PLANE_TEST_OWNER_URL {owner_url:?} is not a URL: {e}")
        });
        let name = format!(
            "dp_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot reach PostgreSQL as the owner at {owner_url:?} (run `make setup`): {e}"
                )
            });
        drop_abandoned(&admin).await;
        admin
            .execute(format!("CREATE DATABASE {name} TEMPLATE template1").as_str())
            .await
            .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
        admin.close().await;

        let owner_opts = base.clone().database(&name);
        let owner = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(owner_opts)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {name}: {e}"));
        crate::migrate::migrator()
            .run(&owner)
            .await
            .unwrap_or_else(|e| panic!("migrations failed on {name}: {e}"));

        let app_url = app_url(&owner_url, &base, &name);
        let owner_url = with_database(&owner_url, &name);
        let db = Db::connect(&app_url, 8)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {name} as data_plane_app: {e}"));
        TestDatabase {
            name,
            owner,
            db,
            app_url,
            owner_url,
        }
    }
}

impl TestDatabase {
    /// Drops the database now (benchmarks call this; tests leave theirs to be
    /// collected by the next run, see `drop_abandoned`).
    pub async fn destroy(self) -> Result<(), sqlx::Error> {
        let TestDatabase {
            name,
            owner,
            db,
            owner_url,
            ..
        } = self;
        owner.close().await;
        db.pool().close().await;
        let base: PgConnectOptions = owner_url.parse()?;
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.database("postgres"))
            .await?;
        // The pools are closed on our side, but a server process of the app
        // role may still be on its way out; the owner may not terminate it
        // (42501) or the database is still in use (55006) until it is gone.
        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        let mut tries = 0;
        let dropped = loop {
            match admin.execute(drop.as_str()).await {
                Err(sqlx::Error::Database(e))
                    if tries < 100 && matches!(e.code().as_deref(), Some("42501" | "55006")) =>
                {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => break other,
            }
        };
        admin.close().await;
        dropped.map(|_| ())
    }
}

/// The owner role's URL: `DATA_PLANE_TEST_OWNER_URL`, or the one `make
/// setup` creates.
pub fn owner_url() -> String {
    std::env::var("DATA_PLANE_TEST_OWNER_URL").unwrap_or_else(|_| {
        "postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/postgres?sslmode=disable"
            .to_string()
    })
}

/// The server role's URL to `database` on the owner URL's server (`base`
/// is `owner_url` parsed), with `DATA_PLANE_TEST_APP_PASSWORD` and the
/// owner URL's parameters (sslmode) applying to the app role too.
pub fn app_url(owner_url: &str, base: &PgConnectOptions, database: &str) -> String {
    let password = std::env::var("DATA_PLANE_TEST_APP_PASSWORD")
        .unwrap_or_else(|_| "data_plane_app".to_string());
    let query = owner_url
        .split_once('?')
        .map_or(String::new(), |(_, q)| format!("?{q}"));
    format!(
        "postgres://data_plane_app:{password}@{}:{}/{database}{query}",
        base.get_host(),
        base.get_port()
    )
}

/// The URL with its database replaced (query parameters kept).
fn with_database(url: &str, database: &str) -> String {
    let (main, query) = match url.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (url, None),
    };
    let authority_end = main.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match main[authority_end..].find('/') {
        Some(i) => &main[..authority_end + i],
        None => main,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

/// Drops test databases whose creating process is gone. Names carry the
/// process id, so databases of test processes still running are left alone.
async fn drop_abandoned(admin: &PgPool) {
    let Ok(names) = sqlx::query_scalar::<_, String>(
        "SELECT datname::text FROM pg_database WHERE datname LIKE 'dp\\_test\\_%'",
    )
    .fetch_all(admin)
    .await
    else {
        return;
    };
    for name in names {
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            // Best effort: another test process may be dropping it at the same time.
            let _ = admin
                .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_the_database_of_a_url() {
        for (url, expected) in [
            ("postgres://u:p@h:5432/postgres", "postgres://u:p@h:5432/x"),
            (
                "postgres://u:p@h/postgres?sslmode=disable",
                "postgres://u:p@h/x?sslmode=disable",
            ),
            ("postgres://u@h", "postgres://u@h/x"),
        ] {
            assert_eq!(super::with_database(url, "x"), expected);
        }
    }
}
