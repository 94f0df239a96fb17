//! What the search benchmarks share: a database of their own, built once and
//! reused while its recipe marker matches; the corpus `search` and `scale`
//! build in it (`corpus`); the registry call they time; and the statistics
//! they print. Included by each with `#[path]`.

// Each benchmark uses its own part of this module.
#![allow(dead_code)]

pub mod corpus;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use data_plane_embed::{EmbedConfig, Embedder, Precision, Provider};
use data_plane_registry::{NoCallbacks, Registry, ToolContext};
use data_plane_store::testing;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor, PgPool};

/// A benchmark's database: reused when its comment holds `marker` and the
/// keyword index is on disk, otherwise dropped and created empty.
pub struct BenchDatabase {
    pub name: String,
    /// The owner's connection to the cluster (`postgres` database).
    pub admin: PgPool,
    /// The owner's options, for connecting to the benchmark's database.
    pub base: PgConnectOptions,
    /// The server role's URL of the benchmark's database.
    pub app_url: String,
    pub reuse: bool,
}

impl BenchDatabase {
    /// Connects as the owner (`DATA_PLANE_TEST_OWNER_URL`) and decides
    /// whether the database `name` can be reused; when not, it is dropped
    /// and created again. `rebuild` forces that.
    pub async fn prepare(
        name: &str,
        marker: &str,
        rebuild: bool,
        index_dir: &Path,
    ) -> anyhow::Result<BenchDatabase> {
        let owner_url = testing::owner_url();
        let base: PgConnectOptions = owner_url.parse().context("DATA_PLANE_TEST_OWNER_URL")?;
        let app_url = testing::app_url(&owner_url, &base, name);
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await
            .context("cannot reach PostgreSQL as the owner (run `make setup`)")?;
        let existing: Option<Option<String>> = sqlx::query_scalar(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
        )
        .bind(name)
        .fetch_optional(&admin)
        .await?;
        let reuse = !rebuild
            && existing.flatten().as_deref() == Some(marker)
            && index_dir.join("meta.json").exists();
        Ok(BenchDatabase {
            name: name.to_string(),
            admin,
            base,
            app_url,
            reuse,
        })
    }

    /// Drops the database and creates it empty.
    pub async fn recreate(&self) -> anyhow::Result<()> {
        let name = &self.name;
        self.admin
            .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
            .await?;
        self.admin
            .execute(format!("CREATE DATABASE {name} TEMPLATE template1").as_str())
            .await?;
        Ok(())
    }

    /// The owner's pool on the benchmark's database.
    pub async fn owner(&self) -> anyhow::Result<PgPool> {
        Ok(PgPoolOptions::new()
            .max_connections(1)
            .connect_with(self.base.clone().database(&self.name))
            .await?)
    }

    /// Marks the database as built by `marker`, so later runs reuse it.
    pub async fn mark(&self, marker: &str) -> anyhow::Result<()> {
        self.admin
            .execute(
                format!(
                    "COMMENT ON DATABASE {} IS '{}'",
                    &self.name,
                    marker.replace('\'', "''")
                )
                .as_str(),
            )
            .await?;
        Ok(())
    }
}

/// The local embedding model `make setup` installs, or an error saying so,
/// in the arithmetic `DATA_PLANE_EMBEDDING_PRECISION` names as the server
/// reads it (`auto`, `float32` or `int8`; default `auto`).
pub fn local_embedder() -> anyhow::Result<Arc<Embedder>> {
    let model_dir = data_plane_testkit::model_dir();
    let mut config = EmbedConfig::local(&model_dir);
    if let Provider::Local { precision, .. } = &mut config.provider {
        *precision = match std::env::var("DATA_PLANE_EMBEDDING_PRECISION").as_deref() {
            Err(_) | Ok("auto") => Precision::Auto,
            Ok("float32") => Precision::Float32,
            Ok("int8") => Precision::Int8,
            Ok(other) => bail!("DATA_PLANE_EMBEDDING_PRECISION={other}: auto, float32 or int8"),
        };
    }
    let embedder = Embedder::from_config(&config).with_context(|| {
        format!(
            "the local model is needed in {} (run `make setup`)",
            model_dir.display()
        )
    })?;
    Ok(Arc::new(embedder))
}

/// search_documents through the registry; its data, or an error.
pub async fn call(registry: &Registry, args: Value, ctx: &ToolContext) -> anyhow::Result<Value> {
    let result = registry
        .execute_tool("search_documents", args.clone(), ctx, &NoCallbacks)
        .await;
    match result.data {
        Some(data) if result.success => Ok(data),
        _ => bail!("search_documents {args} failed: {:?}", result.error),
    }
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Nearest-rank percentile.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `name.p50_ms`, `name.p95_ms` and `name.p99_ms` lines.
pub fn print_percentiles(name: &str, values: &[f64]) {
    for p in [50.0, 95.0, 99.0] {
        println!("{name}.p{p:.0}_ms {:.1}", percentile(values, p));
    }
}
