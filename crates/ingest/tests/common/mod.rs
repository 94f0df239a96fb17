//! Helpers shared by the integration tests: fixtures and the offset invariant.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

use data_plane_ingest::{Chunk, ChunkOptions, Extracted, chunk};

pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// PostgreSQL's `substr(text, start + 1, end - start)` on a UTF-8 database.
pub fn substr(text: &str, start: u64, end: u64) -> String {
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

/// Chunks an extraction and proves the invariants every stored chunk relies on.
pub fn chunk_checked(extracted: &Extracted, opts: &ChunkOptions) -> Vec<Chunk> {
    let chunks = chunk(
        &extracted.text,
        &extracted.metadata.headings,
        &extracted.metadata.pages,
        opts,
    );
    let mut previous_start = 0;
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.ordinal as usize, i);
        assert_eq!(
            substr(&extracted.text, c.char_start, c.char_end),
            c.text,
            "chunk {i} is not its slice"
        );
        assert!(!c.text.trim().is_empty(), "chunk {i} is blank");
        assert_eq!(c.text.trim(), c.text, "chunk {i} has whitespace at an edge");
        assert!(
            c.text.chars().count() <= opts.max_chars,
            "chunk {i} exceeds max_chars"
        );
        assert!(
            c.char_start >= previous_start,
            "chunk {i} starts before chunk {}",
            i.saturating_sub(1)
        );
        previous_start = c.char_start;
    }
    chunks
}
