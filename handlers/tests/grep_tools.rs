//! grep_documents and find_by_name over the real PostgreSQL: matches, line
//! numbers, context and citable offsets; case and glob rules; refusals of bad
//! patterns; caps and paging; and that no other space's text or names ever
//! come back.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::World;
use data_plane_registry::{ErrorCode, ToolContext};
use data_plane_store::Scope;
use data_plane_store::content::{self, NewDocument, WriteOutcome};
use serde_json::{Value, json};
use uuid::Uuid;

const MEETING: &str = "notes/meeting-2024-03.txt";

/// Writes a document without chunks (grep and find_by_name read only the
/// documents table).
async fn add_document(w: &World, space_id: Uuid, source_id: Uuid, path: &str, text: &str) -> Uuid {
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    let outcome = content::write_document(
        &mut tx,
        &NewDocument {
            space_id,
            source_id,
            path: path.to_string(),
            mime: "text/plain".to_string(),
            size_bytes: text.len() as i64,
            content_hash: format!("test-{path}-{}", text.len()),
            title: None,
            language: None,
            content: text.to_string(),
            metadata: json!({}),
            chunks: vec![],
            tables: vec![],
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    match outcome {
        WriteOutcome::Created(id) | WriteOutcome::Replaced(id) | WriteOutcome::Unchanged(id) => id,
    }
}

/// One result line as a test compares it: path, line number, matched texts.
type Hit = (String, u64, Vec<String>);

/// Runs grep_documents, checks that every offset it gives cites exactly the
/// text it shows (through read_document, as a client would), and returns
/// the hits and the whole answer.
async fn grep(w: &World, ctx: &ToolContext, args: Value) -> (Vec<Hit>, Value) {
    let data = w.ok("grep_documents", args.clone(), ctx).await;
    let mut hits = Vec::new();
    for r in data["results"].as_array().unwrap() {
        let id = r["document_id"].as_str().unwrap();
        let read = |start: u64, len: u64| {
            let args = json!({ "document_id": id, "start": start, "max_length": len.max(1) });
            async move {
                let part = w.ok("read_document", args, ctx).await;
                part["text"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .take(len as usize)
                    .collect::<String>()
            }
        };
        let text = r["text"].as_str().unwrap();
        let text_start = r["text_start"].as_u64().unwrap();
        assert_eq!(
            read(text_start, text.chars().count() as u64).await,
            text,
            "text_start of {r}"
        );
        let mut matched = Vec::new();
        for m in r["matches"].as_array().unwrap() {
            let (start, end) = (
                m["char_start"].as_u64().unwrap(),
                m["char_end"].as_u64().unwrap(),
            );
            let shown = m["text"].as_str().unwrap();
            if !shown.ends_with('…') {
                assert_eq!(
                    read(start, end - start).await,
                    shown,
                    "offsets of {m} in {r}"
                );
            }
            matched.push(shown.to_string());
        }
        hits.push((
            r["path"].as_str().unwrap().to_string(),
            r["line"].as_u64().unwrap(),
            matched,
        ));
    }
    assert_eq!(data["returned"].as_u64().unwrap() as usize, hits.len());
    (hits, data)
}

fn hit(path: &str, line: u64, matched: &[&str]) -> Hit {
    (
        path.to_string(),
        line,
        matched.iter().map(|s| s.to_string()).collect(),
    )
}

fn error_of(result: &data_plane_registry::ToolResult) -> (ErrorCode, String) {
    let e = result.error.as_ref().expect("the call should have failed");
    (e.code, e.message.clone())
}

#[tokio::test]
async fn grep_finds_lines_with_numbers_and_citable_offsets() {
    let w = World::new().await;
    let alpha = w.ctx(w.alice, Some(w.alpha));
    // Characters outside ASCII before the matches, so byte and character
    // offsets differ; letters whose case folds reach outside ASCII (the long
    // s, the Kelvin sign), which the index prefilter must not lose.
    add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "notes/unicode.txt",
        "Café crème — 東京 naïve\r\nſtop the \u{212a}ILO press TODO-4799 ok\r\nlast line: TODO-4800",
    )
    .await;

    let check = async |args: Value, expected: Vec<Hit>| {
        let (hits, _) = grep(&w, &alpha, args.clone()).await;
        assert_eq!(hits, expected, "grep {args}");
    };
    check(
        json!({ "pattern": r"TODO-47\d+", "regex": true }),
        vec![
            hit(MEETING, 10, &["TODO-4711"]),
            hit(MEETING, 11, &["TODO-4712"]),
            hit("notes/unicode.txt", 2, &["TODO-4799"]),
        ],
    )
    .await;
    check(
        json!({ "pattern": "Budget approved" }),
        vec![hit(MEETING, 5, &["Budget approved"])],
    )
    .await;
    // Case-insensitive unless asked otherwise.
    check(
        json!({ "pattern": "budget APPROVED" }),
        vec![hit(MEETING, 5, &["Budget approved"])],
    )
    .await;
    check(
        json!({ "pattern": "budget APPROVED", "case_sensitive": true }),
        vec![],
    )
    .await;
    check(
        json!({ "pattern": "VACUUM", "case_sensitive": true }),
        vec![
            hit("guides/vacuum.md", 13, &["VACUUM"]),
            hit("guides/vacuum.md", 15, &["VACUUM"]),
        ],
    )
    .await;
    // A literal search takes regex characters as they are.
    check(json!({ "pattern": "TODO-47\\d+" }), vec![]).await;
    check(
        json!({ "pattern": "(TODO-4711)" }),
        vec![hit(MEETING, 10, &["(TODO-4711)"])],
    )
    .await;
    // Several matches on one line are one result.
    check(
        json!({ "pattern": r"\bvacuum\w*", "regex": true, "path_glob": "guides/*" }),
        vec![
            hit("guides/vacuum.md", 1, &["Vacuuming"]),
            hit("guides/vacuum.md", 3, &["vacuuming"]),
            hit("guides/vacuum.md", 4, &["vacuuming"]),
            hit("guides/vacuum.md", 13, &["VACUUM"]),
            hit("guides/vacuum.md", 15, &["VACUUM"]),
            hit("guides/vacuum.md", 23, &["vacuumed"]),
        ],
    )
    .await;
    check(
        json!({ "pattern": r"^## \w+", "regex": true }),
        vec![
            hit("guides/indexes.md", 7, &["## B"]),
            hit("guides/indexes.md", 13, &["## GIN"]),
            hit("guides/indexes.md", 18, &["## HNSW"]),
            hit("guides/vacuum.md", 7, &["## Recovering"]),
            hit("guides/vacuum.md", 19, &["## Preventing"]),
        ],
    )
    .await;
    // Offsets count characters, and lines end at \r\n too.
    check(
        json!({ "pattern": "stop|kilo|東京|TODO-4800$", "regex": true }),
        vec![
            hit("notes/unicode.txt", 1, &["東京"]),
            hit("notes/unicode.txt", 2, &["ſtop", "\u{212a}ILO"]),
            hit("notes/unicode.txt", 3, &["TODO-4800"]),
        ],
    )
    .await;
    // The same through the index prefilter (a literal long enough for it).
    check(
        json!({ "pattern": "STOP THE kilo press" }),
        vec![hit("notes/unicode.txt", 2, &["ſtop the \u{212a}ILO press"])],
    )
    .await;
    // path_glob: with a slash against the path, without against the name.
    let indexes = || vec![hit("guides/indexes.md", 20, &["An HNSW"])];
    let meeting = || vec![hit(MEETING, 7, &["benchmark the HNSW"])];
    for (glob, expected) in [
        ("*.md", indexes()),
        ("**/*.TXT", meeting()),
        ("notes/**", meeting()),
        ("{guides,reference}/*", indexes()),
        ("data/*", vec![]),
    ] {
        check(
            json!({ "pattern": "An HNSW|benchmark the HNSW", "regex": true, "path_glob": glob }),
            expected,
        )
        .await;
    }
    // source_id and document_id narrow the search.
    check(
        json!({ "pattern": "TODO-4711", "source_id": w.alpha_source }),
        vec![hit(MEETING, 10, &["TODO-4711"])],
    )
    .await;
    check(
        json!({ "pattern": "TODO", "document_id": w.doc("alpha/notes/meeting-2024-03.txt") }),
        vec![hit(MEETING, 10, &["TODO"]), hit(MEETING, 11, &["TODO"])],
    )
    .await;
}

#[tokio::test]
async fn grep_shows_context_lines_and_trims_long_lines() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let (_, data) = grep(&w, &alice, json!({ "pattern": "TODO-4711" })).await;
    let r = &data["results"][0];
    assert_eq!(r["before"], json!(["", "Action items:"]));
    assert_eq!(
        r["after"],
        json!(["- Linus: write the rollback plan (TODO-4712)"])
    );
    assert_eq!(
        r["text"],
        "- Ada: schedule the maintenance window (TODO-4711)"
    );
    assert!(r.get("trimmed").is_none());

    let (_, data) = grep(
        &w,
        &alice,
        json!({ "pattern": "Budget approved", "context_lines": 4 }),
    )
    .await;
    let r = &data["results"][0];
    assert_eq!(
        r["before"],
        json!([
            "Planning meeting, 12 March 2024",
            "",
            "Attendees: Ada, Grace, Linus",
            ""
        ])
    );
    assert_eq!(r["after"].as_array().unwrap().len(), 4);
    let (_, data) = grep(
        &w,
        &alice,
        json!({ "pattern": "Budget approved", "context_lines": 0 }),
    )
    .await;
    assert!(data["results"][0].get("before").is_none());

    // A line of 100 000 characters comes back as a window around the match,
    // saying how much was left out on each side.
    let long = format!("{}NEEDLE{}", "x".repeat(60_000), "y".repeat(40_000));
    add_document(&w, w.alpha, w.alpha_source, "long/line.txt", &long).await;
    let (hits, data) = grep(&w, &alice, json!({ "pattern": "needle" })).await;
    assert_eq!(hits, vec![hit("long/line.txt", 1, &["NEEDLE"])]);
    let r = &data["results"][0];
    let shown = r["text"].as_str().unwrap();
    assert!(shown.chars().count() <= 300, "{}", shown.len());
    assert!(shown.contains("NEEDLE"));
    let before = r["trimmed"]["chars_before"].as_u64().unwrap();
    let after = r["trimmed"]["chars_after"].as_u64().unwrap();
    assert_eq!(before + shown.chars().count() as u64 + after, 100_006);
    assert_eq!(r["text_start"].as_u64().unwrap(), before);
    assert_eq!(r["matches"][0]["char_start"], 60_000);
}

#[tokio::test]
async fn grep_refuses_bad_patterns_clearly_and_survives_catastrophic_ones() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let check = async |args: Value, code: ErrorCode, needles: &[&str]| {
        let result = w.call("grep_documents", args.clone(), &alice).await;
        let (got, message) = error_of(&result);
        assert_eq!(got, code, "{args}: {message}");
        for needle in needles {
            assert!(
                message.contains(needle),
                "{args}: {message:?} lacks {needle:?}"
            );
        }
    };
    check(
        json!({ "pattern": "TODO-(47", "regex": true }),
        ErrorCode::InvalidArguments,
        &[
            "invalid regex \"TODO-(47\"",
            "unclosed group",
            "at character 6",
            "regex to false",
        ],
    )
    .await;
    check(
        json!({ "pattern": "[z-a]", "regex": true }),
        ErrorCode::InvalidArguments,
        &["invalid regex", "range", "at character 2"],
    )
    .await;
    check(
        json!({ "pattern": "(?<=a)b", "regex": true }),
        ErrorCode::InvalidArguments,
        &["invalid regex", "look-around"],
    )
    .await;
    check(
        json!({ "pattern": r"(?:\w{100}){100}", "regex": true }),
        ErrorCode::InvalidArguments,
        &["too large", "shorter pattern"],
    )
    .await;
    check(
        json!({ "pattern": "x", "path_glob": "guides/[abc" }),
        ErrorCode::InvalidArguments,
        &[
            "path_glob \"guides/[abc\" is not a valid glob",
            "unclosed character class",
        ],
    )
    .await;
    check(
        json!({ "pattern": "x", "max_results": 0 }),
        ErrorCode::InvalidArguments,
        &["max_results"],
    )
    .await;

    // Patterns that take exponential time in a backtracking engine run in
    // linear time here, over a document of a million characters.
    let mut text = "a".repeat(1_000_000);
    text.push('b');
    add_document(&w, w.alpha, w.alpha_source, "stress/aaaa.txt", &text).await;
    for (pattern, lines) in [
        ("(a+)+$", 0),
        ("(a|aa)+c", 0),
        ("(a*)*b", 1),
        ("(x+x+)+y", 0),
    ] {
        let started = Instant::now();
        let (hits, data) = grep(
            &w,
            &alice,
            json!({ "pattern": pattern, "regex": true, "path_glob": "stress/*" }),
        )
        .await;
        let took = started.elapsed();
        assert_eq!(hits.len(), lines, "{pattern}: {data}");
        assert!(took < Duration::from_secs(10), "{pattern} took {took:?}");
    }
}

