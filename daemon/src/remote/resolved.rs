//! Reading an object wherever its URL says: `s3://` and `https://` as they
//! are, `drs://` through its DRS object to an access URL, resolved at each
//! read (access URLs may be signed and expire; none is kept beyond a
//! batch's minute, `prepared.rs`). Whatever the
//! way, bytes reach the pool only with the sha256 they were asked for.
//!
//! Before anything is read, what the DRS server says of the object is
//! checked against what was asked: its size, and its sha256 checksum when
//! it gives one. A server that names other bytes than the pointer is
//! refused by name, not downloaded.

use std::sync::Arc;

use super::{fetch_into_pool, Fetch, FetchError, FetchOptions, Fetched, Remote};
use crate::pool::{Oid, Pool};
use crate::stores::drs::{DrsError, DrsObject, DrsUri};
use crate::stores::Permanence;
use crate::stores::{ObjectUrl, RemoteError};

/// Why an object could not be read from where its URL says.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Boxed: the DRS error is the largest, and every `Result` carries it.
    #[error(transparent)]
    Drs(Box<DrsError>),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("{uri}: the DRS server says {what} {said}, the pointer says {wanted}: refusing it")]
    Disagrees {
        uri: String,
        what: &'static str,
        said: String,
        wanted: String,
    },
    #[error("{uri}: its access URL is itself a DRS URI; drsd follows one level only")]
    Nested { uri: String },
    #[error("{uri}: no way to its bytes worked; tried {tries}. Check the credential for its DRS server ({creds}) or the keys for its bucket")]
    NoWay {
        uri: String,
        tries: String,
        creds: String,
        /// Whether a try failed in a way a retry may mend.
        transient: bool,
    },
}

/// A DRS object and the access URL to read it by, for this read only.
pub struct Access {
    pub object: DrsObject,
    /// An `s3://` or `https://` URL.
    pub url: ObjectUrl,
    /// Headers the server asks this read to send (`access_url.headers`).
    pub headers: Vec<(String, String)>,
}

impl From<DrsError> for ResolveError {
    fn from(e: DrsError) -> ResolveError {
        ResolveError::Drs(Box::new(e))
    }
}

impl Remote {
    /// The DRS object `uri` names and an access URL to read it by.
    pub async fn access(&self, uri: &DrsUri) -> Result<Access, ResolveError> {
        let drs = self.drs()?;
        let object = drs.object(uri).await?;
        self.access_to(uri, object).await
    }

