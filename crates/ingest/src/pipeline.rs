//! The ingestion pipeline: bytes → text, metadata and tables → chunks →
//! embeddings → one PostgreSQL transaction.
//!
//! The slow steps (extraction, embedding) run before the transaction opens, so
//! the transaction only writes and stays short; readers see the old version of
//! a document or the new one, never a mix, and a crash at any point leaves
//! nothing half-written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use data_plane_embed::{EmbedError, Embedder};
use data_plane_store::content::{self, NewChunk, NewDocument, NewTable, WriteOutcome};
use data_plane_store::{Db, Scope};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use data_plane_extract::Limits;

use crate::{ChunkOptions, IngestError, chunk, embedding_input, extract_with};

/// Where a file goes.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub space_id: Uuid,
    pub source_id: Uuid,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Replaced,
    Unchanged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Replaced => "replaced",
            Outcome::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: String,
    pub outcome: Outcome,
    pub document_id: Uuid,
    pub chunks: usize,
    pub tables: usize,
    pub extract_time: Duration,
    pub embed_time: Duration,
    pub write_time: Duration,
}

/// Turns files into stored, embedded documents.
#[derive(Debug)]
pub struct Pipeline {
    db: Db,
    embedder: Arc<Embedder>,
    chunking: ChunkOptions,
    limits: Limits,
}

impl Pipeline {
    pub fn new(db: Db, embedder: Arc<Embedder>) -> Self {
        Pipeline {
            db,
            embedder,
            chunking: ChunkOptions::default(),
            limits: Limits::default(),
        }
    }

