//! Chunk boundaries, offsets, heading paths and overlap, as data.

// A failed unwrap is a failed test, with the value in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::substr;
use data_plane_ingest::{Chunk, ChunkOptions, Heading, PageSpan, chunk, embedding_input, extract};

fn opts(target: usize, max: usize, overlap: usize) -> ChunkOptions {
    ChunkOptions {
        target_chars: target,
        max_chars: max,
        overlap_chars: overlap,
    }
}

/// Headings are given as (level, text) and located at the first occurrence of `text` in the input.
fn headings_in(text: &str, headings: &[(u8, &str)]) -> Vec<Heading> {
    headings
        .iter()
        .map(|&(level, h)| {
            let byte = text
                .find(h)
                .unwrap_or_else(|| panic!("heading {h:?} not in text"));
            Heading {
                level,
                text: h.trim_start_matches('#').trim().to_string(),
                char_offset: text[..byte].chars().count() as u64,
            }
        })
        .collect()
}

fn run(text: &str, headings: &[(u8, &str)], o: &ChunkOptions) -> Vec<Chunk> {
    let chunks = chunk(text, &headings_in(text, headings), &[], o);
    for c in &chunks {
        assert_eq!(
            substr(text, c.char_start, c.char_end),
            c.text,
            "offsets of {:?}",
            c.text
        );
        assert!(
            c.text.chars().count() <= o.max_chars.max(1),
            "{:?} exceeds max",
            c.text
        );
        assert_eq!(c.text.trim(), c.text);
        assert!(!c.text.is_empty());
    }
    chunks
}

/// Checks chunk texts only.
fn check(text: &str, o: ChunkOptions, expected: &[&str]) {
    let got: Vec<String> = run(text, &[], &o).into_iter().map(|c| c.text).collect();
    assert_eq!(got, expected, "input {text:?}");
}

