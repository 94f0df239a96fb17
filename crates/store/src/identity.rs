//! Users, spaces and memberships.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{ScopedTx, StoreError};

pub use data_plane_types::Permission;

/// A member's role inside one space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MembershipRole {
    Viewer,
    Editor,
    Owner,
}

crate::pg_enum!(MembershipRole = "membership_role" {
    Viewer = "viewer",
    Editor = "editor",
    Owner = "owner",
});

#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub id: Uuid,
    pub email: String,
    pub display_name: Option<String>,
    pub permission: Permission,
}
crate::from_row!(User {
    id,
    email,
    display_name,
    permission
});

#[derive(Debug, Clone, Serialize)]
pub struct Space {
    pub id: Uuid,
    pub name: String,
    pub description: String,
}
crate::from_row!(Space {
    id,
    name,
    description
});

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

/// Gives a space its description and creator (system scope).
pub async fn describe_space(
    tx: &mut ScopedTx,
    space_id: Uuid,
    description: &str,
    created_by: Uuid,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE spaces SET description = $2, created_by = $3 WHERE id = $1")
        .bind(space_id)
        .bind(description)
        .bind(created_by)
        .execute(&mut **tx)
        .await?;
    Ok(())
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
    .await
    .map_err(|e| StoreError::from(e).classify())?;
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

/// Deletes a space and everything in it (system scope, or a space owner who
/// is not a guest: row-level security leaves it untouched for anyone else).
pub async fn delete_space(tx: &mut ScopedTx, space_id: Uuid) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM spaces WHERE id = $1")
        .bind(space_id)
        .execute(&mut **tx)
        .await
        .map_err(|e| StoreError::from(e).classify())?;
    Ok(done.rows_affected() > 0)
}

/// The level of a user's role in a space, for comparisons: viewer < editor < owner.
impl MembershipRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MembershipRole::Viewer => "viewer",
            MembershipRole::Editor => "editor",
            MembershipRole::Owner => "owner",
        }
    }

    pub fn rank(self) -> u8 {
        match self {
            MembershipRole::Viewer => 0,
            MembershipRole::Editor => 1,
            MembershipRole::Owner => 2,
        }
    }
}

impl std::str::FromStr for MembershipRole {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        match s.to_ascii_lowercase().as_str() {
            "viewer" => Ok(MembershipRole::Viewer),
            "editor" => Ok(MembershipRole::Editor),
            "owner" => Ok(MembershipRole::Owner),
            other => Err(StoreError::Invalid(format!(
                "unknown space role {other:?} (expected viewer, editor or owner)"
            ))),
        }
    }
}

/// One member of a space, as its members see the list.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    pub user_id: Uuid,
    pub email: String,
    pub display_name: Option<String>,
    pub role: MembershipRole,
    pub joined_at: chrono::DateTime<chrono::Utc>,
}
crate::from_row!(Member {
    user_id,
    email,
    display_name,
    role,
    joined_at
});

/// The members of a space, by email; empty unless the scope's user is one.
pub async fn space_members(tx: &mut ScopedTx, space_id: Uuid) -> Result<Vec<Member>, StoreError> {
    Ok(sqlx::query_as::<_, Member>(
        "SELECT user_id, email, display_name, role, joined_at FROM dp_space_members($1)",
    )
    .bind(space_id)
    .fetch_all(&mut **tx)
    .await?)
}

/// The id of the user with this email, for the scope's user to add them to
/// a space.
pub async fn user_id_by_email(tx: &mut ScopedTx, email: &str) -> Result<Option<Uuid>, StoreError> {
    Ok(sqlx::query_scalar("SELECT dp_user_id_by_email($1)")
        .bind(email)
        .fetch_one(&mut **tx)
        .await?)
}

/// Adds a member or changes their role, as the scope's user: the database
/// admits only the space's owners (never guests) and keeps a last owner.
/// Answers the member's previous role (`None` when newly added).
pub async fn set_member(
    tx: &mut ScopedTx,
    space_id: Uuid,
    user_id: Uuid,
    role: MembershipRole,
) -> Result<Option<MembershipRole>, StoreError> {
    sqlx::query_scalar("SELECT dp_set_member($1, $2, $3)")
        .bind(space_id)
        .bind(user_id)
        .bind(role)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| StoreError::from(e).classify())
}

/// Removes a member, as the scope's user: owners remove anyone, everyone
/// may leave, the last owner stays. Answers whether there was such a member.
pub async fn remove_member(
    tx: &mut ScopedTx,
    space_id: Uuid,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    sqlx::query_scalar("SELECT dp_remove_member($1, $2)")
        .bind(space_id)
        .bind(user_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| StoreError::from(e).classify())
}

/// Another member's role in a space, as the scope's user (a member) sees it.
pub async fn member_role(
    tx: &mut ScopedTx,
    space_id: Uuid,
    user_id: Uuid,
) -> Result<Option<MembershipRole>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT role FROM dp_space_members($1) WHERE user_id = $2")
            .bind(space_id)
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// What a request needs to know about its user, read as that user: their
/// permission, token version and role in each of their spaces. `None` when
/// there is no such user.
pub async fn identity(
    tx: &mut ScopedTx,
    user_id: Uuid,
) -> Result<Option<(Permission, i32, Vec<(Uuid, MembershipRole)>)>, StoreError> {
    let Some((permission, version)) = sqlx::query_as::<_, (Permission, i32)>(
        "SELECT permission, token_version FROM users WHERE id = $1",
    )
    .bind(user_id)
    .fetch_optional(&mut **tx)
    .await?
    else {
        return Ok(None);
    };
    let roles = sqlx::query_as("SELECT space_id, role FROM memberships WHERE user_id = $1")
        .bind(user_id)
        .fetch_all(&mut **tx)
        .await?;
    Ok(Some((permission, version, roles)))
}

