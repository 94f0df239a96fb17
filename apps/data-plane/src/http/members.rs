//! A space's members: every member lists them; owners add (by email),
//! change and remove them; anyone may leave. The last owner can neither
//! leave nor be demoted (409). The database enforces the same rules
//! (migrations/0013), so these routes run as the caller, never as the system.

use axum::extract::State;
use axum::http::StatusCode;
use data_plane_store::Scope;
use data_plane_store::identity::{self, MembershipRole};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{Json, Path};
use crate::access::{require_owner, space_role};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /v1/spaces/{space_id}/members`.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
) -> Result<Json<Value>, ApiError> {
    space_role(&state, &caller, space_id).await?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let members = identity::space_members(&mut tx, space_id).await?;
    tx.commit().await?;
    Ok(Json(json!({ "members": members })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    email: String,
    #[serde(default = "default_role")]
    role: MembershipRole,
}

fn default_role() -> MembershipRole {
    MembershipRole::Viewer
}

/// The member as the list shows them.
async fn member_json(state: &AppState, caller: &Caller, space_id: Uuid, user_id: Uuid) -> Value {
    let found = async {
        let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
        let members = identity::space_members(&mut tx, space_id).await?;
        tx.commit().await?;
        Ok::<_, data_plane_store::StoreError>(members.into_iter().find(|m| m.user_id == user_id))
    }
    .await;
    match found {
        Ok(Some(m)) => json!(m),
        _ => json!({ "user_id": user_id }),
    }
}

/// `POST /v1/spaces/{space_id}/members` `{email, role}` (role defaults to
/// viewer): adds a user who exists; 409 when they are a member already.
pub async fn add(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
    Json(body): Json<AddMember>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    require_owner(&caller, space_role(&state, &caller, space_id).await?)?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let user_id = identity::user_id_by_email(&mut tx, &body.email)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no user with email {:?} (they need an account first)",
                body.email.trim()
            ))
        })?;
    if identity::member_role(&mut tx, space_id, user_id)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "{} is a member already; PUT /v1/spaces/{space_id}/members/{user_id} changes their role",
            body.email.trim()
        )));
    }
    identity::set_member(&mut tx, space_id, user_id, body.role).await?;
    tx.commit().await?;
    state.identities.forget(user_id);
    Ok((
        StatusCode::CREATED,
        Json(member_json(&state, &caller, space_id, user_id).await),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeMember {
    role: MembershipRole,
}

/// `PUT /v1/spaces/{space_id}/members/{user_id}` `{role}`.
pub async fn change(
    State(state): State<AppState>,
    caller: Caller,
    Path((space_id, user_id)): Path<(Uuid, Uuid)>,
    Json(body): Json<ChangeMember>,
) -> Result<Json<Value>, ApiError> {
    require_owner(&caller, space_role(&state, &caller, space_id).await?)?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    if identity::member_role(&mut tx, space_id, user_id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found(format!(
            "user {user_id} is not a member of space {space_id}"
        )));
    }
    identity::set_member(&mut tx, space_id, user_id, body.role).await?;
    tx.commit().await?;
    state.identities.forget(user_id);
    Ok(Json(member_json(&state, &caller, space_id, user_id).await))
}

/// `DELETE /v1/spaces/{space_id}/members/{user_id}`: owners remove anyone;
/// a member removing themselves leaves.
pub async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path((space_id, user_id)): Path<(Uuid, Uuid)>,
) -> Result<StatusCode, ApiError> {
    let role = space_role(&state, &caller, space_id).await?;
    if user_id != caller.user_id {
        require_owner(&caller, role)?;
    }
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    if !identity::remove_member(&mut tx, space_id, user_id).await? {
        return Err(ApiError::not_found(format!(
            "user {user_id} is not a member of space {space_id}"
        )));
    }
    tx.commit().await?;
    state.identities.forget(user_id);
    Ok(StatusCode::NO_CONTENT)
}
