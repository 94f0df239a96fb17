//! Writing documents: unchanged files are skipped, changed files replace their
//! chunks and tables in one transaction, every change lands in the ordered
//! index log, and an aborted write leaves nothing behind.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind, WriteOutcome};
use data_plane_store::identity;
use data_plane_store::index_log;
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope};
use uuid::Uuid;

fn doc(space_id: Uuid, source_id: Uuid, path: &str, body: &str, pieces: usize) -> NewDocument {
    let len = body.chars().count();
    let step = len.div_ceil(pieces).max(1);
    let chunks = (0..len)
        .step_by(step)
        .map(|start| {
            let end = (start + step).min(len);
            NewChunk {
                char_start: start as i32,
                char_end: end as i32,
                heading: "Intro".into(),
                page: None,
                text: body.chars().skip(start).take(end - start).collect(),
                embedding: vec![0.5; 384],
            }
        })
        .collect();
    NewDocument {
        space_id,
        source_id,
        path: path.into(),
        mime: "text/plain".into(),
        size_bytes: body.len() as i64,
        content_hash: format!(
            "{:x}",
            body.len() * 31 + body.bytes().map(usize::from).sum::<usize>()
        ),
        title: None,
        language: None,
        content: body.into(),
        metadata: serde_json::json!({}),
        chunks,
        tables: vec![],
    }
}

async fn setup(db: &Db) -> (Uuid, Uuid) {
    let mut tx = db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "docs").await.unwrap();
    let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (space.id, source.id)
}

async fn chunk_texts(db: &Db, document: Uuid) -> Vec<String> {
    let mut tx = db.begin(Scope::System).await.unwrap();
    sqlx::query_scalar("SELECT text FROM chunks WHERE document_id = $1 ORDER BY ordinal")
        .bind(document)
        .fetch_all(&mut *tx)
        .await
        .unwrap()
}

