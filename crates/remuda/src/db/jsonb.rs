//! `Jsonb`: JSON kept as its text, read from and written to `jsonb`/`json` columns without
//! building a `serde_json::Value` tree in between. Job args are decoded straight into the
//! task's own type and results are written as the task serialised them.

use bytes::{BufMut, BytesMut};
use postgres_types::{accepts, to_sql_checked, FromSql, IsNull, ToSql, Type};
use serde::{de::DeserializeOwned, Serialize};
use std::error::Error as StdError;

/// A JSON document as text, exchanged with PostgreSQL `jsonb` in its binary form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jsonb(pub String);

impl Jsonb {
    /// Serialises a value.
    pub fn encode<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::to_string(value).map(Jsonb)
    }

    /// Deserialises into a value.
    pub fn decode<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }

    /// Size of the JSON text in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for an empty text (never valid JSON).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> FromSql<'a> for Jsonb {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        let body = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, body)) => body,
                _ => return Err("unsupported jsonb encoding version".into()),
            }
        } else {
            raw
        };
        Ok(Jsonb(std::str::from_utf8(body)?.to_owned()))
    }

    accepts!(JSON, JSONB);
}

impl ToSql for Jsonb {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        if *ty == Type::JSONB {
            out.put_u8(1);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    accepts!(JSON, JSONB);
    to_sql_checked!();
}
