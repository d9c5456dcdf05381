//! Reading the engine's rows back into the registry's types: oids and job
//! states are stored as their text (as SQLite keeps them), and a damaged
//! value is refused where it is read, by its column, as a conversion error.

use std::error::Error;

use postgres::types::{FromSql, Type};
use postgres::Row;

use crate::pool::Oid;
use crate::registry::{Entry, ForeignObject, JobState};

type Boxed = Box<dyn Error + Sync + Send>;

/// An oid stored as its 64 lowercase hex digits.
pub(super) struct OidText(pub(super) Oid);

impl<'a> FromSql<'a> for OidText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<OidText, Boxed> {
        let text = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(OidText(text.parse()?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// A job state stored as [`JobState::as_str`] spells it.
pub(super) struct StateText(pub(super) JobState);

impl<'a> FromSql<'a> for StateText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<StateText, Boxed> {
        let text = <&str as FromSql>::from_sql(ty, raw)?;
        JobState::parse(text)
            .map(StateText)
            .ok_or_else(|| format!("{text:?} is not a prefetch job state").into())
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// The object's columns, in the order [`object_at`] reads them.
pub(super) const OBJECT_COLUMNS: &str = "o.url, o.bucket, o.key, o.version_id, o.etag, o.size, \
    o.provisional_oid, o.content_oid, o.drs_id, o.last_modified, o.recorded_at, o.md5, \
    o.content_read";

/// The object whose [`OBJECT_COLUMNS`] start at column `at`.
pub(super) fn object_at(row: &Row, at: usize) -> Result<ForeignObject, postgres::Error> {
    Ok(ForeignObject {
        url: row.try_get::<_, String>(at)?.into(),
        bucket: row.try_get(at + 1)?,
        key: row.try_get(at + 2)?,
        version_id: row.try_get(at + 3)?,
        etag: row.try_get(at + 4)?,
        size: row.try_get::<_, i64>(at + 5)? as u64,
        provisional_oid: row.try_get::<_, OidText>(at + 6)?.0,
        content_oid: row.try_get::<_, Option<OidText>>(at + 7)?.map(|o| o.0),
        drs_id: row.try_get(at + 8)?,
        last_modified: row.try_get(at + 9)?,
        recorded_at: row.try_get::<_, i64>(at + 10)? as u64,
        md5: row.try_get(at + 11)?,
        content_read: row.try_get(at + 12)?,
    })
}

/// An entry from a row of `r.path, r.oid, OBJECT_COLUMNS`.
pub(super) fn entry_of(row: &Row) -> Result<Entry, postgres::Error> {
    Ok(Entry {
        path: row.try_get(0)?,
        oid: row.try_get::<_, OidText>(1)?.0,
        object: object_at(row, 2)?,
    })
}

/// A size or a time as PostgreSQL's `bigint`; what does not fit is the most.
pub(super) fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
