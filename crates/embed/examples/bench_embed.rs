//! Embedding throughput of the local engine, and the latency of one search
//! query embedded alone: prints one `name value` line per figure. `benches/embed.sh` runs it next to PyTorch sentence-transformers.
//!
//! Usage: bench_embed MODEL_DIR TEXTS_JSON [--precision auto|float32|int8]
//! [--cpu avx2|portable] [--sweep] [--query-vector OUT_JSON]
//! TEXTS_JSON is a JSON array of strings. `--precision` picks the dense
//! layers' arithmetic (default `auto`, as the server does); the figures
//! are printed under `embed.local.` with `embed.local.arithmetic` naming it. `--sweep` also times other batch
//! sizes and thread counts on the first 100 texts, once each, for
//! docs/embeddings.md, with all texts in one call and with one call per batch.
//! `--query-vector` writes the query's vector, for the ONNX Runtime side to
//! check that it computes the same function. `--cpu` turns `archmage`'s
//! checks for the levels above off (x86-64 only), so the kernels it
//! dispatches (8-bit dense layers, attention, the row kernels) take what a
//! CPU of that level has. Float32's matrix products and few-row path keep
//! their own CPU checks: `avx2` is what an AVX2 CPU runs, but `portable`
//! still multiplies floats with AVX2 and FMA here.

use std::path::PathBuf;
use std::time::Instant;

use data_plane_embed::{EmbedConfig, EmbedError, LocalEmbedder, Precision, Provider};

const REPEATS: usize = 2;
const SWEEP_TEXTS: usize = 100;

fn load(
    model_dir: &PathBuf,
    threads: Option<usize>,
    batch_size: usize,
    precision: Precision,
) -> Result<LocalEmbedder, EmbedError> {
    let mut config = EmbedConfig::local(model_dir);
    if let Provider::Local {
        threads: t,
        batch_size: b,
        precision: p,
        ..
    } = &mut config.provider
    {
        *t = threads;
        *b = batch_size;
        *p = precision;
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

/// The argument after `flag`, when present.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

/// A search query of ten words, as search_documents embeds one.
pub const QUERY: &str = "how do I reclaim disk space taken by dead table rows";
const QUERY_RUNS: usize = 300;

/// p50 and p99 in milliseconds of embedding [`QUERY`] alone, tokenising
/// included, after a few warm-up calls.
fn query_latency(embedder: &LocalEmbedder) -> Result<(f64, f64), EmbedError> {
    let query = [QUERY.to_owned()];
    for _ in 0..20 {
        embedder.embed_blocking(&query)?;
    }
    let mut ms = Vec::with_capacity(QUERY_RUNS);
    for _ in 0..QUERY_RUNS {
        let start = Instant::now();
        embedder.embed_blocking(&query)?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms[ms.len() / 2], ms[ms.len() * 99 / 100]))
}

/// Turns the CPU checks above `level` off for this process.
#[cfg(target_arch = "x86_64")]
fn hold_to(level: &str) -> Result<(), Box<dyn std::error::Error>> {
    use archmage::{X64V3Token, X64V4Token};
    let result = match level {
        "avx2" => X64V4Token::dangerously_disable_token_process_wide(true),
        "portable" => X64V3Token::dangerously_disable_token_process_wide(true),
        other => return Err(format!("--cpu {other}: avx2 or portable").into()),
    };
    result.map_err(|e| format!("--cpu {level}: {e}").into())
}

#[cfg(not(target_arch = "x86_64"))]
fn hold_to(level: &str) -> Result<(), Box<dyn std::error::Error>> {
    Err(format!("--cpu {level}: only on x86-64").into())
}

fn report(prefix: &str, texts: usize, tokens: usize, seconds: f64) {
    println!("{prefix}.seconds {seconds:.3}");
    println!("{prefix}.sentences_per_s {:.1}", texts as f64 / seconds);
    println!("{prefix}.tokens_per_s {:.0}", tokens as f64 / seconds);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model_dir), Some(texts_path)) = (args.get(1), args.get(2)) else {
        return Err(
            "usage: bench_embed MODEL_DIR TEXTS_JSON [--precision auto|float32|int8] \
             [--cpu avx2|portable] [--sweep] [--query-vector OUT_JSON]"
                .into(),
        );
    };
    let sweep = args.iter().any(|a| a == "--sweep");
    let precision = match flag_value(&args, "--precision").unwrap_or("auto") {
        "auto" => Precision::Auto,
        "float32" => Precision::Float32,
        "int8" => Precision::Int8,
        other => return Err(format!("--precision {other}: auto, float32 or int8").into()),
    };
    if let Some(level) = flag_value(&args, "--cpu") {
        hold_to(level)?;
    }
    let model_dir = PathBuf::from(model_dir);
    let texts: Vec<String> = serde_json::from_str(&std::fs::read_to_string(texts_path)?)?;
    if texts.is_empty() {
        return Err(format!("no texts in {texts_path}").into());
    }

    let default_batch = data_plane_embed::DEFAULT_LOCAL_BATCH_SIZE;
    let embedder = load(&model_dir, None, default_batch, precision)?;
    let mut tokens = 0;
    for text in &texts {
        tokens += embedder.token_count(text)?;
    }
    println!("embed.local.texts {}", texts.len());
    println!("embed.local.tokens {tokens}");
    println!("embed.local.batch_size {default_batch}");
    println!(
        "embed.local.arithmetic {}",
        embedder.arithmetic().replace(' ', "_")
    );
    let seconds = time(&embedder, &texts, default_batch, true, REPEATS)?;
    report("embed.local", texts.len(), tokens, seconds);
    if let Some(out) = flag_value(&args, "--query-vector") {
        let vector = embedder.embed_blocking(&[QUERY.to_owned()])?;
        std::fs::write(out, serde_json::to_string(&vector[0])?)?;
    }
    let (p50, p99) = query_latency(&embedder)?;
    println!("embed.local.query_p50_ms {p50:.2}");
    println!("embed.local.query_p99_ms {p99:.2}");

    if sweep {
        let texts = &texts[..SWEEP_TEXTS.min(texts.len())];
        let mut tokens = 0;
        for text in texts {
            tokens += embedder.token_count(text)?;
        }
        println!("embed.sweep.texts {}", texts.len());
        for batch in [1, 4, 8, 16, 32, 64] {
            let embedder = load(&model_dir, None, batch, precision)?;
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
            let embedder = load(&model_dir, Some(threads), default_batch, precision)?;
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