    /// The extraction limits each file is held to.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_chunking(mut self, options: ChunkOptions) -> Self {
        self.chunking = options;
        self
    }

    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.embedder
    }

    /// Ingests one file at `path` (relative, inside the source), acting for `scope`.
    pub async fn ingest_file(
        &self,
        scope: Scope,
        target: Target,
        path: &str,
        bytes: &[u8],
    ) -> Result<FileReport, IngestError> {
        let prepared = self.prepare(scope, target, path, bytes).await?;
        let mut report = None;
        self.embed_and_write(scope, vec![prepared], &mut |_, r| report = Some(r))
            .await?;
        report.unwrap_or_else(|| {
            Err(IngestError::Internal(
                "a file went missing between its steps".into(),
            ))
        })
    }

    /// Ingests `files` (relative path, bytes as read) in order, read one by
    /// one as the iterator gives them, embedding the chunks of several
    /// files in one call: a corpus of small documents (an abstract, a note)
    /// then keeps every core of the model busy, where one call per file
    /// would embed a chunk or two at a time. Files are taken in groups of
    /// about [`EMBED_TOGETHER`] chunks and each is written in its own
    /// transaction. Each file's outcome goes to `done` once known: a file
    /// that fails before its embedding at once, the others as they are
    /// written, in order. A file that fails alone
    /// ([`IngestError::is_per_file`]) is reported and the rest go on. Any
    /// other error (the database or the model failing) is returned, after
    /// the files prepared before it are written; the files after it are
    /// neither written nor reported.
    pub async fn ingest_batch(
        &self,
        scope: Scope,
        target: Target,
        files: impl IntoIterator<Item = (String, std::io::Result<Vec<u8>>)>,
        mut done: impl FnMut(&str, Result<FileReport, IngestError>),
    ) -> Result<(), IngestError> {
        let mut group: Vec<Prepared> = Vec::new();
        let mut chunks = 0;
        // The group the model is embedding while the next one is prepared
        // and the one before it written: once the model is fast, reading,
        // extracting and each file's commit would otherwise wait their turn.
        let mut embedding: Option<Embedding> = None;
        let mut files = files.into_iter().peekable();
        while let Some((path, bytes)) = files.next() {
            let prepared = match bytes {
                Ok(bytes) => self.prepare(scope, target, &path, &bytes).await,
                Err(e) => Err(IngestError::Unreadable {
                    file: path.clone(),
                    reason: e.to_string(),
                }),
            };
            match prepared {
                Ok(prepared) => {
                    chunks += prepared.inputs.len();
                    group.push(prepared);
                }
                Err(e) if e.is_per_file() => done(&path, Err(e)),
                Err(e) => {
                    if let Some(previous) = embedding.take() {
                        self.write_group(scope, previous.wait().await?, &mut done)
                            .await?;
                    }
                    self.embed_and_write(scope, group, &mut done).await?;
                    return Err(e);
                }
            }
            if chunks >= EMBED_TOGETHER || files.peek().is_none() {
                // The previous group's vectors before the next request, so
                // that a failing model stops the ingest there.
                let previous = match embedding.take() {
                    Some(previous) => Some(previous.wait().await?),
                    None => None,
                };
                embedding = Some(self.start_embedding(std::mem::take(&mut group)));
                if let Some(previous) = previous {
                    self.write_group(scope, previous, &mut done).await?;
                }
                chunks = 0;
            }
        }
        if let Some(last) = embedding {
            self.write_group(scope, last.wait().await?, &mut done)
                .await?;
        }
        Ok(())
    }

    /// Everything before the embedding: the unchanged check, extraction and
    /// chunking.
    async fn prepare(
        &self,
        scope: Scope,
        target: Target,
        path: &str,
        bytes: &[u8],
    ) -> Result<Prepared, IngestError> {
        let path = content::normalize_path(path)?;
        let hash = hex::encode(Sha256::digest(bytes));

        // Unchanged files cost one indexed lookup: no extraction, no embedding.
        {
            let mut tx = self.db.begin(scope).await?;
            if let Some(existing) =
                content::document_by_path(&mut tx, target.source_id, &path).await?
                && existing.content_hash == hash
            {
                return Ok(Prepared {
                    path,
                    inputs: Vec::new(),
                    step: Step::Unchanged(existing.id),
                    extract_time: Duration::ZERO,
                });
            }
        }

        let started = Instant::now();
        let file_name = path.rsplit('/').next().unwrap_or(&path).to_string();
        let owned = bytes.to_vec();
        let options = self.chunking.clone();
        let limits = self.limits.clone();
        let (extracted, chunks) = tokio::task::spawn_blocking(move || {
            let name = file_name.clone();
            let inner = limits.clone();
            // The time limit covers the parser and the chunker: a file that takes longer is
            // given up (its thread left to finish alone) and the batch goes on.
            data_plane_extract::with_time_limit(&limits, move || {
                let extracted = extract_with(&file_name, &owned, &inner)?;
                let chunks = chunk(
                    &extracted.text,
                    &extracted.metadata.headings,
                    &extracted.metadata.pages,
                    &options,
                );
                Ok::<_, IngestError>((extracted, chunks))
            })
            .map_err(|e| IngestError::limit(&name, e))?
        })
        .await
        .map_err(|e| IngestError::Internal(format!("extraction task failed: {e}")))??;
        let extract_time = started.elapsed();

        let title = extracted.metadata.title.as_deref();
        let inputs: Vec<String> = chunks.iter().map(|c| embedding_input(c, title)).collect();
        let new_chunks: Vec<NewChunk> = chunks
            .iter()
            .map(|c| {
                Ok(NewChunk {
                    char_start: to_i32(c.char_start)?,
                    char_end: to_i32(c.char_end)?,
                    heading: c.heading_path.join(" › "),
                    page: c.page.map(|p| p as i32),
                    text: c.text.clone(),
                    embedding: Vec::new(),
                })
            })
            .collect::<Result<_, IngestError>>()?;
        let tables: Vec<NewTable> = extracted
            .tables
            .iter()
            .map(|t| NewTable {
                name: t.name.clone(),
                columns: serde_json::to_value(&t.columns).unwrap_or_default(),
                rows: t
                    .rows
                    .iter()
                    .map(|r| serde_json::Value::Object(r.clone()))
                    .collect(),
            })
            .collect();
        let metadata = serde_json::to_value(&extracted.metadata)
            .map_err(|e| IngestError::Internal(format!("metadata does not serialise: {e}")))?;
        let doc = NewDocument {
            space_id: target.space_id,
            source_id: target.source_id,
            path: path.clone(),
            mime: extracted.mime.clone(),
            size_bytes: bytes.len() as i64,
            content_hash: hash,
            title: extracted.metadata.title.clone(),
            language: extracted.metadata.language.clone(),
            content: extracted.text,
            metadata,
            chunks: new_chunks,
            tables,
        };
        Ok(Prepared {
            path,
            inputs,
            step: Step::Write(Box::new(doc)),
            extract_time,
        })
    }

    /// Embeds the chunks of `group` in one call, then writes its files in
    /// order, each in its own transaction.
    async fn embed_and_write(
        &self,
        scope: Scope,
        group: Vec<Prepared>,
        done: &mut impl FnMut(&str, Result<FileReport, IngestError>),
    ) -> Result<(), IngestError> {
        let embedded = self.start_embedding(group).wait().await?;
        self.write_group(scope, embedded, done).await
    }

    /// Starts embedding the chunks of `group` in a task of its own.
    fn start_embedding(&self, mut group: Vec<Prepared>) -> Embedding {
        let inputs: Vec<String> = group
            .iter_mut()
            .flat_map(|p| std::mem::take(&mut p.inputs))
            .collect();
        let chunks = inputs.len();
        let embedder = Arc::clone(&self.embedder);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let vectors = if inputs.is_empty() {
                Ok(Vec::new())
            } else {
                embedder.embed(&inputs).await
            };
            (vectors, started.elapsed())
        });
        Embedding {
            group,
            chunks,
            task: AbortOnDrop(task),
        }
    }

    /// Writes the files of an embedded group in order, each with its vectors.
    async fn write_group(
        &self,
        scope: Scope,
        embedded: Embedded,
        done: &mut impl FnMut(&str, Result<FileReport, IngestError>),
    ) -> Result<(), IngestError> {
        let Embedded {
            group,
            chunks,
            vectors,
            embed_time,
        } = embedded;
        let mut vectors = vectors.into_iter();
        for prepared in group {
            let n = match &prepared.step {
                Step::Write(doc) => doc.chunks.len(),
                Step::Unchanged(_) => 0,
            };
            let mine: Vec<Vec<f32>> = vectors.by_ref().take(n).collect();
            // Each file is charged its share of the call, by its chunks.
            let share = embed_time.mul_f64(n as f64 / chunks.max(1) as f64);
            let path = prepared.path.clone();
            match self.write(scope, prepared, mine, share).await {
                Err(e) if !e.is_per_file() => return Err(e),
                report => done(&path, report),
            }
        }
        Ok(())
    }

    /// One file's transaction: its document, chunks (with `vectors`, in
    /// order) and tables.
    async fn write(
        &self,
        scope: Scope,
        prepared: Prepared,
        vectors: Vec<Vec<f32>>,
        embed_time: Duration,
    ) -> Result<FileReport, IngestError> {
        let Prepared {
            path,
            step,
            extract_time,
            ..
        } = prepared;
        let mut doc = match step {
            Step::Unchanged(document_id) => {
                return Ok(FileReport {
                    path,
                    outcome: Outcome::Unchanged,
                    document_id,
                    chunks: 0,
                    tables: 0,
                    extract_time: Duration::ZERO,
                    embed_time: Duration::ZERO,
                    write_time: Duration::ZERO,
                });
            }
            Step::Write(doc) => doc,
        };
        if vectors.len() != doc.chunks.len() {
            return Err(IngestError::Internal(format!(
                "{} vectors for {} chunks of {path}",
                vectors.len(),
                doc.chunks.len()
            )));
        }
        for (chunk, embedding) in doc.chunks.iter_mut().zip(vectors) {
            chunk.embedding = embedding;
        }

        let started = Instant::now();
        let mut tx = self.db.begin(scope).await?;
        let outcome = content::write_document(&mut tx, &doc).await?;
        tx.commit()
            .await
            .map_err(data_plane_store::StoreError::from)?;
        let write_time = started.elapsed();
        let (outcome, document_id) = match outcome {
            WriteOutcome::Created(id) => (Outcome::Created, id),
            WriteOutcome::Replaced(id) => (Outcome::Replaced, id),
            WriteOutcome::Unchanged(id) => (Outcome::Unchanged, id),
        };
        Ok(FileReport {
            path,
            outcome,
            document_id,
            chunks: doc.chunks.len(),
            tables: doc.tables.len(),
            extract_time,
            embed_time,
            write_time,
        })
    }
}

