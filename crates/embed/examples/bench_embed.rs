//! Embedding throughput of the local engine: prints one `name value` line per
//! figure. `benches/embed.sh` runs it next to PyTorch sentence-transformers.
//!
//! Usage: bench_embed MODEL_DIR TEXTS_JSON [--sweep]
//! TEXTS_JSON is a JSON array of strings. `--sweep` also times other batch
//! sizes and thread counts on the first 100 texts, once each, for
//! docs/embeddings.md, with all texts in one call and with one call per batch.

use std::path::PathBuf;
use std::time::Instant;

use data_plane_embed::{EmbedConfig, EmbedError, LocalEmbedder, Provider};

const REPEATS: usize = 2;
const SWEEP_TEXTS: usize = 100;

fn load(
    model_dir: &PathBuf,
    threads: Option<usize>,
    batch_size: usize,
) -> Result<LocalEmbedder, EmbedError> {
    let mut config = EmbedConfig::local(model_dir);
    if let Provider::Local {
        threads: t,
        batch_size: b,
        ..
    } = &mut config.provider
    {
        *t = threads;
        *b = batch_size;
    }
    match data_plane_embed::Embedder::from_config(&config)? {
        data_plane_embed::Embedder::Local(local) => Ok(local),
        data_plane_embed::Embedder::Remote(_) => Err(EmbedError::InvalidConfig(
            "a local configuration gave a remote embedder".to_owned(),
        )),
    }
}

/// Best wall time of `repeats` runs, after one warm-up batch. With
/// `one_call` false the texts go in one call per batch, as a caller feeding
/// chunks as they come would.
fn time(
    embedder: &LocalEmbedder,
    texts: &[String],
    batch_size: usize,
    one_call: bool,
    repeats: usize,
) -> Result<f64, EmbedError> {
    embedder.embed_blocking(&texts[..batch_size.min(texts.len())])?;
    let mut best = f64::MAX;
    for _ in 0..repeats {
        let start = Instant::now();
        if one_call {
            embedder.embed_blocking(texts)?;
        } else {
            for chunk in texts.chunks(batch_size) {
                embedder.embed_blocking(chunk)?;
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn report(prefix: &str, texts: usize, tokens: usize, seconds: f64) {
    println!("{prefix}.seconds {seconds:.3}");
    println!("{prefix}.sentences_per_s {:.1}", texts as f64 / seconds);
    println!("{prefix}.tokens_per_s {:.0}", tokens as f64 / seconds);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model_dir), Some(texts_path)) = (args.get(1), args.get(2)) else {
        return Err("usage: bench_embed MODEL_DIR TEXTS_JSON [--sweep]".into());
    };
    let sweep = args.iter().any(|a| a == "--sweep");
    let model_dir = PathBuf::from(model_dir);
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(texts_path)?)?;
    if texts.is_empty() {
        return Err(format!("no texts in {texts_path}").into());
    }

    let default_batch = data_plane_embed::DEFAULT_LOCAL_BATCH_SIZE;
    let embedder = load(&model_dir, None, default_batch)?;
    let mut tokens = 0;
    for text in &texts {
        tokens += embedder.token_count(text)?;
    }
    println!("embed.local.texts {}", texts.len());
    println!("embed.local.tokens {tokens}");
    println!("embed.local.batch_size {default_batch}");
    let seconds = time(&embedder, &texts, default_batch, true, REPEATS)?;
    report("embed.local", texts.len(), tokens, seconds);

    if sweep {
        let texts = &texts[..SWEEP_TEXTS.min(texts.len())];
        let mut tokens = 0;
        for text in texts {
            tokens += embedder.token_count(text)?;
        }
        println!("embed.sweep.texts {}", texts.len());
        for batch in [1, 4, 8, 16, 32, 64] {
            let embedder = load(&model_dir, None, batch)?;
            let seconds = time(&embedder, texts, batch, true, 1)?;
            report(
                &format!("embed.sweep.batch{batch}.one_call"),
                texts.len(),
                tokens,
                seconds,
            );
            if batch > 1 {
                let seconds = time(&embedder, texts, batch, false, 1)?;
                report(
                    &format!("embed.sweep.batch{batch}.call_per_batch"),
                    texts.len(),
                    tokens,
                    seconds,
                );
            }
        }
        for threads in [1, 2] {
            let embedder = load(&model_dir, Some(threads), default_batch)?;
            let seconds = time(&embedder, texts, default_batch, true, 1)?;
            report(
                &format!("embed.sweep.threads{threads}"),
                texts.len(),
                tokens,
                seconds,
            );
        }
    }
    Ok(())
}