    /// An access URL of `object`, which `uri` named: its ways in the
    /// order the DRS client gives (access ids first when a bearer
    /// credential goes to the server, else raw URLs), each tried in turn.
    /// A raw URL with a way after it (or after a failed one) is tried by
    /// one HEAD: in a commons
    /// the bucket is rarely readable with the user's keys (404, 403). The
    /// URL is for this read only: a signed one is neither kept nor shown.
    pub async fn access_to(&self, uri: &DrsUri, object: DrsObject) -> Result<Access, ResolveError> {
        let drs = self.drs()?;
        let ways = drs.access_ways(uri, &object)?;
        if ways.is_empty() {
            return Err(crate::stores::drs::no_access(uri, &object).into());
        }
        let mut tries = Vec::new();
        let mut transient = false;
        for (n, way) in ways.iter().enumerate() {
            let shown = way.shown(&object);
            let access = match drs.way_url(uri, &object, way).await {
                Ok(Some(access)) => access,
                Ok(None) => {
                    tries.push(format!("{shown}: the server has no URL for it"));
                    continue;
                }
                Err(e) => {
                    transient |= e.permanence() != Permanence::Permanent;
                    tries.push(format!("{shown}: {e}"));
                    continue;
                }
            };
            let url = ObjectUrl::parse(access.url.expose())?;
            if matches!(url, ObjectUrl::Drs(_)) {
                return Err(ResolveError::Nested {
                    uri: uri.to_string(),
                });
            }
            // The last way is probed too once another failed, so the error
            // names every try. A signed URL is not: S3 signs it for GET only.
            let last = n + 1 == ways.len();
            if !way.signed && (!last || !tries.is_empty()) {
                let probed = match self.locate(&url) {
                    Ok(located) => located.origin(&access.headers).head().await,
                    Err(e) => Err(e),
                };
                match probed {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        tries.push(format!("{shown}: it has no object (HTTP 404)"));
                        continue;
                    }
                    Err(e) => {
                        transient |= e.permanence() != Permanence::Permanent;
                        tries.push(format!("{shown}: {e}"));
                        continue;
                    }
                }
            }
            if n > 0 {
                log::info!("{uri}: read by its {shown} ({})", tries.join("; "));
            }
            return Ok(Access {
                object,
                url,
                headers: access.headers,
            });
        }
        Err(ResolveError::NoWay {
            uri: uri.to_string(),
            tries: tries.join("; "),
            creds: drs.credential_shown(uri),
            transient,
        })
    }

    /// Reads `url` (`size` bytes, sha256 `oid`) into `pool`, checked on the
    /// way in: bytes of another sha256 are not kept. A `drs://` object
    /// whose read a batch prepared (`prepared.rs`) is read by the URL
    /// asked in bulk; when that URL fails (refused, expired, unreachable),
    /// by a URL asked for it alone, as any other.
    pub async fn fetch_verified(
        &self,
        pool: Arc<Pool>,
        url: &ObjectUrl,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<Fetched, ResolveError> {
        let ObjectUrl::Drs(uri) = url else {
            return self.fetch_from(pool, url, &[], oid, size, report).await;
        };
        if let Some((object, access)) = self.prepared.take(uri) {
            check_claims(uri, &object, oid, size)?;
            let fetched = match ObjectUrl::parse(access.url.expose()) {
                Ok(ObjectUrl::Drs(_)) => Err(ResolveError::Nested {
                    uri: uri.to_string(),
                }),
                Ok(by) => {
                    self.fetch_from(pool.clone(), &by, &access.headers, oid, size, report)
                        .await
                }
                Err(e) => Err(e.into()),
            };
            match fetched {
                Err(e) if answers_for_the_url(&e) => {
                    log::info!("{uri}: the access URL asked in bulk did not serve it ({e}); asking for one of its own");
                }
                done => return done,
            }
        }
        let access = self.access(uri).await?;
        check_claims(uri, &access.object, oid, size)?;
        self.fetch_from(pool, &access.url, &access.headers, oid, size, report)
            .await
    }

    /// Reads `url`, sending `headers`, into `pool`, checked against `oid`.
    async fn fetch_from(
        &self,
        pool: Arc<Pool>,
        url: &ObjectUrl,
        headers: &[(String, String)],
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<Fetched, ResolveError> {
        let located = self.locate(url)?;
        let req = Fetch {
            origin: located.origin(headers),
            size,
            etag: None,
            last_modified: None, // the sha256 is the check
            expect: Some(oid),
            md5: false,
            part_sizes: &[],
        };
        // Read next: a checkout copies it into the work tree, a push sends it.
        let opts = FetchOptions {
            read_soon: true,
            ..FetchOptions::default()
        };
        Ok(fetch_into_pool(pool, req, opts, report).await?)
    }
}

/// Whether `e`, from reading by a URL asked in bulk, is the URL's fault (a
/// refusal, an expiry, a store that could not be reached): then a URL of
/// the object's own may do. Bytes that are not the object, or a pool that
/// cannot take them, would be the same by any URL.
fn answers_for_the_url(e: &ResolveError) -> bool {
    matches!(
        e,
        ResolveError::Remote(_)
            | ResolveError::Nested { .. }
            | ResolveError::Fetch(FetchError::Remote(_))
    )
}

/// The DRS object's size and sha256 (when it gives one) against the
/// pointer's.
fn check_claims(uri: &DrsUri, object: &DrsObject, oid: Oid, size: u64) -> Result<(), ResolveError> {
    let disagrees = |what, said: String, wanted: String| ResolveError::Disagrees {
        uri: uri.to_string(),
        what,
        said,
        wanted,
    };
    if object.size != size {
        return Err(disagrees("size", object.size.to_string(), size.to_string()));
    }
    match object.sha256()? {
        Some(said) if said != oid => Err(disagrees("sha256", said.to_hex(), oid.to_hex())),
        _ => Ok(()),
    }
}
