//! PDF extraction: a PDF built in the test, real PDFs found on the machine, broken ones.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{chunk_checked, substr};
use data_plane_ingest::{ChunkOptions, IngestError, Limits, extract, extract_with};
use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

/// A real, minimal PDF: one Helvetica text line per page, and an Info dictionary.
fn build_pdf(pages: &[&str]) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut kids = Vec::new();
    for text in pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 12.into()]),
                Operation::new("Td", vec![72.into(), 720.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(Object::Reference(page_id));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count,
            "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    let info_id = doc.add_object(dictionary! {
        "Title" => Object::string_literal("Quarterly Report"),
        "Author" => Object::string_literal("Jane Roe"),
        "CreationDate" => Object::string_literal("D:20240305102030+02'00'"),
        "ModDate" => Object::string_literal("D:20240401000000Z"),
    });
    doc.trailer.set("Root", catalog_id);
    doc.trailer.set("Info", info_id);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

#[test]
fn generated_pdf_pages_metadata_and_chunks() {
    let bytes = build_pdf(&[
        "Revenue grew in the first quarter.",
        "Costs fell sharply in the second quarter.",
        "Outlook remains stable.",
    ]);
    let pdf = extract("reports/q1.pdf", &bytes).unwrap();
    assert_eq!(pdf.mime, "application/pdf");
    let m = &pdf.metadata;
    assert_eq!(m.page_count, Some(3));
    assert_eq!(m.title.as_deref(), Some("Quarterly Report"));
    assert_eq!(m.author.as_deref(), Some("Jane Roe"));
    assert_eq!(m.created_at.as_deref(), Some("2024-03-05T10:20:30+02:00"));
    assert_eq!(m.modified_at.as_deref(), Some("2024-04-01T00:00:00+00:00"));
    let page_texts: Vec<String> = m
        .pages
        .iter()
        .map(|p| substr(&pdf.text, p.char_start, p.char_end))
        .collect();
    assert_eq!(
        page_texts,
        vec![
            "Revenue grew in the first quarter.",
            "Costs fell sharply in the second quarter.",
            "Outlook remains stable."
        ]
    );
    assert_eq!(pdf.text, page_texts.join("\n\n"));

    // Pages are hard boundaries: each chunk cites exactly one page.
    let chunks = chunk_checked(&pdf, &ChunkOptions::default());
    let pages: Vec<(Option<u32>, &str)> =
        chunks.iter().map(|c| (c.page, c.text.as_str())).collect();
    assert_eq!(
        pages,
        vec![
            (Some(1), "Revenue grew in the first quarter."),
            (Some(2), "Costs fell sharply in the second quarter."),
            (Some(3), "Outlook remains stable."),
        ]
    );
}

#[test]
fn pdf_is_recognised_by_content_whatever_the_name() {
    let bytes = build_pdf(&["Hello from a misnamed file."]);
    let pdf = extract("download.bin", &bytes).unwrap();
    assert_eq!(pdf.mime, "application/pdf");
    assert_eq!(pdf.text, "Hello from a misnamed file.");
}

#[test]
fn broken_pdfs_are_corrupt_not_panics() {
    let good = build_pdf(&["Some text that will be cut off."]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "garbage after header",
            b"%PDF-1.7\nthis is not a pdf at all".to_vec(),
        ),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("no header", b"hello world".to_vec()),
        ("empty", Vec::new()),
        ("header only", b"%PDF-".to_vec()),
    ];
    for (what, bytes) in cases {
        match extract("broken.pdf", &bytes) {
            Err(IngestError::Corrupt { file, reason }) => {
                assert_eq!(file, "broken.pdf");
                assert!(!reason.is_empty(), "{what}");
            }
            other => panic!("{what}: expected corrupt, got {other:?}"),
        }
    }
}

/// PDFs shipped with system packages are real-world files from real producers. Which ones exist
/// depends on the machine; the test checks each that does and needs at least none.
#[test]
fn real_pdfs_on_this_machine() {
    let Ok(dirs) = std::fs::read_dir("/usr/share/doc") else {
        return;
    };
    let mut paths: Vec<std::path::PathBuf> = dirs
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf")))
        .collect();
    paths.sort();
    for path in paths.iter().take(5) {
        let bytes = std::fs::read(path).unwrap();
        let name = path.to_string_lossy();
        match extract(&name, &bytes) {
            Ok(pdf) => {
                let m = &pdf.metadata;
                let chunks = chunk_checked(&pdf, &ChunkOptions::default());
                println!(
                    "{name}: {} pages, {} chars, {} words, {} chunks, title {:?}, created {:?}, language {:?}",
                    m.page_count.unwrap_or(0),
                    m.char_count,
                    m.word_count,
                    chunks.len(),
                    m.title,
                    m.created_at,
                    m.language
                );
                assert!(m.page_count.unwrap_or(0) >= 1, "{name}");
                assert_eq!(
                    m.pages.len() as u32,
                    m.page_count.unwrap_or(0).min(m.pages.len() as u32)
                );
                for span in &m.pages {
                    assert!(
                        span.char_start <= span.char_end && span.char_end <= m.char_count,
                        "{name}"
                    );
                }
            }
            // Acceptable for an exotic file, but it must be a clean error.
            Err(e) => println!("{name}: {e}"),
        }
    }
}

#[test]
fn a_pdf_over_the_limits_is_a_per_file_error_naming_the_limit() {
    let bytes = build_pdf(&["one page", "another page"]);
    let tight = Limits {
        pdf_max_inflated_bytes: 16,
        ..Limits::default()
    };
    let err = extract_with("report.pdf", &bytes, &tight).unwrap_err();
    assert!(matches!(err, IngestError::Limit { .. }), "{err}");
    assert!(err.is_per_file());
    let message = err.to_string();
    assert!(
        message.contains("report.pdf")
            && message.contains("DATA_PLANE_EXTRACT_PDF_MAX_INFLATED_BYTES"),
        "{message}"
    );
    let few_objects = Limits {
        pdf_max_objects: 3,
        ..Limits::default()
    };
    let err = extract_with("report.pdf", &bytes, &few_objects).unwrap_err();
    assert!(err.to_string().contains("objects"), "{err}");
    let few_chars = Limits {
        max_chars: 5,
        ..Limits::default()
    };
    let err = extract_with("report.pdf", &bytes, &few_chars).unwrap_err();
    assert!(err.to_string().contains("more than 5 characters"), "{err}");
    assert!(extract_with("report.pdf", &bytes, &Limits::default()).is_ok());
}

#[test]
fn deep_html_keeps_its_text_and_parses_quickly() {
    let depth = 300_000;
    let html = format!(
        "<html><body>{}bottom text{}</body></html>",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    );
    let started = std::time::Instant::now();
    let extracted = extract_with("deep.html", html.as_bytes(), &Limits::default()).unwrap();
    let took = started.elapsed();
    assert!(extracted.text.contains("bottom text"), "{}", extracted.text);
    println!("300000-deep html extracted in {took:?}");
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
}
