//! The all-MiniLM-L6-v2 files `make setup` fetches, and the embedder over them.

use std::path::PathBuf;

/// `DATA_PLANE_MODEL_DIR`, else the repository's `.data/model/all-MiniLM-L6-v2`;
/// panics, saying how to get them, when the model files are not there.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("DATA_PLANE_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.data/model/all-MiniLM-L6-v2")
        });
    assert!(
        dir.join("model.safetensors").is_file(),
        "model files missing in {}: run `make setup` or set DATA_PLANE_MODEL_DIR",
        dir.display()
    );
    dir
}

/// The local embedding model, loaded once per process: loading it is the
/// slowest part of most tests' set-up.
#[cfg(feature = "embed")]
pub fn embedder() -> std::sync::Arc<data_plane_embed::Embedder> {
    use data_plane_embed::{EmbedConfig, Embedder};
    use std::sync::{Arc, OnceLock};

    static EMBEDDER: OnceLock<Arc<Embedder>> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            Arc::new(
                Embedder::from_config(&EmbedConfig::local(model_dir())).unwrap_or_else(|e| {
                    panic!("the local model is needed (run `make setup`): {e}")
                }),
            )
        })
        .clone()
}
