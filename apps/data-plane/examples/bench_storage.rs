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
use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::identity;
use data_plane_store::testing::TestDatabase;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SPACES: usize = 100;
const CHUNKS_PER_DOC: usize = 50;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let docs = total.div_ceil(CHUNKS_PER_DOC);
    let words = vocabulary();
    let mut rng = StdRng::seed_from_u64(7);
    let test = TestDatabase::create().await;
    let db = &test.db;

    let mut tx = db.begin(Scope::System).await?;
    let mut targets = Vec::new();
    for s in 0..SPACES {
        let (space, _) = identity::ensure_space(&mut tx, &format!("space-{s:03}")).await?;
        let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files).await?;
        targets.push((space.id, source.id));
    }
    tx.commit().await?;

    let started = Instant::now();
    let mut text_bytes = 0usize;
    for d in 0..docs {
        let (space_id, source_id) = targets[d % SPACES];
        let mut body = String::new();
        let mut chunks = Vec::with_capacity(CHUNKS_PER_DOC);
        for _ in 0..CHUNKS_PER_DOC {
            let start = body.chars().count();
            let n = rng.random_range(80..180);
            let sentence: Vec<&str> = (0..n)
                .map(|_| words[rng.random_range(0..words.len())].as_str())
                .collect();
            let text = sentence.join(" ");
            body.push_str(&text);
            let end = body.chars().count();
            body.push_str("\n\n");
            chunks.push(NewChunk {
                char_start: start as i32,
                char_end: end as i32,
                heading: String::new(),
                page: None,
                text,
                embedding: unit_vector(&mut rng),
            });
        }
        text_bytes += body.len();
        let doc = NewDocument {
            space_id,
            source_id,
            path: format!("folder-{}/doc-{d:06}.txt", d % 20),
            mime: "text/plain".into(),
            size_bytes: body.len() as i64,
            content_hash: format!("synthetic-{d}"),
            title: None,
            language: Some("en".into()),
            content: body,
            metadata: serde_json::json!({}),
            chunks,
            tables: vec![],
        };
        let mut tx = db.begin(Scope::System).await?;
        content::write_document(&mut tx, &doc).await?;
        tx.commit().await?;
        if (d + 1) % 200 == 0 {
            eprintln!("loaded {} / {docs} documents", d + 1);
        }
    }
    let load = started.elapsed().as_secs_f64();
    let chunks = docs * CHUNKS_PER_DOC;

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

fn unit_vector(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..384).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Words from real English text on the machine (licence texts), so the keyword
/// index sees a realistic vocabulary and term distribution.
fn vocabulary() -> Vec<String> {
    let mut words = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/usr/share/common-licenses") {
        for entry in entries.flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                words.extend(
                    text.split(|c: char| !c.is_alphanumeric())
                        .filter(|w| w.len() > 1)
                        .map(str::to_lowercase),
                );
            }
        }
    }
    if words.is_empty() {
        words = "the quick brown fox jumps over the lazy dog"
            .split(' ')
            .map(String::from)
            .collect();
    }
    words
}
