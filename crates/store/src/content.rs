//! Sources, folders, documents, chunks and tables.

use pgvector::Vector;
use serde::Serialize;
use uuid::Uuid;

use crate::{ScopedTx, StoreError};

/// What kind of source a source is; a feed is a source like any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Files,
    Upload,
    Feed,
    Web,
}

crate::pg_enum!(SourceKind = "source_kind" {
    Files = "files",
    Upload = "upload",
    Feed = "feed",
    Web = "web",
});

#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub id: Uuid,
    pub space_id: Uuid,
    pub name: String,
    pub kind: SourceKind,
}
crate::from_row!(Source {
    id,
    space_id,
    name,
    kind
});

#[derive(Debug, Clone, Serialize)]
pub struct DocumentSummary {
    pub id: Uuid,
    pub space_id: Uuid,
    pub source_id: Uuid,
    pub path: String,
    pub name: String,
    pub mime: String,
    pub size_bytes: i64,
    pub content_hash: String,
    pub version: i32,
}
crate::from_row!(DocumentSummary {
    id,
    space_id,
    source_id,
    path,
    name,
    mime,
    size_bytes,
    content_hash,
    version
});

/// A document ready to be written, with everything derived from it.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub space_id: Uuid,
    pub source_id: Uuid,
    /// Path inside the source with '/' separators and no leading slash.
    pub path: String,
    pub mime: String,
    pub size_bytes: i64,
    pub content_hash: String,
    pub title: Option<String>,
    pub language: Option<String>,
    pub content: String,
    pub metadata: serde_json::Value,
    pub chunks: Vec<NewChunk>,
    pub tables: Vec<NewTable>,
}

#[derive(Debug, Clone)]
pub struct NewChunk {
    pub char_start: i32,
    pub char_end: i32,
    pub heading: String,
    pub page: Option<i32>,
    pub text: String,
    pub embedding: Vec<f32>,
}

#[derive(Debug, Clone)]
pub struct NewTable {
    pub name: String,
    pub columns: serde_json::Value,
    pub rows: Vec<serde_json::Value>,
}

/// What writing a document did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Created(Uuid),
    Replaced(Uuid),
    Unchanged(Uuid),
}

/// Finds a source of the space by name or creates it.
pub async fn ensure_source(
    tx: &mut ScopedTx,
    space_id: Uuid,
    name: &str,
    kind: SourceKind,
) -> Result<Source, StoreError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(StoreError::Invalid("source name is empty".into()));
    }
    let existing = sqlx::query_as::<_, Source>(
        "SELECT id, space_id, name, kind FROM sources WHERE space_id = $1 AND name = $2",
    )
    .bind(space_id)
    .bind(name)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(source) = existing {
        return Ok(source);
    }
    let source = sqlx::query_as::<_, Source>(
        "INSERT INTO sources (space_id, name, kind) VALUES ($1, $2, $3)
         RETURNING id, space_id, name, kind",
    )
    .bind(space_id)
    .bind(name)
    .bind(kind)
    .fetch_one(&mut **tx)
    .await?;
    ensure_folder(tx, space_id, source.id, "").await?;
    Ok(source)
}

pub async fn list_sources(tx: &mut ScopedTx, space_id: Uuid) -> Result<Vec<Source>, StoreError> {
    Ok(sqlx::query_as::<_, Source>(
        "SELECT id, space_id, name, kind FROM sources WHERE space_id = $1 ORDER BY name",
    )
    .bind(space_id)
    .fetch_all(&mut **tx)
    .await?)
}

/// Returns the id of the folder at `path` in the source, creating it and its
/// ancestors as needed. `""` is the root.
pub async fn ensure_folder(
    tx: &mut ScopedTx,
    space_id: Uuid,
    source_id: Uuid,
    path: &str,
) -> Result<Uuid, StoreError> {
    let path = normalize_path(path)?;
    let mut parent: Option<Uuid> = None;
    let mut current = String::new();
    let mut id = root_folder(tx, space_id, source_id).await?;
    if path.is_empty() {
        return Ok(id);
    }
    parent.replace(id);
    for segment in path.split('/') {
        if !current.is_empty() {
            current.push('/');
        }
        current.push_str(segment);
        id = sqlx::query_scalar(
            "INSERT INTO folders (space_id, source_id, parent_id, name, path) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (source_id, path) DO UPDATE SET name = excluded.name
             RETURNING id",
        )
        .bind(space_id)
        .bind(source_id)
        .bind(parent)
        .bind(segment)
        .bind(&current)
        .fetch_one(&mut **tx)
        .await?;
        parent = Some(id);
    }
    Ok(id)
}

