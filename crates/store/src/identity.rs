//! Users, spaces and memberships.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{ScopedTx, StoreError};

/// A user's deployment-wide permission level, lowest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
)]
#[sqlx(type_name = "permission_level", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    Guest,
    User,
    Admin,
    Owner,
}

impl std::str::FromStr for Permission {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        match s.to_ascii_lowercase().as_str() {
            "guest" => Ok(Permission::Guest),
            "user" => Ok(Permission::User),
            "admin" => Ok(Permission::Admin),
            "owner" => Ok(Permission::Owner),
            other => Err(StoreError::Invalid(format!(
                "unknown permission level {other:?} (expected guest, user, admin or owner)"
            ))),
        }
    }
}

/// A member's role inside one space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "membership_role", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum MembershipRole {
    Viewer,
    Editor,
    Owner,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct User {
    pub id: Uuid,
    pub email: String,
    pub display_name: Option<String>,
    pub permission: Permission,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Space {
    pub id: Uuid,
    pub name: String,
    pub description: String,
}

/// Creates the user when missing (system scope), updating the permission when
/// one is given.
pub async fn upsert_user(
    tx: &mut ScopedTx,
    email: &str,
    permission: Option<Permission>,
) -> Result<User, StoreError> {
    let email = email.trim().to_lowercase();
    if !email.contains('@') {
        return Err(StoreError::Invalid(format!(
            "{email:?} is not an email address"
        )));
    }
    let user = sqlx::query_as::<_, User>(
        "INSERT INTO users (email, permission) VALUES ($1, coalesce($2, 'user'::permission_level))
         ON CONFLICT (email) DO UPDATE SET permission = coalesce($2, users.permission)
         RETURNING id, email, display_name, permission",
    )
    .bind(&email)
    .bind(permission)
    .fetch_one(&mut **tx)
    .await?;
    Ok(user)
}

pub async fn user_by_id(tx: &mut ScopedTx, id: Uuid) -> Result<Option<User>, StoreError> {
    Ok(sqlx::query_as::<_, User>(
        "SELECT id, email, display_name, permission FROM users WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Finds a space by name or creates it (system scope).
pub async fn ensure_space(tx: &mut ScopedTx, name: &str) -> Result<(Space, bool), StoreError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(StoreError::Invalid("space name is empty".into()));
    }
    if let Some(space) = space_by_name(tx, name).await? {
        return Ok((space, false));
    }
    let space = sqlx::query_as::<_, Space>(
        "INSERT INTO spaces (name) VALUES ($1) RETURNING id, name, description",
    )
    .bind(name)
    .fetch_one(&mut **tx)
    .await?;
    Ok((space, true))
}

pub async fn space_by_name(tx: &mut ScopedTx, name: &str) -> Result<Option<Space>, StoreError> {
    Ok(
        sqlx::query_as::<_, Space>("SELECT id, name, description FROM spaces WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

pub async fn space_by_id(tx: &mut ScopedTx, id: Uuid) -> Result<Option<Space>, StoreError> {
    Ok(
        sqlx::query_as::<_, Space>("SELECT id, name, description FROM spaces WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// The spaces visible in this transaction's scope, by name.
pub async fn list_spaces(tx: &mut ScopedTx) -> Result<Vec<Space>, StoreError> {
    Ok(
        sqlx::query_as::<_, Space>("SELECT id, name, description FROM spaces ORDER BY name")
            .fetch_all(&mut **tx)
            .await?,
    )
}

/// Adds (or changes) a membership (system scope).
pub async fn add_member(
    tx: &mut ScopedTx,
    space_id: Uuid,
    user_id: Uuid,
    role: MembershipRole,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO memberships (space_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role",
    )
    .bind(space_id)
    .bind(user_id)
    .bind(role)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The role of the scope's user in a space, if a member.
pub async fn membership_role(
    tx: &mut ScopedTx,
    space_id: Uuid,
    user_id: Uuid,
) -> Result<Option<MembershipRole>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT role FROM memberships WHERE space_id = $1 AND user_id = $2")
            .bind(space_id)
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// Deletes a space and everything in it (system scope or space owner).
pub async fn delete_space(tx: &mut ScopedTx, space_id: Uuid) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM spaces WHERE id = $1")
        .bind(space_id)
        .execute(&mut **tx)
        .await?;
    Ok(done.rows_affected() > 0)
}
