//! Keyword search as a user sees it: stemming per language, filters, phrases,
//! odd query syntax, and the index following replaces and deletes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use data_plane_search::{
    Bm25, ChunkDoc, IndexOp, KeywordHit, KeywordIndex, KeywordQuery, MAX_WINDOW, SearchError,
};
use uuid::Uuid;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A small multilingual corpus; chunk ids are referred to by the tests below.
fn corpus() -> Vec<ChunkDoc> {
    let en = Some("en");
    vec![
        chunk(
            1,
            1,
            "/manual/sql-commands",
            en,
            "CREATE TABLE",
            "Creates a new table in the current database.",
        ),
        chunk(
            2,
            1,
            "/manual/sql-commands",
            en,
            "Notes",
            "The vacuum process runs in the background and reclaims storage.",
        ),
        chunk(
            3,
            2,
            "/manual",
            en,
            "Queries",
            "How to run a query against the server from the command line.",
        ),
        chunk(
            4,
            3,
            "/manual/admin",
            None,
            "Jobs",
            "The runner logs every job it starts.",
        ),
        chunk(
            5,
            4,
            "/travel",
            Some("xx"),
            "Guide",
            "Ærøskøbing café and harbour.",
        ),
        chunk(
            10,
            10,
            "/handbuch",
            Some("de"),
            "Gebäude",
            "Das Haus am See ist alt. Der Hund läuft.",
        ),
        chunk(
            11,
            11,
            "/handbuch",
            Some("de-AT"),
            "Stadt",
            "Die Häuser der Stadt sind neu. Wir laufen.",
        ),
        chunk(
            12,
            12,
            "/culture",
            Some("fr"),
            "Culture",
            "Les bibliothèques municipales ouvrent le dimanche.",
        ),
        chunk(
            13,
            13,
            "/docs",
            Some("ru"),
            "Книги",
            "Новые книги в библиотеке.",
        ),
        ChunkDoc {
            space_id: SPACE_B,
            ..chunk(
                20,
                20,
                "/manual/sql-commands",
                en,
                "Vacuum",
                "vacuum vacuum vacuum full vacuum",
            )
        },
        chunk(21, 21, "/manualx", en, "Other", "vacuum elsewhere"),
        ChunkDoc {
            source_id: SOURCE_2,
            ..chunk(
                22,
                22,
                "/guide",
                en,
                "Vacuum guide",
                "Tuning autovacuum settings.",
            )
        },
    ]
}

fn corpus_index() -> Result<KeywordIndex, SearchError> {
    let index = KeywordIndex::in_memory()?;
    index.apply(replace_ops(corpus()), 1)?;
    Ok(index)
}

#[test]
fn words_match_through_each_languages_stemmer() -> TestResult {
    let index = corpus_index()?;
    let check = |text: &str, expected: &[i64]| {
        assert_eq!(
            search_ids(&index, &query(text, &[SPACE_A])),
            expected,
            "query {text:?}"
        );
    };
    // English: every form of "run" meets "runs" and "run", but not "runner".
    check("running", &[2, 3]);
    check("runs", &[2, 3]);
    check("RUN", &[2, 3]);
    check("databases", &[1]);
    // German: Snowball folds the plural and the umlaut onto the singular...
    check("Häuser", &[10, 11]);
    check("haus", &[10, 11]);
    check("hauser", &[10, 11]);
    // ...but not the strong verb: "läuft" stems to "lauft", "laufen" to "lauf".
    check("laufen", &[11]);
    check("läuft", &[10]);
    // French and Russian, with and without the accent.
    check("bibliothèque", &[12]);
    check("bibliotheque", &[12]);
    check("книга", &[13]);
    // Unknown language: no stemming, but case and accents are folded.
    check("cafe", &[5]);
    check("CAFÉ", &[5]);
    check("aeroskobing", &[5]);
    check("runners", &[]);
    // No word at all.
    check("", &[]);
    check("   ", &[]);
    Ok(())
}