/// Checks chunk texts with their heading paths.
fn check_sections(
    text: &str,
    headings: &[(u8, &str)],
    o: ChunkOptions,
    expected: &[(&str, &[&str])],
) {
    let got: Vec<(String, Vec<String>)> = run(text, headings, &o)
        .into_iter()
        .map(|c| (c.text, c.heading_path))
        .collect();
    let expected: Vec<(String, Vec<String>)> = expected
        .iter()
        .map(|(t, p)| (t.to_string(), p.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(got, expected, "input {text:?}");
}

#[test]
fn paragraphs_merge_up_to_target_and_split_beyond() {
    check("", opts(20, 40, 0), &[]);
    check("  \n\n \t \n", opts(20, 40, 0), &[]);
    check("  hello  ", opts(20, 40, 0), &["hello"]);
    check("aaa\n\nbbb\n\nccc", opts(20, 40, 0), &["aaa\n\nbbb\n\nccc"]);
    check(
        "aaaa aaaa\n\nbbbb bbbb\n\ncccc cccc",
        opts(20, 40, 0),
        &["aaaa aaaa\n\nbbbb bbbb", "cccc cccc"],
    );
    // A paragraph between target and max stays whole.
    check(
        "short\n\nthis paragraph is thirty chars\n\nend",
        opts(20, 40, 0),
        &["short", "this paragraph is thirty chars", "end"],
    );
    // Whitespace-only lines count as paragraph breaks.
    check(
        "aaaa aaaa aaaa\n   \nbbbb bbbb bbbb",
        opts(20, 40, 0),
        &["aaaa aaaa aaaa", "bbbb bbbb bbbb"],
    );
}

#[test]
fn long_paragraphs_split_at_lines_then_sentences_then_words_then_chars() {
    check(
        "row one is here\nrow two is here\nrow three here",
        opts(20, 30, 0),
        &["row one is here", "row two is here", "row three here"],
    );
    check(
        "One sentence here. Another one follows! A third? Yes.",
        opts(20, 30, 0),
        &[
            "One sentence here.",
            "Another one follows!",
            "A third? Yes.",
        ],
    );
    check(
        "alpha beta gamma delta epsilon zeta eta theta",
        opts(12, 16, 0),
        &["alpha beta", "gamma delta", "epsilon zeta", "eta theta"],
    );
    check(
        "abcdefghijklmnopqrstuvwxyz",
        opts(10, 12, 0),
        &["abcdefghij", "klmnopqrst", "uvwxyz"],
    );
    // Multi-byte characters are never cut and count as one each.
    check(
        "ééééééééééééééé",
        opts(5, 6, 0),
        &["ééééé", "ééééé", "ééééé"],
    );
    check(
        "日本語の文です。二番目の文です。",
        opts(8, 10, 0),
        &["日本語の文です。", "二番目の文です。"],
    );
}

#[test]
fn a_short_line_before_a_long_paragraph_leads_it_instead_of_standing_alone() {
    // Cut at sentences, the paragraph's first piece starts with the title line.
    let text =
        "On the title.\n\nFirst sentence is here. Second sentence is here. Third sentence is here.";
    check(
        text,
        opts(60, 80, 0),
        &[
            "On the title.\n\nFirst sentence is here.",
            "Second sentence is here. Third sentence is here.",
        ],
    );
    // Under the ceiling together, the two make one chunk.
    check(
        "A heading\n\nA paragraph of fifty characters, give or take one.",
        opts(40, 70, 0),
        &["A heading\n\nA paragraph of fifty characters, give or take one."],
    );
    // A paragraph under the target that the short line would push past it: one chunk too.
    check(
        "A heading\n\nA paragraph of thirty-six characters.",
        opts(40, 70, 0),
        &["A heading\n\nA paragraph of thirty-six characters."],
    );
    // Several short lines lead it together; a longer lead-in still stands alone.
    check(
        "Ab.\n\nCd.\n\nFirst sentence is here. Second sentence is here. Third sentence is here.",
        opts(60, 80, 0),
        &[
            "Ab.\n\nCd.\n\nFirst sentence is here. Second sentence is here.",
            "Third sentence is here.",
        ],
    );
    check(
        "A lead-in of thirty characters\n\nFirst sentence is here. Second sentence is here. Third one.",
        opts(60, 80, 0),
        &[
            "A lead-in of thirty characters",
            "First sentence is here. Second sentence is here. Third one.",
        ],
    );
    // With overlap, the first piece still starts with the title line and none is the line alone.
    let chunks = run(text, &[], &opts(60, 80, 12));
    assert!(chunks[0].text.starts_with("On the title.\n\nFirst"));
    assert!(chunks.iter().all(|c| c.text != "On the title."));
    assert!(chunks[1].text.ends_with("Third sentence is here."));
}

#[test]
fn overlap_only_where_a_paragraph_was_cut_mid_flow() {
    let text = "First sentence is here. Second sentence is here. Third sentence is here.";
    let chunks = run(text, &[], &opts(25, 45, 12));
    let got: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        got,
        [
            "First sentence is here.",
            "is here. Second sentence is here.",
            "is here. Third sentence is here."
        ]
    );
    // Paragraph and line breaks are clean cuts: no overlap there.
    let text = "aaaa aaaa aaaa\n\nbbbb bbbb bbbb\ncccc cccc cccc";
    let got: Vec<String> = run(text, &[], &opts(15, 20, 10))
        .into_iter()
        .map(|c| c.text)
        .collect();
    assert_eq!(got, ["aaaa aaaa aaaa", "bbbb bbbb bbbb", "cccc cccc cccc"]);
    // Overlap never pushes a chunk past max.
    for c in run(&"word ".repeat(400), &[], &opts(50, 55, 40)) {
        assert!(c.text.chars().count() <= 55);
    }
}

#[test]
fn sections_split_at_headings_and_carry_their_path() {
    let text = "# Guide\n\nIntro text of the guide that is long enough to stand alone as its own chunk here.\n\n\
                ## Install\n\nInstall steps that are also long enough to be a full chunk on their own, yes.\n\n\
                ## Use\n\nUsage notes that again fill a chunk by themselves and then some more words.";
    check_sections(
        text,
        &[(1, "# Guide"), (2, "## Install"), (2, "## Use")],
        opts(100, 150, 0),
        &[
            (
                "# Guide\n\nIntro text of the guide that is long enough to stand alone as its own chunk here.",
                &["Guide"],
            ),
            (
                "## Install\n\nInstall steps that are also long enough to be a full chunk on their own, yes.",
                &["Guide", "Install"],
            ),
            (
                "## Use\n\nUsage notes that again fill a chunk by themselves and then some more words.",
                &["Guide", "Use"],
            ),
        ],
    );
}

#[test]
fn small_sections_merge_with_their_neighbours() {
    let text = "# A\n\n## B\n\nbody of b\n\n## C\n\nbody of c\n\n# D\n\nbody of d";
    check_sections(
        text,
        &[(1, "# A"), (2, "## B"), (2, "## C"), (1, "# D")],
        opts(100, 150, 0),
        &[(
            "# A\n\n## B\n\nbody of b\n\n## C\n\nbody of c\n\n# D\n\nbody of d",
            &[],
        )],
    );
    check_sections(
        text,
        &[(1, "# A"), (2, "## B"), (2, "## C"), (1, "# D")],
        opts(30, 40, 0),
        &[
            ("# A\n\n## B\n\nbody of b", &["A"]),
            ("## C\n\nbody of c", &["A", "C"]),
            ("# D\n\nbody of d", &["D"]),
        ],
    );
}

#[test]
fn a_bare_heading_joins_the_big_section_after_it() {
    let body = format!("{}\n\n{}", "word ".repeat(25), "more ".repeat(25));
    let text = format!("# Title\n\n## Part\n\n{body}");
    let chunks = run(&text, &[(1, "# Title"), (2, "## Part")], &opts(100, 160, 0));
    assert!(
        chunks[0].text.starts_with("# Title\n\n## Part\n\nword"),
        "{:?}",
        chunks[0].text
    );
    assert_eq!(chunks[0].heading_path, ["Title"]);
    assert!(
        chunks[1..]
            .iter()
            .all(|c| c.heading_path == ["Title", "Part"])
    );
}

#[test]
fn big_sections_never_share_a_chunk() {
    let a = "alpha ".repeat(12);
    let b = "beta ".repeat(12);
    let text = format!("# A\n{a}\n# B\n{b}");
    let chunks = run(&text, &[(1, "# A"), (1, "# B")], &opts(100, 150, 0));
    assert_eq!(chunks.len(), 2);
    assert!(chunks[0].text.starts_with("# A") && !chunks[0].text.contains("# B"));
    assert!(chunks[1].text.starts_with("# B"));
}

#[test]
fn pages_are_hard_boundaries_and_label_chunks() {
    let text = "p1 a\n\np2 b\n\np3 c";
    let pages = [
        PageSpan {
            page: 1,
            char_start: 0,
            char_end: 4,
        },
        PageSpan {
            page: 2,
            char_start: 6,
            char_end: 10,
        },
        PageSpan {
            page: 3,
            char_start: 12,
            char_end: 16,
        },
    ];
    let chunks = chunk(text, &[], &pages, &ChunkOptions::default());
    let got: Vec<(&str, Option<u32>)> = chunks.iter().map(|c| (c.text.as_str(), c.page)).collect();
    assert_eq!(
        got,
        [("p1 a", Some(1)), ("p2 b", Some(2)), ("p3 c", Some(3))]
    );
}

#[test]
fn offsets_count_characters_not_bytes() {
    let text = "Ünïcödé heading\n\n😀 emoji paragraph one.\n\n日本語 paragraph two.";
    let chunks = run(text, &[], &opts(25, 30, 0));
    let spans: Vec<(u64, u64)> = chunks.iter().map(|c| (c.char_start, c.char_end)).collect();
    assert_eq!(spans, [(0, 15), (17, 39), (41, 59)]);
}

#[test]
fn heading_offsets_out_of_order_or_out_of_range_are_tolerated() {
    let text = "one\n\ntwo";
    let headings = [
        Heading {
            level: 1,
            text: "late".into(),
            char_offset: 5,
        },
        Heading {
            level: 1,
            text: "beyond".into(),
            char_offset: 999,
        },
        Heading {
            level: 2,
            text: "first".into(),
            char_offset: 0,
        },
    ];
    let chunks = chunk(text, &headings, &[], &opts(3, 5, 0));
    let got: Vec<(&str, Vec<String>)> = chunks
        .iter()
        .map(|c| (c.text.as_str(), c.heading_path.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("one", vec!["first".to_string()]),
            ("two", vec!["late".to_string()])
        ]
    );
}

#[test]
fn degenerate_options_still_make_progress() {
    let got: Vec<String> = run("abc def", &[], &opts(0, 0, 50))
        .into_iter()
        .map(|c| c.text)
        .collect();
    assert_eq!(got, ["a", "b", "c", "d", "e", "f"]);
}

#[test]
fn embedding_input_adds_title_and_headings_once() {
    let c = Chunk {
        ordinal: 0,
        text: "Steep for three minutes.".into(),
        char_start: 0,
        char_end: 24,
        heading_path: vec!["Brewing".into(), "Tea".into()],
        page: None,
    };
    assert_eq!(
        embedding_input(&c, Some("Field Guide")),
        "Field Guide\nBrewing > Tea\n\nSteep for three minutes."
    );
    assert_eq!(
        embedding_input(&c, Some("Brewing")),
        "Brewing\nTea\n\nSteep for three minutes."
    );
    assert_eq!(
        embedding_input(&c, None),
        "Brewing > Tea\n\nSteep for three minutes."
    );
    let bare = Chunk {
        heading_path: vec![],
        ..c
    };
    assert_eq!(
        embedding_input(&bare, Some("  ")),
        "Steep for three minutes."
    );
}

#[test]
fn markdown_fixture_chunks_follow_its_sections() {
    let md = extract("guide.md", &common::fixture("guide.md")).unwrap();
    let chunks = common::chunk_checked(&md, &opts(150, 250, 0));
    let got: Vec<(String, Vec<String>)> = chunks
        .iter()
        .map(|c| {
            (
                c.text.lines().next().unwrap_or_default().to_string(),
                c.heading_path.clone(),
            )
        })
        .collect();
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            ("---".to_string(), path(&[])),
            (
                "Intro paragraph before any heading, about the joy of brewing.".to_string(),
                path(&[])
            ),
            ("# Brewing basics".to_string(), path(&["Brewing basics"])),
            // Tea is small, so it shares a chunk with the bare "## Coffee" heading after it.
            ("## Tea".to_string(), path(&["Brewing basics"])),
            (
                "Coffee".to_string(),
                path(&["Brewing basics", "Coffee grind size"])
            ),
            ("# Cleaning up".to_string(), path(&["Cleaning up"])),
        ]
    );
}
