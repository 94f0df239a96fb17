//! The keyword index handle: opening, applying change-log batches atomically,
//! and the sequence number stored with each commit.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tantivy::directory::MmapDirectory;
use tantivy::directory::error::LockError;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyError};
use uuid::Uuid;

use crate::SearchError;
use crate::schema::{FORMAT_VERSION, Fields, build_schema, register_tokenizers};

/// Total memory the writer may buffer before it flushes a segment.
const WRITER_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Tantivy wants at least ~15 MB per indexing thread; two threads keep the
/// budget modest while not serialising a large rebuild on one core.
const WRITER_THREADS: usize = 2;

/// One chunk as the index sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkDoc {
    pub chunk_id: i64,
    pub document_id: Uuid,
    pub space_id: Uuid,
    pub source_id: Uuid,
    /// The folder holding the document, e.g. `/manual/sql-commands`.
    pub folder_path: String,
    pub document_path: String,
    /// ISO 639-1 code (`en`, `de`, ...); `None` or an unsupported language is
    /// indexed without stemming.
    pub language: Option<String>,
    pub heading: String,
    /// The document's title (empty when it has none), indexed with every
    /// chunk of the document.
    pub title: String,
    pub text: String,
}

/// One change to the index; each says what a document looks like now, so
/// applying it twice gives the same index as applying it once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexOp {
    /// The document's chunks become exactly `chunks` (possibly none).
    ReplaceDocument {
        document_id: Uuid,
        chunks: Vec<ChunkDoc>,
    },
    DeleteDocument {
        document_id: Uuid,
    },
}

/// A cheap-to-clone handle on the keyword index: one writer behind a mutex,
/// any number of concurrent searches.
#[derive(Clone)]
pub struct KeywordIndex {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
    writer: Mutex<IndexWriter>,
    /// `None` for an index in RAM.
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for KeywordIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordIndex")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl KeywordIndex {
    /// Opens the index in `dir`, creating the directory and an empty index
    /// when needed. An index written with another schema or format is derived
    /// data of no further use: it is deleted and recreated empty, with
    /// sequence number 0, so that the follower rebuilds it.
    pub fn open_or_create(dir: &Path) -> Result<Self, SearchError> {
        let io_err = |source| SearchError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let schema = build_schema();
        let open = |dir: &Path| -> Result<Index, SearchError> {
            let directory = MmapDirectory::open(dir).map_err(TantivyError::from)?;
            Ok(Index::open_or_create(directory, schema.clone())?)
        };
        let index = match open(dir) {
            Ok(index) if is_current_format(&index)? => index,
            Ok(index) => {
                tracing::warn!(dir = %dir.display(), "keyword index has an outdated format; recreating it empty");
                drop(index);
                wipe_index_dir(dir)?;
                open(dir)?
            }
            // Tantivy refuses to open an index whose schema differs from ours.
            Err(SearchError::Tantivy(TantivyError::SchemaError(e))) => {
                tracing::warn!(dir = %dir.display(), error = %e, "keyword index has another schema; recreating it empty");
                wipe_index_dir(dir)?;
                open(dir)?
            }
            Err(e) => return Err(e),
        };
        Self::from_index(index, Some(dir.to_path_buf()))
    }

    /// An index held in memory only, for tests and throw-away use.
    pub fn in_memory() -> Result<Self, SearchError> {
        Self::from_index(Index::create_in_ram(build_schema()), None)
    }