#[test]
fn query_syntax_never_fails() -> TestResult {
    let index = corpus_index()?;
    let check = |text: &str, expected: &[i64]| {
        assert_eq!(
            search_ids(&index, &query(text, &[SPACE_A])),
            expected,
            "query {text:?}"
        );
    };
    check("table:(create", &[1]);
    check("-vacuum", &[2, 21, 22]);
    check("vacuum*", &[2, 21, 22]);
    check("*", &[]);
    // Operators are plain words: "and" is in chunks 2 and 5.
    check("AND OR NOT", &[2, 5]);
    check(r"[]{}^~\ :/+-!&|", &[]);
    check("title:\"x", &[]);
    check("\"unclosed vacuum", &[2, 21, 22]);
    check("\"", &[]);
    check("\"\"", &[]);
    check("née ∑ 🦀 ", &[]);
    let long = "vacuum ".repeat(5_000);
    check(&long, &[2, 21, 22]);
    Ok(())
}

#[test]
fn quoted_phrases_must_appear_in_order() -> TestResult {
    let index = corpus_index()?;
    let check = |text: &str, expected: &[i64]| {
        assert_eq!(
            search_ids(&index, &query(text, &[SPACE_A])),
            expected,
            "query {text:?}"
        );
    };
    check("\"new table\"", &[1]);
    check("\"table new\"", &[]);
    // The phrase is stemmed like the text, so a plural still meets the singular.
    check("\"vacuum processes\"", &[2]);
    // Words beside a phrase only rank; the phrase is required.
    check("\"vacuum process\" harbour", &[2]);
    check("\"no such phrase\" vacuum", &[]);
    // A one-word phrase is just that word.
    check("\"Häuser\"", &[10, 11]);
    Ok(())
}

#[test]
fn chunks_of_unlisted_spaces_are_never_returned() -> TestResult {
    let index = corpus_index()?;
    // Chunk 20 in space B is the best match for "vacuum" by far.
    let both = index.search(&query("vacuum", &[SPACE_A, SPACE_B]))?;
    assert_eq!(ids(&both).first(), Some(&20));
    let check = |spaces: &[Uuid], expected: &[i64]| {
        assert_eq!(
            search_ids(&index, &query("vacuum", spaces)),
            expected,
            "spaces {spaces:?}"
        );
    };
    check(&[SPACE_A], &[2, 21, 22]);
    check(&[SPACE_B], &[20]);
    check(&[Uuid::from_u128(0xC)], &[]);
    check(&[], &[]);
    Ok(())
}

#[test]
fn filters_narrow_results() -> TestResult {
    let index = corpus_index()?;
    let check = |q: KeywordQuery, expected: &[i64]| {
        assert_eq!(search_ids(&index, &q), expected, "query {q:?}");
    };
    let vacuum = query("vacuum table", &[SPACE_A]);
    check(vacuum.clone(), &[1, 2, 21, 22]);
    // A folder and everything below it, but not a sibling sharing its prefix.
    for folder in ["/manual", "/manual/", "manual", "//manual"] {
        let q = KeywordQuery {
            folder_prefix: Some(folder.into()),
            ..vacuum.clone()
        };
        check(q, &[1, 2]);
    }
    let q = KeywordQuery {
        folder_prefix: Some("/manual/sql-commands".into()),
        ..query("run", &[SPACE_A])
    };
    check(q, &[2]);
    let q = KeywordQuery {
        folder_prefix: Some("/".into()),
        ..vacuum.clone()
    };
    check(q, &[1, 2, 21, 22]);
    let q = KeywordQuery {
        folder_prefix: Some("/man".into()),
        ..vacuum.clone()
    };
    check(q, &[]);
    check(
        KeywordQuery {
            source_ids: Some(vec![SOURCE_2]),
            ..vacuum.clone()
        },
        &[22],
    );
    check(
        KeywordQuery {
            source_ids: Some(vec![SOURCE_1, SOURCE_2]),
            ..vacuum.clone()
        },
        &[1, 2, 21, 22],
    );
    check(
        KeywordQuery {
            source_ids: Some(vec![]),
            ..vacuum.clone()
        },
        &[],
    );
    check(
        KeywordQuery {
            document_ids: Some(vec![doc(1)]),
            ..vacuum.clone()
        },
        &[1, 2],
    );
    check(
        KeywordQuery {
            document_ids: Some(vec![doc(21), doc(22)]),
            ..vacuum.clone()
        },
        &[21, 22],
    );
    check(
        KeywordQuery {
            document_ids: Some(vec![]),
            ..vacuum.clone()
        },
        &[],
    );
    // A document of another space stays invisible even when named.
    check(
        KeywordQuery {
            document_ids: Some(vec![doc(20)]),
            ..vacuum.clone()
        },
        &[],
    );
    Ok(())
}