#[tokio::test]
async fn grep_caps_output_and_pages_with_skip() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let lines: Vec<String> = (1..=120).map(|i| format!("item {i:03} MARKER")).collect();
    add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "many/lines.txt",
        &lines.join("\n"),
    )
    .await;

    let mut seen = Vec::new();
    let mut skip = 0;
    let mut calls = 0;
    loop {
        let (hits, data) = grep(
            &w,
            &alice,
            json!({ "pattern": "marker", "max_results": 50, "skip": skip }),
        )
        .await;
        calls += 1;
        seen.extend(hits.iter().map(|h| h.1));
        match data.get("more") {
            Some(more) => {
                assert_eq!(hits.len(), 50);
                assert!(more["hint"].as_str().unwrap().contains("skip"), "{more}");
                skip = more["skip"].as_u64().unwrap();
            }
            None => break,
        }
    }
    assert_eq!(calls, 3);
    assert_eq!(seen, (1..=120).collect::<Vec<u64>>());

    // The default cap is 50 lines.
    let (hits, data) = grep(&w, &alice, json!({ "pattern": "marker" })).await;
    assert_eq!(hits.len(), 50);
    assert_eq!(data["more"]["skip"], 50);

    // Long matching lines with context fill the character budget before
    // max_results; the hint says so.
    let wide: Vec<String> = (0..200)
        .map(|i| format!("WIDE {i:03} {}", "w".repeat(280)))
        .collect();
    add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "many/wide.txt",
        &wide.join("\n"),
    )
    .await;
    let (hits, data) = grep(
        &w,
        &alice,
        json!({ "pattern": "WIDE", "path_glob": "wide.txt", "max_results": 500, "context_lines": 10 }),
    )
    .await;
    assert!(hits.len() < 200 && !hits.is_empty(), "{}", hits.len());
    let chars = serde_json::to_string(&data["results"])
        .unwrap()
        .chars()
        .count();
    assert!(chars < 60_000, "{chars}");
    let hint = data["more"]["hint"].as_str().unwrap();
    assert!(hint.contains("size limit"), "{hint}");
    assert_eq!(data["more"]["skip"].as_u64().unwrap() as usize, hits.len());
}

