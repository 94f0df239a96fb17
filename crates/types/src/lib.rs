//! Types every layer speaks, from the store to the binary, kept free of IO;
//! with the `sqlx` feature, how they and the store's rows meet PostgreSQL
//! (`sql.rs`).

#[cfg(feature = "sqlx")]
mod sql;

use serde::{Deserialize, Serialize};

/// A user's deployment-wide permission level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    Guest,
    User,
    Admin,
    Owner,
}

impl Permission {
    /// Every level, lowest first.
    pub const ALL: [Permission; 4] = [
        Permission::Guest,
        Permission::User,
        Permission::Admin,
        Permission::Owner,
    ];

    /// The level's name as tokens, settings and the database write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Guest => "guest",
            Permission::User => "user",
            Permission::Admin => "admin",
            Permission::Owner => "owner",
        }
    }
}

#[cfg(feature = "sqlx")]
pg_enum!(Permission = "permission_level" {
    Guest = "guest",
    User = "user",
    Admin = "admin",
    Owner = "owner",
});

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a permission level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission level {0:?} (expected guest, user, admin or owner)")]
pub struct UnknownPermission(pub String);

impl std::str::FromStr for Permission {
    type Err = UnknownPermission;
    fn from_str(s: &str) -> Result<Self, UnknownPermission> {
        Permission::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownPermission(s.to_ascii_lowercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_in_any_case_and_print_back() {
        for p in Permission::ALL {
            assert_eq!(p.as_str().to_uppercase().parse::<Permission>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(
            "root".parse::<Permission>().unwrap_err().to_string(),
            "unknown permission level \"root\" (expected guest, user, admin or owner)"
        );
    }

    #[test]
    fn levels_order_from_guest_to_owner() {
        assert!(Permission::Guest < Permission::User);
        assert!(Permission::User < Permission::Admin);
        assert!(Permission::Admin < Permission::Owner);
    }
}
