//! Statements in one exchange with PostgreSQL. Work through a scoped
//! transaction takes three round trips: `BEGIN` with the identity, the
//! statement, and the end. For a short keyed read those trips cost more
//! than the read: here the statement is prepared once on each pooled
//! connection (`PREPARE`, a plan the server keeps), and every use is one
//! simple query that sets the identity transaction-locally and executes it:
//!
//! ```sql
//! SET LOCAL data_plane.user_id = '…'; SET LOCAL data_plane.system = 'off';
//! EXECUTE dp_document_info('…', NULL)
//! ```
//!
//! PostgreSQL runs the statements of one simple query as one implicit
//! transaction: the identity holds for the `EXECUTE` and ends with it, and
//! an error rolls all of it back and leaves the connection idle. Row-level
//! security applies exactly as in a transaction from `Db::begin`.
//!
//! Nothing from outside reaches the SQL text but typed values, each written
//! as a literal that cannot end early ([`Param`]); names and statements are
//! constants of the code ([`Prepared::new`] checks them when compiled). The
//! values are part of the SQL text, so logs that show statements show them
//! too: this is for keyed reads, not for content.

use sqlx::Executor;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use crate::{Scope, StoreError};

/// A read statement that connections prepare under its own name.
#[derive(Debug)]
pub struct Prepared {
    name: &'static str,
    sql: &'static str,
    types: &'static [&'static str],
}

impl Prepared {
    /// `name` is the server-side name (lowercase letters, digits and `_`,
    /// starting with `dp_`); `sql` uses `$1`, `$2`… for its parameters,
    /// whose PostgreSQL types `types` names in order (letters, digits, `_`
    /// and `[]`). A bad name or type fails the build (declare it `static`).
    pub const fn new(
        name: &'static str,
        sql: &'static str,
        types: &'static [&'static str],
    ) -> Prepared {
        let n = name.as_bytes();
        assert!(
            n.len() > 3 && n.len() < 64 && n[0] == b'd' && n[1] == b'p' && n[2] == b'_',
            "a prepared statement's name starts with dp_ and has at most 63 bytes"
        );
        let mut i = 0;
        while i < n.len() {
            assert!(
                n[i].is_ascii_lowercase() || n[i].is_ascii_digit() || n[i] == b'_',
                "a prepared statement's name is lowercase letters, digits and _"
            );
            i += 1;
        }
        let mut t = 0;
        while t < types.len() {
            let b = types[t].as_bytes();
            assert!(!b.is_empty(), "a parameter type is named");
            let mut i = 0;
            while i < b.len() {
                assert!(
                    b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'[' || b[i] == b']',
                    "a parameter type is letters, digits, _ and []"
                );
                i += 1;
            }
            t += 1;
        }
        Prepared { name, sql, types }
    }

    /// The server-side name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn sql(&self) -> &'static str {
        self.sql
    }

    pub(crate) fn types(&self) -> &'static [&'static str] {
        self.types
    }

    /// `PREPARE name(types) AS sql` (no parentheses without parameters).
    fn prepare(&self) -> String {
        if self.types.is_empty() {
            return format!("PREPARE {} AS {}", self.name, self.sql);
        }
        format!(
            "PREPARE {}({}) AS {}",
            self.name,
            self.types.join(", "),
            self.sql
        )
    }
}

/// One parameter of an `EXECUTE`, written into the query as a literal.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Uuid(Uuid),
    /// A UUID or SQL NULL.
    OptUuid(Option<Uuid>),
    Int(i64),
    Bool(bool),
    /// Text of any content but NUL (which PostgreSQL's text cannot hold).
    Text(&'a str),
}

impl Param<'_> {
    /// Appends the literal: hex digits and dashes, digits, keywords, or an
    /// escape string whose quotes and backslashes are doubled, which reads
    /// the same whatever `standard_conforming_strings` says.
    fn write(&self, out: &mut String) -> Result<(), StoreError> {
        use std::fmt::Write;
        match self {
            Param::Uuid(id) | Param::OptUuid(Some(id)) => {
                let _ = write!(out, "'{}'", id.hyphenated());
            }
            Param::OptUuid(None) => out.push_str("NULL"),
            Param::Int(n) => {
                let _ = write!(out, "({n})");
            }
            Param::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
            Param::Text(s) => {
                if s.contains('\0') {
                    return Err(StoreError::Schema(
                        "text with a NUL byte cannot be sent to PostgreSQL".into(),
                    ));
                }
                out.reserve(s.len() + 3);
                out.push_str("E'");
                for c in s.chars() {
                    match c {
                        '\'' => out.push_str("''"),
                        '\\' => out.push_str("\\\\"),
                        c => out.push(c),
                    }
                }
                out.push('\'');
            }
        }
        Ok(())
    }
}