#[tokio::test]
async fn grep_never_shows_another_space() {
    let w = World::new().await;
    for ctx in [w.ctx(w.alice, None), w.ctx(w.alice, Some(w.alpha))] {
        // beta's plan also says "Budget approved" and "TODO-9999".
        let (hits, _) = grep(&w, &ctx, json!({ "pattern": "Budget approved" })).await;
        assert_eq!(hits, vec![hit(MEETING, 5, &["Budget approved"])]);
        for pattern in ["TODO-9999", "Zanzibar", "99,000"] {
            let (hits, data) = grep(&w, &ctx, json!({ "pattern": pattern })).await;
            assert!(hits.is_empty(), "{pattern}: {data}");
        }
        let (hits, _) = grep(&w, &ctx, json!({ "pattern": r"TODO-\d+", "regex": true })).await;
        assert!(hits.iter().all(|h| h.0 == MEETING), "{hits:?}");
        let (hits, _) = grep(
            &w,
            &ctx,
            json!({ "pattern": r"\d", "regex": true, "max_results": 500 }),
        )
        .await;
        assert!(
            !hits
                .iter()
                .any(|h| h.0.contains("zanzibar") || h.0.contains("salaries"))
        );
    }
    // Reaching into beta by name gets the answer a missing thing gets.
    let alice = w.ctx(w.alice, None);
    let secret = w.doc("beta/plans/zanzibar.md");
    for (args, code) in [
        (
            json!({ "pattern": "Budget", "document_id": secret }),
            ErrorCode::NotFound,
        ),
        (
            json!({ "pattern": "Budget", "document_id": Uuid::new_v4() }),
            ErrorCode::NotFound,
        ),
        (
            json!({ "pattern": "Budget", "source_id": w.beta_source }),
            ErrorCode::NotFound,
        ),
        (
            json!({ "pattern": "Budget", "source_id": Uuid::new_v4() }),
            ErrorCode::NotFound,
        ),
    ] {
        let result = w.call("grep_documents", args.clone(), &alice).await;
        let (got, message) = error_of(&result);
        assert_eq!(got, code, "{args}");
        assert!(
            !message.contains("Zanzibar") && !message.contains("secret"),
            "{message}"
        );
    }
    let result = w
        .call(
            "grep_documents",
            json!({ "pattern": "Budget" }),
            &w.ctx(w.alice, Some(w.beta)),
        )
        .await;
    assert_eq!(result.code(), Some(ErrorCode::NotFound));
    // carol belongs nowhere and finds nothing.
    let (hits, _) = grep(
        &w,
        &w.ctx(w.carol, None),
        json!({ "pattern": r"\w", "regex": true }),
    )
    .await;
    assert!(hits.is_empty());
    // bob does see his plan.
    let (hits, _) = grep(&w, &w.ctx(w.bob, None), json!({ "pattern": "TODO-9999" })).await;
    assert_eq!(hits, vec![hit("plans/zanzibar.md", 5, &["TODO-9999"])]);
}

