//! Storage and index scale: loads a synthetic corpus of at least 100k chunks
//! (real words, synthetic unit vectors: what is measured is storage and index
//! scale, not retrieval quality) into a fresh database through the same write
//! path as ingestion, builds the keyword index from the change log, and prints
//! load time, database size and index sizes.
//!
//! Run with `make bench` (or `cargo run --release -p data-plane --example
//! bench_storage -- [CHUNKS]`); needs `make setup` first.

use std::time::Instant;

use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::Scope;
use data_plane_store::testing::TestDatabase;

#[path = "shared/synthetic.rs"]
mod synthetic;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let test = TestDatabase::create().await;
    let db = &test.db;
    let started = Instant::now();
    let corpus = synthetic::load(db, total).await?;
    let load = started.elapsed().as_secs_f64();
    let (docs, chunks, text_bytes) = (corpus.documents, corpus.chunks, corpus.text_bytes);

    let mut tx = db.begin(Scope::System).await?;
    let sizes: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT pg_database_size(current_database()), pg_total_relation_size('chunks'),
                pg_relation_size('chunks_embedding'), pg_total_relation_size('documents')",
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;

    let dir = tempfile::tempdir()?;
    let index = KeywordIndex::open_or_create(dir.path())?;
    let started = Instant::now();
    Follower::new(db.clone(), index.clone()).catch_up().await?;
    let index_time = started.elapsed().as_secs_f64();

    let mb = |b: i64| b as f64 / 1_048_576.0;
    println!("storage.chunks {chunks}");
    println!("storage.documents {docs}");
    println!("storage.text_mb {:.1}", text_bytes as f64 / 1_048_576.0);
    println!("storage.load_seconds {load:.1}");
    println!("storage.load_chunks_per_s {:.0}", chunks as f64 / load);
    println!("storage.database_mb {:.1}", mb(sizes.0));
    println!("storage.chunks_table_mb {:.1}", mb(sizes.1));
    println!("storage.hnsw_index_mb {:.1}", mb(sizes.2));
    println!("storage.documents_table_mb {:.1}", mb(sizes.3));
    println!("storage.keyword_index_seconds {index_time:.1}");
    println!(
        "storage.keyword_index_mb {:.1}",
        index.disk_size_bytes() as f64 / 1_048_576.0
    );
    println!("storage.keyword_index_chunks {}", index.num_chunks());

    // Leave no multi-hundred-megabyte database behind.
    test.destroy().await?;
    Ok(())
}