#[test]
fn hits_carry_their_document_and_a_score() -> TestResult {
    let index = corpus_index()?;
    let hits = index.search(&query("create table", &[SPACE_A]))?;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].chunk_id, 1);
    assert_eq!(hits[0].document_id, doc(1));
    assert!(hits[0].score > 0.0, "score {}", hits[0].score);
    Ok(())
}

#[test]
fn a_word_in_the_heading_outranks_the_same_word_in_the_body() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let en = Some("en");
    let chunks = vec![
        chunk(
            1,
            1,
            "/",
            en,
            "Setup",
            "replication of streaming standby servers",
        ),
        chunk(
            2,
            2,
            "/",
            en,
            "Replication",
            "setup of streaming standby servers",
        ),
    ];
    index.apply(replace_ops(chunks), 1)?;
    assert_eq!(
        ids(&index.search(&query("replication", &[SPACE_A]))?),
        [2, 1]
    );
    Ok(())
}

#[test]
fn k1_decides_between_repetition_in_a_long_passage_and_one_mention_in_a_short_one() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let en = Some("en");
    let filler = "the survey counted mosses ferns and grasses along the northern ridge";
    let long = format!(
        "lichen grows slowly on the exposed rock. {filler}. {filler}. lichen survives \
         drought by drying out. {filler}. {filler}. a lichen is a partnership of fungus and alga."
    );
    let mut chunks = vec![
        chunk(1, 1, "/", en, "", &long),
        chunk(2, 2, "/", en, "", "lichen on the old wall"),
    ];
    for n in 3..12 {
        chunks.push(chunk(n, n as u128, "/", en, "", filler));
    }
    index.apply(replace_ops(chunks), 1)?;
    let ranked = |k1: f64| -> Result<Vec<i64>, Box<dyn std::error::Error>> {
        let q = KeywordQuery {
            bm25: Bm25::with_k1(k1)?,
            ..query("lichen", &[SPACE_A])
        };
        Ok(ids(&index.search(&q)?))
    };
    // Tantivy's k1 1.2 (b 0.75): the long passage pays for its length.
    assert_eq!(ranked(1.2)?, [2, 1]);
    // k1 0.35 (b 0.14): three mentions count for more than one, and length
    // hardly matters.
    assert_eq!(ranked(0.35)?, [1, 2]);
    Ok(())
}

/// Whatever k1, a short page is the head of the whole list: no passage is
/// skipped that belongs on it. Tantivy prunes blocks of 128 postings by an
/// entry chosen under its own k1 and b when the block was written, which
/// bounds the block's scores only under those, so under another k1 the
/// search scores every match instead. The passages are built so that the
/// entry kept for a block under k1 1.2 (a short passage naming the word
/// once) is not the block's best under a low k1 (long passages naming it
/// twenty or thirty times), with more than a page of those in the first
/// blocks and better ones in later blocks.
#[test]
fn every_k1_gives_the_best_passages_of_the_whole_list() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let en = Some("en");
    let long = |mentions: usize| {
        format!(
            "{} {}",
            "lichen ".repeat(mentions),
            "moss fern rock ridge ".repeat(70)
        )
    };
    let (early, late) = (long(20), long(30));
    let chunks = (0..3000i64)
        .map(|i| {
            let text = match i {
                0..40 => early.as_str(),
                _ if i >= 512 && i % 97 == 0 => late.as_str(),
                _ => "lichen on rock",
            };
            chunk(i + 1, (i + 1) as u128, "/", en, "", text)
        })
        .collect();
    index.apply(replace_ops(chunks), 1)?;
    for k1 in [0.35, 0.5, 1.2, 2.5] {
        let q = KeywordQuery {
            bm25: Bm25::with_k1(k1)?,
            ..query("lichen", &[SPACE_A])
        };
        // A window as large as the list cannot prune anything.
        let whole = index.search(&KeywordQuery {
            limit: 3000,
            ..q.clone()
        })?;
        assert_eq!(whole.len(), 3000);
        for limit in [1, 10, 50] {
            let page = index.search(&KeywordQuery { limit, ..q.clone() })?;
            let scores = |hits: &[KeywordHit]| hits.iter().map(|h| h.score).collect::<Vec<_>>();
            assert_eq!(
                scores(&page),
                scores(&whole[..limit]),
                "k1 {k1}, limit {limit}"
            );
        }
    }
    Ok(())
}

