//! Builders shared by the keyword index tests.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::collections::BTreeMap;

use data_plane_search::{ChunkDoc, IndexOp, KeywordHit, KeywordIndex, KeywordQuery};
use uuid::Uuid;

pub const SPACE_A: Uuid = Uuid::from_u128(0xA);
pub const SPACE_B: Uuid = Uuid::from_u128(0xB);
pub const SOURCE_1: Uuid = Uuid::from_u128(0x51);
pub const SOURCE_2: Uuid = Uuid::from_u128(0x52);

pub fn doc(n: u128) -> Uuid {
    Uuid::from_u128(0xD0C0_0000 + n)
}

/// A chunk of document `doc(document)` in space A, source 1.
pub fn chunk(
    chunk_id: i64,
    document: u128,
    folder: &str,
    language: Option<&str>,
    heading: &str,
    text: &str,
) -> ChunkDoc {
    ChunkDoc {
        chunk_id,
        document_id: doc(document),
        space_id: SPACE_A,
        source_id: SOURCE_1,
        folder_path: folder.to_owned(),
        document_path: format!("{folder}/doc-{document}.md"),
        language: language.map(str::to_owned),
        heading: heading.to_owned(),
        title: String::new(),
        text: text.to_owned(),
    }
}

/// One `ReplaceDocument` per document, in document order.
pub fn replace_ops(chunks: Vec<ChunkDoc>) -> Vec<IndexOp> {
    let mut by_doc: BTreeMap<Uuid, Vec<ChunkDoc>> = BTreeMap::new();
    for c in chunks {
        by_doc.entry(c.document_id).or_default().push(c);
    }
    by_doc
        .into_iter()
        .map(|(document_id, chunks)| IndexOp::ReplaceDocument {
            document_id,
            chunks,
        })
        .collect()
}

pub fn query(text: &str, spaces: &[Uuid]) -> KeywordQuery {
    KeywordQuery {
        text: text.to_owned(),
        space_ids: spaces.to_vec(),
        limit: 50,
        ..KeywordQuery::default()
    }
}

pub fn ids(hits: &[KeywordHit]) -> Vec<i64> {
    hits.iter().map(|h| h.chunk_id).collect()
}

pub fn sorted_ids(hits: &[KeywordHit]) -> Vec<i64> {
    let mut ids = ids(hits);
    ids.sort_unstable();
    ids
}

pub fn search_ids(index: &KeywordIndex, q: &KeywordQuery) -> Vec<i64> {
    match index.search(q) {
        Ok(hits) => sorted_ids(&hits),
        Err(e) => panic!("search {q:?} failed: {e}"),
    }
}
