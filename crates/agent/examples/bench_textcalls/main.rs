//! Throughput of the text tool-call parser on a long reply with calls, now
//! and, with the `bench-baseline` feature, before the Mistral, Llama, Python
//! and schema-typed forms. The old parser is not in the tree:
//! `benches/textcalls.sh` takes it (`old.rs`, `old/body.rs`) from the commit
//! that last held it and builds this example with the feature.
//!
//! The reply mixes what the common case looks like: paragraphs of prose
//! (with `<`, `[` and `{` here and there, footnotes and lists at line
//! starts), `<tool_call>` JSON calls, `<function=>` calls and bare call
//! arrays, each form the old parser also reads, so both do the same work.
//! Each parser reads it whole and streamed in 16-byte deltas, the parsers
//! in turn within every round; the best round of each counts. Before timing,
//! both readings are checked to give the same text and the same calls.
//!
//! Usage: bench_textcalls [MEGABYTES] [ROUNDS]

// Not in the tree (benches/textcalls.sh puts it here for a run), so
// rustfmt, which reads every module file, is told to leave it alone.
#[cfg(feature = "bench-baseline")]
#[rustfmt::skip]
mod old;

use std::time::{Duration, Instant};

use data_plane_agent::textcalls::{Segment, StreamParser};
use serde_json::{Value, json};

const TOOLS: [&str; 3] = ["search_documents", "read_document", "web_search"];

fn reply(size: usize) -> String {
    let paragraph = "Vacuuming reclaims storage held by dead tuples; if a < b and the \
        table is large, run it [1] more often. The map {a: 1} is a set-up detail.\n\
        - first point about autovacuum\n[2] PostgreSQL manual, chapter 25.\n\n";
    let calls = [
        "<tool_call>\n{\"name\": \"search_documents\", \"arguments\": {\"query\": \"vacuum full\", \"limit\": 5}}\n</tool_call>\n",
        "<function=read_document>\n<parameter=document_id>\n1f0c-77\n</parameter>\n<parameter=start>\n200\n</parameter>\n</function>\n",
        "[{\"name\": \"web_search\", \"arguments\": {\"query\": \"postgres bloat\"}}]\n",
    ];
    let mut out = String::with_capacity(size + 1024);
    let mut n = 0;
    while out.len() < size {
        for _ in 0..3 {
            out.push_str(paragraph);
        }
        out.push_str(calls[n % calls.len()]);
        n += 1;
    }
    out
}

fn schemas() -> Vec<(String, Value)> {
    TOOLS
        .iter()
        .map(|name| {
            let schema = json!({"type": "object", "properties": {
                "query": {"type": "string"}, "limit": {"type": "integer"},
                "document_id": {"type": "string"}, "start": {"type": "integer"}}});
            (name.to_string(), schema)
        })
        .collect()
}

fn new_calls(input: &str, delta: usize, typed: bool) -> usize {
    let mut parser = if typed {
        StreamParser::new(Vec::new()).schemas(schemas())
    } else {
        StreamParser::new(TOOLS.iter().map(|s| s.to_string()).collect())
    };
    let mut calls = 0;
    let mut count = |segments: Vec<Segment>| {
        calls += segments
            .iter()
            .filter(|s| matches!(s, Segment::Call(_)))
            .count();
    };
    for chunk in chunks(input, delta) {
        count(parser.push(chunk));
    }
    count(parser.finish());
    calls
}

#[cfg(feature = "bench-baseline")]
fn old_calls(input: &str, delta: usize) -> usize {
    let names: Vec<String> = TOOLS.iter().map(|s| s.to_string()).collect();
    let mut parser = old::StreamParser::new(names);
    let mut calls = 0;
    let mut count = |segments: Vec<old::Segment>| {
        calls += segments
            .iter()
            .filter(|s| matches!(s, old::Segment::Call(_)))
            .count();
    };
    for chunk in chunks(input, delta) {
        count(parser.push(chunk));
    }
    count(parser.finish());
    calls
}

fn chunks(input: &str, delta: usize) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= input.len() {
            return None;
        }
        let mut end = (at + delta).min(input.len());
        while !input.is_char_boundary(end) {
            end += 1;
        }
        let piece = &input[at..end];
        at = end;
        Some(piece)
    })
}