    fn from_index(index: Index, dir: Option<PathBuf>) -> Result<Self, SearchError> {
        register_tokenizers(index.tokenizers());
        let fields = Fields::from_schema(&index.schema())?;
        let writer = index
            .writer_with_num_threads(WRITER_THREADS, WRITER_MEMORY_BYTES)
            .map_err(|e| match e {
                TantivyError::LockFailure(LockError::LockBusy, _) => SearchError::Locked {
                    path: dir.clone().unwrap_or_default(),
                },
                other => SearchError::Tantivy(other),
            })?;
        // Reloads happen right after our own commits, so a search never waits
        // on a file watcher and always sees what the last apply wrote.
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(KeywordIndex {
            inner: Arc::new(Inner {
                index,
                reader,
                fields,
                writer: Mutex::new(writer),
                dir,
            }),
        })
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Applies `ops` in order and commits them together with `up_to_seq`, the
    /// last change-log entry they include; either all of it becomes visible
    /// (to searches as soon as this returns, and after a crash) or none of it.
    /// An error after the commit (the reader failing to reload) leaves the
    /// batch committed; applying it again is harmless.
    pub fn apply(&self, ops: Vec<IndexOp>, up_to_seq: i64) -> Result<(), SearchError> {
        if up_to_seq < 0 {
            return Err(SearchError::NegativeSeq(up_to_seq));
        }
        let mut writer = self.lock_writer();
        let staged = stage(&writer, &self.inner.fields, ops);
        let committed = staged.and_then(|()| commit(&mut writer, up_to_seq));
        if let Err(e) = committed {
            // Nothing of a failed batch may ride along with the next commit.
            if let Err(rollback) = writer.rollback() {
                tracing::error!(error = %rollback, "keyword index rollback failed");
            }
            return Err(e);
        }
        drop(writer);
        self.inner.reader.reload()?;
        Ok(())
    }

    /// Removes every chunk and commits with `seq`, for a full rebuild.
    pub fn clear(&self, seq: i64) -> Result<(), SearchError> {
        if seq < 0 {
            return Err(SearchError::NegativeSeq(seq));
        }
        let mut writer = self.lock_writer();
        let cleared = writer
            .delete_all_documents()
            .map_err(SearchError::from)
            .and_then(|_| commit(&mut writer, seq));
        if let Err(e) = cleared {
            if let Err(rollback) = writer.rollback() {
                tracing::error!(error = %rollback, "keyword index rollback failed");
            }
            return Err(e);
        }
        drop(writer);
        self.inner.reader.reload()?;
        Ok(())
    }

    /// The change-log sequence number of the last commit; 0 for a new index.
    pub fn last_seq(&self) -> Result<i64, SearchError> {
        let metas = self.inner.index.load_metas()?;
        match metas.payload.as_deref() {
            None => Ok(0),
            Some(payload) => decode_payload(payload)
                .map(|(_, seq)| seq)
                .ok_or_else(|| SearchError::Payload(payload.to_owned())),
        }
    }

    /// Chunks visible to searches.
    pub fn num_chunks(&self) -> u64 {
        self.inner.reader.searcher().num_docs()
    }

    /// Bytes the index files take on disk; 0 for an index in RAM.
    pub fn disk_size_bytes(&self) -> u64 {
        self.inner.dir.as_deref().map_or(0, dir_size)
    }

    fn lock_writer(&self) -> MutexGuard<'_, IndexWriter> {
        match self.inner.writer.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                // A panic mid-apply may have left staged operations behind;
                // dropping them restores the last committed state.
                let mut guard = poisoned.into_inner();
                if let Err(e) = guard.rollback() {
                    tracing::error!(error = %e, "keyword index rollback after a panic failed");
                }
                self.inner.writer.clear_poison();
                guard
            }
        }
    }
}

fn stage(writer: &IndexWriter, fields: &Fields, ops: Vec<IndexOp>) -> Result<(), SearchError> {
    for op in ops {
        match op {
            IndexOp::ReplaceDocument {
                document_id,
                chunks,
            } => {
                // A delete only affects documents added before it, so the
                // new chunks added next survive it.
                writer.delete_term(fields.document_term(document_id));
                for chunk in &chunks {
                    if chunk.document_id != document_id {
                        return Err(SearchError::ChunkDocumentMismatch {
                            chunk_id: chunk.chunk_id,
                            expected: document_id,
                            actual: chunk.document_id,
                        });
                    }
                    writer.add_document(fields.to_document(chunk))?;
                }
            }
            IndexOp::DeleteDocument { document_id } => {
                writer.delete_term(fields.document_term(document_id));
            }
        }
    }
    Ok(())
}

fn commit(writer: &mut IndexWriter, seq: i64) -> Result<(), SearchError> {
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&encode_payload(seq));
    prepared.commit()?;
    Ok(())
}

/// The payload is `<format version>:<seq>`, so that an index written by an
/// older analysis is recognised on open.
fn encode_payload(seq: i64) -> String {
    format!("{FORMAT_VERSION}:{seq}")
}

fn decode_payload(payload: &str) -> Option<(u32, i64)> {
    let (version, seq) = payload.split_once(':')?;
    Some((version.parse().ok()?, seq.parse().ok()?))
}

fn is_current_format(index: &Index) -> Result<bool, SearchError> {
    let metas = index.load_metas()?;
    Ok(match metas.payload.as_deref() {
        None => true,
        Some(payload) => decode_payload(payload).is_some_and(|(v, _)| v == FORMAT_VERSION),
    })
}

/// Deletes an outdated index. Only a directory holding a Tantivy index is
/// touched, so a misconfigured path never loses unrelated files.
fn wipe_index_dir(dir: &Path) -> Result<(), SearchError> {
    let io_err = |source| SearchError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.join("meta.json").is_file() {
        return Err(SearchError::Internal(format!(
            "refusing to recreate {}: it does not hold a keyword index",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(dir).map_err(io_err)?;
    std::fs::create_dir_all(dir).map_err(io_err)
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| if meta.is_dir() { 0 } else { meta.len() })
        .sum()
}
