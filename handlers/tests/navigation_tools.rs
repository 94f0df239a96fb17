//! list_folder_contents and folder_tree over the real PostgreSQL: the alpha
//! handbook, a larger archive written here for pagination, depth cuts and the
//! node cap, the not-found answers, and attempts to reach another space.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use data_plane_registry::{ErrorCode, ToolContext};
use data_plane_store::Scope;
use data_plane_store::content::{self, NewDocument, SourceKind};
use serde_json::{Value, json};
use uuid::Uuid;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_str().unwrap().to_string())
        .collect()
}

/// A folder line as (name, documents directly inside, sub-folders).
fn folder_lines(data: &Value) -> Vec<(String, i64, i64)> {
    data["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["documents"].as_i64().unwrap(),
                f["folders"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// A folder line as written in a test case.
type Line<'a> = (&'a str, i64, i64);

fn lines(expected: &[Line]) -> Vec<(String, i64, i64)> {
    expected
        .iter()
        .map(|(n, d, f)| (n.to_string(), *d, *f))
        .collect()
}

#[tokio::test]
async fn lists_the_handbook_folder_by_folder() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let top: &[Line] = &[
        ("data", 1, 0),
        ("guides", 2, 0),
        ("notes", 1, 0),
        ("reference", 1, 0),
    ];
    // (path as asked, normalised path, folders, documents)
    type Case<'a> = (Option<&'a str>, &'a str, &'a [Line<'a>], &'a [&'a str]);
    let cases: &[Case] = &[
        (None, "", top, &[]),
        (Some(""), "", top, &[]),
        (Some("/"), "", top, &[]),
        (Some("guides"), "guides", &[], &["indexes.md", "vacuum.md"]),
        (
            Some("/guides/"),
            "guides",
            &[],
            &["indexes.md", "vacuum.md"],
        ),
        (
            Some(" guides/ "),
            "guides",
            &[],
            &["indexes.md", "vacuum.md"],
        ),
        (Some("data"), "data", &[], &["cities.csv"]),
        (Some("./notes"), "notes", &[], &["meeting-2024-03.txt"]),
    ];
    for (path, normalised, folders, documents) in cases {
        let mut args = json!({ "source_id": w.alpha_source });
        if let Some(p) = path {
            args["path"] = json!(p);
        }
        let data = w.ok("list_folder_contents", args, &alice).await;
        assert_eq!(data["path"], *normalised, "{path:?}");
        assert_eq!(data["source"], "handbook");
        assert_eq!(folder_lines(&data), lines(folders), "{path:?}");
        assert_eq!(strings(&data["documents"], "name"), *documents, "{path:?}");
        assert_eq!(data["total"], folders.len() + documents.len(), "{path:?}");
        assert!(data.get("next_offset").is_none(), "{path:?}: {data}");
    }

    let guides = w
        .ok(
            "list_folder_contents",
            json!({ "source_id": w.alpha_source, "path": "guides" }),
            &alice,
        )
        .await;
    let vacuum = &guides["documents"][1];
    assert_eq!(
        vacuum["document_id"],
        json!(w.doc("alpha/guides/vacuum.md"))
    );
    assert_eq!(vacuum["path"], "guides/vacuum.md");
    assert_eq!(vacuum["title"], "Routine Vacuuming");
    assert_eq!(vacuum["mime"], "text/markdown");
    assert_eq!(vacuum["size_bytes"], 1044);
    assert!(
        vacuum["updated_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .is_ok()
    );
}

/// Calls a tool that must fail, and checks the code and that the message
/// says what the model needs (and nothing it must not see).
async fn check_failure(
    w: &World,
    ctx: &ToolContext,
    tool: &str,
    args: Value,
    code: ErrorCode,
    says: &[&str],
    never: &[&str],
) -> String {
    let r = w.call(tool, args.clone(), ctx).await;
    assert_eq!(r.code(), Some(code), "{tool} {args}: {r:?}");
    let message = r.error.unwrap().message;
    for s in says {
        assert!(
            message.contains(s),
            "{tool} {args}: {message:?} lacks {s:?}"
        );
    }
    for s in never {
        assert!(
            !message.contains(s),
            "{tool} {args}: {message:?} shows {s:?}"
        );
    }
    message
}

#[tokio::test]
async fn a_missing_folder_points_at_the_folders_that_exist() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let vacuum = w.doc("alpha/guides/vacuum.md").to_string();
    let cases: &[(&str, ErrorCode, &[&str])] = &[
        (
            "guide",
            ErrorCode::NotFound,
            &["\"guide\"", "did you mean \"guides\""],
        ),
        ("Guides", ErrorCode::NotFound, &["did you mean \"guides\""]),
        ("note", ErrorCode::NotFound, &["did you mean \"notes\""]),
        (
            "referense",
            ErrorCode::NotFound,
            &["did you mean \"reference\""],
        ),
        // The first missing segment is the one compared.
        (
            "nots/2024",
            ErrorCode::NotFound,
            &["did you mean \"notes\""],
        ),
        (
            "xyzzy",
            ErrorCode::NotFound,
            &[
                "the top of the source holds the folders \"data\", \"guides\", \"notes\", \"reference\"",
            ],
        ),
        (
            "guides/tuning",
            ErrorCode::NotFound,
            &["\"guides\" has no sub-folders"],
        ),
        (
            "guides/vacuum.md",
            ErrorCode::NotFound,
            &["is a document, not a folder", "read_document", &vacuum],
        ),
        ("../beta", ErrorCode::InvalidArguments, &["'..'"]),
    ];
    for (path, code, says) in cases {
        for tool in ["list_folder_contents", "folder_tree"] {
            check_failure(
                &w,
                &alice,
                tool,
                json!({ "source_id": w.alpha_source, "path": path }),
                *code,
                says,
                &["secret", "plans"],
            )
            .await;
        }
    }
}

#[tokio::test]
async fn the_handbook_tree_counts_every_folder() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let data = w
        .ok(
            "folder_tree",
            json!({ "source_id": w.alpha_source }),
            &alice,
        )
        .await;
    assert_eq!(data["source"], "handbook");
    assert_eq!(data["max_depth"], 3);
    assert_eq!(data["nodes"], 5);
    assert_eq!(data["total_folders"], 5);
    assert_eq!(data["node_cap_reached"], false);
    let root = &data["tree"];
    assert_eq!(root["path"], "");
    assert_eq!(root["documents"], 0);
    assert_eq!(root["total_documents"], 5);
    assert_eq!(root["folders"], 4);
    assert!(root.get("cut").is_none());
    let children: Vec<(String, i64, i64)> = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["documents"].as_i64().unwrap(),
                c["total_documents"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        children,
        lines(&[
            ("data", 1, 1),
            ("guides", 2, 2),
            ("notes", 1, 1),
            ("reference", 1, 1)
        ])
    );

    let guides = w
        .ok(
            "folder_tree",
            json!({ "source_id": w.alpha_source, "path": "/guides/", "max_depth": 1 }),
            &alice,
        )
        .await;
    assert_eq!(guides["path"], "guides");
    assert_eq!(guides["tree"]["name"], "guides");
    assert_eq!(guides["tree"]["total_documents"], 2);
    assert_eq!(guides["nodes"], 1);
}

/// The archive: 552 documents in 254 folders (the top included).
///   inbox/            120 messages and three sub-folders of two documents each
///   years/YYYY/qN/    ten reports per quarter, 2019 to 2023
///   years/2023/q4/drafts/ five drafts, and drafts/old/ one more
///   wide/f-NNN/       220 folders of one document each
fn archive_paths() -> Vec<String> {
    let mut paths = Vec::new();
    for i in 0..120 {
        paths.push(format!("inbox/msg-{i:03}.txt"));
    }
    for sub in ["a-drafts", "b-old", "c-sent"] {
        for i in 0..2 {
            paths.push(format!("inbox/{sub}/note-{i}.txt"));
        }
    }
    for year in 2019..=2023 {
        for q in 1..=4 {
            for i in 0..10 {
                paths.push(format!("years/{year}/q{q}/report-{i:02}.md"));
            }
        }
    }
    for i in 0..5 {
        paths.push(format!("years/2023/q4/drafts/draft-{i}.md"));
    }
    paths.push("years/2023/q4/drafts/old/first.md".into());
    for i in 0..220 {
        paths.push(format!("wide/f-{i:03}/only.txt"));
    }
    paths
}

/// Writes the archive as a second source of alpha; returns its id.
async fn write_archive(w: &World) -> Uuid {
    let mut tx = w.test.db.begin(Scope::System).await.unwrap();
    let source = content::ensure_source(&mut tx, w.alpha, "archive", SourceKind::Files)
        .await
        .unwrap();
    for path in archive_paths() {
        let doc = NewDocument {
            space_id: w.alpha,
            source_id: source.id,
            path: path.clone(),
            mime: "text/plain".into(),
            size_bytes: path.len() as i64,
            content_hash: path.clone(),
            title: None,
            language: None,
            content: path.clone(),
            metadata: json!({}),
            chunks: Vec::new(),
            tables: Vec::new(),
        };
        content::write_document(&mut tx, &doc).await.unwrap();
    }
    tx.commit().await.unwrap();
    source.id
}

#[tokio::test]
async fn a_large_folder_pages_folders_first_then_documents() {
    let w = World::new().await;
    let archive = write_archive(&w).await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let mut everything: Vec<String> = vec!["a-drafts".into(), "b-old".into(), "c-sent".into()];
    everything.extend((0..120).map(|i| format!("msg-{i:03}.txt")));

    // (offset, limit) → the names on the page and the next offset.
    let check = async |offset: Option<u64>, limit: Option<u64>, next: Option<u64>| {
        let mut args = json!({ "source_id": archive, "path": "inbox" });
        if let Some(o) = offset {
            args["offset"] = json!(o);
        }
        if let Some(l) = limit {
            args["limit"] = json!(l);
        }
        let page = w.ok("list_folder_contents", args, &alice).await;
        let start = offset.unwrap_or(0) as usize;
        let end = (start + limit.unwrap_or(50) as usize).min(everything.len());
        let mut names = strings(&page["folders"], "name");
        names.extend(strings(&page["documents"], "name"));
        assert_eq!(
            names,
            everything[start..end],
            "offset {offset:?} limit {limit:?}"
        );
        assert_eq!(page["total"], 123);
        assert_eq!(page["total_folders"], 3);
        assert_eq!(page["total_documents"], 120);
        assert_eq!(page["offset"], start);
        assert_eq!(page["next_offset"].as_u64(), next, "offset {offset:?}");
        page
    };
    let first = check(None, None, Some(50)).await;
    assert_eq!(
        folder_lines(&first),
        lines(&[("a-drafts", 2, 0), ("b-old", 2, 0), ("c-sent", 2, 0)])
    );
    check(Some(50), None, Some(100)).await;
    check(Some(100), None, None).await;
    check(Some(2), Some(2), Some(4)).await;
    check(Some(3), Some(1), Some(4)).await;
    check(Some(120), Some(10), None).await;
    check(Some(122), Some(5), None).await;
    check(None, Some(200), None).await;

    // Walking next_offset visits every entry exactly once.
    let mut seen = Vec::new();
    let mut offset = Some(0);
    while let Some(o) = offset {
        let page = w
            .ok(
                "list_folder_contents",
                json!({ "source_id": archive, "path": "inbox", "offset": o, "limit": 17 }),
                &alice,
            )
            .await;
        seen.extend(strings(&page["folders"], "name"));
        seen.extend(strings(&page["documents"], "name"));
        offset = page["next_offset"].as_u64();
    }
    assert_eq!(seen, everything);

    check_failure(
        &w,
        &alice,
        "list_folder_contents",
        json!({ "source_id": archive, "path": "inbox", "offset": 123 }),
        ErrorCode::InvalidArguments,
        &["offset 123", "123 entries", "offset 0"],
        &[],
    )
    .await;
    check_failure(
        &w,
        &alice,
        "list_folder_contents",
        json!({ "source_id": archive, "path": "inbox", "limit": 500 }),
        ErrorCode::InvalidArguments,
        &["limit"],
        &[],
    )
    .await;

    // A folder of folders, past the first page.
    let wide = w
        .ok(
            "list_folder_contents",
            json!({ "source_id": archive, "path": "wide", "offset": 200, "limit": 50 }),
            &alice,
        )
        .await;
    assert_eq!(wide["total"], 220);
    assert_eq!(wide["folders"].as_array().unwrap().len(), 20);
    assert_eq!(wide["folders"][0]["name"], "f-200");
    assert_eq!(wide["folders"][0]["documents"], 1);
    assert!(wide.get("next_offset").is_none());

    // Many siblings: the answer names some of them and says how many more.
    check_failure(
        &w,
        &alice,
        "list_folder_contents",
        json!({ "source_id": archive, "path": "wide/zzz" }),
        ErrorCode::NotFound,
        &["\"wide\" holds the folders \"wide/f-000\"", "and 200 more"],
        &[],
    )
    .await;
    // A folder of that name exists, only elsewhere.
    check_failure(
        &w,
        &alice,
        "list_folder_contents",
        json!({ "source_id": archive, "path": "drafts" }),
        ErrorCode::NotFound,
        &["did you mean \"years/2023/q4/drafts\""],
        &[],
    )
    .await;
}

/// A tree node found by path anywhere below `node`.
fn find<'a>(node: &'a Value, path: &str) -> Option<&'a Value> {
    if node["path"] == path {
        return Some(node);
    }
    node["children"]
        .as_array()?
        .iter()
        .find_map(|c| find(c, path))
}

