//! The on-disk index across restarts and crashes: what was committed survives
//! with its sequence number, what was not is never seen.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use data_plane_search::{IndexOp, KeywordIndex, SearchError};
use tantivy::schema::FieldType;
use tantivy::tokenizer::SimpleTokenizer;
use tantivy::{Index, IndexWriter, TantivyDocument};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Set in the child process of `a_crash_before_commit_loses_only_the_uncommitted_work`.
const CRASH_DIR_ENV: &str = "DATA_PLANE_SEARCH_CRASH_DIR";

/// Printed by the child once its work is staged, just before it aborts.
const STAGED: &str = "uncommitted work staged";

fn seed(dir: &Path) -> Result<KeywordIndex, SearchError> {
    let index = KeywordIndex::open_or_create(dir)?;
    let chunks = vec![
        chunk(
            1,
            1,
            "/a",
            Some("en"),
            "Intro",
            "the index survives restarts",
        ),
        chunk(2, 1, "/a", Some("en"), "More", "restarting is routine"),
        chunk(3, 2, "/b", Some("de"), "Haus", "Die Häuser bleiben"),
    ];
    index.apply(replace_ops(chunks), 41)?;
    Ok(index)
}

fn assert_seeded_state(index: &KeywordIndex) -> TestResult {
    assert_eq!(index.last_seq()?, 41);
    assert_eq!(index.num_chunks(), 3);
    assert_eq!(search_ids(index, &query("restart", &[SPACE_A])), [1, 2]);
    assert_eq!(search_ids(index, &query("haus", &[SPACE_A])), [3]);
    Ok(())
}

/// Stages a delete of document 1 and a thousand new chunks directly through
/// Tantivy, flushing segments to disk without committing them.
fn stage_without_commit(dir: &Path) -> Result<IndexWriter, Box<dyn std::error::Error>> {
    let index = Index::open_in_dir(dir)?;
    let schema = index.schema();
    // The writer insists on every analyser the schema names; none of the
    // text fields is written here, so any analyser will do.
    for (_, entry) in schema.fields() {
        if let FieldType::Str(options) = entry.field_type()
            && let Some(indexing) = options.get_indexing_options()
        {
            index
                .tokenizers()
                .register(indexing.tokenizer(), SimpleTokenizer::default());
        }
    }
    let (chunk_id, document_id) = (
        schema.get_field("chunk_id")?,
        schema.get_field("document_id")?,
    );
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 20_000_000)?;
    writer.delete_term(tantivy::Term::from_field_text(
        document_id,
        &doc(1).to_string(),
    ));
    for i in 0..1000 {
        let mut d = TantivyDocument::new();
        d.add_i64(chunk_id, 1000 + i);
        d.add_text(document_id, doc(500).to_string());
        writer.add_document(d)?;
    }
    // Segment files are written now; only meta.json would make them live.
    let _ = writer.prepare_commit()?;
    Ok(writer)
}

#[test]
fn committed_state_survives_reopening() -> TestResult {
    let dir = tempfile::tempdir()?;
    let index = seed(dir.path())?;
    assert!(index.disk_size_bytes() > 0);
    drop(index);
    let reopened = KeywordIndex::open_or_create(dir.path())?;
    assert_seeded_state(&reopened)?;
    reopened.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(2),
        }],
        42,
    )?;
    drop(reopened);
    let again = KeywordIndex::open_or_create(dir.path())?;
    assert_eq!(again.last_seq()?, 42);
    assert!(search_ids(&again, &query("haus", &[SPACE_A])).is_empty());
    Ok(())
}

#[test]
fn a_new_directory_starts_empty_at_sequence_zero() -> TestResult {
    let dir = tempfile::tempdir()?;
    let nested = dir.path().join("data").join("index");
    let index = KeywordIndex::open_or_create(&nested)?;
    assert_eq!(index.last_seq()?, 0);
    assert_eq!(index.num_chunks(), 0);
    drop(index);
    assert_eq!(KeywordIndex::open_or_create(&nested)?.last_seq()?, 0);
    Ok(())
}

#[test]
fn a_writer_dropped_before_commit_leaves_the_previous_state() -> TestResult {
    let dir = tempfile::tempdir()?;
    drop(seed(dir.path())?);
    let writer = stage_without_commit(dir.path())?;
    drop(writer);
    assert_seeded_state(&KeywordIndex::open_or_create(dir.path())?)
}

#[test]
fn a_crash_before_commit_loses_only_the_uncommitted_work() -> TestResult {
    if let Ok(dir) = std::env::var(CRASH_DIR_ENV) {
        // Child process: stage work, then die without unwinding or committing.
        let _writer = stage_without_commit(Path::new(&dir))?;
        println!("{STAGED}");
        std::process::abort();
    }
    let dir = tempfile::tempdir()?;
    drop(seed(dir.path())?);
    let child = Command::new(std::env::current_exe()?)
        .args([
            "--exact",
            "a_crash_before_commit_loses_only_the_uncommitted_work",
        ])
        .args(["--test-threads=1", "--nocapture"])
        .env(CRASH_DIR_ENV, dir.path())
        .output()?;
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        stdout.contains(STAGED) && !child.status.success(),
        "the child should stage work, then abort: {}\n{stdout}{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
    let reopened = KeywordIndex::open_or_create(dir.path())?;
    assert_seeded_state(&reopened)?;
    // The index keeps working after the crash.
    reopened.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(1),
        }],
        43,
    )?;
    assert!(search_ids(&reopened, &query("restart", &[SPACE_A])).is_empty());
    assert_eq!(reopened.num_chunks(), 1);
    Ok(())
}

#[test]
fn a_second_writer_on_the_same_directory_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let _index = seed(dir.path())?;
    match KeywordIndex::open_or_create(dir.path()) {
        Err(e @ SearchError::Locked { .. }) => {
            assert!(
                e.to_string().contains(&dir.path().display().to_string()),
                "{e}"
            );
        }
        other => panic!("expected a lock error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn an_index_of_another_format_is_rebuilt_from_scratch() -> TestResult {
    // Written by an older analysis: same schema, other format version.
    let dir = tempfile::tempdir()?;
    drop(seed(dir.path())?);
    {
        let index = Index::open_in_dir(dir.path())?;
        let mut writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(1, 20_000_000)?;
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload("0:41");
        prepared.commit()?;
    }
    let index = KeywordIndex::open_or_create(dir.path())?;
    assert_eq!((index.last_seq()?, index.num_chunks()), (0, 0));
    drop(index);

    // Another schema altogether.
    let dir = tempfile::tempdir()?;
    let mut builder = tantivy::schema::Schema::builder();
    builder.add_text_field("body", tantivy::schema::TEXT);
    let foreign = Index::create_in_dir(dir.path(), builder.build())?;
    let mut writer: IndexWriter<TantivyDocument> =
        foreign.writer_with_num_threads(1, 20_000_000)?;
    writer.commit()?;
    drop((writer, foreign));
    let index = KeywordIndex::open_or_create(dir.path())?;
    assert_eq!((index.last_seq()?, index.num_chunks()), (0, 0));
    index.apply(replace_ops(vec![chunk(1, 1, "/", None, "", "fresh")]), 1)?;
    assert_eq!(search_ids(&index, &query("fresh", &[SPACE_A])), [1]);
    Ok(())
}
