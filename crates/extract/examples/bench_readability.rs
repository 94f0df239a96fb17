//! Measures readable extraction against fixture sets: token precision,
//! recall and F1 per page and on average, metadata agreement per field, and
//! extraction time; with `--others DIR`, the same scores for the saved output
//! of other extractors (benches/readability_others.py) beside ours.
//! Usage: bench_readability [--others DIR] FIXTURES_DIR [MORE_SETS...]
//!        bench_readability FIXTURES_DIR PAGE (prints that page's Markdown and metadata)
//! The first set prints the `readability_*` figures; every set prints a
//! `set` line per extractor.

#[path = "../tests/extract_eval/mod.rs"]
mod extract_eval;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// Other extractors whose saved output is scored, as readability_others.py names it.
const OTHERS: [&str; 2] = ["readability-lxml", "trafilatura"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let others = match args.iter().position(|a| a == "--others") {
        Some(at) if at + 1 < args.len() => {
            let dir = PathBuf::from(args.remove(at + 1));
            args.remove(at);
            Some(dir)
        }
        Some(_) => return Err("--others needs a directory".into()),
        None => None,
    };
    let root = PathBuf::from(
        args.first()
            .ok_or("usage: bench_readability [--others DIR] FIXTURES_DIR [MORE_SETS...]")?,
    );
    if let Some(page) = args
        .get(1)
        .filter(|p| root.join(p).join("source.html").is_file())
    {
        let bytes = std::fs::read(root.join(page).join("source.html"))?;
        let hints = data_plane_extract::charset::Hints {
            html: true,
            ..Default::default()
        };
        let (source, _) = data_plane_extract::charset::decode(&bytes, hints);
        let out = data_plane_extract::html::readable::extract_html(&source, None);
        println!("{:#?}\n\n{}", out.metadata, out.markdown);
        return Ok(());
    }
    let mut sets = Vec::new();
    for dir in args.iter().map(PathBuf::from) {
        sets.push(score_set(&dir, others.as_deref())?);
    }
    for set in &sets {
        for (tool, sum) in &set.tools {
            println!(
                "set {:<14} {:<18} pages={:<3} p={:.3} r={:.3} f1={:.3}",
                set.name, tool, sum.pages, sum.precision, sum.recall, sum.f1
            );
        }
    }
    let first = &sets[0];
    let dirs = &first.dirs;
    let sum = &first.tools[0].1;
    let elapsed = first.elapsed;
    println!("readability_pages {}", sum.pages);
    println!("readability_precision {:.3}", sum.precision);
    println!("readability_recall {:.3}", sum.recall);
    println!("readability_f1 {:.3}", sum.f1);
    println!("readability_baseline_f1 {:.3}", sum.baseline_f1);
    for (field, agree, total) in &sum.fields {
        let ratio = if *total == 0 {
            0.0
        } else {
            *agree as f64 / *total as f64
        };
        println!("readability_meta_{field} {ratio:.3} ({agree}/{total})");
    }
    println!("readability_total_ms {:.1}", elapsed.as_secs_f64() * 1000.0);
    let bytes: u64 = dirs
        .iter()
        .filter_map(|d| std::fs::metadata(d.join("source.html")).ok())
        .map(|m| m.len())
        .sum();
    println!("readability_source_bytes {bytes}");

    // Hostile nesting: time should grow about linearly with depth.
    for (name, open, close) in [
        ("div", "<div>", "</div>"),
        ("list", "<ul><li>", "</li></ul>"),
        ("quote", "<blockquote>", "</blockquote>"),
    ] {
        for depth in [10_000usize, 100_000] {
            let html = format!(
                "<p>top</p>{}<p>bottom</p>{}",
                open.repeat(depth),
                close.repeat(depth)
            );
            let t = Instant::now();
            let page = data_plane_extract::html::readable::extract_html(&html, None);
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if !page.markdown.contains("bottom") {
                return Err(format!("nested {name} at depth {depth} lost its text").into());
            }
            println!("readability_nested_{name}_{depth}_ms {ms:.1}");
        }
    }
    Ok(())
}

struct SetScores {
    name: String,
    dirs: Vec<PathBuf>,
    /// Ours first, then each other extractor with saved output.
    tools: Vec<(&'static str, extract_eval::Summary)>,
    elapsed: std::time::Duration,
}

fn score_set(root: &Path, others: Option<&Path>) -> Result<SetScores, Box<dyn std::error::Error>> {
    let dirs = extract_eval::fixture_dirs(root)
        .map_err(|e| format!("cannot read fixtures at {}: {e}", root.display()))?;
    let name = extract_eval::dir_name(root);
    let started = Instant::now();
    let mut scores = Vec::new();
    for dir in &dirs {
        let s =
            extract_eval::score_dir(dir).map_err(|e| format!("fixture {}: {e}", dir.display()))?;
        let fields: Vec<String> = s
            .fields
            .iter()
            .map(|(f, a)| format!("{f}={}", a.map_or("-", |a| if a { "ok" } else { "no" })))
            .collect();
        println!(
            "page {:<14} {:<28} p={:.3} r={:.3} f1={:.3} {}",
            name,
            s.name,
            s.precision,
            s.recall,
            s.f1,
            fields.join(" ")
        );
        scores.push(s);
    }
    let elapsed = started.elapsed();
    let mut tools = vec![("data-plane", extract_eval::summarize(&scores))];
    if let Some(others) = others {
        for tool in OTHERS {
            let theirs: Vec<_> = dirs
                .iter()
                .filter_map(|d| {
                    let out = others.join(&name).join(extract_eval::dir_name(d));
                    extract_eval::score_other(d, &out, tool)
                })
                .collect();
            if theirs.len() == dirs.len() {
                tools.push((tool, extract_eval::summarize(&theirs)));
            }
        }
    }
    Ok(SetScores {
        name,
        dirs,
        tools,
        elapsed,
    })
}