#[tokio::test]
async fn unchanged_is_skipped_changed_replaces_and_the_log_follows() {
    let test = TestDatabase::create().await;
    let (space, source) = setup(&test.db).await;

    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let first = content::write_document(
        &mut tx,
        &doc(space, source, "a/b/notes.txt", "héllo wörld, twice over", 3),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let WriteOutcome::Created(id) = first else {
        panic!("expected a new document, got {first:?}")
    };
    assert_eq!(
        chunk_texts(&test.db, id).await,
        vec!["héllo wö", "rld, twi", "ce over"]
    );

    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let again = content::write_document(
        &mut tx,
        &doc(space, source, "a/b/notes.txt", "héllo wörld, twice over", 3),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(again, WriteOutcome::Unchanged(id));

    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let changed = content::write_document(
        &mut tx,
        &doc(space, source, "a/b/notes.txt", "short now", 1),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(changed, WriteOutcome::Replaced(id));
    assert_eq!(chunk_texts(&test.db, id).await, vec!["short now"]);

    // Offsets cite the exact span in the stored content, in code points.
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let mismatches: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
         WHERE substr(d.content, c.char_start + 1, c.char_end - c.char_start) <> c.text",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(mismatches, 0);

    let entries = index_log::entries_after(&mut tx, 0, 100).await.unwrap();
    let ops: Vec<&str> = entries.iter().map(|e| e.op.as_str()).collect();
    assert_eq!(
        ops,
        vec!["upsert", "upsert"],
        "one entry per real change, none for the skipped write"
    );
    assert!(entries.windows(2).all(|w| w[0].seq < w[1].seq));

    assert!(content::delete_document(&mut tx, id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let last = index_log::entries_after(&mut tx, entries[1].seq, 100)
        .await
        .unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!((last[0].op.as_str(), last[0].document_id), ("delete", id));
    let folders: Vec<String> = sqlx::query_scalar("SELECT path FROM folders ORDER BY path")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(folders, vec!["", "a", "a/b"]);
}

#[tokio::test]
async fn an_aborted_write_leaves_nothing_visible() {
    let test = TestDatabase::create().await;
    let (space, source) = setup(&test.db).await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    content::write_document(&mut tx, &doc(space, source, "x.txt", "some text here", 2))
        .await
        .unwrap();
    // The process dies before commit: dropping the transaction rolls it back.
    drop(tx);
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    for table in ["documents", "chunks", "index_log"] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table} kept rows of an aborted write");
    }
}

#[tokio::test]
async fn paths_are_normalised_and_escapes_refused() {
    for (input, expected) in [
        ("a/b/c.txt", Some("a/b/c.txt")),
        ("/a//b/./c.txt", Some("a/b/c.txt")),
        ("a\\b.txt", Some("a/b.txt")),
        ("", Some("")),
        ("../etc/passwd", None),
        ("a/../../b", None),
    ] {
        let got = content::normalize_path(input).ok();
        assert_eq!(got.as_deref(), expected, "normalize_path({input:?})");
    }
}

#[tokio::test]
async fn the_embedding_dimension_is_checked_against_the_schema() {
    let test = TestDatabase::create().await;
    assert!(test.db.check_embedding_dimension(384).await.is_ok());
    let err = test
        .db
        .check_embedding_dimension(1536)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("1536") && err.contains("vector(384)"), "{err}");
}

/// The listing clients page through (MCP's resources): (path, id) order,
/// each page after the last one read, under the reader's row-level
/// security.
#[tokio::test]
async fn documents_are_listed_page_by_page_only_to_those_who_may_read_them() {
    use data_plane_store::identity::{MembershipRole, Permission};
    let test = TestDatabase::create().await;
    let (space, source) = setup(&test.db).await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    for path in ["b.txt", "a.txt", "c/d.txt"] {
        content::write_document(&mut tx, &doc(space, source, path, "ünïcode text", 1))
            .await
            .unwrap();
    }
    let (other, _) = identity::ensure_space(&mut tx, "other").await.unwrap();
    let member = identity::upsert_user(&mut tx, "reader@example.com", Some(Permission::User))
        .await
        .unwrap();
    let stranger = identity::upsert_user(&mut tx, "stranger@example.com", Some(Permission::User))
        .await
        .unwrap();
    identity::add_member(&mut tx, space, member.id, MembershipRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = test.db.begin(Scope::User(member.id)).await.unwrap();
    let first = content::document_entries(&mut tx, space, None, 2)
        .await
        .unwrap();
    let paths: Vec<&str> = first.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "b.txt"]);
    assert_eq!(first[0].text_bytes, "ünïcode text".len() as i64);
    let last = &first[1];
    let rest = content::document_entries(&mut tx, space, Some((&last.path, last.id)), 2)
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].path, "c/d.txt");
    let after = Some((rest[0].path.as_str(), rest[0].id));
    assert!(
        content::document_entries(&mut tx, space, after, 2)
            .await
            .unwrap()
            .is_empty()
    );
    // By path, whole or begun, case aside.
    let by = |path: &'static str, prefix: bool| {
        let db = test.db.clone();
        let user = member.id;
        async move {
            let mut tx = db.begin(Scope::User(user)).await.unwrap();
            let found = content::document_entries_by_path(&mut tx, space, path, prefix, 10)
                .await
                .unwrap();
            found.into_iter().map(|d| d.path).collect::<Vec<_>>()
        }
    };
    assert_eq!(by("B.TXT", false).await, Vec::<String>::new());
    assert_eq!(by("b.txt", false).await, ["b.txt"]);
    assert_eq!(by("C/", true).await, ["c/d.txt"]);
    assert_eq!(by("", true).await, ["a.txt", "b.txt", "c/d.txt"]);
    assert_eq!(by("%", true).await, Vec::<String>::new());
    // Another space's listing holds none of them.
    assert!(
        content::document_entries(&mut tx, other.id, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    tx.commit().await.unwrap();

    let mut tx = test.db.begin(Scope::User(stranger.id)).await.unwrap();
    assert!(
        content::document_entries(&mut tx, space, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        content::document_entries_by_path(&mut tx, space, "", true, 10)
            .await
            .unwrap()
            .is_empty()
    );
}
