//! Ingestion throughput on the demo corpus: every file through the real
//! pipeline (extract → chunk → embed → write) into a fresh database, printing
//! documents/s and chunks/s overall and the time spent in each step, embedding
//! separately.
//!
//! Run with `make bench` (or `cargo run --release -p data-plane --example
//! bench_ingest -- [CORPUS_DIR]`); needs `make setup` first.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use data_plane_embed::{EmbedConfig, Embedder};
use data_plane_ingest::pipeline::{Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity;
use data_plane_store::testing::TestDatabase;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let corpus: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| ".data/corpus/demo".into())
        .into();
    let model = data_plane_testkit::model_dir();
    let files: Vec<PathBuf> = walkdir::WalkDir::new(&corpus)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.into_path())
        .collect();
    anyhow::ensure!(
        !files.is_empty(),
        "no files under {} (run make setup)",
        corpus.display()
    );

    let test = TestDatabase::create().await;
    let embedder = Arc::new(Embedder::from_config(&EmbedConfig::local(model))?);
    let mut tx = test.db.begin(Scope::System).await?;
    let (space, _) = identity::ensure_space(&mut tx, "bench").await?;
    let source = content::ensure_source(&mut tx, space.id, "demo", SourceKind::Files).await?;
    tx.commit().await?;
    let target = Target {
        space_id: space.id,
        source_id: source.id,
    };
    let pipeline = Pipeline::new(test.db.clone(), embedder);

    let (mut extract, mut embed, mut write) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut docs, mut chunks, mut failed, mut bytes) = (0usize, 0usize, 0usize, 0usize);
    let started = Instant::now();
    for file in &files {
        let rel = file
            .strip_prefix(&corpus)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        let data = std::fs::read(file)?;
        bytes += data.len();
        match pipeline
            .ingest_file(Scope::System, target, &rel, &data)
            .await
        {
            Ok(r) => {
                docs += 1;
                chunks += r.chunks;
                extract += r.extract_time;
                embed += r.embed_time;
                write += r.write_time;
            }
            Err(e) => {
                failed += 1;
                eprintln!("failed {rel}: {e}");
            }
        }
    }
    let total = started.elapsed().as_secs_f64();
    println!("ingest.files {}", files.len());
    println!("ingest.documents {docs}");
    println!("ingest.failed {failed}");
    println!("ingest.mb {:.1}", bytes as f64 / 1_048_576.0);
    println!("ingest.chunks {chunks}");
    println!("ingest.seconds {total:.1}");
    println!("ingest.documents_per_s {:.1}", docs as f64 / total);
    println!("ingest.chunks_per_s {:.1}", chunks as f64 / total);
    println!("ingest.extract_chunk_seconds {:.1}", extract.as_secs_f64());
    println!("ingest.embed_seconds {:.1}", embed.as_secs_f64());
    println!(
        "ingest.embed_chunks_per_s {:.1}",
        chunks as f64 / embed.as_secs_f64().max(1e-9)
    );
    println!("ingest.write_seconds {:.1}", write.as_secs_f64());
    println!("ingest.embed_share {:.2}", embed.as_secs_f64() / total);

    test.destroy().await?;
    Ok(())
}
