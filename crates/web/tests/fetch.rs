//! Fetching from real HTTP servers on 127.0.0.1: the allow-list that lets
//! tests reach loopback at all, redirects (chains, loops, caps, relative
//! Locations, hops to refused addresses), pinned DNS that is looked up once
//! per hop, the time and size caps, character sets, and every content kind.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use data_plane_web::WebError;
use data_plane_web::fetch::{Document, FetchConfig, Fetcher, Kind};
use data_plane_web::testing::{Body, FakeDns, LocalServer, Reply};
use lopdf::content::{Content, Operation};
use lopdf::{Document as PdfDocument, Object, Stream, dictionary};

fn config() -> FetchConfig {
    FetchConfig {
        allow: "127.0.0.1".parse().unwrap(),
        ..FetchConfig::default()
    }
}

fn local() -> Fetcher {
    Fetcher::new(config())
}

const PAGE: &str = "<!doctype html><html><head><title>Greetings</title></head>\
<body><p>Hello from the local server.</p></body></html>";

async fn fetch_ok(fetcher: &Fetcher, url: &str) -> Document {
    fetcher
        .fetch(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

#[tokio::test]
async fn loopback_is_refused_without_the_allow_list_and_nothing_connects() {
    let server = LocalServer::start(vec![("/", Reply::ok("text/html", PAGE))]).await;
    let err = Fetcher::new(FetchConfig::default())
        .fetch(&server.url("/"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WebError::Blocked { reason, .. } if reason.contains("loopback")),
        "{err}"
    );
    assert!(server.seen().is_empty(), "the server was reached");

    let doc = fetch_ok(&local(), &server.url("/")).await;
    assert_eq!(doc.kind, Kind::Html);
    assert_eq!(doc.status, 200);
    assert!(
        doc.markdown.contains("Hello from the local server."),
        "{doc:?}"
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn redirects_are_followed_hop_by_hop() {
    // The second server comes first: the first one's absolute Location names it.
    let second = LocalServer::start(vec![
        ("/relay", Reply::redirect(303, "../deeper/../final#part")),
        ("/final", Reply::ok("text/plain", "arrived")),
    ])
    .await;
    let first = LocalServer::start(vec![
        ("/start", Reply::redirect(301, "/dir/middle?x=1")),
        ("/dir/middle?x=1", Reply::redirect(302, "end")),
        ("/dir/end", Reply::redirect(307, &second.url("/relay"))),
    ])
    .await;
    let doc = fetch_ok(&local(), &first.url("/start")).await;
    assert_eq!(doc.markdown, "arrived");
    assert_eq!(doc.url, first.url("/start"));
    assert_eq!(doc.final_url, second.url("/final"));
    let paths = |s: &LocalServer| s.seen().into_iter().map(|s| s.path).collect::<Vec<_>>();
    assert_eq!(paths(&first), ["/start", "/dir/middle?x=1", "/dir/end"]);
    assert_eq!(paths(&second), ["/relay", "/final"]);
}

#[tokio::test]
async fn redirect_loops_caps_and_refused_destinations() {
    let server = LocalServer::start(vec![
        ("/loop-a", Reply::redirect(302, "/loop-b")),
        ("/loop-b", Reply::redirect(302, "/loop-a")),
        ("/r1", Reply::redirect(302, "/r2")),
        ("/r2", Reply::redirect(302, "/r3")),
        ("/r3", Reply::redirect(302, "/r4")),
        ("/r4", Reply::redirect(302, "/r5")),
        ("/r5", Reply::redirect(302, "/r6")),
        ("/r6", Reply::redirect(302, "/r7")),
        ("/r7", Reply::ok("text/plain", "too far")),
        (
            "/to-metadata",
            Reply::redirect(302, "http://169.254.169.254/latest/meta-data/"),
        ),
        ("/to-private", Reply::redirect(301, "http://10.0.0.1/admin")),
        ("/to-decimal", Reply::redirect(301, "http://2852039166/")),
        ("/to-localhost", Reply::redirect(301, "http://localhost/")),
        ("/to-rebind", Reply::redirect(302, "http://rebind.test/")),
        ("/to-file", Reply::redirect(302, "file:///etc/passwd")),
        ("/to-creds", Reply::redirect(302, "http://u:p@127.0.0.1/")),
        ("/no-location", Reply::status(302)),
        ("/missing", Reply::status(404)),
        ("/broken", Reply::status(503)),
    ])
    .await;
    let dns = FakeDns::new().with("rebind.test", &["10.0.0.1"]);
    let fetcher = Fetcher::with_resolver(config(), Arc::new(dns));
    let check = async |path: &str, expected: &str| {
        let err = fetcher.fetch(&server.url(path)).await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains(expected), "{path}: {message}");
    };
    check("/loop-a", "redirect loop at http://127.0.0.1").await;
    check("/r1", "more than 5 redirects").await;
    check(
        "/to-metadata",
        "169.254.169.254 is not a public address: cloud metadata",
    )
    .await;
    check("/to-private", "refused to fetch http://10.0.0.1/admin").await;
    check("/to-decimal", "169.254.169.254 is not a public address").await;
    check("/to-localhost", "loopback host name").await;
    check("/to-rebind", "rebind.test resolves to 10.0.0.1").await;
    check("/to-file", "scheme \"file\" is not allowed").await;
    check("/to-creds", "credentials in the url are not allowed").await;
    check("/no-location", "answered HTTP 302").await;
    check("/missing", "answered HTTP 404").await;
    check("/broken", "answered HTTP 503").await;
    // The refused destinations were never asked for.
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("meta-data") || p == "/admin")
    );

    let five = Fetcher::new(FetchConfig {
        max_redirects: 6,
        ..config()
    });
    assert_eq!(
        fetch_ok(&five, &server.url("/r1")).await.markdown,
        "too far"
    );
}

#[tokio::test]
async fn names_are_pinned_to_the_address_checked_and_looked_up_once_per_hop() {
    let server = LocalServer::start(vec![
        ("/", Reply::ok("text/plain", "by name")),
        ("/hop", Reply::redirect(302, "/")),
    ])
    .await;
    let port = server.port();
    // A rebinding DNS: first a (here: allowed) address, then a private one.
    let dns =
        Arc::new(FakeDns::new().with_sequence("rebind.test", &[&["127.0.0.1"], &["10.0.0.1"]]));
    let fetcher = Fetcher::with_resolver(config(), dns.clone());
    let doc = fetch_ok(&fetcher, &format!("http://rebind.test:{port}/")).await;
    assert_eq!(doc.markdown, "by name");
    assert_eq!(
        dns.lookups(),
        ["rebind.test"],
        "one lookup, used for the connection"
    );
    let seen = server.seen();
    assert_eq!(
        seen[0].host.as_deref(),
        Some(format!("rebind.test:{port}").as_str())
    );
    // The next hop is a new lookup, and this one rebinds: refused.
    let err = fetcher
        .fetch(&format!("http://rebind.test:{port}/hop"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("rebind.test resolves to 10.0.0.1"),
        "{err}"
    );
    assert_eq!(server.seen().len(), 1, "the refused fetch never connected");

    // The other order: refused at once, before any connection.
    let dns = Arc::new(FakeDns::new().with_sequence("flip.test", &[&["10.0.0.1"], &["127.0.0.1"]]));
    let fetcher = Fetcher::with_resolver(config(), dns.clone());
    let err = fetcher
        .fetch(&format!("http://flip.test:{port}/"))
        .await
        .unwrap_err();
    assert!(matches!(err, WebError::Blocked { .. }), "{err}");
    assert_eq!(dns.lookups().len(), 1);

    // A redirect chain on one name: one lookup per hop, no more.
    let dns = Arc::new(FakeDns::new().with("site.test", &["127.0.0.1"]));
    let fetcher = Fetcher::with_resolver(config(), dns.clone());
    fetch_ok(&fetcher, &format!("http://site.test:{port}/hop")).await;
    assert_eq!(dns.lookups(), ["site.test", "site.test"]);
}

#[tokio::test]
async fn a_slow_body_hits_the_time_cap() {
    let server = LocalServer::start(vec![(
        "/slow",
        Reply::ok("text/plain", "").with_body(Body::Trickle {
            chunk: b"x".to_vec(),
            every: Duration::from_millis(200),
            count: 100,
        }),
    )])
    .await;
    let fetcher = Fetcher::new(FetchConfig {
        timeout: Duration::from_secs(1),
        ..config()
    });
    let began = Instant::now();
    let err = fetcher.fetch(&server.url("/slow")).await.unwrap_err();
    assert!(
        matches!(&err, WebError::Timeout { seconds: 1, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("/slow timed out after 1 s"),
        "{err}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn a_huge_body_hits_the_size_cap() {
    let server = LocalServer::start(vec![
        (
            "/endless",
            Reply::ok("text/plain", "").with_body(Body::Endless(vec![b'a'; 8192])),
        ),
        ("/declared", Reply::ok("text/plain", vec![b'b'; 100_000])),
        ("/fits", Reply::ok("text/plain", vec![b'c'; 65_536])),
    ])
    .await;
    let fetcher = Fetcher::new(FetchConfig {
        max_bytes: 65_536,
        ..config()
    });
    for path in ["/endless", "/declared"] {
        let err = fetcher.fetch(&server.url(path)).await.unwrap_err();
        assert!(
            matches!(&err, WebError::TooLarge { limit: 65_536, .. }),
            "{path}: {err}"
        );
        assert!(err.to_string().contains("larger than 65536 bytes"), "{err}");
    }
    let doc = fetch_ok(&fetcher, &server.url("/fits")).await;
    assert_eq!(doc.markdown.len(), 65_536);
}

#[tokio::test]
async fn character_sets_declared_in_the_header_or_meta_or_sniffed() {
    let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode("日本語のページです。東京の天気は晴れ。");
    let mut meta_sjis =
        b"<html><head><meta charset=\"Shift_JIS\"><title>t</title></head><body><p>".to_vec();
    meta_sjis.extend_from_slice(&sjis);
    meta_sjis.extend_from_slice(b"</p></body></html>");
    let mut http_equiv = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=shift_jis\"></head><body>".to_vec();
    http_equiv.extend_from_slice(&sjis);
    http_equiv.extend_from_slice(b"</body></html>");
    let (cyrillic, _, _) = encoding_rs::WINDOWS_1251.encode(
        "Привет, мир! Это обычная страница на русском языке, без объявленной кодировки. \
         Здесь достаточно слов, чтобы распознать кодировку по самим байтам.",
    );
    let (latin, _, _) =
        encoding_rs::WINDOWS_1252.encode("Ça coûte très cher, naïve façade — «déjà vu».");
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "Grüße aus UTF-16".encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    let server = LocalServer::start(vec![
        (
            "/1252",
            Reply::ok("text/plain; charset=windows-1252", latin.to_vec()),
        ),
        (
            "/latin1",
            Reply::ok("text/plain; charset=\"ISO-8859-1\"", latin.to_vec()),
        ),
        ("/meta", Reply::ok("text/html", meta_sjis)),
        ("/http-equiv", Reply::ok("text/html", http_equiv)),
        ("/sniffed", Reply::ok("text/plain", cyrillic.to_vec())),
        ("/utf8", Reply::ok("text/plain", "naïve ✓ 😀")),
        ("/bom", Reply::ok("text/plain; charset=iso-8859-1", utf16)),
    ])
    .await;
    let f = local();
    let check = async |path: &str, charset: &str, text: &str| {
        let doc = fetch_ok(&f, &server.url(path)).await;
        assert_eq!(doc.charset.as_deref(), Some(charset), "{path}");
        assert!(doc.markdown.contains(text), "{path}: {:?}", doc.markdown);
    };
    check(
        "/1252",
        "windows-1252",
        "Ça coûte très cher, naïve façade — «déjà vu».",
    )
    .await;
    check("/latin1", "windows-1252", "naïve façade").await;
    check(
        "/meta",
        "shift_jis",
        "日本語のページです。東京の天気は晴れ。",
    )
    .await;
    check("/http-equiv", "shift_jis", "東京の天気").await;
    check("/sniffed", "windows-1251", "Привет, мир!").await;
    check("/utf8", "utf-8", "naïve ✓ 😀").await;
    check("/bom", "utf-16le", "Grüße aus UTF-16").await;
}

/// A real, minimal PDF with one Helvetica line per page.
fn pdf(pages: &[&str]) -> Vec<u8> {
    let mut doc = PdfDocument::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let mut kids = Vec::new();
    for text in pages {
        let ops = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 12.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let stream = doc.add_object(Stream::new(dictionary! {}, ops.encode().unwrap()));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => stream,
        });
        kids.push(Object::Reference(page));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

#[tokio::test]
async fn content_kinds() {
    let report = pdf(&[
        "Revenue grew in the first quarter.",
        "Outlook remains stable.",
    ]);
    let server = LocalServer::start(vec![
        (
            "/text",
            Reply::ok("text/plain; charset=utf-8", "line one\nline two\n"),
        ),
        ("/markdown", Reply::ok("text/markdown", "# Title\n\nBody")),
        (
            "/json",
            Reply::ok("application/json", r#"{"b":[1,2],"a":"x"}"#),
        ),
        (
            "/problem",
            Reply::ok("application/problem+json", r#"{"title":"nope"}"#),
        ),
        (
            "/bad-json",
            Reply::ok("application/json", "not json at all"),
        ),
        ("/pdf", Reply::ok("application/pdf", report.clone())),
        ("/pdf-octets", Reply::ok("application/octet-stream", report)),
        (
            "/broken-pdf",
            Reply::ok("application/pdf", b"%PDF-1.5 garbage".to_vec()),
        ),
        ("/undeclared-html", Reply::ok("", PAGE)),
        ("/undeclared-json", Reply::ok("", "[1, {\"k\": true}]")),
        ("/undeclared-text", Reply::ok("", "just words")),
        (
            "/png",
            Reply::ok("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
        ),
        (
            "/binary",
            Reply::ok("application/octet-stream", b"\0\x01\x02\x03".to_vec()),
        ),
    ])
    .await;
    let f = local();
    let check = async |path: &str, kind: Kind, content_type: &str, markdown: &str| {
        let doc = fetch_ok(&f, &server.url(path)).await;
        assert_eq!(
            (doc.kind, doc.content_type.as_str()),
            (kind, content_type),
            "{path}"
        );
        assert!(
            doc.markdown.contains(markdown),
            "{path}: {:?}",
            doc.markdown
        );
    };
    check("/text", Kind::Text, "text/plain", "line one\nline two\n").await;
    check("/markdown", Kind::Text, "text/markdown", "# Title\n\nBody").await;
    check(
        "/json",
        Kind::Json,
        "application/json",
        "```json\n{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    2\n  ]\n}\n```",
    )
    .await;
    check(
        "/problem",
        Kind::Json,
        "application/problem+json",
        "\"title\": \"nope\"",
    )
    .await;
    check(
        "/bad-json",
        Kind::Json,
        "application/json",
        "not json at all",
    )
    .await;
    check(
        "/pdf",
        Kind::Pdf,
        "application/pdf",
        "Revenue grew in the first quarter.",
    )
    .await;
    check(
        "/pdf",
        Kind::Pdf,
        "application/pdf",
        "Outlook remains stable.",
    )
    .await;
    check("/pdf-octets", Kind::Pdf, "application/pdf", "Revenue grew").await;
    check(
        "/undeclared-html",
        Kind::Html,
        "text/html",
        "Hello from the local server.",
    )
    .await;
    check(
        "/undeclared-json",
        Kind::Json,
        "application/json",
        "\"k\": true",
    )
    .await;
    check("/undeclared-text", Kind::Text, "text/plain", "just words").await;
    for (path, expected) in [
        ("/png", "cannot read content of type \"image/png\""),
        (
            "/binary",
            "cannot read content of type \"application/octet-stream\"",
        ),
        ("/broken-pdf", "application/pdf ("),
    ] {
        let err = f.fetch(&server.url(path)).await.unwrap_err();
        assert!(matches!(err, WebError::Unsupported { .. }), "{path}: {err}");
        assert!(err.to_string().contains(expected), "{path}: {err}");
    }
}

#[tokio::test]
async fn content_over_the_extraction_limits_is_refused_by_name() {
    let report = pdf(&["Revenue grew in the first quarter."]);
    let server = LocalServer::start(vec![
        ("/pdf", Reply::ok("application/pdf", report)),
        (
            "/text",
            Reply::ok("text/plain", "far more than five characters"),
        ),
    ])
    .await;
    let tight = Fetcher::new(FetchConfig {
        extract: data_plane_extract::Limits {
            pdf_max_inflated_bytes: 16,
            max_chars: 5,
            ..data_plane_extract::Limits::default()
        },
        ..config()
    });
    for (path, expected) in [
        ("/pdf", "a likely decompression bomb"),
        ("/text", "more than 5 characters"),
    ] {
        let err = tight.fetch(&server.url(path)).await.unwrap_err();
        assert!(matches!(err, WebError::Unsupported { .. }), "{path}: {err}");
        assert!(err.to_string().contains(expected), "{path}: {err}");
    }
    // The default limits read both.
    fetch_ok(&local(), &server.url("/pdf")).await;
    fetch_ok(&local(), &server.url("/text")).await;
}
