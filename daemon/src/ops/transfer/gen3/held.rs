//! Whether a Gen3 Indexd holds an object already: the one decision of both
//! pushes that meet one, a repo whose object remote is a Gen3 commons
//! (`mod.rs`) and a repo that registers its objects with an Indexd beside
//! its own object remote (`indexd.rs`).
//!
//! A record is a claim: whoever may write the project's records chose its
//! hashes and its locations (DESIGN.md "Trust"). A record counts only once
//! the push's [`Proof`] shows its bytes are the object:
//! - by sha256: a record naming the object's sha256, its size (or none)
//!   and a location. A record without a location is an upload begun, never
//!   the object held;
//! - else by md5: a record naming the object's md5 and size and no sha256
//!   (most Gen3 records). Its md5 is asked for only when the Indexd has
//!   such records of the object's size, so a file of many GB is not read
//!   for an md5 nobody will compare. A record so shown gets a version
//!   naming the sha256 (`POST /index/{did}`, same `baseid`), which the next
//!   push and a clone asking by sha256 find. Trust in the Indexd's word
//!   (`trust_claims`) never covers these: that word is about a sha256 they
//!   do not name.

use std::future::Future;

use crate::lfs::Pointer;
use crate::pool::{Oid, PoolError};
use crate::remote::ResolveError;
use crate::stores::drs::{DrsError, IndexdClient, IndexdRecord};

/// Which question a record answers: by [`By::Sha256`] a record that
/// names the object's sha256; by [`By::Md5`] one that names its md5 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    Sha256,
    Md5,
}

/// How a push shows that a record's bytes are the object.
pub(super) trait Proof {
    /// Whether `record`'s bytes are the object; `Err` when that cannot be
    /// said now (the push then fails, rather than sending the bytes again
    /// on a guess and making a second record).
    async fn holds(&mut self, record: &IndexdRecord, by: By) -> Result<bool, HeldError>;

    /// Adds a version of `record` (md5 only, shown to be the object) that
    /// names the object's sha256; the new version's did.
    async fn add_sha256_version(&self, record: &IndexdRecord) -> Result<String, DrsError>;
}

/// Why an Indexd could not say whether it holds an object. Each names the
/// record, never a signed URL.
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    /// Asking the Indexd (`by`: how).
    #[error("Indexd could not be asked whether it holds the object{by}: {error}")]
    Ask {
        by: &'static str,
        #[source]
        error: DrsError,
    },
    /// A record of the object's md5 only was shown to be the object, and
    /// publishing its sha256 failed.
    #[error("object {oid} is held as {did} under its md5 only (its bytes were shown here to have the sha256), but adding a version that names the sha256 failed: {error}")]
    Version {
        oid: Oid,
        did: String,
        #[source]
        error: DrsError,
    },
    /// A record naming the object could not be read to show it holds it.
    #[error("record {did} names object {oid}, but its bytes could not be read to show they are the object: {error}")]
    Unreadable {
        did: String,
        oid: Oid,
        #[source]
        error: Box<ResolveError>,
    },
    /// The object's bytes here could not be read for their md5.
    #[error("reading object {oid} here for its md5: {error}")]
    Read {
        oid: Oid,
        #[source]
        error: PoolError,
    },
}

/// The did of a record naming `pointer`'s sha256 that `proof` shows holds
/// it; `None` when no record does.
pub(super) async fn by_sha256(
    indexd: &IndexdClient,
    pointer: Pointer,
    proof: &mut impl Proof,
) -> Result<Option<String>, HeldError> {
    let records = indexd
        .by_sha256(pointer.oid)
        .await
        .map_err(|error| HeldError::Ask { by: "", error })?;
    for record in records {
        let sized = record.size.is_none_or(|size| size == pointer.size);
        if sized && !record.urls.is_empty() && proof.holds(&record, By::Sha256).await? {
            return Ok(Some(record.did));
        }
    }
    Ok(None)
}

/// The did of a new version, naming the sha256, of a record that names
/// `pointer`'s md5 and size and no sha256 and that `proof` shows holds it;
/// `None` when no record does. `md5`: the md5 of the bytes here, asked for
/// only when the Indexd has records of the size naming an md5 and no
/// sha256 (`None`: no bytes here, nothing to ask by). `name`: the Indexd
/// as the log names it.
pub(super) async fn by_md5<F>(
    indexd: &IndexdClient,
    name: &str,
    pointer: Pointer,
    md5: F,
    proof: &mut impl Proof,
) -> Result<Option<String>, HeldError>
where
    F: Future<Output = Result<Option<String>, HeldError>>,
{
    let sized = indexd
        .any_md5_only_of_size(pointer.size)
        .await
        .map_err(|error| HeldError::Ask {
            by: " by its size",
            error,
        })?;
    if !sized {
        return Ok(None);
    }
    let Some(md5) = md5.await? else {
        return Ok(None);
    };
    let records = indexd
        .by_md5_only(&md5, pointer.size)
        .await
        .map_err(|error| HeldError::Ask {
            by: " by its md5",
            error,
        })?;
    for record in records {
        if !proof.holds(&record, By::Md5).await? {
            continue;
        }
        let did = proof
            .add_sha256_version(&record)
            .await
            .map_err(|error| HeldError::Version {
                oid: pointer.oid,
                did: record.did.clone(),
                error,
            })?;
        log::info!(
            "{name} held object {} as {} under its md5 only; its bytes were shown to have the sha256, published as version {did}",
            pointer.oid,
            record.did
        );
        return Ok(Some(did));
    }
    Ok(None)
}