/// Runs find_by_name and returns the paths found.
async fn find(w: &World, ctx: &ToolContext, args: Value) -> (Vec<String>, Value) {
    let data = w.ok("find_by_name", args, ctx).await;
    let paths = data["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_string())
        .collect();
    (paths, data)
}

#[tokio::test]
async fn find_by_name_matches_globs_on_names_and_paths() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    // Names with letters whose lowercase leaves ASCII or comes from outside it.
    add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "archive/\u{212a}ILO-report.txt",
        "x",
    )
    .await;
    add_document(&w, w.alpha, w.alpha_source, "archive/Été-2024.TXT", "x").await;
    let check = async |pattern: &str, case_sensitive: bool, expected: &[&str]| {
        let args = json!({ "pattern": pattern, "case_sensitive": case_sensitive });
        let (paths, _) = find(&w, &alice, args).await;
        assert_eq!(
            paths, expected,
            "{pattern} (case-sensitive: {case_sensitive})"
        );
    };
    check("*.md", false, &["guides/indexes.md", "guides/vacuum.md"]).await;
    check("*.MD", false, &["guides/indexes.md", "guides/vacuum.md"]).await;
    check("*.MD", true, &[]).await;
    check("**/*.csv", false, &["data/cities.csv"]).await;
    check(
        "guides/*",
        false,
        &["guides/indexes.md", "guides/vacuum.md"],
    )
    .await;
    check(
        "/guides/*",
        false,
        &["guides/indexes.md", "guides/vacuum.md"],
    )
    .await;
    check("guides", false, &[]).await;
    check("{notes,data}/**", false, &["data/cities.csv", MEETING]).await;
    check("*VACUUM*", false, &["guides/vacuum.md"]).await;
    check("*VACUUM*", true, &[]).await;
    check("*vacuum*", true, &["guides/vacuum.md"]).await;
    check("meeting-202?-0[0-9].txt", false, &[MEETING]).await;
    check(
        "*.{csv,html}",
        false,
        &["data/cities.csv", "reference/functions.html"],
    )
    .await;
    check(
        "[!a-m]*",
        false,
        &["archive/Été-2024.TXT", "guides/vacuum.md"],
    )
    .await;
    check("kilo*", false, &["archive/\u{212a}ILO-report.txt"]).await;
    check("été*.txt", false, &["archive/Été-2024.TXT"]).await;
    check("été*", true, &[]).await;
    check(
        "*.txt",
        false,
        &[
            "archive/Été-2024.TXT",
            "archive/\u{212a}ILO-report.txt",
            MEETING,
        ],
    )
    .await;
    check(
        "**",
        false,
        &[
            "archive/Été-2024.TXT",
            "archive/\u{212a}ILO-report.txt",
            "data/cities.csv",
            "guides/indexes.md",
            "guides/vacuum.md",
            MEETING,
            "reference/functions.html",
        ],
    )
    .await;

    let (_, data) = find(&w, &alice, json!({ "pattern": "vacuum.md" })).await;
    let d = &data["documents"][0];
    assert_eq!(d["document_id"], json!(w.doc("alpha/guides/vacuum.md")));
    assert_eq!(d["source"], "handbook");
    assert_eq!(d["mime"], "text/markdown");

    for (pattern, needle) in [
        ("[abc", "unclosed character class"),
        ("{a,b", "unclosed alternate group"),
        ("/", "matches no file"),
    ] {
        let result = w
            .call("find_by_name", json!({ "pattern": pattern }), &alice)
            .await;
        let (code, message) = error_of(&result);
        assert_eq!(code, ErrorCode::InvalidArguments, "{pattern}");
        assert!(message.contains(needle), "{pattern}: {message}");
        assert!(message.contains(&format!("{pattern:?}")), "{message}");
    }
}

