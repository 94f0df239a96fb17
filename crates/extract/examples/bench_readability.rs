//! Measures readable extraction against the readability fixtures: token
//! precision, recall and F1 per page and on average, metadata agreement per
//! field, and extraction time.
//! Usage: bench_readability FIXTURES_DIR [PAGE] (with PAGE, prints that page's
//! Markdown and metadata instead).

#[path = "../tests/extract_eval/mod.rs"]
mod extract_eval;

use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: bench_readability FIXTURES_DIR")?,
    );
    let dirs = extract_eval::fixture_dirs(&root)
        .map_err(|e| format!("cannot read fixtures at {}: {e}", root.display()))?;
    if let Some(page) = std::env::args().nth(2) {
        let source = std::fs::read_to_string(root.join(&page).join("source.html"))?;
        let out = data_plane_extract::html::readable::extract_html(&source, None);
        println!("{:#?}\n\n{}", out.metadata, out.markdown);
        return Ok(());
    }
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
            "page {:<28} p={:.3} r={:.3} f1={:.3} {}",
            s.name,
            s.precision,
            s.recall,
            s.f1,
            fields.join(" ")
        );
        scores.push(s);
    }
    let elapsed = started.elapsed();
    let sum = extract_eval::summarize(&scores);
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
