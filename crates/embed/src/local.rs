//! The local engine: a BERT sentence-transformer (all-MiniLM-L6-v2) run on the
//! CPU by our own forward pass, pooled and normalised exactly as
//! sentence-transformers does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::Precision;
use crate::bert::{Bert, Config};
use crate::error::EmbedError;
use crate::int8::Kernel;

const CONFIG_FILE: &str = "config.json";
const WEIGHTS_FILE: &str = "model.safetensors";
const TOKENIZER_FILE: &str = "tokenizer.json";

/// The local model, loaded once and shared by clones.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    model: Bert,
    tokenizer: Tokenizer,
    // A private pool so the configured thread count holds no matter what else
    // in the process uses rayon's global pool.
    pool: Option<rayon::ThreadPool>,
    batch_size: usize,
    max_tokens: usize,
    dimension: usize,
    model_id: String,
    arithmetic: &'static str,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.inner.model_id)
            .field("dimension", &self.inner.dimension)
            .field("batch_size", &self.inner.batch_size)
            .field("max_tokens", &self.inner.max_tokens)
            .field("arithmetic", &self.inner.arithmetic)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Reads `config.json`, `model.safetensors` and `tokenizer.json` from `model_dir`.
    ///
    /// `threads: None` uses one compute thread per physical core.
    pub fn load(
        model_dir: &Path,
        threads: Option<usize>,
        batch_size: usize,
        max_tokens: usize,
        precision: Precision,
    ) -> Result<Self, EmbedError> {
        if batch_size == 0 {
            return Err(EmbedError::InvalidConfig(
                "local batch size 0 must be at least 1".to_owned(),
            ));
        }
        if threads == Some(0) {
            return Err(EmbedError::InvalidConfig(
                "local thread count 0 must be at least 1".to_owned(),
            ));
        }
        let config_path = existing_file(model_dir, CONFIG_FILE)?;
        let weights_path = existing_file(model_dir, WEIGHTS_FILE)?;
        let tokenizer_path = existing_file(model_dir, TOKENIZER_FILE)?;

        let config_text =
            std::fs::read_to_string(&config_path).map_err(|e| EmbedError::ModelFile {
                path: config_path.clone(),
                reason: e.to_string(),
            })?;
        let config: Config =
            serde_json::from_str(&config_text).map_err(|e| EmbedError::ModelFile {
                path: config_path.clone(),
                reason: e.to_string(),
            })?;
        // Three is the least that leaves room for one word between [CLS] and [SEP].
        if !(3..=config.max_position_embeddings).contains(&max_tokens) {
            return Err(EmbedError::InvalidConfig(format!(
                "local max tokens {max_tokens} must be between 3 and the model's {}",
                config.max_position_embeddings
            )));
        }

        let weights = std::fs::read(&weights_path).map_err(|e| EmbedError::ModelFile {
            path: weights_path.clone(),
            reason: e.to_string(),
        })?;
        let kernel = Kernel::detect();
        let int8 = match precision {
            Precision::Auto => kernel.is_fast().then_some(kernel),
            Precision::Float32 => None,
            Precision::Int8 => {
                if !kernel.is_fast() {
                    tracing::warn!(
                        "8-bit embedding asked for on a CPU below x86-64-v3 (AVX2, FMA, BMI2 and \
                         the rest of Haswell's set): the portable kernel is slower than float32 here"
                    );
                }
                Some(kernel)
            }
        };
        let arithmetic = int8.map_or("float32", Kernel::name);
        let model =
            Bert::load(&weights, &config, int8).map_err(|reason| EmbedError::ModelFile {
                path: weights_path.clone(),
                reason,
            })?;

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::ModelFile {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        // tokenizer.json ships with fixed padding to 128 and truncation at 128;
        // sentence-transformers overrides both (truncate at max_seq_length, pad
        // to the longest in the batch), and so do we, padding by hand per batch.
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| EmbedError::ModelFile {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        tokenizer.with_padding(None);

        let pool = match threads {
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("embed-{i}"))
                    .build()
                    .map_err(|e| {
                        EmbedError::InvalidConfig(format!(
                            "cannot start {n} embedding threads: {e}"
                        ))
                    })?,
            ),
            None => None,
        };

        let model_id = model_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| model_dir.display().to_string());

        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                pool,
                batch_size,
                max_tokens,
                dimension: config.hidden_size,
                model_id,
                arithmetic,
            }),
        })
    }

    /// One L2-normalised vector per text, in order; runs on the blocking pool.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed_blocking(&texts))
            .await
            .map_err(|e| EmbedError::Worker(e.to_string()))?
    }

    /// The same as [`LocalEmbedder::embed`] without tokio, for callers already
    /// on a worker thread (and for benchmarks).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_blocking(texts)
    }

    /// Number of word pieces the model reads from `text`, after truncation and
    /// counting `[CLS]` and `[SEP]`.
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        self.inner
            .tokenizer
            .encode(text, true)
            .map(|encoding| encoding.len())
            .map_err(|e| EmbedError::Tokenize(e.to_string()))
    }

    pub fn dimension(&self) -> usize {
        self.inner.dimension
    }

    pub fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    pub fn max_tokens(&self) -> usize {
        self.inner.max_tokens
    }

    /// The dense layers' arithmetic: `float32`, `int8 (AVX-512 VNNI)`,
    /// `int8 (AVX2)` or `int8 (portable)`.
    pub fn arithmetic(&self) -> &'static str {
        self.inner.arithmetic
    }
}

fn existing_file(dir: &Path, name: &str) -> Result<PathBuf, EmbedError> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(EmbedError::ModelFileMissing { path })
    }
}

impl Inner {
    fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match &self.pool {
            Some(pool) => pool.install(|| self.embed_all(texts)),
            None => self.embed_all(texts),
        }
    }

    fn embed_all(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        // Texts are packed without padding, so batch neighbours cost nothing
        // and no sorting by length is needed; batches only bound the memory
        // of the activations.
        let mut vectors = Vec::with_capacity(encodings.len());
        for batch in encodings.chunks(self.batch_size) {
            let ids: Vec<&[u32]> = batch.iter().map(Encoding::get_ids).collect();
            vectors.extend(self.model.embed(&ids).map_err(EmbedError::Inference)?);
        }
        Ok(vectors)
    }
}
