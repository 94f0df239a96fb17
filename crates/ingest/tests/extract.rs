//! Extraction of every supported format from small fixtures, plus the failure modes.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{chunk_checked, fixture, substr};
use data_plane_ingest::{ChunkOptions, ColumnKind, IngestError, extract, supported_extensions};
use serde_json::json;

fn heading_list(extracted: &data_plane_ingest::Extracted) -> Vec<(u8, String, String)> {
    // (level, heading text, the text found at its offset) so offsets are checked against content
    extracted
        .metadata
        .headings
        .iter()
        .map(|h| {
            let at = substr(&extracted.text, h.char_offset, h.char_offset + 12);
            (h.level, h.text.clone(), at)
        })
        .collect()
}

#[test]
fn markdown_keeps_source_and_finds_headings() {
    let bytes = fixture("guide.md");
    let md = extract("docs/Guide.MD", &bytes).unwrap();
    assert_eq!(md.mime, "text/markdown");
    assert_eq!(
        md.text,
        String::from_utf8(bytes).unwrap(),
        "markdown source is the text"
    );
    assert_eq!(md.metadata.title.as_deref(), Some("Field Guide to Brewing"));
    assert_eq!(md.metadata.author.as_deref(), Some("Ada Brewer"));
    assert_eq!(
        md.metadata.created_at.as_deref(),
        Some("2024-05-01T00:00:00+00:00")
    );
    assert_eq!(
        md.metadata.description.as_deref(),
        Some("How to brew tea and coffee at home")
    );
    assert_eq!(md.metadata.language.as_deref(), Some("en"));
    let expected: Vec<(u8, String, String)> = vec![
        (1, "Brewing basics".into(), "# Brewing ba".into()),
        (2, "Tea".into(), "## Tea\n\nGree".into()),
        (2, "Coffee".into(), "## Coffee\n\nC".into()),
        (2, "Coffee grind size".into(), "Coffee\ngrind".into()),
        (1, "Cleaning up".into(), "# Cleaning u".into()),
    ];
    assert_eq!(heading_list(&md), expected);
    assert_eq!(md.metadata.format, "markdown");
    assert!(
        md.metadata.word_count > 60 && md.metadata.word_count < 120,
        "{}",
        md.metadata.word_count
    );
    assert_eq!(md.metadata.char_count, md.text.chars().count() as u64);
}

#[test]
fn markdown_title_falls_back_to_first_h1() {
    let md = extract(
        "a.markdown",
        "intro\n\nSub\n---\n\n# Real Title\n\ntext".as_bytes(),
    )
    .unwrap();
    assert_eq!(md.metadata.title.as_deref(), Some("Real Title"));
    assert_eq!(md.metadata.headings[0].text, "Sub");
}

#[test]
fn html_readable_text_without_noise() {
    let html = extract("manual/strings.HTML", &fixture("page.html")).unwrap();
    assert_eq!(html.mime, "text/html");
    for noise in [
        "SHOULD NOT APPEAR",
        "color: red",
        "HEADERNOISE",
        "NAVNOISE",
        "DOCBOOKNAV",
        "DOCBOOKFOOTER",
        "NOSCRIPTNOISE",
        "ASIDENOISE",
        "FOOTERNOISE",
    ] {
        assert!(
            !html.text.contains(noise),
            "{noise} leaked into {:?}",
            html.text
        );
    }
    let expected = "9.4. String Functions\n\n\
        This section describes functions and operators for examining and manipulating string values.\n\n\
        Concatenation\n\n\
        The || operator concatenates two strings.\n\n\
        - first item\n- second bold item\n\n\
        1. one\n2. two\n\n\
        Function | Result\nlower('ABC') | abc\n\n\
        SELECT 'a' || 'b';\n  -- indented line\nSELECT 1;\n\n\
        Line one\nLine two";
    assert_eq!(html.text, expected);
    let m = &html.metadata;
    assert_eq!(
        m.title.as_deref(),
        Some("9.4. String Functions and Operators")
    );
    assert_eq!(m.language.as_deref(), Some("en"));
    assert_eq!(
        m.description.as_deref(),
        Some("Functions for examining and manipulating strings")
    );
    assert_eq!(m.author.as_deref(), Some("The Docs Team"));
    assert_eq!(m.created_at.as_deref(), Some("2023-11-09T12:00:00+00:00"));
    assert_eq!(m.modified_at.as_deref(), Some("2024-02-01T00:00:00+00:00"));
    let expected: Vec<(u8, String, String)> = vec![
        (1, "9.4. String Functions".into(), "9.4. String ".into()),
        (2, "Concatenation".into(), "Concatenatio".into()),
    ];
    assert_eq!(heading_list(&html), expected);
}