/// Reads of the same reply by each parser, taken in turn in every round so
/// that a change in the machine's load touches all alike; the best round
/// of each counts.
fn best_of(rounds: usize, runs: &[&dyn Fn() -> usize]) -> (Vec<Duration>, Vec<usize>) {
    let mut best = vec![Duration::MAX; runs.len()];
    let mut calls = vec![0; runs.len()];
    for _ in 0..rounds {
        for (k, run) in runs.iter().enumerate() {
            let started = Instant::now();
            calls[k] = std::hint::black_box(run());
            best[k] = best[k].min(started.elapsed());
        }
    }
    (best, calls)
}

/// What a parser made of the reply: its text, and its calls as
/// `name arguments` lines.
#[cfg(feature = "bench-baseline")]
fn outcome_new(input: &str, delta: usize) -> (String, Vec<String>) {
    let mut parser = StreamParser::new(Vec::new()).schemas(schemas());
    let (mut text, mut calls) = (String::new(), Vec::new());
    let mut take = |segments: Vec<Segment>| {
        for segment in segments {
            match segment {
                Segment::Text(t) => text.push_str(&t),
                Segment::Call(c) => calls.push(format!("{} {}", c.name, c.arguments)),
                Segment::Malformed { raw, reason } => {
                    calls.push(format!("malformed {reason}: {raw}"))
                }
                // The bench gives the parser no tags.
                Segment::Tag(tag) => calls.push(format!("tag {}", tag.line)),
            }
        }
    };
    for chunk in chunks(input, delta) {
        take(parser.push(chunk));
    }
    take(parser.finish());
    (text, calls)
}

#[cfg(feature = "bench-baseline")]
fn outcome_old(input: &str, delta: usize) -> (String, Vec<String>) {
    let mut parser = old::StreamParser::new(TOOLS.iter().map(|s| s.to_string()).collect());
    let (mut text, mut calls) = (String::new(), Vec::new());
    let mut take = |segments: Vec<old::Segment>| {
        for segment in segments {
            match segment {
                old::Segment::Text(t) => text.push_str(&t),
                old::Segment::Call(c) => calls.push(format!("{} {}", c.name, c.arguments)),
                old::Segment::Malformed { raw, reason } => {
                    calls.push(format!("malformed {reason}: {raw}"))
                }
            }
        }
    };
    for chunk in chunks(input, delta) {
        take(parser.push(chunk));
    }
    take(parser.finish());
    (text, calls)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let megabytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let input = reply(megabytes << 20);
    let mb = input.len() as f64 / (1u64 << 20) as f64;
    println!("reply: {mb:.1} MiB, best of {rounds} rounds (MB/s are MiB per second)");
    for (label, delta) in [("whole", input.len()), ("16-byte deltas", 16)] {
        let typed = || new_calls(&input, delta, true);
        let untyped = || new_calls(&input, delta, false);
        #[cfg(feature = "bench-baseline")]
        let old = || {
            assert!(
                outcome_old(&input, delta) == outcome_new(&input, delta),
                "both parsers read the reply alike ({label})"
            );
            old_calls(&input, delta)
        };
        #[cfg(feature = "bench-baseline")]
        let runs: &[&dyn Fn() -> usize] = &[&typed, &untyped, &old];
        #[cfg(not(feature = "bench-baseline"))]
        let runs: &[&dyn Fn() -> usize] = &[&typed, &untyped];
        let (best, calls) = best_of(rounds, runs);
        let rate = |d: Duration| mb / d.as_secs_f64();
        let (after, untyped) = (rate(best[0]), rate(best[1]));
        match best.get(2) {
            Some(&before) => {
                assert_eq!(calls[0], calls[2], "both parsers find the same calls");
                println!(
                    "{label:>15}: before {:7.1} MB/s, after {after:7.1} MB/s, after/before {:.2} \
                     ({} calls; after without schemas {untyped:7.1} MB/s)",
                    rate(before),
                    after / rate(before),
                    calls[0],
                );
            }
            None => println!(
                "{label:>15}: {after:7.1} MB/s ({} calls; without schemas {untyped:7.1} MB/s)",
                calls[0],
            ),
        }
    }
}