#[tokio::test]
async fn find_by_name_pages_and_stays_in_readable_spaces() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let (first, data) = find(&w, &alice, json!({ "pattern": "*", "limit": 2 })).await;
    assert_eq!(first, ["data/cities.csv", "guides/indexes.md"]);
    assert_eq!(data["more"]["skip"], 2);
    assert!(data["more"]["hint"].as_str().unwrap().contains("skip: 2"));
    let (rest, data) = find(&w, &alice, json!({ "pattern": "*", "limit": 5, "skip": 2 })).await;
    assert_eq!(
        rest,
        ["guides/vacuum.md", MEETING, "reference/functions.html"]
    );
    assert!(data.get("more").is_none());

    for ctx in [w.ctx(w.alice, None), w.ctx(w.alice, Some(w.alpha))] {
        for pattern in ["zanzibar*", "**/*.md", "plans/**", "*.csv"] {
            let (paths, _) = find(&w, &ctx, json!({ "pattern": pattern })).await;
            assert!(
                paths
                    .iter()
                    .all(|p| !p.starts_with("plans/") && p != "data/salaries.csv"),
                "{pattern}: {paths:?}"
            );
        }
    }
    let result = w
        .call(
            "find_by_name",
            json!({ "pattern": "*", "source_id": w.beta_source }),
            &alice,
        )
        .await;
    assert_eq!(result.code(), Some(ErrorCode::NotFound));
    let result = w
        .call(
            "find_by_name",
            json!({ "pattern": "*" }),
            &w.ctx(w.alice, Some(w.beta)),
        )
        .await;
    assert_eq!(result.code(), Some(ErrorCode::NotFound));
    let (paths, _) = find(&w, &w.ctx(w.carol, None), json!({ "pattern": "**" })).await;
    assert!(paths.is_empty());
    let (paths, _) = find(&w, &w.ctx(w.bob, None), json!({ "pattern": "*.md" })).await;
    assert_eq!(paths, ["plans/zanzibar.md"]);
    let (paths, _) = find(
        &w,
        &alice,
        json!({ "pattern": "*", "source_id": w.alpha_source, "limit": 500 }),
    )
    .await;
    assert_eq!(paths.len(), 5);
}

