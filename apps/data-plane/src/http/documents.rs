//! Spaces, sources and documents: create, upload (multipart), list, delete.

use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use data_plane_ingest::pipeline::{FileReport, Target};
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::{Scope, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{Json, Path, Query};
use crate::access::{require_editor, require_owner, space_role};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSpace {
    name: String,
    #[serde(default)]
    description: String,
}

pub async fn create_space(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateSpace>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if caller.permission < Permission::User {
        return Err(ApiError::forbidden("guests cannot create spaces"));
    }
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::bad_request("name must be 1 to 200 characters"));
    }
    // Creating a space is done as the system: the caller is not a member of it
    // until the membership below exists.
    let mut tx = state.db.begin(Scope::System).await?;
    if identity::space_by_name(&mut tx, name).await?.is_some() {
        return Err(ApiError::conflict(format!("a space named {name:?} exists")));
    }
    let (space, _) = identity::ensure_space(&mut tx, name).await?;
    identity::describe_space(&mut tx, space.id, &body.description, caller.user_id).await?;
    identity::add_member(&mut tx, space.id, caller.user_id, MembershipRole::Owner).await?;
    tx.commit().await?;
    state.identities.forget(caller.user_id);
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": space.id, "name": space.name, "description": body.description })),
    ))
}

pub async fn list_spaces(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let spaces = identity::list_spaces(&mut tx).await?;
    Ok(Json(json!({ "spaces": spaces })))
}

pub async fn delete_space(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    require_owner(&caller, space_role(&state, &caller, space_id).await?)?;
    // As the caller: row-level security admits the space's owners only.
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    if !identity::delete_space(&mut tx, space_id).await? {
        return Err(ApiError::forbidden("only the space's owners can delete it"));
    }
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSource {
    name: String,
    #[serde(default = "default_kind")]
    kind: SourceKind,
}

fn default_kind() -> SourceKind {
    SourceKind::Upload
}

pub async fn create_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
    Json(body): Json<CreateSource>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    require_editor(&caller, space_role(&state, &caller, space_id).await?)?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let source = content::ensure_source(&mut tx, space_id, &body.name, body.kind).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(json!(source))))
}

pub async fn list_sources(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
) -> Result<Json<Value>, ApiError> {
    space_role(&state, &caller, space_id).await?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let sources = content::list_sources(&mut tx, space_id).await?;
    Ok(Json(json!({ "sources": sources })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    source_id: Option<Uuid>,
    #[serde(default = "default_limit")]
    limit: i64,
    #[serde(default)]
    offset: i64,
}

fn default_limit() -> i64 {
    100
}

pub async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    Path(space_id): Path<Uuid>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    if !(1..=1000).contains(&q.limit) || q.offset < 0 {
        return Err(ApiError::bad_request(
            "limit must be 1 to 1000 and offset not negative",
        ));
    }
    space_role(&state, &caller, space_id).await?;
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let docs =
        content::list_documents(&mut tx, space_id, q.source_id, q.limit + 1, q.offset).await?;
    let more = docs.len() as i64 > q.limit;
    let docs: Vec<_> = docs.into_iter().take(q.limit as usize).collect();
    Ok(Json(
        json!({ "documents": docs, "has_more": more, "next_offset": more.then_some(q.offset + q.limit) }),
    ))
}

pub async fn delete_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(document_id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
    let space = content::document_space(&mut tx, document_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("document {document_id} not found")))?;
    require_editor(&caller, space_role(&state, &caller, space).await?)?;
    content::delete_document(&mut tx, document_id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Multipart upload into a source: every part with a file name is a file (the
/// file name may carry a relative path, which becomes folders); an optional
/// text part `folder` puts all files under that folder. Each file gets its own
/// result; one bad file does not stop the others.
pub async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    Path(source_id): Path<Uuid>,
    mut multipart: Multipart,
) -> Result<Json<Value>, ApiError> {
    let space_id = {
        let mut tx = state.db.begin(Scope::User(caller.user_id)).await?;
        content::source_space(&mut tx, source_id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("source {source_id} not found")))?
    };
    require_editor(&caller, space_role(&state, &caller, space_id).await?)?;
    let target = Target {
        space_id,
        source_id,
    };

    let mut folder = String::new();
    let mut results = Vec::new();
    let mut failed = 0usize;
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(e, "malformed multipart body"))?
    {
        let Some(file_name) = field.file_name().map(str::to_string) else {
            if field.name() == Some("folder") {
                folder = field
                    .text()
                    .await
                    .map_err(|e| ApiError::bad_request(format!("bad folder field: {e}")))?;
                continue;
            }
            return Err(ApiError::bad_request(format!(
                "unexpected field {:?}: send files as parts with a filename, and optionally a 'folder' text part",
                field.name().unwrap_or("")
            )));
        };
        let bytes = field
            .bytes()
            .await
            .map_err(|e| multipart_error(e, &format!("reading {file_name:?}")))?;
        let path = if folder.trim().is_empty() {
            file_name.clone()
        } else {
            format!("{}/{}", folder.trim(), file_name)
        };
        let path = match content::normalize_path(&path) {
            Ok(p) if !p.is_empty() => p,
            Ok(_) => {
                failed += 1;
                results.push(
                    json!({ "file": file_name, "status": "error", "error": "empty file name" }),
                );
                continue;
            }
            Err(StoreError::Invalid(m)) => {
                failed += 1;
                results.push(json!({ "file": file_name, "status": "error", "error": m }));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match state
            .pipeline
            .ingest_file(Scope::User(caller.user_id), target, &path, &bytes)
            .await
        {
            Ok(report) => results.push(report_json(&file_name, &report)),
            Err(e) if e.is_per_file() => {
                failed += 1;
                results.push(json!({ "file": file_name, "path": path, "status": "error", "error": e.to_string() }));
            }
            Err(e) => return Err(ApiError::internal(&e)),
        }
    }
    if results.is_empty() {
        return Err(ApiError::bad_request("no files in the upload"));
    }
    Ok(Json(json!({ "files": results, "failed": failed })))
}

/// A body cut off at the upload limit is a 413; anything else a malformed request.
fn multipart_error(e: axum::extract::multipart::MultipartError, context: &str) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::payload_too_large(0, super::MAX_UPLOAD_BYTES);
    }
    ApiError::bad_request(format!("{context}: {e}"))
}

fn report_json(file_name: &str, r: &FileReport) -> Value {
    json!({
        "file": file_name,
        "path": r.path,
        "status": r.outcome.as_str(),
        "document_id": r.document_id,
        "chunks": r.chunks,
        "tables": r.tables,
    })
}
