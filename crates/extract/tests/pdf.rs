//! The PDF pre-scan against files built here: ordinary documents pass, bombs
//! and object floods are refused before any parser sees them.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use data_plane_extract::pdf::prescan;
use data_plane_extract::{LimitError, Limits};
use flate2::Compression;
use flate2::write::ZlibEncoder;
use lopdf::{Dictionary, Document, Object, Stream, dictionary};

const MIB: u64 = 1024 * 1024;

/// The decoded size of lopdf's cross-reference stream in these small files.
const XREF: u64 = 36;

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A PDF of `pages` pages whose content is one shared stream: `content`
/// deflated when `compress`, raw otherwise. lopdf adds a cross-reference
/// stream of a few dozen bytes, which the scan counts too.
fn pdf(pages: usize, content: &[u8], compress: bool) -> Vec<u8> {
    let mut doc = Document::with_version("1.4");
    let pages_id = doc.new_object_id();
    let stream = if compress {
        Stream::new(dictionary! { "Filter" => "FlateDecode" }, deflate(content))
    } else {
        Stream::new(Dictionary::new(), content.to_vec())
    };
    let content_id = doc.add_object(stream);
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            doc.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => pages_id,
                "Contents" => content_id,
                "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
            })
            .into()
        })
        .collect();
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => pages as i64 },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

fn limits(max_inflated: u64, max_objects: u64) -> Limits {
    Limits {
        pdf_max_inflated_bytes: max_inflated,
        pdf_max_objects: max_objects,
        ..Limits::default()
    }
}

#[test]
fn an_ordinary_pdf_passes_and_is_measured() {
    let content = b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET".repeat(100);
    let scan = prescan(&pdf(1, &content, true), &Limits::default()).unwrap();
    assert_eq!(scan.inflated_bytes, content.len() as u64 + XREF);
    assert_eq!(scan.streams, 2);
    assert_eq!(scan.objects, 5);
}

#[test]
fn a_shared_stream_is_charged_once_per_reference() {
    let content = vec![b' '; 4 * MIB as usize];
    let one = pdf(1, &content, true);
    let four = pdf(4, &content, true);
    assert!(
        four.len() < 64 * 1024,
        "the file is small: {} bytes",
        four.len()
    );
    assert_eq!(
        prescan(&one, &limits(10 * MIB, 100))
            .unwrap()
            .inflated_bytes,
        4 * MIB + XREF
    );
    assert!(
        prescan(&four, &limits(16 * MIB + 100, 100))
            .unwrap()
            .inflated_bytes
            > 16 * MIB
    );
    assert_eq!(
        prescan(&four, &limits(10 * MIB, 100)),
        Err(LimitError::PdfInflated { limit: 10 * MIB })
    );
}

#[test]
fn uncompressed_streams_count_their_bytes() {
    let content = vec![b'x'; 1000];
    let two = prescan(&pdf(2, &content, false), &limits(2100, 100)).unwrap();
    assert!((2000..2100).contains(&two.inflated_bytes), "{two:?}");
    assert!(prescan(&pdf(3, &content, false), &limits(2100, 100)).is_err());
}

#[test]
fn objects_are_counted_those_in_object_streams_too() {
    let content = b"BT ET".to_vec();
    let plain = pdf(50, &content, true);
    assert_eq!(prescan(&plain, &limits(MIB, 100)).unwrap().objects, 54);
    assert_eq!(
        prescan(&plain, &limits(MIB, 40)),
        Err(LimitError::PdfObjects {
            count: 54,
            limit: 40
        })
    );

    // Page dictionaries packed in an object stream, with references the raw bytes do not show.
    let mut doc = Document::load_mem(&plain).unwrap();
    doc.compress();
    let mut packed = Vec::new();
    doc.save_with_options(
        &mut packed,
        lopdf::SaveOptions::builder()
            .use_object_streams(true)
            .build(),
    )
    .unwrap();
    let scan = prescan(&packed, &limits(MIB, 1000)).unwrap();
    assert!(scan.objects >= 54, "objects counted: {}", scan.objects);
    assert!(
        prescan(&packed, &limits(MIB, 40)).is_err(),
        "packed objects count against the limit"
    );
}

#[test]
fn garbage_is_not_refused() {
    assert!(prescan(b"%PDF-1.4\nnot really a pdf", &Limits::default()).is_ok());
    assert!(prescan(b"", &Limits::default()).is_ok());
}