#[tokio::test]
async fn the_candidate_lookup_answers_only_for_readable_spaces() {
    let w = World::new().await;
    // dp_document_candidates runs as the owner to reach the trigram index;
    // it must still keep to the caller's spaces whatever it is asked, and be
    // out of reach of the role that runs user-written SQL.
    let candidates = async |user: Uuid, spaces: Vec<Uuid>| -> Vec<Uuid> {
        let mut tx = w.deps.db.begin(Scope::User(user)).await.unwrap();
        sqlx::query_scalar(
            "SELECT dp_document_candidates($1, ARRAY['[Bb]udget\\u0020approved'], '{}', '{}')",
        )
        .bind(spaces)
        .fetch_all(&mut *tx)
        .await
        .unwrap()
    };
    let meeting = w.doc("alpha/notes/meeting-2024-03.txt");
    let zanzibar = w.doc("beta/plans/zanzibar.md");
    assert_eq!(candidates(w.alice, vec![w.alpha]).await, [meeting]);
    assert_eq!(candidates(w.alice, vec![w.alpha, w.beta]).await, [meeting]);
    assert!(candidates(w.alice, vec![w.beta]).await.is_empty());
    assert!(candidates(w.carol, vec![w.alpha, w.beta]).await.is_empty());
    assert_eq!(candidates(w.bob, vec![w.alpha, w.beta]).await, [zanzibar]);

    let mut tx = w.deps.db.begin(Scope::User(w.alice)).await.unwrap();
    sqlx::query("SET LOCAL ROLE data_plane_query")
        .execute(&mut *tx)
        .await
        .unwrap();
    let refused = sqlx::query("SELECT dp_document_candidates($1, '{}', '{}', '{}')")
        .bind(vec![w.alpha])
        .execute(&mut *tx)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("permission denied"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_candidate_lookup_keeps_to_readable_spaces_in_large_spaces_too() {
    let w = World::new().await;
    // From 500 documents in the spaces asked for, dp_document_candidates lets
    // the trigram index drive the scan and filters spaces afterwards: the
    // same answers must come out of that path.
    for i in 0..520 {
        add_document(
            &w,
            w.alpha,
            w.alpha_source,
            &format!("bulk/filler-{i:04}.txt"),
            &format!("routine filler page {i} about nothing in particular"),
        )
        .await;
    }
    let needle = add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "bulk/needle.txt",
        "the quarterly budget approved in alpha",
    )
    .await;
    let candidates = async |user: Uuid, spaces: Vec<Uuid>, pattern: &str| -> Vec<Uuid> {
        let mut tx = w.deps.db.begin(Scope::User(user)).await.unwrap();
        let mut ids: Vec<Uuid> =
            sqlx::query_scalar("SELECT dp_document_candidates($1, ARRAY[$2], '{}', '{}')")
                .bind(spaces)
                .bind(pattern)
                .fetch_all(&mut *tx)
                .await
                .unwrap();
        ids.sort();
        ids
    };
    let meeting = w.doc("alpha/notes/meeting-2024-03.txt");
    let zanzibar = w.doc("beta/plans/zanzibar.md");
    let mut expected = vec![meeting, needle];
    expected.sort();
    let budget = "[Bb]udget\\u0020approved";
    assert_eq!(candidates(w.alice, vec![w.alpha], budget).await, expected);
    assert_eq!(
        candidates(w.alice, vec![w.alpha, w.beta], budget).await,
        expected
    );
    assert!(candidates(w.alice, vec![w.beta], budget).await.is_empty());
    assert!(
        candidates(w.carol, vec![w.alpha, w.beta], budget)
            .await
            .is_empty()
    );
    assert_eq!(
        candidates(w.bob, vec![w.alpha, w.beta], budget).await,
        [zanzibar]
    );
    assert_eq!(
        candidates(w.alice, vec![w.alpha], "filler page 51[0-9]")
            .await
            .len(),
        10
    );
    // And through the tool: the match among hundreds of documents is found.
    let alice = w.ctx(w.alice, Some(w.alpha));
    let found = w
        .ok(
            "grep_documents",
            json!({ "pattern": "quarterly budget approved" }),
            &alice,
        )
        .await;
    assert_eq!(found["returned"], 1, "{found}");
}

#[tokio::test]
async fn the_index_never_loses_a_match() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    // Documents first in path order that no pattern matches: grep reads
    // them first, finds nothing, and asks the index for the rest, so every
    // pattern's index conditions are tried.
    for i in 0..12 {
        add_document(
            &w,
            w.alpha,
            w.alpha_source,
            &format!("0000-filler/fill-{i:02}.txt"),
            "xq zv\nqv xz\n",
        )
        .await;
    }
    add_document(
        &w,
        w.alpha,
        w.alpha_source,
        "notes/unicode.txt",
        "Straße ſtop \u{212a}elvin \u{212b}ngström ΣΊΣΥΦΟΣ σίσυφος\nCOLOUR colour color\ntab\there TODO-0001 todo_0002",
    )
    .await;
    // Every document's text, read as a client reads it.
    let listing = w
        .ok("find_by_name", json!({ "pattern": "**" }), &alice)
        .await;
    let mut texts = Vec::new();
    for d in listing["documents"].as_array().unwrap() {
        let id = d["document_id"].as_str().unwrap();
        let read = w
            .ok(
                "read_document",
                json!({ "document_id": id, "max_length": 20_000 }),
                &alice,
            )
            .await;
        assert!(read.get("next").is_none());
        texts.push((
            d["path"].as_str().unwrap().to_string(),
            read["text"].as_str().unwrap().to_string(),
        ));
    }
    // Patterns of every shape the prefilter reads: literals, classes,
    // alternations, repetitions, anchors, and case folds that leave ASCII.
    let patterns = [
        ("straße", false, false),
        ("STRAẞE", false, false),
        ("stop", false, false),
        ("kelvin", false, false),
        ("ångström", false, false),
        ("σίσυφος", false, false),
        ("Budget approved", true, false),
        ("budget APPROVED", false, false),
        (r"colou?r", false, true),
        (r"(?:colour|color)\b", false, true),
        (r"todo[-_]\d{4}", false, true),
        (r"TODO-\d+", true, true),
        (r"^\w+ing\b", false, true),
        (r"(?i)HNSW|IVFFlat", true, true),
        (r"\bvacuum(?:ing|ed)?\b", false, true),
        (r"index(?:es)? types?", false, true),
        (r"tab\there", false, true),
        (r"[0-9]{7}", false, true),
        (r"B-?tree", false, true),
        (r"(?s)routine.{0,40}vacuum", false, true),
        (r"gist|gin|brin", false, true),
        (r"(?-i:POSTGRESQL)|postgres", false, true),
    ];
    for (pattern, case_sensitive, is_regex) in patterns {
        let source = if is_regex {
            pattern.to_string()
        } else {
            regex::escape(pattern)
        };
        let re = regex::RegexBuilder::new(&source)
            .case_insensitive(!case_sensitive)
            .multi_line(true)
            .crlf(true)
            .build()
            .unwrap();
        let mut expected: Vec<(String, u64)> = Vec::new();
        for (path, text) in &texts {
            for m in re.find_iter(text) {
                let line = text[..m.start()].matches('\n').count() as u64 + 1;
                let key = (path.clone(), line);
                if expected.last() != Some(&key) {
                    expected.push(key);
                }
            }
        }
        let (hits, _) = grep(
            &w,
            &alice,
            json!({
                "pattern": pattern,
                "regex": is_regex,
                "case_sensitive": case_sensitive,
                "max_results": 500,
                "context_lines": 0,
            }),
        )
        .await;
        let got: Vec<(String, u64)> = hits.into_iter().map(|(p, l, _)| (p, l)).collect();
        assert_eq!(
            got, expected,
            "{pattern} (case-sensitive: {case_sensitive})"
        );
        assert!(!expected.is_empty(), "{pattern} should match something");
    }
}

