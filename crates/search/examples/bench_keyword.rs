//! Indexes synthetic chunks on disk and prints indexing and query timings.
//!
//! `cargo run --release -p data-plane-search --example bench_keyword -- [CHUNKS]`
//! (20 000 chunks by default).

use std::time::{Duration, Instant};

use data_plane_search::{ChunkDoc, IndexOp, KeywordIndex, KeywordQuery};
use uuid::Uuid;

const SPACES: u128 = 20;
const CHUNKS_PER_DOCUMENT: usize = 10;
const WORDS_PER_CHUNK: usize = 120;
const BATCH_DOCUMENTS: usize = 200;
const RUNS: usize = 50;

/// A small deterministic generator, so runs are comparable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// Skewed towards small values, like word frequencies in text.
    fn zipfish(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64) * u.powi(3)) as usize
    }
}

fn vocabulary() -> Vec<String> {
    let syllables = [
        "ka", "to", "ri", "mel", "san", "dor", "vi", "lu", "pe", "qua", "ster", "no", "bra", "in",
        "ex",
    ];
    let mut words = Vec::new();
    for a in syllables {
        for b in syllables {
            for c in ["", "s", "ing", "ed", "er", "en"] {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

fn chunk_text(rng: &mut Lcg, vocab: &[String]) -> String {
    let mut text = String::with_capacity(WORDS_PER_CHUNK * 7);
    for _ in 0..WORDS_PER_CHUNK {
        text.push_str(&vocab[rng.zipfish(vocab.len())]);
        text.push(' ');
    }
    text
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let vocab = vocabulary();
    let mut rng = Lcg(42);
    let dir = tempfile::tempdir()?;
    let index = KeywordIndex::open_or_create(dir.path())?;

    let documents = total.div_ceil(CHUNKS_PER_DOCUMENT);
    let started = Instant::now();
    let mut seq = 0;
    let mut ops = Vec::new();
    for d in 0..documents {
        let document_id = Uuid::from_u128(d as u128 + 1);
        let space_id = Uuid::from_u128(0x5000 + d as u128 % SPACES);
        let language = match d % 10 {
            0..=6 => Some("en".to_owned()),
            7 | 8 => Some("de".to_owned()),
            _ => None,
        };
        let chunks = (0..CHUNKS_PER_DOCUMENT)
            .map(|c| ChunkDoc {
                chunk_id: (d * CHUNKS_PER_DOCUMENT + c) as i64,
                document_id,
                space_id,
                source_id: Uuid::from_u128(0x6000 + d as u128 % 50),
                folder_path: format!("/f{}/g{}", d % 7, d % 31),
                document_path: format!("/f{}/g{}/doc{d}.md", d % 7, d % 31),
                language: language.clone(),
                heading: vocab[rng.zipfish(vocab.len())].clone(),
                title: String::new(),
                text: chunk_text(&mut rng, &vocab),
            })
            .collect();
        ops.push(IndexOp::ReplaceDocument {
            document_id,
            chunks,
        });
        if ops.len() == BATCH_DOCUMENTS || d + 1 == documents {
            seq += 1;
            index.apply(std::mem::take(&mut ops), seq)?;
        }
    }
    let indexing = started.elapsed();
    println!("keyword.chunks {}", index.num_chunks());
    println!("keyword.index_secs {:.2}", indexing.as_secs_f64());
    println!(
        "keyword.chunks_per_sec {:.0}",
        index.num_chunks() as f64 / indexing.as_secs_f64()
    );
    println!(
        "keyword.disk_mb {:.1}",
        index.disk_size_bytes() as f64 / 1_048_576.0
    );

    let one_space = vec![Uuid::from_u128(0x5003)];
    let all_spaces: Vec<Uuid> = (0..SPACES).map(|s| Uuid::from_u128(0x5000 + s)).collect();
    let cases = [
        ("rare_word_one_space", "quasters", one_space.clone(), None),
        (
            "three_words_one_space",
            "kato melsan dorvi",
            one_space.clone(),
            None,
        ),
        (
            "common_words_all_spaces",
            "kaka kato kari",
            all_spaces.clone(),
            None,
        ),
        (
            "phrase_all_spaces",
            "\"kaka kato\" kari",
            all_spaces.clone(),
            None,
        ),
        (
            "eight_words_all_spaces",
            "kaka toto riri melmel sansan dordor vivi lulu",
            all_spaces.clone(),
            None,
        ),
        (
            "folder_filter",
            "kato melsan dorvi",
            all_spaces.clone(),
            Some("/f3/g10".to_owned()),
        ),
    ];
    for (name, text, space_ids, folder_prefix) in cases {
        let q = KeywordQuery {
            text: text.to_owned(),
            space_ids,
            folder_prefix,
            limit: 20,
            ..KeywordQuery::default()
        };
        let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
        let mut hits = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            hits = index.search(&q)?.len();
            times.push(t.elapsed());
        }
        times.sort_unstable();
        let p50 = times[RUNS / 2].as_secs_f64() * 1e3;
        let p95 = times[RUNS * 95 / 100].as_secs_f64() * 1e3;
        println!("keyword.query.{name} hits={hits} p50_ms={p50:.2} p95_ms={p95:.2}");
    }
    Ok(())
}
