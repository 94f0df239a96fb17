//! What every door needs before a tool is listed or run: the call's
//! context (who, where, settings as stored now), the space check, and the
//! agent profile the request may take. Route modules build a ToolContext
//! only through here.

use axum::http::HeaderMap;
use data_plane_registry::ToolContext;
use uuid::Uuid;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The profile of executeTool and the module protocol for services, and
/// the default of the tool list and `/mcp` for a service token.
pub const SERVICE_PROFILE: &str = "service";

/// The profile of `/v1/chat` unless `options.agent` names another, and the
/// default of every other door for a person.
pub const CHAT_PROFILE: &str = "chat";

/// Builds the context of a call: who, where, settings as stored now, the
/// remote modules' tools as fresh as they can be.
pub async fn context(
    state: &AppState,
    caller: &Caller,
    space_id: Option<Uuid>,
    headers: &HeaderMap,
) -> Result<ToolContext, ApiError> {
    // Every door lists or runs tools after this: a remote module whose
    // manifest expired is asked again first.
    state.modules.ensure_fresh().await;
    let settings = state.settings().await?;
    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_string);
    let mut ctx = ToolContext::new(caller.user_id, space_id, caller.permission)
        .with_settings(settings)
        .with_request_id(request_id)
        .with_deployment(state.deployment.now());
    // A call is answered once its audit row is stored: a replica that dies
    // right after answering leaves no call that ran unaudited.
    ctx.audit_first = true;
    Ok(ctx)
}

/// The profile a door uses when the request names none: `service` for a
/// service token, `chat` for a person.
pub fn default_profile(caller: &Caller) -> &'static str {
    if caller.service.is_some() {
        SERVICE_PROFILE
    } else {
        CHAT_PROFILE
    }
}

/// `ctx` under the agent profile `name`. The one rule of every door: a
/// person may take only a profile made for people (`chat: true`), since a
/// profile is what the gate's rules and the audit key on; a service token
/// may take any. An unknown name, or one a person may not take, is a 400
/// naming the field (`field`) and the profiles the caller may choose (a
/// person is never told the names of the others).
pub fn with_profile(
    state: &AppState,
    caller: &Caller,
    ctx: ToolContext,
    name: &str,
    field: &str,
) -> Result<ToolContext, ApiError> {
    if caller.service.is_none() {
        let refusal = match state.registry.profile(name) {
            Some(profile) if profile.spec.chat => None,
            Some(_) => Some(format!("the profile {name:?} is not for people")),
            None => Some(format!("unknown agent profile {name:?}")),
        };
        if let Some(refusal) = refusal {
            // Listed only for a refusal: an accepted request builds nothing.
            let for_people: Vec<&str> = state
                .registry
                .profiles()
                .values()
                .filter(|p| p.spec.chat)
                .map(|p| p.name())
                .collect();
            return Err(ApiError::bad_request(format!(
                "{field}: {refusal}; choose one of {}",
                for_people.join(", ")
            )));
        }
    }
    state
        .registry
        .with_profile(ctx, name)
        .map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

/// Refuses a space the caller cannot read, with the same answer as a
/// missing one. Answered from the caller's cached identity (a space missing
/// from it is looked up afresh first, so a membership just granted on
/// another replica counts at once). What a removal's notification has not
/// reached yet is still refused further in: built-in tools read under
/// row-level security, and a remote module's tool checks the membership in
/// the database before the module is called.
pub async fn require_member(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<(), ApiError> {
    match crate::access::role_in(state, caller, space_id).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!(
            "no space {space_id} among the caller's spaces"
        ))),
    }
}

/// The space, or a refusal when the caller cannot read it, with the same
/// answer as a missing one.
pub async fn check_space(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<data_plane_store::identity::Space, ApiError> {
    let mut tx = state
        .db
        .begin(data_plane_store::Scope::User(caller.user_id))
        .await?;
    let space = data_plane_store::identity::space_by_id(&mut tx, space_id).await?;
    tx.commit()
        .await
        .map_err(data_plane_store::StoreError::from)?;
    match space {
        Some(space) => Ok(space),
        None => Err(ApiError::not_found(format!(
            "no space {space_id} among the caller's spaces"
        ))),
    }
}

/// The space's name and description for the system prompt, or the refusal
/// of a space the caller cannot read.
pub async fn space_facts(
    state: &AppState,
    caller: &Caller,
    space_id: Uuid,
) -> Result<data_plane_agent::prompt::SpaceFacts, ApiError> {
    let space = check_space(state, caller, space_id).await?;
    Ok(data_plane_agent::prompt::SpaceFacts {
        name: space.name,
        description: space.description,
    })
}
