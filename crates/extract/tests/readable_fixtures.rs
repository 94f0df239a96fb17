//! Readable extraction against the readability fixtures (real pages with
//! the content a reference extractor keeps): average token F1 and metadata
//! agreement must not fall below the floors. Skipped where the fixtures are
//! absent; READABILITY_FIXTURES points at them, else ../shared/fixtures/readability
//! from the repository root.

mod extract_eval;

use std::path::PathBuf;

/// A little below what the extractor reaches (0.991), so a regression fails.
const F1_FLOOR: f64 = 0.97;
/// Per metadata field, agreement a little below what is reached.
const FIELD_FLOORS: [(&str, f64); 6] = [
    ("title", 0.85),
    ("byline", 0.85),
    ("excerpt", 0.9),
    ("language", 0.95),
    ("site_name", 0.95),
    ("published_time", 0.95),
];

fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("READABILITY_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/readability")
        }
    };
    dir.is_dir().then_some(dir)
}

#[test]
fn fixture_set_scores_above_the_floor() {
    let Some(dir) = fixtures() else {
        eprintln!("readability fixtures not found; set READABILITY_FIXTURES to run this test");
        return;
    };
    let dirs = extract_eval::fixture_dirs(&dir).expect("fixture directory readable");
    assert!(!dirs.is_empty(), "no fixture pages under {}", dir.display());
    let scores: Vec<_> = dirs
        .iter()
        .map(|d| extract_eval::score_dir(d).unwrap_or_else(|e| panic!("{}: {e}", d.display())))
        .collect();
    let summary = extract_eval::summarize(&scores);
    let pages: Vec<String> = scores
        .iter()
        .map(|s| format!("{} {:.3}", s.name, s.f1))
        .collect();
    assert!(
        summary.f1 >= F1_FLOOR,
        "average F1 {:.3} below {F1_FLOOR}; per page: {pages:?}",
        summary.f1
    );
    // Extraction must beat taking the whole page's text by a clear margin.
    assert!(
        summary.f1 > summary.baseline_f1 + 0.1,
        "F1 {:.3} vs whole page {:.3}",
        summary.f1,
        summary.baseline_f1
    );
    for (field, floor) in FIELD_FLOORS {
        let (_, agree, total) = summary
            .fields
            .iter()
            .find(|(f, _, _)| *f == field)
            .copied()
            .unwrap_or((field, 0, 0));
        let ratio = if total == 0 {
            1.0
        } else {
            agree as f64 / total as f64
        };
        assert!(
            ratio >= floor,
            "metadata {field}: {agree}/{total} agree, floor {floor}"
        );
    }
}

#[test]
fn scoring_tells_text_apart() {
    fn check(ours: &str, expected: &str, f1: f64) {
        let (_, _, got) = extract_eval::token_scores(ours, expected);
        assert!(
            (got - f1).abs() < 1e-9,
            "{ours:?} vs {expected:?}: {got} != {f1}"
        );
    }
    let cases: &[(&str, &str, f64)] = &[
        ("a b c", "a b c", 1.0),
        ("A, b. C!", "a b c", 1.0),
        ("a b", "c d", 0.0),
        ("a a b", "a b b", 2.0 / 3.0),
        ("", "", 1.0),
        ("a", "", 0.0),
    ];
    for (ours, expected, f1) in cases {
        check(ours, expected, *f1);
    }
    assert_eq!(
        extract_eval::markdown_text("# Title\n\n[link text](https://x.example/path) and `code`")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["Title", "link", "text", "and", "code"]
    );
}
