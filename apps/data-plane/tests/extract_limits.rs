//! The server against hostile files and bodies, on 127.0.0.1 with real
//! PostgreSQL and the real embedding model: a PDF decompression bomb and a
//! 300k-deep HTML page uploaded in one batch with an ordinary file (the bomb
//! is refused by name, the rest goes on, time and resident memory stay
//! bounded), the ingest pipeline under a deployment's limits (what
//! `data-plane ingest` runs per file), and request bodies over the limit
//! answered 413 with the JSON error body.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use data_plane_store::Scope;
use data_plane_store::identity;
use data_plane_store::testing::TestDatabase;
use flate2::Compression;
use flate2::write::ZlibEncoder;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{Server, json, start};

const MIB: u64 = 1024 * 1024;

/// What the bomb's one content stream inflates to; its four pages each ask for it.
const BOMB_INFLATED: u64 = 1024 * MIB;
/// Bounds the upload must stay under, debug build included.
const MAX_SECONDS: f64 = 30.0;
const MAX_RESIDENT_GROWTH: u64 = 300 * MIB;

/// A value of /proc/self/status, in bytes.
fn proc_status(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in /proc/self/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

/// A four-page PDF whose pages share one deflated content stream of
/// `inflated` spaces: about a thousandth of that on disk.
fn bomb(inflated: u64) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::best());
    let block = vec![b' '; MIB as usize];
    for _ in 0..inflated / MIB {
        encoder.write_all(&block).unwrap();
    }
    let stream = encoder.finish().unwrap();
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [4 0 R 5 0 R 6 0 R 7 0 R] /Count 4 >>".to_vec(),
    ];
    let mut content = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    content.extend_from_slice(&stream);
    content.extend_from_slice(b"\nendstream");
    objects.push(content);
    for _ in 0..4 {
        objects.push(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 3 0 R >>".to_vec(),
        );
    }
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

fn deep_html(depth: usize) -> Vec<u8> {
    let mut html = String::from("<!doctype html><html><head><title>Deep</title></head><body>");
    html.push_str(&"<div>".repeat(depth));
    html.push_str("The bottom of a very deep page.");
    html.push_str(&"</div>".repeat(depth));
    html.push_str("</body></html>");
    html.into_bytes()
}

