//! The pipeline over the real PostgreSQL and the local model: files
//! ingested in groups (`Pipeline::ingest_batch`, what `data-plane ingest`
//! runs) are stored exactly as one by one (each chunk with its own vector,
//! whatever the files around it), a file that fails alone is reported by
//! name while the rest go on, and unchanged files are skipped.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use data_plane_ingest::IngestError;
use data_plane_ingest::pipeline::{EMBED_TOGETHER, Outcome, Pipeline, Target};
use data_plane_store::Scope;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity;
use data_plane_store::testing::TestDatabase;

/// Files of one to several chunks, more chunks in all than one group
/// holds, with three that fail on their own among them.
fn files() -> Vec<(String, std::io::Result<Vec<u8>>)> {
    let mut files = Vec::new();
    for i in 0..50 {
        let body = format!(
            "# Note {i}\n\nNote {i} is about {} and the {} of table number {i}.\n",
            ["vacuum", "indexes", "replication", "backups", "locks"][i % 5],
            ["bloat", "size", "lag", "schedule", "waits"][i % 5]
        );
        files.push((format!("notes/note-{i:02}.md"), Ok(body.into_bytes())));
        if i == 10 {
            files.push(("broken.pdf".into(), Ok(b"%PDF-1.4 not really".to_vec())));
            files.push((
                "gone.md".into(),
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                )),
            ));
        }
        if i == 30 {
            let long: String = (0..40)
                .map(|p| {
                    format!(
                        "## Part {p}\n\n{}\n\n",
                        format!("Paragraph {p} of the guide, on checkpoints and WAL volume. ")
                            .repeat(12)
                    )
                })
                .collect();
            files.push((
                "guide.md".into(),
                Ok(format!("# Guide\n\n{long}").into_bytes()),
            ));
            files.push(("tool.exe".into(), Ok(vec![0x4d, 0x5a, 0, 0])));
        }
    }
    files
}

#[tokio::test]
async fn files_ingested_in_groups_are_stored_as_one_by_one() {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "s").await.unwrap();
    let grouped = content::ensure_source(&mut tx, space.id, "grouped", SourceKind::Files)
        .await
        .unwrap();
    let single = content::ensure_source(&mut tx, space.id, "single", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let pipeline = Pipeline::new(test.db.clone(), data_plane_testkit::embedder());
    let into = |source_id| Target {
        space_id: space.id,
        source_id,
    };

    let mut seen: Vec<(String, Result<Outcome, String>, usize)> = Vec::new();
    pipeline
        .ingest_batch(Scope::System, into(grouped.id), files(), |path, report| {
            seen.push((
                path.to_string(),
                report
                    .as_ref()
                    .map(|r| r.outcome)
                    .map_err(|e: &IngestError| e.to_string()),
                report.map_or(0, |r| r.chunks),
            ))
        })
        .await
        .unwrap();
    // Every file reported once, the failures by name among the rest.
    assert_eq!(seen.len(), files().len());
    let failed: Vec<&str> = seen
        .iter()
        .filter(|(_, r, _)| r.is_err())
        .map(|(p, _, _)| p.as_str())
        .collect();
    assert_eq!(failed, ["broken.pdf", "gone.md", "tool.exe"], "{seen:?}");
    let gone = seen.iter().find(|(p, _, _)| p == "gone.md").unwrap();
    assert!(
        gone.1.as_ref().unwrap_err().contains("no such file"),
        "{gone:?}"
    );
    let chunks: usize = seen.iter().map(|(_, _, n)| n).sum();
    assert!(
        chunks > EMBED_TOGETHER,
        "{chunks} chunks make one group only"
    );
    assert!(
        seen.iter()
            .filter(|(_, r, _)| r.is_ok())
            .all(|(_, r, _)| *r.as_ref().unwrap() == Outcome::Created)
    );

    // The same files one by one, into another source.
    for (path, bytes) in files() {
        if let Ok(bytes) = bytes {
            let _ = pipeline
                .ingest_file(Scope::System, into(single.id), &path, &bytes)
                .await;
        }
    }
    // Chunk for chunk, the same offsets and the same vector.
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let (pairs, worst): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), min(1 - (a.embedding <=> b.embedding)) \
         FROM chunks a JOIN documents da ON da.id = a.document_id AND da.source_id = $1 \
         JOIN documents db ON db.path = da.path AND db.source_id = $2 \
         JOIN chunks b ON b.document_id = db.id AND b.ordinal = a.ordinal \
             AND b.char_start = a.char_start AND b.char_end = a.char_end",
    )
    .bind(grouped.id)
    .bind(single.id)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    drop(tx);
    assert_eq!(pairs as usize, chunks);
    let worst = worst.unwrap();
    assert!(worst > 0.99999, "a chunk's vector differs: cosine {worst}");

    // Again: nothing changed, nothing embedded.
    let mut outcomes = Vec::new();
    pipeline
        .ingest_batch(Scope::System, into(grouped.id), files(), |_, report| {
            if let Ok(r) = report {
                outcomes.push((r.outcome, r.chunks));
            }
        })
        .await
        .unwrap();
    assert_eq!(outcomes.len(), files().len() - 3);
    assert!(outcomes.iter().all(|o| *o == (Outcome::Unchanged, 0)));
    test.destroy().await.unwrap();
}