#[tokio::test]
async fn the_tree_is_cut_at_max_depth_but_counts_everything_below() {
    let w = World::new().await;
    let archive = write_archive(&w).await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let tree = async |max_depth: u64| {
        w.ok(
            "folder_tree",
            json!({ "source_id": archive, "path": "years", "max_depth": max_depth }),
            &alice,
        )
        .await
    };

    // (max_depth, folders shown, then per path: total documents, cut, hidden folders)
    type Expect<'a> = &'a [(&'a str, i64, Option<&'a str>, i64)];
    let cases: &[(u64, u64, Expect)] = &[
        (
            1,
            6,
            &[
                ("years", 206, None, 0),
                ("years/2019", 40, Some("max_depth"), 4),
                ("years/2023", 46, Some("max_depth"), 6),
            ],
        ),
        (
            2,
            26,
            &[
                ("years/2023", 46, None, 0),
                ("years/2023/q1", 10, None, 0),
                ("years/2023/q4", 16, Some("max_depth"), 2),
            ],
        ),
        (
            3,
            27,
            &[
                ("years/2023/q4", 16, None, 0),
                ("years/2023/q4/drafts", 6, Some("max_depth"), 1),
            ],
        ),
        (
            4,
            28,
            &[
                ("years/2023/q4/drafts", 6, None, 0),
                ("years/2023/q4/drafts/old", 1, None, 0),
            ],
        ),
    ];
    for (max_depth, shown, expect) in cases {
        let data = tree(*max_depth).await;
        assert_eq!(data["nodes"], *shown, "max_depth {max_depth}");
        assert_eq!(data["total_folders"], 28, "max_depth {max_depth}");
        assert_eq!(data["node_cap_reached"], false);
        for (path, total, cut, hidden) in *expect {
            let node = find(&data["tree"], path)
                .unwrap_or_else(|| panic!("max_depth {max_depth}: no {path} in {data}"));
            assert_eq!(node["total_documents"], *total, "{max_depth} {path}");
            assert_eq!(node["cut"].as_str(), *cut, "{max_depth} {path}");
            assert_eq!(
                node["hidden_folders"].as_i64().unwrap_or(0),
                *hidden,
                "{max_depth} {path}"
            );
        }
    }
    // Siblings in name order.
    let one = tree(1).await;
    assert_eq!(
        strings(&one["tree"]["children"], "name"),
        ["2019", "2020", "2021", "2022", "2023"]
    );
}

