//! The HTTP surface for loading a corpus, against a real server on 127.0.0.1,
//! real PostgreSQL and the real local embedding model: create a space and a
//! source, upload files (one of them broken), list, re-upload unchanged,
//! delete; strangers and bad requests get clear JSON errors.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{json, start};

#[tokio::test]
async fn upload_list_reupload_and_delete() {
    let server = start().await;
    let http = reqwest::Client::new();
    let alice = server.token("alice@example.com").await;
    let mallory = server.token("mallory@example.com").await;

    let (status, space) = json(
        http.post(format!("{}/v1/spaces", server.base))
            .bearer_auth(&alice)
            .json(&serde_json::json!({"name": "research"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{space}");
    let space_id = space["id"].as_str().unwrap().to_string();
    let (status, source) = json(
        http.post(format!("{}/v1/spaces/{space_id}/sources", server.base))
            .bearer_auth(&alice)
            .json(&serde_json::json!({"name": "papers"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{source}");
    let source_id = source["id"].as_str().unwrap().to_string();

    let form = || {
        reqwest::multipart::Form::new()
            .text("folder", "inbox")
            .part(
                "file",
                reqwest::multipart::Part::bytes(
                    b"# Vacuum\n\nVACUUM reclaims storage occupied by dead tuples.\n".to_vec(),
                )
                .file_name("notes/vacuum.md"),
            )
            .part(
                "file",
                reqwest::multipart::Part::bytes(
                    b"city,population\nOslo,709000\nBergen,291000\n".to_vec(),
                )
                .file_name("cities.csv"),
            )
            .part(
                "file",
                reqwest::multipart::Part::bytes(b"%PDF-1.7 this is not a pdf".to_vec())
                    .file_name("broken.pdf"),
            )
            .part(
                "file",
                reqwest::multipart::Part::bytes(vec![0u8; 16]).file_name("image.png"),
            )
    };
    let url = format!("{}/v1/sources/{source_id}/documents", server.base);
    let (status, body) = json(
        http.post(&url)
            .bearer_auth(&alice)
            .multipart(form())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let files = body["files"].as_array().unwrap();
    let statuses: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f["file"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("notes/vacuum.md", "created"),
            ("cities.csv", "created"),
            ("broken.pdf", "error"),
            ("image.png", "error")
        ]
    );
    assert_eq!(files[0]["path"], "inbox/notes/vacuum.md");
    assert_eq!(files[1]["tables"], 1);
    assert!(
        files[3]["error"].as_str().unwrap().contains("png"),
        "{}",
        files[3]
    );
    assert_eq!(body["failed"], 2);

    // The same bytes again: nothing to do.
    let (_, again) = json(
        http.post(&url)
            .bearer_auth(&alice)
            .multipart(form())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again["files"][0]["status"], "unchanged");
    assert_eq!(again["files"][1]["status"], "unchanged");

    let (status, listed) = json(
        http.get(format!(
            "{}/v1/spaces/{space_id}/documents?limit=1",
            server.base
        ))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(listed["documents"][0]["path"], "inbox/cities.csv");
    assert_eq!(listed["has_more"], true);

    // A stranger learns nothing: the space and the source do not exist for them.
    let (status, err) = json(
        http.post(&url)
            .bearer_auth(&mallory)
            .multipart(form())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "not_found");
    let (status, _) = json(
        http.get(format!("{}/v1/spaces/{space_id}/documents", server.base))
            .bearer_auth(&mallory)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);

    let doc_id = files[0]["document_id"].as_str().unwrap();
    let resp = http
        .delete(format!("{}/v1/documents/{doc_id}", server.base))
        .bearer_auth(&mallory)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let resp = http
        .delete(format!("{}/v1/documents/{doc_id}", server.base))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
}

#[tokio::test]
async fn bad_requests_get_json_errors_naming_the_problem() {
    let server = start().await;
    let http = reqwest::Client::new();
    let alice = server.token("alice@example.com").await;
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            http.get(format!("{}/v1/spaces", server.base)),
            401,
            "missing Authorization",
        ),
        (
            http.get(format!("{}/v1/spaces", server.base))
                .header("Authorization", "Basic abc"),
            401,
            "Bearer",
        ),
        (
            http.get(format!("{}/v1/spaces", server.base))
                .bearer_auth("not.a.jwt"),
            401,
            "not valid",
        ),
        (
            http.post(format!("{}/v1/spaces", server.base))
                .bearer_auth(&alice)
                .json(&serde_json::json!({"name": ""})),
            400,
            "name",
        ),
        (
            http.post(format!("{}/v1/spaces", server.base))
                .bearer_auth(&alice)
                .json(&serde_json::json!({"name": "x", "colour": "red"})),
            400,
            "colour",
        ),
        (
            http.get(format!("{}/v1/nope", server.base))
                .bearer_auth(&alice),
            404,
            "no such endpoint",
        ),
    ];
    for (request, status, needle) in cases {
        let resp = request.send().await.unwrap();
        let got = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(got, status, "{text}");
        assert!(text.contains(needle), "expected {needle:?} in {text}");
    }
}
