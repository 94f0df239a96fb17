//! Embeds every definition (definitions/*.json) and agent profile
//! (definitions/agents/*.json) into the binary, so a deployed server needs no
//! files beside it, and rebuilds when one is added, removed or changed.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("..").join("definitions");
    let mut out = String::from("&[\n");
    for (folder, prefix) in [
        (dir.clone(), "definitions"),
        (dir.join("agents"), "definitions/agents"),
    ] {
        println!("cargo:rerun-if-changed={}", folder.display());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        // Every file but folders: a stray non-JSON file is the registry's to refuse.
        files.retain(|p| p.is_file());
        files.sort();
        for path in files {
            println!("cargo:rerun-if-changed={}", path.display());
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    (\"{prefix}/{name}\", include_str!({:?})),",
                path.display().to_string()
            );
        }
    }
    out.push(']');
    let target = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("definitions.rs");
    if let Err(e) = std::fs::write(&target, out) {
        panic!("cannot write {}: {e}", target.display());
    }
}
