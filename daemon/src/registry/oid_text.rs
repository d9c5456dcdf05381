//! Oids in the registry's two stores. Both keep them as they always have,
//! 64 lowercase hex digits: SQLite as `TEXT` columns, the mirror as JSON
//! strings. Read back, they are [`Oid`]s, so a damaged value is refused
//! where it is read, by its column or line, instead of travelling on as text.
//!
//! Written as helpers (not `ToSql`/`Serialize` on `Oid`) so the registry
//! does not decide how `Oid` speaks everywhere else.

use rusqlite::types::Type;
use rusqlite::Row;

use crate::pool::Oid;

/// The oid in column `at` of `row`.
pub(super) fn oid_column(row: &Row<'_>, at: usize) -> rusqlite::Result<Oid> {
    let text: String = row.get(at)?;
    parse(at, &text)
}

/// The oid in column `at` of `row`, when the column is not NULL.
pub(super) fn optional_oid_column(row: &Row<'_>, at: usize) -> rusqlite::Result<Option<Oid>> {
    let text: Option<String> = row.get(at)?;
    text.map(|t| parse(at, &t)).transpose()
}

fn parse(at: usize, text: &str) -> rusqlite::Result<Oid> {
    text.parse()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(at, Type::Text, Box::new(e)))
}

/// `#[serde(with = "hex")]`: an oid as its hex string.
pub(super) mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::pool::Oid;

    pub fn serialize<S: Serializer>(oid: &Oid, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&oid.to_hex())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Oid, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "optional_hex")]`: an oid, if any, as its hex string.
pub(super) mod optional_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::pool::Oid;

    pub fn serialize<S: Serializer>(oid: &Option<Oid>, s: S) -> Result<S::Ok, S::Error> {
        match oid {
            Some(oid) => s.serialize_some(&oid.to_hex()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Oid>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}
