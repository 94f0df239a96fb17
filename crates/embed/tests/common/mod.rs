//! What the local model's test files share.

use data_plane_embed::{EmbedConfig, Embedder, Precision, Provider};
use data_plane_testkit::model_dir;

/// The local model with `batch_size` texts per batch in `precision`.
pub fn embedder_with(batch_size: usize, precision: Precision) -> Embedder {
    let mut config = EmbedConfig::local(model_dir());
    if let Provider::Local {
        batch_size: b,
        precision: p,
        ..
    } = &mut config.provider
    {
        *b = batch_size;
        *p = precision;
    }
    Embedder::from_config(&config).expect("the local model loads (make setup)")
}