async fn source(server: &Server, http: &reqwest::Client, token: &str) -> String {
    let (status, space) = json(
        http.post(format!("{}/v1/spaces", server.base))
            .bearer_auth(token)
            .json(&json!({"name": "hostile"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{space}");
    let space_id = space["id"].as_str().unwrap();
    let (status, source) = json(
        http.post(format!("{}/v1/spaces/{space_id}/sources", server.base))
            .bearer_auth(token)
            .json(&json!({"name": "uploads"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{source}");
    source["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_bomb_and_a_deep_page_leave_the_batch_and_the_memory_intact() {
    let server = start().await;
    let http = reqwest::Client::new();
    let alice = server.token("alice@example.com").await;
    let source_id = source(&server, &http, &alice).await;

    let pdf = bomb(BOMB_INFLATED);
    let html = deep_html(300_000);
    println!(
        "bomb.pdf: {} bytes on disk, {} MiB inflated per page, 4 pages; deep.html: {} bytes, 300000 levels",
        pdf.len(),
        BOMB_INFLATED / MIB,
        html.len()
    );
    assert!(pdf.len() < 2 * MIB as usize);
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(pdf).file_name("bomb.pdf"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(html).file_name("deep.html"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"# Fine\n\nAn ordinary note.\n".to_vec())
                .file_name("fine.md"),
        );

    let resident_before = proc_status("VmRSS:");
    let started = Instant::now();
    let (status, body) = json(
        http.post(format!("{}/v1/sources/{source_id}/documents", server.base))
            .bearer_auth(&alice)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let peak = proc_status("VmHWM:");
    let growth = peak.saturating_sub(resident_before);
    println!(
        "upload took {seconds:.2} s; resident before {} MiB, peak {} MiB, growth {} MiB",
        resident_before / MIB,
        peak / MIB,
        growth / MIB
    );
    assert_eq!(status, 200, "{body}");
    let files = body["files"].as_array().unwrap();
    let by_name = |name: &str| {
        files
            .iter()
            .find(|f| f["file"] == name)
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    };
    let refused = by_name("bomb.pdf");
    assert_eq!(refused["status"], "error", "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("bomb.pdf") && message.contains("decompression bomb"),
        "{message}"
    );
    assert_eq!(by_name("deep.html")["status"], "created", "{body}");
    assert_eq!(by_name("fine.md")["status"], "created", "{body}");
    assert_eq!(body["failed"], 1);
    assert!(seconds < MAX_SECONDS, "the upload took {seconds:.2} s");
    assert!(
        growth < MAX_RESIDENT_GROWTH,
        "resident memory grew by {} MiB",
        growth / MIB
    );
}

/// Sends raw request `head` and `body` bytes and reads the answer's status and JSON body.
async fn raw(server: &Server, head: String, body: &[u8]) -> (u16, Value) {
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    // The server may answer and close before the whole body is sent.
    let _ = tcp.write_all(body).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b.trim()).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_with_the_json_error() {
    let server = start().await;
    let http = reqwest::Client::new();
    let alice = server.token("alice@example.com").await;
    let big = json!({ "arguments": { "query": "x".repeat(3 * MIB as usize) } });

    // Declared lengths over the limit, on every kind of route.
    for (method, path) in [
        (reqwest::Method::POST, "/v1/tools/search_documents/execute"),
        (reqwest::Method::POST, "/v1/chat"),
        (reqwest::Method::POST, "/execute"),
        (reqwest::Method::PUT, "/v1/admin/settings"),
        (reqwest::Method::POST, "/v1/spaces"),
        (reqwest::Method::GET, "/healthz"),
    ] {
        let (status, body) = json(
            http.request(method.clone(), format!("{}{path}", server.base))
                .bearer_auth(&alice)
                .json(&big)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 413, "{method} {path}: {body}");
        assert_eq!(body["error"]["code"], "payload_too_large", "{path}: {body}");
    }

    // A chunked body declares nothing; it is cut off as it is read.
    let payload = serde_json::to_vec(&big).unwrap();
    let mut chunked = format!("{:x}\r\n", payload.len()).into_bytes();
    chunked.extend_from_slice(&payload);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let head = format!(
        "POST /v1/tools/search_documents/execute HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {alice}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.addr()
    );
    let (status, body) = raw(&server, head, &chunked).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    // The upload route takes more, but not without end.
    let source_id = source(&server, &http, &alice).await;
    let head = format!(
        "POST /v1/sources/{source_id}/documents HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {alice}\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr(),
        300 * MIB
    );
    let (status, body) = raw(&server, head, b"--x\r\n").await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");

    // Under the limit, the same routes still work.
    let (status, body) = json(
        http.post(format!("{}/v1/spaces", server.base))
            .bearer_auth(&alice)
            .json(&json!({"name": "small"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

/// What `data-plane ingest` runs for each file: the pipeline under the
/// deployment's limits, where a refused file fails alone.
#[tokio::test]
async fn the_pipeline_applies_its_limits_and_the_next_file_goes_in() {
    use data_plane_ingest::Limits;
    use data_plane_ingest::pipeline::{Outcome, Pipeline, Target};
    use data_plane_store::content::{self, SourceKind};

    let test = TestDatabase::create().await;
    let db = test.db.clone();
    let mut tx = db.begin(Scope::System).await.unwrap();
    let (space, _) = identity::ensure_space(&mut tx, "cli").await.unwrap();
    let source = content::ensure_source(&mut tx, space.id, "files", SourceKind::Files)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let target = Target {
        space_id: space.id,
        source_id: source.id,
    };
    let pipeline = Pipeline::new(db.clone(), common::embedder()).with_limits(Limits {
        pdf_max_inflated_bytes: 8 * MIB,
        max_chars: 1000,
        ..Limits::default()
    });

    let err = pipeline
        .ingest_file(Scope::System, target, "bomb.pdf", &bomb(16 * MIB))
        .await
        .unwrap_err();
    assert!(err.is_per_file(), "{err}");
    assert!(err.to_string().contains("8388608 bytes"), "{err}");
    let err = pipeline
        .ingest_file(
            Scope::System,
            target,
            "long.txt",
            "word ".repeat(500).as_bytes(),
        )
        .await
        .unwrap_err();
    assert!(err.is_per_file(), "{err}");
    assert!(
        err.to_string().contains("more than 1000 characters"),
        "{err}"
    );
    let report = pipeline
        .ingest_file(Scope::System, target, "short.txt", b"a short note")
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Created);
}