#[tokio::test]
async fn a_tree_past_the_node_cap_says_where_it_stopped() {
    let w = World::new().await;
    let archive = write_archive(&w).await;
    let alice = w.ctx(w.alice, Some(w.alpha));
    let data = w
        .ok(
            "folder_tree",
            json!({ "source_id": archive, "max_depth": 2 }),
            &alice,
        )
        .await;
    assert_eq!(data["node_cap_reached"], true);
    assert_eq!(data["nodes"], 200);
    assert_eq!(data["total_folders"], 254);
    let note = data["note"].as_str().unwrap();
    assert!(
        note.contains("254 folders") && note.contains("sub-folder"),
        "{note}"
    );
    let root = &data["tree"];
    assert_eq!(root["total_documents"], 552);
    assert!(root.get("cut").is_none());
    // Level by level: the top level whole, then inbox's and wide's children
    // up to the cap, years' none.
    assert_eq!(
        strings(&root["children"], "name"),
        ["inbox", "wide", "years"]
    );
    let inbox = find(root, "inbox").unwrap();
    assert_eq!(inbox["children"].as_array().unwrap().len(), 3);
    let wide = find(root, "wide").unwrap();
    assert_eq!(wide["children"].as_array().unwrap().len(), 193);
    assert_eq!(wide["cut"], "node_cap");
    assert_eq!(wide["hidden_folders"], 27);
    assert_eq!(wide["total_documents"], 220);
    let years = find(root, "years").unwrap();
    assert!(years.get("children").is_none());
    assert_eq!(years["cut"], "node_cap");
    assert_eq!(years["hidden_folders"], 27);
    assert_eq!(years["total_documents"], 206);

    // Asking for a smaller part fits.
    let part = w
        .ok(
            "folder_tree",
            json!({ "source_id": archive, "path": "years", "max_depth": 10 }),
            &alice,
        )
        .await;
    assert_eq!(part["node_cap_reached"], false);
    assert!(part.get("note").is_none());
}

