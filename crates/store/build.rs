//! Embeds the migrations: writes `$OUT_DIR/migrations.rs`, a list of
//! `(file name, include_str!(path))` in name order that `src/migrate.rs`
//! turns into sqlx's `Migrator` (what `sqlx::migrate!` did, without the
//! procedural macro and the second copy of sqlx it builds), and rebuilds
//! the crate when a migration is added or changed.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("..").join("..").join("migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("cannot read the migrations in {}: {e}", dir.display()),
    };
    files.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "sql"));
    files.sort();
    let mut out = String::from("&[\n");
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push_str("]\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out_dir.join("migrations.rs"), out) {
        panic!("cannot write migrations.rs: {e}");
    }
}