#[test]
fn more_matching_words_rank_higher() -> TestResult {
    let index = corpus_index()?;
    let hits = index.search(&query("vacuum process background", &[SPACE_A]))?;
    assert_eq!(ids(&hits).first(), Some(&2));
    Ok(())
}

#[test]
fn a_selective_filter_still_fills_the_page() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    // 1000 strong matches in space B, 25 weak ones in space A.
    let mut chunks = Vec::new();
    for i in 0..1000 {
        chunks.push(ChunkDoc {
            space_id: SPACE_B,
            ..chunk(
                10_000 + i,
                10_000 + i as u128,
                "/b",
                Some("en"),
                "lorem",
                "lorem lorem lorem",
            )
        });
    }
    for i in 0..25 {
        let text = format!("lorem ipsum dolor sit amet number {i} with several other words");
        chunks.push(chunk(i, i as u128, "/a", Some("en"), "", &text));
    }
    index.apply(replace_ops(chunks), 1)?;
    let page = |offset: usize| -> Result<Vec<i64>, SearchError> {
        let q = KeywordQuery {
            limit: 10,
            offset,
            ..query("lorem", &[SPACE_A])
        };
        Ok(ids(&index.search(&q)?))
    };
    let (first, second, third) = (page(0)?, page(10)?, page(20)?);
    assert_eq!((first.len(), second.len(), third.len()), (10, 10, 5));
    let mut all: Vec<i64> = [first, second, third].concat();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..25).collect::<Vec<_>>(),
        "pages overlap or miss chunks"
    );
    assert!(page(25)?.is_empty());
    Ok(())
}

#[test]
fn oversized_windows_are_refused_and_empty_limits_return_nothing() -> TestResult {
    let index = corpus_index()?;
    let q = KeywordQuery {
        limit: MAX_WINDOW,
        offset: 1,
        ..query("vacuum", &[SPACE_A])
    };
    match index.search(&q) {
        Err(e @ SearchError::WindowTooLarge(_)) => assert!(e.to_string().contains("10001"), "{e}"),
        other => panic!("expected a window error, got {other:?}"),
    }
    let q = KeywordQuery {
        limit: usize::MAX,
        offset: usize::MAX,
        ..query("vacuum", &[SPACE_A])
    };
    assert!(index.search(&q).is_err());
    let q = KeywordQuery {
        limit: 0,
        ..query("vacuum", &[SPACE_A])
    };
    assert!(index.search(&q)?.is_empty());
    Ok(())
}

fn alpha_doc(ids: &[i64], text: &str) -> IndexOp {
    IndexOp::ReplaceDocument {
        document_id: doc(7),
        chunks: ids
            .iter()
            .map(|&id| chunk(id, 7, "/a", Some("en"), "", text))
            .collect(),
    }
}

#[test]
fn replacing_a_document_removes_its_old_chunks() -> TestResult {
    let index = corpus_index()?;
    let before = index.num_chunks();
    index.apply(vec![alpha_doc(&[100, 101, 102], "alpha")], 2)?;
    assert_eq!(
        search_ids(&index, &query("alpha", &[SPACE_A])),
        [100, 101, 102]
    );
    assert_eq!(index.num_chunks(), before + 3);

    // Fewer chunks than before: the surplus must not linger.
    index.apply(vec![alpha_doc(&[100], "alpha beta")], 3)?;
    assert_eq!(search_ids(&index, &query("alpha", &[SPACE_A])), [100]);
    assert_eq!(search_ids(&index, &query("beta", &[SPACE_A])), [100]);
    assert_eq!(index.num_chunks(), before + 1);

    // New chunk ids replace the old ones entirely.
    index.apply(vec![alpha_doc(&[200, 201], "gamma")], 4)?;
    assert_eq!(
        search_ids(&index, &query("alpha gamma", &[SPACE_A])),
        [200, 201]
    );

    // Replacing with no chunks empties the document.
    index.apply(vec![alpha_doc(&[], "")], 5)?;
    assert!(search_ids(&index, &query("alpha gamma", &[SPACE_A])).is_empty());
    assert_eq!(index.num_chunks(), before);
    Ok(())
}

#[test]
fn deleted_documents_are_never_returned() -> TestResult {
    let index = corpus_index()?;
    index.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(1),
        }],
        2,
    )?;
    let check = |text: &str, expected: &[i64]| {
        assert_eq!(
            search_ids(&index, &query(text, &[SPACE_A])),
            expected,
            "query {text:?}"
        );
    };
    check("table vacuum", &[21, 22]);
    let named = KeywordQuery {
        document_ids: Some(vec![doc(1)]),
        ..query("table vacuum", &[SPACE_A])
    };
    assert!(index.search(&named)?.is_empty());
    // Deleting what is not there is harmless.
    index.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(999),
        }],
        3,
    )?;
    assert_eq!(index.num_chunks(), corpus().len() as u64 - 2);
    Ok(())
}