#[tokio::test]
async fn navigation_needs_a_space() {
    let w = World::new().await;
    let alice = w.ctx(w.alice, None);
    let offered: Vec<String> = w
        .registry
        .get_available_tools(&alice)
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    for tool in ["list_folder_contents", "folder_tree"] {
        assert!(!offered.contains(&tool.to_string()), "{offered:?}");
        check_failure(
            &w,
            &alice,
            tool,
            json!({ "source_id": w.alpha_source }),
            ErrorCode::NotAvailable,
            &[tool, "a space is selected"],
            &[],
        )
        .await;
    }
    let in_alpha: Vec<String> = w
        .registry
        .get_available_tools(&w.ctx(w.alice, Some(w.alpha)))
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(in_alpha.contains(&"list_folder_contents".to_string()));
    assert!(in_alpha.contains(&"folder_tree".to_string()));
}

#[tokio::test]
async fn another_space_is_out_of_reach() {
    let w = World::new().await;
    let beta_source = w.beta_source.to_string();
    let nowhere = Uuid::new_v4();
    // Beta's names: none may appear in an answer to someone outside beta.
    let secrets = ["secret", "plans", "zanzibar", "salaries"];
    for tool in ["list_folder_contents", "folder_tree"] {
        for (who, ctx, source, path) in [
            ("alice", w.ctx(w.alice, Some(w.alpha)), w.beta_source, ""),
            (
                "alice",
                w.ctx(w.alice, Some(w.alpha)),
                w.beta_source,
                "plans",
            ),
            (
                "alice",
                w.ctx(w.alice, Some(w.alpha)),
                w.beta_source,
                "plan",
            ),
            (
                "alice in beta",
                w.ctx(w.alice, Some(w.beta)),
                w.beta_source,
                "",
            ),
            ("carol", w.ctx(w.carol, Some(w.alpha)), w.alpha_source, ""),
            (
                "carol",
                w.ctx(w.carol, Some(w.beta)),
                w.beta_source,
                "plans",
            ),
        ] {
            let r = w
                .call(tool, json!({ "source_id": source, "path": path }), &ctx)
                .await;
            assert_eq!(r.code(), Some(ErrorCode::NotFound), "{tool} {who}: {r:?}");
            let shown = format!("{r:?}").to_lowercase();
            for s in secrets {
                assert!(!shown.contains(s), "{tool} {who} {path}: {shown}");
            }
        }
        // A source of another space and one that does not exist get the
        // same answer, word for word.
        let alice = w.ctx(w.alice, Some(w.alpha));
        let foreign = w
            .call(tool, json!({ "source_id": w.beta_source }), &alice)
            .await;
        let missing = w.call(tool, json!({ "source_id": nowhere }), &alice).await;
        assert_eq!(
            foreign.error.unwrap().message.replace(&beta_source, "ID"),
            missing
                .error
                .unwrap()
                .message
                .replace(&nowhere.to_string(), "ID")
        );
    }
    // The member of beta sees it.
    let bob = w.ctx(w.bob, Some(w.beta));
    let top = w
        .ok(
            "list_folder_contents",
            json!({ "source_id": w.beta_source }),
            &bob,
        )
        .await;
    assert_eq!(strings(&top["folders"], "name"), ["data", "plans"]);
    let tree = w
        .ok("folder_tree", json!({ "source_id": w.beta_source }), &bob)
        .await;
    assert_eq!(tree["tree"]["total_documents"], 2);
}