#[test]
fn html_title_from_h1_and_entities() {
    let page = "<html><body><h1>Caf&eacute; &amp; more</h1><p>a&nbsp;b</p></body></html>";
    let html = extract("x.htm", page.as_bytes()).unwrap();
    assert_eq!(html.metadata.title.as_deref(), Some("Café & more"));
    // A no-break space is whitespace to a reader and to search alike.
    assert_eq!(html.text, "Café & more\n\na b");
}

#[test]
fn html_deep_nesting_does_not_overflow() {
    // Deep enough to overflow a recursive walk; html5ever itself is quadratic in depth, so not deeper.
    let page = format!("{}deep{}", "<div>".repeat(10_000), "</div>".repeat(10_000));
    let html = extract("deep.html", page.as_bytes()).unwrap();
    assert_eq!(html.text, "deep");
}

#[test]
fn csv_with_semicolons_and_quotes() {
    let csv = extract("exports/People.csv", &fixture("people.csv")).unwrap();
    assert_eq!(csv.mime, "text/csv");
    assert_eq!(csv.tables.len(), 1);
    let table = &csv.tables[0];
    assert_eq!(table.name, "People");
    let kinds: Vec<(&str, ColumnKind)> = table
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("name", ColumnKind::Text),
            ("city", ColumnKind::Text),
            ("amount", ColumnKind::Number),
            ("active", ColumnKind::Boolean),
            ("joined", ColumnKind::Date),
            ("note", ColumnKind::Text),
        ]
    );
    let rows: Vec<serde_json::Value> = table
        .rows
        .iter()
        .map(|r| serde_json::Value::Object(r.clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            json!({"name": "Müller, Hans", "city": "Berlin", "amount": 12.0, "active": true, "joined": "2024-01-05", "note": "said \"hi\""}),
            json!({"name": "Smith", "city": "Lon;don", "amount": 7.5, "active": false, "joined": "2023-12-31", "note": null}),
            json!({"name": "Lee", "city": "Seoul", "amount": null, "active": true, "joined": "2022-02-02", "note": "multi\nline"}),
        ]
    );
    let lines: Vec<&str> = csv.text.lines().collect();
    assert_eq!(lines[0], "name | city | amount | active | joined | note");
    assert_eq!(
        lines[1],
        "name: Müller, Hans | city: Berlin | amount: 12.0 | active: true | joined: 2024-01-05 | note: said \"hi\""
    );
    assert_eq!(
        lines[2],
        "name: Smith | city: Lon;don | amount: 7.5 | active: false | joined: 2023-12-31"
    );
    assert_eq!(
        lines[3],
        "name: Lee | city: Seoul | active: true | joined: 2022-02-02 | note: multi line"
    );
    assert_eq!(csv.metadata.tables.len(), 1);
    assert_eq!(csv.metadata.tables[0].row_count, 3);
}

#[test]
fn tsv_keeps_leading_zero_codes_as_text() {
    let tsv = extract("codes.tsv", &fixture("codes.tsv")).unwrap();
    assert_eq!(tsv.mime, "text/tab-separated-values");
    let kinds: Vec<ColumnKind> = tsv.tables[0].columns.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        vec![ColumnKind::Integer, ColumnKind::Text, ColumnKind::Integer]
    );
    assert_eq!(
        serde_json::Value::Object(tsv.tables[0].rows[0].clone()),
        json!({"id": 1, "zip": "01234", "score": 3})
    );
}

#[test]
fn ragged_csv_is_corrupt() {
    let err = extract("bad.csv", b"a,b,c\n1,2,3\n4,5\n").unwrap_err();
    assert!(matches!(err, IngestError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains("bad.csv") && err.to_string().contains("line 3"),
        "{err}"
    );
}

#[test]
fn csv_header_names_are_made_unique() {
    let csv = extract("dup.csv", b"a,a,,b\n1,2,3,4\n").unwrap();
    let names: Vec<&str> = csv.tables[0]
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["a", "a_2", "column_3", "b"]);
}

#[test]
fn json_array_holder_becomes_a_table() {
    let json = extract("items.json", &fixture("items.json")).unwrap();
    assert_eq!(json.mime, "application/json");
    assert!(json.text.starts_with("{\n  \"count\": 3,"), "{}", json.text);
    let table = &json.tables[0];
    assert_eq!(table.name, "items");
    let kinds: Vec<(&str, ColumnKind)> = table
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("added", ColumnKind::Date),
            ("in_stock", ColumnKind::Boolean),
            ("price", ColumnKind::Number),
            ("qty", ColumnKind::Integer),
            ("sku", ColumnKind::Text),
            ("tags", ColumnKind::Text),
        ]
    );
    assert_eq!(table.rows.len(), 3);
    assert_eq!(json.metadata.tables[0].row_count, 3);
}