/// The version a new token of this user carries.
pub async fn token_version(tx: &mut ScopedTx, user_id: Uuid) -> Result<i32, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT token_version FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?
            .unwrap_or(0),
    )
}

/// Makes every token issued to the user so far invalid (system scope);
/// answers the new version, or `None` when there is no such user.
pub async fn revoke_tokens(tx: &mut ScopedTx, email: &str) -> Result<Option<i32>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE users SET token_version = token_version + 1 WHERE email = $1 RETURNING token_version",
    )
    .bind(email.trim().to_lowercase())
    .fetch_optional(&mut **tx)
    .await?)
}

/// Who signed in with an OpenID Connect provider, as its token says.
#[derive(Debug, Clone)]
pub struct ExternalPerson<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    /// Needed only the first time the person is seen.
    pub email: Option<&'a str>,
    /// The provider vouches for the address (`email_verified`, or a
    /// deployment that trusts its provider's addresses).
    pub email_verified: bool,
    /// The permission the provider's role claim maps to.
    pub permission: Permission,
}

/// The user a provider's person is (system scope), and whether their
/// account was made for them by this provider.
///
/// - Linked before (by issuer and subject): that user.
/// - Else, an address the provider vouches for: the account with that
///   email, joined, unless another person of the same provider has it
///   already (refused: two people of one provider never share an
///   account); no such account, a new one with that email.
/// - Else (an address nobody vouches for): a new account under a
///   placeholder address (`oidc-…@unverified.invalid`), so nobody can
///   claim someone else's email here by typing it at a provider; it is
///   never found by the email it claims (added to spaces by its id's
///   placeholder only), and nobody is joined to it by email later.
///
/// An account made for the person follows the provider's permission on
/// every sign-in; an account made here before keeps the permission this
/// server gave it.
pub async fn external_person(
    tx: &mut ScopedTx,
    person: &ExternalPerson<'_>,
) -> Result<Uuid, StoreError> {
    // One first sign-in per person, and per address, at a time: two
    // requests of a person never seen would otherwise both find no link,
    // and two people claiming one address would both find it free.
    lock(tx, &format!("oidc {} {}", person.issuer, person.subject)).await?;
    let linked: Option<(Uuid, bool)> = sqlx::query_as(
        "SELECT user_id, made_account FROM oidc_identities WHERE issuer = $1 AND subject = $2",
    )
    .bind(person.issuer)
    .bind(person.subject)
    .fetch_optional(&mut **tx)
    .await?;
    let (user_id, made) = match linked {
        Some(found) => found,
        None => {
            let email = person
                .email
                .ok_or_else(|| {
                    StoreError::Invalid(
                        "the token carries no email, which a person signing in for the first time needs (DATA_PLANE_OIDC_EMAIL_CLAIM)".into(),
                    )
                })?
                .trim()
                .to_lowercase();
            if !email.contains('@') || email.contains('\0') {
                return Err(StoreError::Invalid(format!(
                    "{email:?} is not an email address"
                )));
            }
            let (id, made) = if person.email_verified {
                lock(tx, &format!("email {email}")).await?;
                let existing: Option<(Uuid, bool)> = sqlx::query_as(
                    "SELECT u.id, EXISTS (SELECT 1 FROM oidc_identities i
                                          WHERE i.user_id = u.id AND i.issuer = $2)
                     FROM users u WHERE u.email = $1",
                )
                .bind(&email)
                .bind(person.issuer)
                .fetch_optional(&mut **tx)
                .await?;
                match existing {
                    Some((_, true)) => {
                        return Err(StoreError::Denied(format!(
                            "the account with the email {email} is another person's sign-in at this provider"
                        )));
                    }
                    Some((id, false)) => (id, false),
                    None => (new_user(tx, &email, person.permission).await?, true),
                }
            } else {
                let placeholder: String = sqlx::query_scalar(
                    "SELECT 'oidc-' || substr(encode(sha256(convert_to($1 || ' ' || $2, 'UTF8')), 'hex'), 1, 32)
                            || '@unverified.invalid'",
                )
                .bind(person.issuer)
                .bind(person.subject)
                .fetch_one(&mut **tx)
                .await?;
                (new_user(tx, &placeholder, person.permission).await?, true)
            };
            sqlx::query(
                "INSERT INTO oidc_identities (issuer, subject, user_id, made_account)
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(person.issuer)
            .bind(person.subject)
            .bind(id)
            .bind(made)
            .execute(&mut **tx)
            .await?;
            (id, made)
        }
    };
    if made {
        sqlx::query("UPDATE users SET permission = $2 WHERE id = $1 AND permission <> $2")
            .bind(user_id)
            .bind(person.permission)
            .execute(&mut **tx)
            .await?;
    }
    Ok(user_id)
}

/// A transaction-long advisory lock on `key`.
async fn lock(tx: &mut ScopedTx, key: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(key)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A user that must not exist yet: one with the address already is a
/// conflict, never an update.
async fn new_user(
    tx: &mut ScopedTx,
    email: &str,
    permission: Permission,
) -> Result<Uuid, StoreError> {
    sqlx::query_scalar(
        "INSERT INTO users (email, permission) VALUES ($1, $2)
         ON CONFLICT (email) DO NOTHING RETURNING id",
    )
    .bind(email)
    .bind(permission)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| {
        StoreError::Conflict(format!("an account with the email {email} exists already"))
    })
}
