//! `kill -9` in the middle of an ingest: the process dies between and
//! inside documents' transactions. Afterwards every document in PostgreSQL
//! is whole (its text, its passages, each passage's span inside the text),
//! the next `serve` starts and answers searches over what was stored, and
//! the same ingest run again completes without duplicates.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use data_plane_store::Scope;
use data_plane_store::testing::TestDatabase;
use serde_json::json;

const FILES: usize = 120;

fn corpus(dir: &std::path::Path) {
    for i in 0..FILES {
        let folder = dir.join(format!("part{}", i % 7));
        std::fs::create_dir_all(&folder).unwrap();
        let mut text = format!("# Note {i}\n\n");
        for p in 0..12 {
            text.push_str(&format!(
                "Paragraph {p} of note {i} explains checkpoint {} and the write-ahead log, \
                 how replicas replay it, and why a crash never leaves a torn page behind. \
                 Marker word crashsafe{i}.\n\n",
                i * 13 + p
            ));
        }
        std::fs::write(folder.join(format!("note{i}.md")), text).unwrap();
    }
}

/// A count read with the system's rights (row-level security applies to
/// the schema's owner too).
async fn count(test: &TestDatabase, sql: &str) -> i64 {
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let n = sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    n
}

/// Documents whose stored passages do not add up: none, or a passage whose
/// span does not hold its text.
async fn torn_documents(test: &TestDatabase) -> i64 {
    count(
        test,
        "SELECT count(*) FROM documents d
         WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id)
            OR EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id
                       AND substr(d.content, c.char_start + 1, c.char_end - c.char_start) <> c.text)",
    )
    .await
}

#[tokio::test]
async fn a_killed_ingest_leaves_whole_documents_and_the_next_start_serves() {
    let test = TestDatabase::create().await;
    let files = tempfile::tempdir().unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    corpus(files.path());

    let mut ingest = common::binary(&test, data_dir.path())
        .args(["ingest", files.path().to_str().unwrap(), "--space", "crash"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some documents are in and more are on their way.
    let started = Instant::now();
    loop {
        let stored = count(&test, "SELECT count(*) FROM documents").await;
        if stored >= 10 {
            break;
        }
        assert!(
            ingest.try_wait().unwrap().is_none(),
            "the ingest ended before it could be killed"
        );
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "ingest made no progress"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ingest.kill().unwrap(); // SIGKILL
    ingest.wait().unwrap();
    let stored = count(&test, "SELECT count(*) FROM documents").await;
    println!("killed after {stored} of {FILES} documents");
    assert!(
        stored < FILES as i64,
        "the kill came too late to test anything"
    );
    assert_eq!(
        torn_documents(&test).await,
        0,
        "a document was half written"
    );

    // The next start serves what was stored.
    let port = data_plane_testkit::unused_addr().port();
    let token = common::binary(&test, data_dir.path())
        .args(["token", "--user", "reader@example.com", "--space", "crash"])
        .output()
        .unwrap();
    assert!(
        token.status.success(),
        "{}",
        String::from_utf8_lossy(&token.stderr)
    );
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let mut server = common::binary(&test, data_dir.path())
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            server.try_wait().unwrap().is_none(),
            "the server did not start after the crash"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not ready in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spaces: serde_json::Value = http
        .get(format!("{base}/v1/spaces"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let space = spaces["spaces"][0]["id"].clone();
    let found: serde_json::Value = http
        .post(format!("{base}/v1/tools/search_documents/execute"))
        .bearer_auth(&token)
        .json(&json!({"args": {"query": "write-ahead log replicas", "mode": "keyword"}, "spaceId": space}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found["success"], true, "{found}");
    assert!(
        !found["data"]["results"].as_array().unwrap().is_empty(),
        "{found}"
    );
    server.kill().unwrap();
    server.wait().unwrap();

    // The same ingest again finishes the job, once per file.
    let again = common::binary(&test, data_dir.path())
        .args(["ingest", files.path().to_str().unwrap(), "--space", "crash"])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(
        count(&test, "SELECT count(*) FROM documents").await,
        FILES as i64
    );
    assert_eq!(
        count(&test, "SELECT count(DISTINCT path) FROM documents").await,
        FILES as i64
    );
    assert_eq!(torn_documents(&test).await, 0);
}