async fn root_folder(
    tx: &mut ScopedTx,
    space_id: Uuid,
    source_id: Uuid,
) -> Result<Uuid, StoreError> {
    Ok(sqlx::query_scalar(
        "INSERT INTO folders (space_id, source_id, parent_id, name, path) VALUES ($1, $2, NULL, '', '')
         ON CONFLICT (source_id, path) DO UPDATE SET name = folders.name
         RETURNING id",
    )
    .bind(space_id)
    .bind(source_id)
    .fetch_one(&mut **tx)
    .await?)
}

/// Normalises a relative path: '/' separators, no empty, '.' or '..' segments.
pub fn normalize_path(path: &str) -> Result<String, StoreError> {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                return Err(StoreError::Invalid(format!(
                    "path {path:?} must not contain '..'"
                )));
            }
            s => out.push(s),
        }
    }
    Ok(out.join("/"))
}

pub async fn document_by_path(
    tx: &mut ScopedTx,
    source_id: Uuid,
    path: &str,
) -> Result<Option<DocumentSummary>, StoreError> {
    Ok(sqlx::query_as::<_, DocumentSummary>(
        "SELECT id, space_id, source_id, path, name, mime, size_bytes, content_hash, version
         FROM documents WHERE source_id = $1 AND path = $2",
    )
    .bind(source_id)
    .bind(path)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Writes a document with its chunks and tables, replacing an earlier version
/// at the same path. Runs inside the caller's transaction, so readers see the
/// old version or the new one, never a mix; the `documents` trigger appends the
/// change to the index log in the same transaction.
pub async fn write_document(
    tx: &mut ScopedTx,
    doc: &NewDocument,
) -> Result<WriteOutcome, StoreError> {
    let path = normalize_path(&doc.path)?;
    if path.is_empty() {
        return Err(StoreError::Invalid("document path is empty".into()));
    }
    let (folder_path, name) = match path.rsplit_once('/') {
        Some((folder, name)) => (folder.to_string(), name.to_string()),
        None => (String::new(), path.clone()),
    };
    if let Some(existing) = document_by_path(tx, doc.source_id, &path).await?
        && existing.content_hash == doc.content_hash
    {
        return Ok(WriteOutcome::Unchanged(existing.id));
    }
    let folder_id = ensure_folder(tx, doc.space_id, doc.source_id, &folder_path).await?;
    let (id, inserted): (Uuid, bool) = sqlx::query_as(
        "INSERT INTO documents (space_id, source_id, folder_id, path, name, mime, size_bytes, content_hash,
                                title, language, content, metadata)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (source_id, path) DO UPDATE SET
             folder_id = excluded.folder_id, name = excluded.name, mime = excluded.mime,
             size_bytes = excluded.size_bytes, content_hash = excluded.content_hash,
             title = excluded.title, language = excluded.language, content = excluded.content,
             metadata = excluded.metadata, version = documents.version + 1, updated_at = now()
         RETURNING id, (xmax = 0)",
    )
    .bind(doc.space_id)
    .bind(doc.source_id)
    .bind(folder_id)
    .bind(&path)
    .bind(&name)
    .bind(&doc.mime)
    .bind(doc.size_bytes)
    .bind(&doc.content_hash)
    .bind(&doc.title)
    .bind(&doc.language)
    .bind(&doc.content)
    .bind(&doc.metadata)
    .fetch_one(&mut **tx)
    .await?;
    if !inserted {
        sqlx::query("DELETE FROM chunks WHERE document_id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        sqlx::query("DELETE FROM doc_tables WHERE document_id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    insert_chunks(tx, id, doc.space_id, &doc.chunks).await?;
    for table in &doc.tables {
        insert_table(tx, id, doc.space_id, table).await?;
    }
    Ok(if inserted {
        WriteOutcome::Created(id)
    } else {
        WriteOutcome::Replaced(id)
    })
}

async fn insert_chunks(
    tx: &mut ScopedTx,
    document_id: Uuid,
    space_id: Uuid,
    chunks: &[NewChunk],
) -> Result<(), StoreError> {
    // Batched with UNNEST: one round trip per few hundred chunks instead of one each.
    for (batch_no, batch) in chunks.chunks(256).enumerate() {
        let base = i32::try_from(batch_no * 256)
            .map_err(|_| StoreError::Invalid("too many chunks".into()))?;
        let mut ordinals = Vec::with_capacity(batch.len());
        let mut starts = Vec::with_capacity(batch.len());
        let mut ends = Vec::with_capacity(batch.len());
        let mut headings = Vec::with_capacity(batch.len());
        let mut pages = Vec::with_capacity(batch.len());
        let mut texts = Vec::with_capacity(batch.len());
        let mut embeddings = Vec::with_capacity(batch.len());
        for (i, c) in batch.iter().enumerate() {
            ordinals.push(base + i as i32);
            starts.push(c.char_start);
            ends.push(c.char_end);
            headings.push(c.heading.as_str());
            pages.push(c.page);
            texts.push(c.text.as_str());
            embeddings.push(Vector::from(c.embedding.clone()));
        }
        sqlx::query(
            "INSERT INTO chunks (document_id, space_id, ordinal, char_start, char_end, heading, page, text, embedding)
             SELECT $1, $2, * FROM UNNEST($3::int[], $4::int[], $5::int[], $6::text[], $7::int[], $8::text[], $9::vector[])",
        )
        .bind(document_id)
        .bind(space_id)
        .bind(&ordinals)
        .bind(&starts)
        .bind(&ends)
        .bind(&headings)
        .bind(&pages)
        .bind(&texts)
        .bind(&embeddings)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn insert_table(
    tx: &mut ScopedTx,
    document_id: Uuid,
    space_id: Uuid,
    table: &NewTable,
) -> Result<(), StoreError> {
    let row_count = i32::try_from(table.rows.len())
        .map_err(|_| StoreError::Invalid(format!("table {:?} has too many rows", table.name)))?;
    let table_id: Uuid = sqlx::query_scalar(
        "INSERT INTO doc_tables (document_id, space_id, name, columns, row_count)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(document_id)
    .bind(space_id)
    .bind(&table.name)
    .bind(&table.columns)
    .bind(row_count)
    .fetch_one(&mut **tx)
    .await?;
    for (batch_no, batch) in table.rows.chunks(1000).enumerate() {
        let base = (batch_no * 1000) as i32;
        let numbers: Vec<i32> = (0..batch.len() as i32).map(|i| base + i).collect();
        sqlx::query(
            "INSERT INTO table_rows (table_id, space_id, row_number, data)
             SELECT $1, $2, * FROM UNNEST($3::int[], $4::jsonb[])",
        )
        .bind(table_id)
        .bind(space_id)
        .bind(&numbers)
        .bind(batch)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The space a document belongs to, when the scope can see it.
pub async fn document_space(
    tx: &mut ScopedTx,
    document_id: Uuid,
) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT space_id FROM documents WHERE id = $1")
            .bind(document_id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// The space a source belongs to, when the scope can see it.
pub async fn source_space(tx: &mut ScopedTx, source_id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT space_id FROM sources WHERE id = $1")
            .bind(source_id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// Deletes a document (and, by cascade, its chunks and tables).
pub async fn delete_document(tx: &mut ScopedTx, id: Uuid) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM documents WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Documents of a space, optionally of one source, by path.
pub async fn list_documents(
    tx: &mut ScopedTx,
    space_id: Uuid,
    source_id: Option<Uuid>,
    limit: i64,
    offset: i64,
) -> Result<Vec<DocumentSummary>, StoreError> {
    Ok(sqlx::query_as::<_, DocumentSummary>(
        "SELECT id, space_id, source_id, path, name, mime, size_bytes, content_hash, version
         FROM documents WHERE space_id = $1 AND ($2::uuid IS NULL OR source_id = $2)
         ORDER BY path LIMIT $3 OFFSET $4",
    )
    .bind(space_id)
    .bind(source_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(&mut **tx)
    .await?)
}

/// A document as a listing of readable documents shows it (MCP's resources).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentEntry {
    pub id: Uuid,
    pub space_id: Uuid,
    pub path: String,
    pub title: Option<String>,
    /// Bytes of the extracted text (read from the value's header, not by
    /// reading the text).
    pub text_bytes: i64,
}
crate::from_row!(DocumentEntry {
    id,
    space_id,
    path,
    title,
    text_bytes
});

/// Up to `limit` documents of a space that `tx`'s scope may read, in
/// (path, id) order, starting after `after` (the last one of the page
/// before): a page stays right while documents come and go.
pub async fn document_entries(
    tx: &mut ScopedTx,
    space_id: Uuid,
    after: Option<(&str, Uuid)>,
    limit: i64,
) -> Result<Vec<DocumentEntry>, StoreError> {
    let (after_path, after_id) = after.unzip();
    Ok(sqlx::query_as::<_, DocumentEntry>(
        "SELECT id, space_id, path, title, octet_length(content)::bigint AS text_bytes
           FROM documents
          WHERE space_id = $1 AND ($2::text IS NULL OR (path, id) > ($2, $3::uuid))
          ORDER BY path, id LIMIT $4",
    )
    .bind(space_id)
    .bind(after_path)
    .bind(after_id)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// Up to `limit` ids of the spaces `tx`'s scope may read whose id (as
/// text) begins with `prefix`, in id order.
pub async fn readable_space_ids(
    tx: &mut ScopedTx,
    prefix: &str,
    limit: i64,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM spaces WHERE starts_with(id::text, lower($1)) ORDER BY id LIMIT $2",
    )
    .bind(prefix)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// Up to `limit` documents of a space that `tx`'s scope may read whose
/// path is `path` (`prefix` false) or starts with it, case aside (`prefix`
/// true: what completion offers as one types), in (path, id) order.
pub async fn document_entries_by_path(
    tx: &mut ScopedTx,
    space_id: Uuid,
    path: &str,
    prefix: bool,
    limit: i64,
) -> Result<Vec<DocumentEntry>, StoreError> {
    Ok(sqlx::query_as::<_, DocumentEntry>(
        "SELECT id, space_id, path, title, octet_length(content)::bigint AS text_bytes
           FROM documents
          WHERE space_id = $1
            AND CASE WHEN $3 THEN starts_with(lower(path), lower($2)) ELSE path = $2 END
          ORDER BY path, id LIMIT $4",
    )
    .bind(space_id)
    .bind(path)
    .bind(prefix)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// A chunk as the keyword index needs it.
#[derive(Debug, Clone)]
pub struct IndexableChunk {
    pub chunk_id: i64,
    pub document_id: Uuid,
    pub space_id: Uuid,
    pub source_id: Uuid,
    pub folder_path: String,
    pub document_path: String,
    pub language: Option<String>,
    pub heading: String,
    /// The document's title, empty when it has none.
    pub title: String,
    pub text: String,
}
crate::from_row!(IndexableChunk {
    chunk_id,
    document_id,
    space_id,
    source_id,
    folder_path,
    document_path,
    language,
    heading,
    title,
    text
});

/// The current chunks of the given documents (documents that no longer exist
/// simply contribute none).
pub async fn indexable_chunks(
    tx: &mut ScopedTx,
    document_ids: &[Uuid],
) -> Result<Vec<IndexableChunk>, StoreError> {
    Ok(sqlx::query_as::<_, IndexableChunk>(
        "SELECT c.id AS chunk_id, c.document_id, c.space_id, d.source_id, f.path AS folder_path,
                d.path AS document_path, d.language, c.heading,
                coalesce(d.title, '') AS title, c.text
         FROM chunks c JOIN documents d ON d.id = c.document_id JOIN folders f ON f.id = d.folder_id
         WHERE c.document_id = ANY($1)
         ORDER BY c.document_id, c.ordinal",
    )
    .bind(document_ids)
    .fetch_all(&mut **tx)
    .await?)
}