#[test]
fn json_without_records_has_no_table() {
    let check = |source: &str, tables: usize| {
        let json = extract("x.json", source.as_bytes()).unwrap();
        assert_eq!(json.tables.len(), tables, "source {source}");
    };
    check(r#"[{"a":1},{"a":2}]"#, 1);
    check(r#"{"a": [1, 2]}"#, 0);
    check(r#"{"a": [{"x":1}], "b": [{"y":2}]}"#, 0);
    check(r#""just a string""#, 0);
    check("", 0);
}

#[test]
fn invalid_json_is_corrupt() {
    let err = extract("broken.json", b"{\"a\": ").unwrap_err();
    assert!(matches!(err, IngestError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("broken.json"), "{err}");
}

#[test]
fn windows_1252_text_is_decoded() {
    let txt = extract("cp1252.txt", &fixture("cp1252.txt")).unwrap();
    assert_eq!(txt.mime, "text/plain");
    assert!(
        txt.text
            .starts_with("Le café était très chaud, et la crème brûlée"),
        "{}",
        txt.text
    );
    assert!(
        txt.text
            .contains("payé € 12 pour le déjeuner – un prix raisonnable à Paris.\nDeuxième"),
        "{}",
        txt.text
    );
    assert!(!txt.text.contains('\r'));
    assert_eq!(txt.metadata.language.as_deref(), Some("fr"));
}

#[test]
fn binary_named_txt_is_corrupt() {
    let err = extract(
        "image.txt",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00",
    )
    .unwrap_err();
    assert!(matches!(err, IngestError::Corrupt { .. }), "{err:?}");
}

#[test]
fn unsupported_extension_names_file_and_extension() {
    let err = extract("slides/deck.PPTX", b"PK\x03\x04").unwrap_err();
    match &err {
        IngestError::Unsupported { file, extension } => {
            assert_eq!(file, "slides/deck.PPTX");
            assert_eq!(extension, "pptx");
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("\"pptx\"") && message.contains("md"),
        "{message}"
    );
}

#[test]
fn files_without_extension_are_sniffed() {
    let check = |bytes: &[u8], mime: &str| {
        assert_eq!(
            extract("README", bytes).unwrap().mime,
            mime,
            "bytes {:?}",
            String::from_utf8_lossy(bytes)
        );
    };
    check(b"<!DOCTYPE html><p>hi</p>", "text/html");
    check(b"  {\"a\": 1}", "application/json");
    check(b"plain words", "text/plain");
    assert!(matches!(
        extract("blob", b"\x00\x01\x02\xff\xfe\xfd").unwrap_err(),
        IngestError::Unsupported { .. }
    ));
}

#[test]
fn empty_files_give_empty_text_and_no_chunks() {
    for name in ["e.txt", "e.md", "e.html", "e.csv", "e.json", "e.log"] {
        let extracted = extract(name, b"").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(extracted.text, "", "{name}");
        assert_eq!(extracted.metadata.word_count, 0);
        assert!(
            chunk_checked(&extracted, &ChunkOptions::default()).is_empty(),
            "{name}"
        );
    }
}

#[test]
fn supported_extensions_all_dispatch() {
    for ext in supported_extensions() {
        let result = extract(&format!("file.{ext}"), b"");
        if *ext == "pdf" {
            assert!(
                matches!(result, Err(IngestError::Corrupt { .. })),
                "empty pdf must be corrupt"
            );
        } else {
            assert!(result.is_ok(), "{ext}: {result:?}");
        }
    }
}

#[test]
fn every_fixture_chunks_into_exact_slices() {
    let opts = ChunkOptions {
        target_chars: 120,
        max_chars: 200,
        overlap_chars: 30,
    };
    for name in [
        "guide.md",
        "page.html",
        "people.csv",
        "codes.tsv",
        "items.json",
        "cp1252.txt",
        "notes.log",
    ] {
        let extracted = extract(name, &fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let chunks = chunk_checked(&extracted, &opts);
        assert!(!chunks.is_empty(), "{name} gave no chunks");
        let defaults = chunk_checked(&extracted, &ChunkOptions::default());
        assert!(!defaults.is_empty(), "{name} gave no chunks");
    }
}

#[test]
fn metadata_round_trips_through_json() {
    let md = extract("guide.md", &fixture("guide.md")).unwrap();
    let value = serde_json::to_value(&md.metadata).unwrap();
    assert_eq!(
        value["headings"][0]["char_offset"],
        json!(md.metadata.headings[0].char_offset)
    );
    assert_eq!(value["format"], "markdown");
    let back: data_plane_ingest::DocMetadata = serde_json::from_value(value).unwrap();
    assert_eq!(back, md.metadata);
    let csv = extract("people.csv", &fixture("people.csv")).unwrap();
    let value = serde_json::to_value(&csv.metadata.tables).unwrap();
    assert_eq!(
        value[0]["columns"][2],
        json!({"name": "amount", "kind": "number"})
    );
}
