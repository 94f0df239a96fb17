//! Rebuilds the crate when a migration is added or removed: `sqlx::migrate!`
//! watches the files it embeds, but on stable Rust not the folder, so a new
//! file would otherwise be left out of the binary until something else changed.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