/// The simple query of one use: the identity, then the `EXECUTE`.
fn exchange_query(
    scope: Scope,
    statement: &Prepared,
    params: &[Param<'_>],
) -> Result<String, StoreError> {
    if params.len() != statement.types.len() {
        return Err(StoreError::Schema(format!(
            "{} takes {} parameters, {} given",
            statement.name,
            statement.types.len(),
            params.len()
        )));
    }
    let mut text = crate::db::set_scope(scope);
    text.push_str("; EXECUTE ");
    text.push_str(statement.name);
    for (i, p) in params.iter().enumerate() {
        text.push_str(if i == 0 { "(" } else { ", " });
        p.write(&mut text)?;
    }
    if !params.is_empty() {
        text.push(')');
    }
    Ok(text)
}

/// What a first try says about the connection's copy of the statement.
enum Retry {
    /// Not prepared on this connection yet (opened before the statement
    /// was first used).
    Prepare,
    /// Prepared before a migration changed what it returns.
    Replace,
}

fn retry(e: &sqlx::Error) -> Option<Retry> {
    let sqlx::Error::Database(d) = e else {
        return None;
    };
    // Told apart by the function that raised it, not by the message, which
    // the server may speak in another language.
    let stale_plan = || {
        d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .is_some_and(|pg| pg.routine() == Some("RevalidateCachedQuery"))
    };
    match d.code().as_deref() {
        Some("26000") => Some(Retry::Prepare),
        Some("0A000") if stale_plan() => Some(Retry::Replace),
        _ => None,
    }
}

impl crate::Db {
    /// Runs `statement` acting for `scope` in one exchange, in a transaction
    /// of its own, and answers its rows in text format (which
    /// `sqlx::Row::try_get` decodes for the types used here: uuid, text,
    /// integers, booleans, timestamptz, jsonb; not interval, among others).
    /// The statement is prepared on every connection the pool opens from
    /// now on; a connection that lacks it prepares it in the same exchange
    /// as the use that finds it missing. The values are part of the SQL
    /// text, which logs may show (sqlx's slow-statement warning,
    /// PostgreSQL's errors): send keys, not content.
    pub async fn exchange(
        &self,
        scope: Scope,
        statement: &'static Prepared,
        params: &[Param<'_>],
    ) -> Result<Vec<PgRow>, StoreError> {
        let query = exchange_query(scope, statement, params)?;
        self.register(statement)?;
        let mut conn = self.pool().acquire().await?;
        let conn: &mut sqlx::PgConnection = &mut conn;
        match conn.fetch_all(sqlx::raw_sql(&query)).await {
            Ok(rows) => Ok(rows),
            Err(e) => {
                let again = match retry(&e) {
                    None => return Err(e.into()),
                    Some(Retry::Prepare) => format!("{}; {query}", statement.prepare()),
                    Some(Retry::Replace) => format!(
                        "DEALLOCATE {}; {}; {query}",
                        statement.name,
                        statement.prepare()
                    ),
                };
                Ok(conn.fetch_all(sqlx::raw_sql(&again)).await?)
            }
        }
    }
}

/// The `PREPARE` of each statement a new connection prepares.
pub(crate) fn prepare_each(statements: &[&'static Prepared]) -> Vec<String> {
    statements.iter().map(|s| s.prepare()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static ONE: Prepared = Prepared::new(
        "dp_one",
        "SELECT $1::text, $2, $3, $4",
        &["text", "uuid", "bigint", "boolean"],
    );
    static NONE: Prepared = Prepared::new("dp_none", "SELECT 1", &[]);

    #[test]
    fn literals_cannot_end_early() {
        let user = Uuid::nil();
        let q = exchange_query(
            Scope::User(user),
            &ONE,
            &[
                Param::Text("it's \\'; DROP TABLE x; --"),
                Param::OptUuid(None),
                Param::Int(-5),
                Param::Bool(true),
            ],
        )
        .unwrap();
        assert_eq!(
            q,
            "SET LOCAL data_plane.user_id = '00000000-0000-0000-0000-000000000000'; \
             SET LOCAL data_plane.system = 'off'; \
             EXECUTE dp_one(E'it''s \\\\''; DROP TABLE x; --', NULL, (-5), TRUE)"
        );
    }

    #[test]
    fn bad_calls_are_refused() {
        let user = Scope::User(Uuid::nil());
        assert!(exchange_query(user, &ONE, &[Param::Bool(true)]).is_err());
        assert!(
            exchange_query(
                user,
                &ONE,
                &[
                    Param::Text("a\0b"),
                    Param::OptUuid(None),
                    Param::Int(1),
                    Param::Bool(false)
                ]
            )
            .is_err()
        );
    }

    #[test]
    fn the_system_scope_sees_everything() {
        let q = exchange_query(Scope::System, &NONE, &[]).unwrap();
        assert_eq!(
            q,
            "SET LOCAL data_plane.user_id = ''; SET LOCAL data_plane.system = 'on'; EXECUTE dp_none"
        );
    }

    #[test]
    fn prepares_with_types() {
        assert_eq!(
            prepare_each(&[&ONE, &NONE]),
            [
                "PREPARE dp_one(text, uuid, bigint, boolean) AS SELECT $1::text, $2, $3, $4",
                "PREPARE dp_none AS SELECT 1"
            ]
        );
    }
}
