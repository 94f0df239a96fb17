//! Who may do what in a space. The database holds the same rules as
//! row-level security and membership functions (migrations/0013); these
//! checks answer first, with a clear status and message, and keep a refused
//! request from doing any work.
//!
//! | role   | read | upload, sources, delete documents | delete space, manage members |
//! |--------|------|-----------------------------------|------------------------------|
//! | viewer | yes  | no                                | no                           |
//! | editor | yes  | yes                               | no                           |
//! | owner  | yes  | yes                               | yes                          |
//!
//! A guest (the permission level) only ever reads, whatever their role.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::listen::{Heard, Subscription};
use data_plane_store::{Db, Scope, StoreError};
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The caller's role in the space, or 404 when they are not a member (so a
/// stranger learns nothing about which ids exist). Read from the cached
/// identity; a space missing from it is looked up afresh before the answer
/// is no, so a membership just granted on another replica counts at once.
pub async fn space_role(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<MembershipRole, ApiError> {
    role_in(state, caller, space_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("space {space_id} not found")))
}

/// The caller's role in the space, `None` when they are not a member: from
/// the cached identity, and for a space missing from it, afresh.
pub async fn role_in(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<Option<MembershipRole>, ApiError> {
    let cached = state.identities.get(caller.user_id).await?;
    if let Some(role) = cached.as_ref().and_then(|i| i.roles.get(&space_id)) {
        return Ok(Some(*role));
    }
    state.identities.forget(caller.user_id);
    let fresh = state.identities.get(caller.user_id).await?;
    Ok(fresh.and_then(|i| i.roles.get(&space_id).copied()))
}

/// Refuses guests, who never write.
pub fn require_not_guest(caller: &Caller) -> Result<(), ApiError> {
    if caller.permission <= Permission::Guest {
        return Err(ApiError::forbidden(
            "guests can read but not change anything",
        ));
    }
    Ok(())
}

/// Editors and owners change a space's content.
pub fn require_editor(caller: &Caller, role: MembershipRole) -> Result<(), ApiError> {
    require_not_guest(caller)?;
    if role.rank() < MembershipRole::Editor.rank() {
        return Err(ApiError::forbidden(
            "viewers cannot change this space (editors and owners can)",
        ));
    }
    Ok(())
}

/// Owners delete the space and manage its members.
pub fn require_owner(caller: &Caller, role: MembershipRole) -> Result<(), ApiError> {
    require_not_guest(caller)?;
    if role != MembershipRole::Owner {
        return Err(ApiError::forbidden(format!(
            "only the space's owners can do this (you are {})",
            role.as_str()
        )));
    }
    Ok(())
}

/// The channel migration 0014's triggers notify with a user's id whenever
/// their permission, token version or memberships change.
pub const IDENTITY_CHANNEL: &str = "data_plane_identity";

/// How long a replica trusts what it read about a user when no notification
/// says otherwise. Notifications make a change visible at once; this bounds
/// the time one that was missed (a dropped listener connection) can matter.
pub const IDENTITY_TTL: Duration = Duration::from_secs(1);

/// Entries kept before expired ones are swept out.
const PRUNE_AT: usize = 4096;

/// What the database says about a user now.
#[derive(Debug, Clone)]
pub struct Identity {
    pub permission: Permission,
    pub token_version: i32,
    pub roles: HashMap<Uuid, MembershipRole>,
}

/// Each user's identity, read from PostgreSQL and cached per replica for at
/// most [`IDENTITY_TTL`]; a notification on [`IDENTITY_CHANNEL`] drops a
/// user's entry at once.
#[derive(Debug)]
pub struct Identities {
    db: Db,
    ttl: Duration,
    entries: Mutex<HashMap<Uuid, (Instant, Arc<Identity>)>>,
    /// Bumped by every invalidation, so a read that raced with one is not
    /// cached (it may predate the change).
    generation: AtomicU64,
}

impl Identities {
    pub fn new(db: Db) -> Identities {
        Identities {
            db,
            ttl: IDENTITY_TTL,
            entries: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// The user's identity; `None` when there is no such user.
    pub async fn get(&self, user: Uuid) -> Result<Option<Arc<Identity>>, StoreError> {
        let cached = self
            .lock()
            .get(&user)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, identity)| identity.clone());
        if cached.is_some() {
            return Ok(cached);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let started = Instant::now();
        let mut tx = self.db.begin(Scope::User(user)).await?;
        let found = identity::identity(&mut tx, user).await?;
        tx.commit().await.map_err(StoreError::from)?;
        let Some((permission, token_version, roles)) = found else {
            self.lock().remove(&user);
            return Ok(None);
        };
        let identity = Arc::new(Identity {
            permission,
            token_version,
            roles: roles.into_iter().collect(),
        });
        let mut entries = self.lock();
        if self.generation.load(Ordering::Acquire) == generation {
            if entries.len() >= PRUNE_AT {
                let ttl = self.ttl;
                entries.retain(|_, (at, _)| at.elapsed() < ttl);
            }
            entries.insert(user, (started, identity.clone()));
        }
        Ok(Some(identity))
    }

    /// Drops what is cached about one user.
    pub fn forget(&self, user: Uuid) {
        let mut entries = self.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(&user);
    }

    /// Drops everything cached.
    pub fn forget_all(&self) {
        let mut entries = self.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, (Instant, Arc<Identity>)>> {
        // A panic while holding the lock leaves a map that is still valid.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Listens on [`IDENTITY_CHANNEL`] until the cache is dropped,
    /// dropping each notified user's entry; after each (re)connection, when
    /// some may have been missed, everything cached is dropped.
    pub fn listen(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut subscription = Subscription::new(&self.db, IDENTITY_CHANNEL);
        tokio::spawn(async move {
            loop {
                let heard = subscription.next().await;
                let Some(identities) = weak.upgrade() else {
                    return;
                };
                match heard {
                    Heard::Notified(payload) => match payload.parse::<Uuid>() {
                        Ok(user) => identities.forget(user),
                        Err(_) => identities.forget_all(),
                    },
                    Heard::Missed => identities.forget_all(),
                }
            }
        })
    }
}
