//! The demo corpus end to end through extraction and chunking (run on demand:
//! `cargo test -p data-plane-ingest --test corpus -- --ignored --nocapture`).

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::chunk_checked;
use data_plane_ingest::{ChunkOptions, extract};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
#[ignore = "needs .data/corpus/demo; prints figures"]
fn demo_corpus_extracts_and_chunks() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.data/corpus/demo");
    let mut paths = Vec::new();
    files(&root, &mut paths);
    paths.sort();
    assert!(!paths.is_empty(), "no corpus at {}", root.display());
    let opts = ChunkOptions::default();
    let started = Instant::now();
    let (mut chars, mut chunks, mut rows, mut headings, mut failures) =
        (0u64, 0usize, 0usize, 0usize, 0usize);
    let mut sizes: Vec<usize> = Vec::new();
    for path in &paths {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .to_string_lossy()
            .to_string();
        let bytes = std::fs::read(path).unwrap();
        match extract(&name, &bytes) {
            Ok(extracted) => {
                let made = chunk_checked(&extracted, &opts);
                chars += extracted.metadata.char_count;
                headings += extracted.metadata.headings.len();
                rows += extracted.tables.iter().map(|t| t.rows.len()).sum::<usize>();
                chunks += made.len();
                sizes.extend(made.iter().map(|c| c.text.chars().count()));
                assert!(
                    extracted.metadata.title.is_some() || name.ends_with(".csv"),
                    "{name} has no title"
                );
            }
            Err(e) => {
                failures += 1;
                println!("{name}: {e}");
            }
        }
    }
    sizes.sort_unstable();
    let median = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    println!(
        "{} files, {failures} failed, {chars} chars, {headings} headings, {rows} table rows, {chunks} chunks \
         (median {median} chars, max {}), {:.2?}",
        paths.len(),
        sizes.last().copied().unwrap_or(0),
        started.elapsed()
    );
    assert_eq!(failures, 0);
}