/// An OpenAI-compatible embeddings endpoint that answers its first
/// request and fails every one after.
async fn embeddings_failing_after_one() -> data_plane_testkit::http::Server {
    use data_plane_testkit::http::{Request, Response, Server};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = AtomicUsize::new(0);
    Server::start(move |request: Request| {
        if calls.fetch_add(1, Ordering::SeqCst) > 0 {
            return Response::whole(503, vec![], "overloaded");
        }
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<serde_json::Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let mut v = vec![0.0f32; 384];
                v[i % 384] = 1.0;
                serde_json::json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        Response::whole(
            200,
            vec![("content-type".into(), "application/json".into())],
            serde_json::json!({"object": "list", "data": data, "model": "m"}).to_string(),
        )
    })
    .await
}

#[tokio::test]
async fn a_failing_model_stops_the_ingest_after_the_groups_it_embedded() {
    let test = TestDatabase::create().await;
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "s").await.unwrap();
    let source = content::ensure_source(&mut tx, space.id, "notes", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let server = embeddings_failing_after_one().await;
    let mut config = data_plane_embed::EmbedConfig::open_ai(server.url("/v1"), None, "m", 384);
    if let data_plane_embed::Provider::OpenAi { batch_size, .. } = &mut config.provider {
        // One request per group, so the second group meets the failure.
        *batch_size = 1024;
    }
    let embedder = std::sync::Arc::new(data_plane_embed::Embedder::from_config(&config).unwrap());
    let pipeline = Pipeline::new(test.db.clone(), embedder);
    let files: Vec<(String, std::io::Result<Vec<u8>>)> = (0..EMBED_TOGETHER * 2)
        .map(|i| {
            let body = format!("# Note {i}\n\nA short note, number {i}.\n");
            (format!("note-{i:03}.md"), Ok(body.into_bytes()))
        })
        .collect();
    let mut reported = Vec::new();
    let error = pipeline
        .ingest_batch(
            Scope::System,
            Target {
                space_id: space.id,
                source_id: source.id,
            },
            files,
            |path, report| reported.push((path.to_string(), report.is_ok())),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, IngestError::Embed(_)), "{error}");
    // The first group is written and reported, each file once; nothing of
    // the second is reported, and nothing of it is stored.
    assert_eq!(reported.len(), EMBED_TOGETHER, "{reported:?}");
    assert!(reported.iter().all(|(_, ok)| *ok));
    let mut tx = test.db.begin(Scope::System).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM documents")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    drop(tx);
    assert_eq!(stored as usize, EMBED_TOGETHER);
    test.destroy().await.unwrap();
}