/// How many chunks [`Pipeline::ingest_batch`] embeds in one call at least
/// (a file's chunks are never split): enough for full blocks of rows on
/// every core (docs/embeddings.md).
pub const EMBED_TOGETHER: usize = 64;

/// A group whose chunks are being embedded.
struct Embedding {
    group: Vec<Prepared>,
    chunks: usize,
    task: AbortOnDrop<(Result<Vectors, EmbedError>, Duration)>,
}

type Vectors = Vec<Vec<f32>>;

/// A group and its vectors, in the order of its files' chunks.
struct Embedded {
    group: Vec<Prepared>,
    chunks: usize,
    vectors: Vec<Vec<f32>>,
    embed_time: Duration,
}

impl Embedding {
    async fn wait(mut self) -> Result<Embedded, IngestError> {
        let (vectors, embed_time) = (&mut self.task.0)
            .await
            .map_err(|e| IngestError::Internal(format!("embedding task failed: {e}")))?;
        Ok(Embedded {
            group: std::mem::take(&mut self.group),
            chunks: self.chunks,
            vectors: vectors?,
            embed_time,
        })
    }
}

/// A task that is cancelled when an ingest stops before waiting for it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One file between its steps.
struct Prepared {
    path: String,
    /// What to embed, one text per chunk of the document.
    inputs: Vec<String>,
    step: Step,
    extract_time: Duration,
}

enum Step {
    /// Stored already with the same bytes.
    Unchanged(Uuid),
    /// To be written, its chunks' embeddings still empty.
    Write(Box<NewDocument>),
}

fn to_i32(offset: u64) -> Result<i32, IngestError> {
    i32::try_from(offset).map_err(|_| {
        IngestError::Internal(format!(
            "offset {offset} exceeds the supported document size"
        ))
    })
}
