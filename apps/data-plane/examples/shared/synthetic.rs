//! A synthetic corpus for the scale benchmarks: real words (licence texts
//! on the machine), synthetic unit vectors, written through the same path
//! as ingestion, spread over 100 spaces. What is measured with it is
//! storage and index scale, not retrieval quality. Shared by the
//! benchmarks through `#[path]`.

use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::{Db, Scope, identity};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SPACES: usize = 100;
const CHUNKS_PER_DOC: usize = 50;

/// What [`load`] wrote.
pub struct Corpus {
    pub documents: usize,
    pub chunks: usize,
    pub text_bytes: usize,
}

/// Writes at least `total` chunks (whole documents of 50) into `db`.
pub async fn load(db: &Db, total: usize) -> anyhow::Result<Corpus> {
    let docs = total.div_ceil(CHUNKS_PER_DOC);
    let words = vocabulary();
    let mut rng = StdRng::seed_from_u64(7);

    let mut tx = db.begin(Scope::System).await?;
    let mut targets = Vec::new();
    for s in 0..SPACES {
        let (space, _) = identity::ensure_space(&mut tx, &format!("space-{s:03}")).await?;
        let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files).await?;
        targets.push((space.id, source.id));
    }
    tx.commit().await?;

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

    Ok(Corpus {
        documents: docs,
        chunks: docs * CHUNKS_PER_DOC,
        text_bytes,
    })
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
