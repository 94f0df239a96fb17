//! What every request handler shares.

use std::sync::Arc;

use data_plane_ingest::pipeline::Pipeline;
use data_plane_search::KeywordIndex;
use data_plane_store::Db;

use crate::auth::JwtKeys;

#[derive(Clone, Debug)]
pub struct AppState {
    pub db: Db,
    pub index: KeywordIndex,
    pub pipeline: Arc<Pipeline>,
    pub jwt: JwtKeys,
}
