//! The keyword index follows PostgreSQL: new, changed and deleted documents
//! reach it through the change log, a restarted index resumes where its last
//! commit stopped, and a rebuild from scratch gives the same answers.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use data_plane_search::follower::Follower;
use data_plane_search::{KeywordIndex, KeywordQuery};
use data_plane_store::content::{self, NewChunk, NewDocument, SourceKind};
use data_plane_store::testing::TestDatabase;
use data_plane_store::{Db, Scope, identity};
use uuid::Uuid;

struct Corpus {
    space: Uuid,
    source: Uuid,
}

async fn corpus(db: &Db) -> Corpus {
    let mut tx = db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "notes").await.unwrap();
    let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    Corpus {
        space: space.id,
        source: source.id,
    }
}

/// Writes a document whose chunks are the given paragraphs.
async fn write(db: &Db, c: &Corpus, path: &str, paragraphs: &[&str]) -> Uuid {
    let content = paragraphs.join("\n\n");
    let mut chunks = Vec::new();
    let mut at = 0;
    for p in paragraphs {
        let len = p.chars().count() as i32;
        chunks.push(NewChunk {
            char_start: at,
            char_end: at + len,
            heading: String::new(),
            page: None,
            text: (*p).to_string(),
            embedding: vec![0.0; 384],
        });
        at += len + 2;
    }
    let doc = NewDocument {
        space_id: c.space,
        source_id: c.source,
        path: path.into(),
        mime: "text/plain".into(),
        size_bytes: content.len() as i64,
        content_hash: format!("{}:{content}", content.len()),
        title: None,
        language: Some("en".into()),
        content,
        metadata: serde_json::json!({}),
        chunks,
        tables: vec![],
    };
    let mut tx = db.begin(Scope::System).await.unwrap();
    let outcome = content::write_document(&mut tx, &doc).await.unwrap();
    tx.commit().await.unwrap();
    match outcome {
        content::WriteOutcome::Created(id)
        | content::WriteOutcome::Replaced(id)
        | content::WriteOutcome::Unchanged(id) => id,
    }
}

fn hits(index: &KeywordIndex, c: &Corpus, text: &str) -> Vec<Uuid> {
    let mut docs: Vec<Uuid> = index
        .search(&KeywordQuery {
            text: text.into(),
            space_ids: vec![c.space],
            limit: 50,
            ..KeywordQuery::default()
        })
        .unwrap()
        .into_iter()
        .map(|h| h.document_id)
        .collect();
    docs.dedup();
    docs
}

#[tokio::test]
async fn changes_deletes_and_restarts_reach_the_index() {
    let test = TestDatabase::create().await;
    let c = corpus(&test.db).await;
    let dir = tempfile::tempdir().unwrap();

    let vacuum = write(
        &test.db,
        &c,
        "admin/vacuum.txt",
        &["vacuum reclaims dead tuples", "autovacuum runs it"],
    )
    .await;
    let index_doc = write(
        &test.db,
        &c,
        "admin/indexes.txt",
        &["btree indexes speed lookups"],
    )
    .await;
    {
        let index = KeywordIndex::open_or_create(dir.path()).unwrap();
        let follower = Follower::new(test.db.clone(), index.clone());
        assert_eq!(follower.catch_up().await.unwrap(), 2);
        assert_eq!(hits(&index, &c, "vacuum"), vec![vacuum]);
        assert_eq!(index.num_chunks(), 3);
        // Nothing new: nothing applied.
        assert_eq!(follower.catch_up().await.unwrap(), 0);
    }

    // While no index is open, a document changes and another is deleted.
    write(
        &test.db,
        &c,
        "admin/vacuum.txt",
        &["vacuum full rewrites the table"],
    )
    .await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    content::delete_document(&mut tx, index_doc).await.unwrap();
    tx.commit().await.unwrap();

    let index = KeywordIndex::open_or_create(dir.path()).unwrap();
    assert_eq!(
        hits(&index, &c, "btree"),
        vec![index_doc],
        "the reopened index holds its last commit"
    );
    let follower = Follower::new(test.db.clone(), index.clone());
    assert_eq!(
        follower.catch_up().await.unwrap(),
        2,
        "only the entries after the stored sequence"
    );
    assert!(
        hits(&index, &c, "btree").is_empty(),
        "a deleted document is gone"
    );
    assert!(
        hits(&index, &c, "autovacuum").is_empty(),
        "replaced chunks are gone"
    );
    assert_eq!(hits(&index, &c, "rewrites"), vec![vacuum]);
    assert_eq!(index.num_chunks(), 1);

    // A rebuild from scratch agrees with the incremental index.
    let fresh = KeywordIndex::in_memory().unwrap();
    let chunks = Follower::new(test.db.clone(), fresh.clone())
        .rebuild()
        .await
        .unwrap();
    assert_eq!(chunks, 1);
    assert_eq!(fresh.last_seq().unwrap(), index.last_seq().unwrap());
    assert_eq!(hits(&fresh, &c, "rewrites"), vec![vacuum]);
}

#[tokio::test]
async fn the_running_follower_picks_up_new_documents_by_itself() {
    let test = TestDatabase::create().await;
    let c = corpus(&test.db).await;
    let index = KeywordIndex::in_memory().unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(Follower::new(test.db.clone(), index.clone()).run(stopped));

    let id = write(
        &test.db,
        &c,
        "wal.txt",
        &["write ahead logging protects commits"],
    )
    .await;
    // Notification-driven: well under the 5 s poll interval, but bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while hits(&index, &c, "logging").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower never applied the new document"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(hits(&index, &c, "logging"), vec![id]);
    stop.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
}