/// grep first reads documents in path order and hands over to the trigram
/// index when few of them match, straight after its first read or later in
/// the walk; the lines must be the same either way, in path order, and
/// paging must neither skip nor repeat a line across the hand-over.
#[tokio::test]
async fn grep_walks_then_hands_over_to_the_index_without_losing_or_repeating_lines() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    // zqx: none in the first eight documents, so the index takes over at
    // once. wpk: four of the first eight, so the walk goes on, then thins
    // out, so the index takes over from the walk.
    let zqx = |i: usize| i % 10 == 9;
    let wpk = |i: usize| i < 4 || i % 20 == 13;
    for i in 0..90 {
        let mut text = format!("bulk document {i}\nan everyday phrase sits here\n");
        if zqx(i) {
            text.push_str(&format!("filler\nthe zqx marker {i} is rare\n"));
        }
        if wpk(i) {
            text.push_str("wpk tag\n");
        }
        add_document(
            &w,
            w.alpha,
            w.alpha_source,
            &format!("bulk/doc-{i:03}.txt"),
            &text,
        )
        .await;
    }
    let expect = |pick: &dyn Fn(usize) -> bool, line: u64, text: &str| -> Vec<Hit> {
        (0..90)
            .filter(|&i| pick(i))
            .map(|i| hit(&format!("bulk/doc-{i:03}.txt"), line, &[text]))
            .collect()
    };
    let zqx_hits = expect(&zqx, 4, "zqx marker");
    let wpk_hits: Vec<Hit> = (0..90)
        .filter(|&i| wpk(i))
        .map(|i| {
            hit(
                &format!("bulk/doc-{i:03}.txt"),
                if zqx(i) { 5 } else { 3 },
                &["wpk tag"],
            )
        })
        .collect();

    for (pattern, expected) in [("ZQX marker", &zqx_hits), ("wpk TAG", &wpk_hits)] {
        for glob in [None, Some("bulk/**")] {
            let mut args = json!({ "pattern": pattern, "context_lines": 0, "max_results": 500 });
            if let Some(glob) = glob {
                args["path_glob"] = json!(glob);
            }
            let (hits, data) = grep(&w, &alice, args).await;
            assert_eq!(&hits, expected, "{pattern} {glob:?}: {data}");
            assert!(data.get("more").is_none(), "{data}");
            assert!(
                data["documents_searched"].as_u64().unwrap() < 80,
                "{pattern}: the index should have skipped most documents: {data}"
            );
        }
        // Paging two lines at a time crosses the hand-over.
        let mut paged = Vec::new();
        let mut skip = 0;
        loop {
            let (hits, data) = grep(
                &w,
                &alice,
                json!({ "pattern": pattern, "context_lines": 0, "max_results": 2, "skip": skip }),
            )
            .await;
            paged.extend(hits);
            match data.get("more") {
                Some(more) => skip = more["skip"].as_u64().unwrap(),
                None => break,
            }
        }
        assert_eq!(&paged, expected, "{pattern}, paged");
    }

    // A phrase every bulk document holds: the first page comes from the
    // first documents in path order, and the next page goes on from there.
    let (first, data) = grep(
        &w,
        &alice,
        json!({ "pattern": "everyday phrase", "context_lines": 0, "max_results": 5 }),
    )
    .await;
    let every = |range: std::ops::Range<usize>| -> Vec<Hit> {
        range
            .map(|i| hit(&format!("bulk/doc-{i:03}.txt"), 2, &["everyday phrase"]))
            .collect()
    };
    assert_eq!(first, every(0..5), "{data}");
    assert_eq!(data["more"]["skip"], 5, "{data}");
    let (next, _) = grep(
        &w,
        &alice,
        json!({ "pattern": "everyday phrase", "context_lines": 0, "max_results": 5, "skip": 5 }),
    )
    .await;
    assert_eq!(next, every(5..10));
    let (all, data) = grep(
        &w,
        &alice,
        json!({ "pattern": "everyday phrase", "context_lines": 0, "max_results": 500, "path_glob": "bulk/**" }),
    )
    .await;
    assert_eq!(all, every(0..90), "{data}");

    // Without a space, the call covers every space the caller reads (two
    // here, so no index gives the path order): the same lines.
    let mut tx = w.deps.db.begin(Scope::System).await.unwrap();
    data_plane_store::identity::add_member(
        &mut tx,
        w.beta,
        w.alice,
        data_plane_store::identity::MembershipRole::Viewer,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let everywhere = w.ctx(w.alice, None);
    let (hits, data) = grep(
        &w,
        &everywhere,
        json!({ "pattern": "zqx marker", "context_lines": 0, "max_results": 500 }),
    )
    .await;
    assert_eq!(hits, zqx_hits, "{data}");
}