#[test]
fn ops_in_one_batch_apply_in_order() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let delete = IndexOp::DeleteDocument {
        document_id: doc(7),
    };
    index.apply(vec![alpha_doc(&[1], "alpha"), delete.clone()], 1)?;
    assert!(search_ids(&index, &query("alpha", &[SPACE_A])).is_empty());
    index.apply(vec![delete, alpha_doc(&[1], "alpha")], 2)?;
    assert_eq!(search_ids(&index, &query("alpha", &[SPACE_A])), [1]);
    index.apply(vec![alpha_doc(&[2], "alpha"), alpha_doc(&[3], "alpha")], 3)?;
    assert_eq!(search_ids(&index, &query("alpha", &[SPACE_A])), [3]);
    Ok(())
}

#[test]
fn replaying_a_batch_changes_nothing() -> TestResult {
    let index = corpus_index()?;
    let once = index.search(&query("vacuum table running", &[SPACE_A]))?;
    let count = index.num_chunks();
    index.apply(replace_ops(corpus()), 1)?;
    index.apply(replace_ops(corpus()), 1)?;
    assert_eq!(index.num_chunks(), count);
    let again = index.search(&query("vacuum table running", &[SPACE_A]))?;
    assert_eq!(ids(&again), ids(&once));
    Ok(())
}

#[test]
fn a_bad_batch_leaves_nothing_behind() -> TestResult {
    let index = corpus_index()?;
    let count = index.num_chunks();
    let mismatched = IndexOp::ReplaceDocument {
        document_id: doc(8),
        chunks: vec![chunk(300, 9, "/a", None, "", "omega")],
    };
    let err = match index.apply(vec![alpha_doc(&[100], "alpha"), mismatched], 9) {
        Err(e) => e,
        Ok(()) => panic!("a chunk filed under the wrong document was accepted"),
    };
    assert!(err.to_string().contains("chunk 300"), "{err}");
    assert_eq!(index.last_seq()?, 1);
    assert_eq!(index.num_chunks(), count);
    // The next good batch does not carry the failed one along.
    index.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(99),
        }],
        10,
    )?;
    assert!(search_ids(&index, &query("alpha omega", &[SPACE_A])).is_empty());
    assert!(matches!(
        index.apply(vec![], -1),
        Err(SearchError::NegativeSeq(-1))
    ));
    Ok(())
}

#[test]
fn sequence_numbers_follow_commits() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    assert_eq!(index.last_seq()?, 0);
    assert_eq!(index.num_chunks(), 0);
    assert_eq!(index.disk_size_bytes(), 0);
    index.apply(replace_ops(corpus()), 5)?;
    assert_eq!(index.last_seq()?, 5);
    index.apply(vec![], 8)?;
    assert_eq!(index.last_seq()?, 8);
    index.clear(2)?;
    assert_eq!(index.last_seq()?, 2);
    assert_eq!(index.num_chunks(), 0);
    assert!(search_ids(&index, &query("vacuum", &[SPACE_A, SPACE_B])).is_empty());
    Ok(())
}

#[test]
fn searches_see_whole_batches_only() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let generation = |g: i64| IndexOp::ReplaceDocument {
        document_id: doc(1),
        chunks: (0..20)
            .map(|i| chunk(g * 100 + i, 1, "/", Some("en"), "", "marker text"))
            .collect(),
    };
    index.apply(vec![generation(0)], 1)?;
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (index, stop) = (index.clone(), stop.clone());
            std::thread::spawn(move || -> Result<usize, SearchError> {
                let mut searches = 0;
                while !stop.load(Ordering::Relaxed) {
                    let ids = ids(&index.search(&query("marker", &[SPACE_A]))?);
                    let generations: std::collections::BTreeSet<i64> =
                        ids.iter().map(|id| id / 100).collect();
                    assert_eq!(ids.len(), 20, "a search saw {} chunks: {ids:?}", ids.len());
                    assert_eq!(
                        generations.len(),
                        1,
                        "a search saw a half-applied batch: {ids:?}"
                    );
                    searches += 1;
                }
                Ok(searches)
            })
        })
        .collect();
    for g in 1..=30 {
        index.apply(vec![generation(g)], g + 1)?;
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let searches = reader.join().map_err(|_| "a reader thread panicked")??;
        assert!(searches > 0);
    }
    assert_eq!(
        search_ids(&index, &query("marker", &[SPACE_A])).first(),
        Some(&3000)
    );
    Ok(())
}

