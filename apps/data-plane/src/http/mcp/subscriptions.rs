//! Resource subscriptions, where the transport allows them: 2026-07-28's
//! `subscriptions/listen`, a request whose stream stays open. A client
//! names the documents it watches (their URIs, by id or by path) and/or
//! the list of the endpoint's space; while the request is open this
//! replica sends `notifications/resources/updated` for a watched document
//! that is changed, re-ingested or deleted, and
//! `notifications/resources/list_changed` when the space's documents
//! change. What changed comes from the keyword-index follower, which every
//! replica runs, so a change made through any replica reaches every
//! subscriber. Only spaces the caller reads are watched, checked again on
//! every change; a notification carries a URI the client named, nothing
//! more.

use std::collections::HashMap;

use data_plane_store::index_log::LogEntry;
use rmcp::ErrorData as McpError;
use rmcp::model::SubscriptionFilter;
use rmcp::service::SubscriptionContext;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::McpServer;
use super::resources::{Document, Named};
use crate::http::context::require_member;

/// One URI a client watches.
struct Watched {
    uri: String,
    named: Named,
    /// For a URI by path: the document at that path when last looked up.
    at_path: Option<Uuid>,
}

impl McpServer {
    /// What a listen request is granted: the resource URIs of ours among
    /// those asked for, and the list's changes when asked; the tool and
    /// prompt lists never change under a running server's clients.
    pub(super) fn subscription_filter(&self, requested: &SubscriptionFilter) -> SubscriptionFilter {
        let mut granted = SubscriptionFilter::builder();
        if requested.resources_list_changed == Some(true) {
            granted = granted.resources_list_changed();
        }
        let uris = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| Named::parse(uri).is_ok())
            .take(MAX_WATCHED);
        granted.resource_subscriptions(uris.cloned()).build()
    }

    /// Runs one subscription until the client closes it.
    pub(super) async fn listen_for(
        &self,
        subscription: SubscriptionContext,
    ) -> Result<(), McpError> {
        let rq = subscription.request_context();
        let ctx = self.tool_context(rq).await?;
        let caller = super::caller_of(rq)?;
        let _held = ListenPlace::take(&self.state.mcp_listens, caller.user_id).ok_or_else(|| {
            McpError::invalid_request(
                format!(
                    "{MAX_LISTENS} subscriptions of yours are open on this server already; close one first"
                ),
                None,
            )
        })?;
        let mut changes = self.state.document_changes.subscribe();
        let mut watched = Vec::new();
        for uri in subscription
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
        {
            let Ok(named) = Named::parse(uri) else {
                continue;
            };
            // Watched only in the endpoint's space when it names one, as
            // a read is.
            if ctx.space_id.is_some_and(|space| space != named.space) {
                continue;
            }
            let mut entry = Watched {
                uri: uri.clone(),
                named,
                at_path: None,
            };
            entry.at_path = self.look_up(&ctx, &entry).await;
            watched.push(entry);
        }
        let list = subscription.accepted().resources_list_changed == Some(true);
        let sink = subscription.sink().clone();
        loop {
            let batch: Option<std::sync::Arc<[LogEntry]>> = tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                // The server is shutting down: the subscription ends as
                // the protocol says a server ends one, with its result.
                () = self.state.shutdown.cancelled() => return Ok(()),
                got = changes.recv() => match got {
                    Ok(batch) => Some(batch),
                    // Fell behind: anything watched may have changed.
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return Ok(()),
                },
            };
            let touched: HashMap<Uuid, Vec<Uuid>> = match &batch {
                Some(batch) => batch.iter().fold(HashMap::new(), |mut by_space, e| {
                    by_space.entry(e.space_id).or_default().push(e.document_id);
                    by_space
                }),
                None => HashMap::new(),
            };
            let hit = |space: &Uuid| batch.is_none() || touched.contains_key(space);
            // The caller must still read a space to hear of it.
            let mut readable = HashMap::new();
            for space in watched
                .iter()
                .map(|w| w.named.space)
                .chain(ctx.space_id.filter(|_| list))
                .filter(|space| hit(space))
            {
                if let std::collections::hash_map::Entry::Vacant(unknown) = readable.entry(space) {
                    unknown.insert(require_member(&self.state, &caller, space).await.is_ok());
                }
            }
            let reads = |space: &Uuid| readable.get(space).copied().unwrap_or(false);
            if list
                && ctx
                    .space_id
                    .is_some_and(|space| hit(&space) && reads(&space))
            {
                let _ = sink.notify_resource_list_changed().await;
            }
            for entry in &mut watched {
                let space = entry.named.space;
                if !hit(&space) || !reads(&space) {
                    continue;
                }
                let changed = |id: &Uuid| {
                    batch.is_none() || touched.get(&space).is_some_and(|ids| ids.contains(id))
                };
                let updated = match &entry.named.document {
                    Document::Id(id) => changed(id),
                    Document::Path(_) => {
                        let before = entry.at_path;
                        entry.at_path = self.look_up(&ctx, entry).await;
                        before != entry.at_path || before.as_ref().is_some_and(changed)
                    }
                };
                if updated
                    && sink
                        .notify_resource_updated(entry.uri.clone())
                        .await
                        .is_err()
                {
                    return Ok(());
                }
            }
        }
    }

    /// The document a URI by path names now, as the caller may read it.
    async fn look_up(
        &self,
        ctx: &data_plane_registry::ToolContext,
        entry: &Watched,
    ) -> Option<Uuid> {
        let Document::Path(path) = &entry.named.document else {
            return None;
        };
        self.document_at(ctx, entry.named.space, path).await.ok()
    }
}

/// The most URIs one subscription watches (more are not accepted).
const MAX_WATCHED: usize = 100;

/// The most subscriptions one caller keeps open on one replica.
const MAX_LISTENS: usize = 4;

/// One of a caller's open subscriptions, counted while held.
struct ListenPlace<'a> {
    open: &'a std::sync::Mutex<HashMap<Uuid, usize>>,
    user: Uuid,
}

impl<'a> ListenPlace<'a> {
    fn take(open: &'a std::sync::Mutex<HashMap<Uuid, usize>>, user: Uuid) -> Option<Self> {
        let mut counts = open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(user).or_default();
        if *count >= MAX_LISTENS {
            return None;
        }
        *count += 1;
        Some(ListenPlace { open, user })
    }
}

impl Drop for ListenPlace<'_> {
    fn drop(&mut self) {
        let mut counts = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.user);
            }
        }
    }
}
