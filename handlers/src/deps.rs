//! What handlers need from the rest of the server, and the scoping helpers
//! every handler uses so no read escapes the caller's spaces.

use std::sync::Arc;

use data_plane_embed::Embedder;
use data_plane_registry::{ToolContext, ToolError};
use data_plane_search::KeywordIndex;
use data_plane_store::{Db, Scope, ScopedTx};
use data_plane_web::fetch::Fetcher;
use data_plane_web::search::WebSearch;
use uuid::Uuid;

/// Shared services, built once at start-up.
pub struct Deps {
    pub db: Db,
    pub index: KeywordIndex,
    pub embedder: Arc<Embedder>,
    /// Fetches web pages behind the SSRF guard (fetch_web_page).
    pub fetcher: Arc<Fetcher>,
    /// The web-search providers the deployment configured (possibly none).
    pub web_search: WebSearch,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").finish_non_exhaustive()
    }
}

/// Logs an internal failure and gives the model a message it can act on,
/// without SQL or stack details.
pub fn internal(tool: &str, error: impl std::fmt::Display) -> ToolError {
    tracing::error!(tool, %error, "tool failed");
    ToolError::unavailable(format!(
        "{tool} could not reach its data just now; try again shortly"
    ))
}

impl Deps {
    /// A transaction acting for the caller: row-level security limits every
    /// read to the spaces they belong to.
    pub async fn read(&self, tool: &str, ctx: &ToolContext) -> Result<ScopedTx, ToolError> {
        self.db
            .begin(Scope::User(ctx.user_id))
            .await
            .map_err(|e| internal(tool, e))
    }

    /// The spaces a call covers: the context's space when set (refused when
    /// the caller is not a member), else every space the caller may read.
    pub async fn spaces(
        &self,
        tool: &str,
        tx: &mut ScopedTx,
        ctx: &ToolContext,
    ) -> Result<Vec<Uuid>, ToolError> {
        let readable: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM spaces ORDER BY id")
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| internal(tool, e))?;
        match ctx.space_id {
            None => Ok(readable),
            Some(id) if readable.contains(&id) => Ok(vec![id]),
            Some(id) => Err(ToolError::not_found(format!(
                "space {id} does not exist or the caller is not a member of it"
            ))),
        }
    }
}