/// When the caller's spaces hold every chunk and BM25 is Tantivy's own
/// (k1 1.2), the space filter is left out (so common words can be pruned);
/// the answer must score as the filtered search does, and a chunk of
/// another space, live or deleted, must never reach a caller of space A
/// alone.
#[test]
fn a_search_over_every_space_ranks_as_the_filtered_one() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let en = Some("en");
    let mut chunks = Vec::new();
    for i in 0..300i64 {
        let extra = if i % 7 == 0 { " vacuum vacuum" } else { "" };
        let text = format!("the table of the server {i} and the rows{extra}");
        chunks.push(chunk(i + 1, (i / 3 + 1) as u128, "/m", en, "Notes", &text));
    }
    index.apply(replace_ops(chunks), 1)?;
    let all = KeywordQuery {
        bm25: Bm25::with_k1(1.2)?,
        ..query("the vacuum of the table", &[SPACE_A])
    };
    // A source filter that admits everything forces the filtered path.
    let filtered = KeywordQuery {
        source_ids: Some(vec![SOURCE_1]),
        ..all.clone()
    };
    // Every match with its score, through the filter.
    let every: std::collections::HashMap<i64, f32> = index
        .search(&KeywordQuery {
            limit: 1000,
            ..filtered.clone()
        })?
        .iter()
        .map(|h| (h.chunk_id, h.score))
        .collect();
    for limit in [1, 5, 10, 50] {
        let unfiltered = index.search(&KeywordQuery {
            limit,
            ..all.clone()
        })?;
        let expected = index.search(&KeywordQuery {
            limit,
            ..filtered.clone()
        })?;
        // The same scores page by page (chunks that tie may trade places),
        // each hit a match the filtered search scores the same.
        assert_eq!(unfiltered.len(), limit);
        assert_eq!(expected.len(), limit);
        for (a, b) in unfiltered.iter().zip(&expected) {
            assert!((a.score - b.score).abs() < 1e-4, "{a:?} against {b:?}");
            let through_filter = every[&a.chunk_id];
            assert!((a.score - through_filter).abs() < 1e-4, "{a:?}");
        }
    }
    // Another space's chunk, then the same chunk deleted: neither is ever
    // returned to a caller of space A alone.
    let other = ChunkDoc {
        space_id: SPACE_B,
        ..chunk(1000, 1000, "/m", en, "Notes", "vacuum vacuum vacuum table")
    };
    index.apply(replace_ops(vec![other]), 2)?;
    assert!(!ids(&index.search(&all)?).contains(&1000));
    assert!(ids(&index.search(&query("vacuum", &[SPACE_A, SPACE_B]))?).contains(&1000));
    index.apply(
        vec![IndexOp::DeleteDocument {
            document_id: doc(1000),
        }],
        3,
    )?;
    assert!(!ids(&index.search(&query("vacuum", &[SPACE_A, SPACE_B]))?).contains(&1000));
    Ok(())
}

/// A document's title is searched with every one of its chunks, so a
/// passage deep in "Replication" is found for "replication", but a word in
/// a passage's own text still outweighs the same word in a title.
#[test]
fn a_documents_title_counts_for_each_chunk_below_its_text() -> TestResult {
    let index = KeywordIndex::in_memory()?;
    let titled = |id: i64, document: u128, title: &str, text: &str| ChunkDoc {
        title: title.to_owned(),
        ..chunk(id, document, "/", Some("en"), "", text)
    };
    let chunks = vec![
        titled(1, 1, "Replication", "setup of streaming standby servers"),
        titled(2, 1, "Replication", "monitoring how far the standby lags"),
        titled(3, 2, "Backups", "replication is not a backup"),
        titled(4, 3, "Backups", "point in time recovery"),
    ];
    index.apply(replace_ops(chunks), 1)?;
    let hits = ids(&index.search(&query("replicated", &[SPACE_A]))?);
    assert_eq!(hits.first(), Some(&3), "{hits:?}");
    let mut rest = hits[1..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, [1, 2]);
    Ok(())
}
