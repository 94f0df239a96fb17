//! How the shared types meet PostgreSQL, without sqlx's procedural macros:
//! those build a second copy of sqlx, its PostgreSQL driver, tokio and
//! rustls for the compiler's own use (about 55 of a release build's 790
//! CPU-seconds, docs/operations.md), to write code these two
//! `macro_rules!` write as well.
//!
//! - [`pg_enum!`]: a Rust enum stored as a PostgreSQL enum type, by its
//!   lowercase names (what `#[derive(sqlx::Type)]` with `rename_all =
//!   "lowercase"` did).
//! - [`from_row!`]: `sqlx::FromRow` for a struct whose every field is read
//!   from the column of its name (what `#[derive(sqlx::FromRow)]` did). A
//!   field left out of the list does not compile.

/// `pg_enum!(Type = "pg_type_name" { Variant = "text", .. })`: `sqlx::Type`,
/// `Encode`, `Decode` and the array type for a plain enum stored as the
/// PostgreSQL enum `pg_type_name`. A value the database sends that is not
/// listed is a decoding error naming it.
#[macro_export]
macro_rules! pg_enum {
    ($ty:ident = $pg:literal { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl ::sqlx::Type<::sqlx::Postgres> for $ty {
            fn type_info() -> ::sqlx::postgres::PgTypeInfo {
                ::sqlx::postgres::PgTypeInfo::with_name($pg)
            }
        }

        impl ::sqlx::postgres::PgHasArrayType for $ty {
            fn array_type_info() -> ::sqlx::postgres::PgTypeInfo {
                ::sqlx::postgres::PgTypeInfo::array_of($pg)
            }
        }

        impl<'q> ::sqlx::Encode<'q, ::sqlx::Postgres> for $ty {
            fn encode_by_ref(
                &self,
                buf: &mut ::sqlx::postgres::PgArgumentBuffer,
            ) -> ::std::result::Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                let text: &str = match self {
                    $($ty::$variant => $text,)+
                };
                <&str as ::sqlx::Encode<'q, ::sqlx::Postgres>>::encode_by_ref(&text, buf)
            }
        }

        impl<'r> ::sqlx::Decode<'r, ::sqlx::Postgres> for $ty {
            fn decode(
                value: ::sqlx::postgres::PgValueRef<'r>,
            ) -> ::std::result::Result<Self, ::sqlx::error::BoxDynError> {
                match <&str as ::sqlx::Decode<'r, ::sqlx::Postgres>>::decode(value)? {
                    $($text => Ok($ty::$variant),)+
                    other => Err(format!("unknown {} value {other:?}", $pg).into()),
                }
            }
        }
    };
}

/// `from_row!(Type { field, .. })`: `sqlx::FromRow` over PostgreSQL rows for
/// a struct, each field read from the column of the same name.
#[macro_export]
macro_rules! from_row {
    ($ty:ident { $($field:ident),+ $(,)? }) => {
        impl<'r> ::sqlx::FromRow<'r, ::sqlx::postgres::PgRow> for $ty {
            fn from_row(
                row: &'r ::sqlx::postgres::PgRow,
            ) -> ::std::result::Result<Self, ::sqlx::Error> {
                use ::sqlx::Row as _;
                Ok($ty {
                    $($field: row.try_get(stringify!($field))?,)+
                })
            }
        }
    };
}
