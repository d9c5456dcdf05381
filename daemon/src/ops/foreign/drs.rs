//! add-url of `drs://` ids: the DRS objects are read in bulk (one
//! `POST /objects` per batch where the server offers it, else one GET
//! each), never their content. An object whose DRS record carries a
//! SHA-256 checksum gets a content pointer at once: nothing downloaded,
//! nothing hashed. One without gets a provisional oid from its access URL's
//! ETag (one HEAD), and is prefetched and promoted like any URL; its DRS md5,
//! when given, is checked by that prefetch.
//!
//! The registry keeps the `drs://` URI (not an access URL: those may be
//! signed and expire), the DRS id, size, md5 and ETag.

use super::plan::Target;
use super::resolve::{OidFrom, Resolved};
use super::Refused;
use crate::pool::Oid;
use crate::registry::{self, Entry, ForeignObject};
use crate::remote::{Remote, ResolveError};
use crate::stores::drs::{DrsError, DrsObject, DrsUri};
use crate::stores::{ObjectMeta, ObjectUrl, RemoteError};

/// Why a `drs://` line's object could not be named, each naming its URI.
#[derive(Debug, thiserror::Error)]
pub enum DrsLineFault {
    /// Reading the DRS record, or its checksums. Boxed: the DRS error is
    /// the largest, and every `Result` here would carry it.
    #[error(transparent)]
    Record(Box<DrsError>),
    #[error(
        "{uri}: the DRS record's only checksums are of types drsd does not know ({kinds}): it names the content by sha-256, md5 or etag"
    )]
    UnknownChecksums { uri: String, kinds: String },
    #[error("{uri}: --sha256 {user} disagrees with the DRS record's sha256 {said}")]
    Disagrees { uri: String, user: Oid, said: Oid },
    #[error(
        "{uri}: the DRS record has no sha256 checksum and its access URL sent no strong ETag; cannot name the object without reading it (give --sha256 HEX if you know its hash)"
    )]
    NoStrongEtag { uri: String },
    /// Resolving the record's access URL.
    #[error(transparent)]
    Access(ResolveError),
    /// Reaching the access URL, or its HEAD.
    #[error(transparent)]
    Head(RemoteError),
    #[error("{uri}: its access URL {access} has no object (HTTP 404)")]
    NoObject { uri: String, access: String },
    #[error("{uri}: its access URL {access} holds {got} bytes, the DRS record says {said}")]
    Size {
        uri: String,
        access: String,
        got: u64,
        said: u64,
    },
}

impl From<DrsError> for DrsLineFault {
    fn from(e: DrsError) -> DrsLineFault {
        DrsLineFault::Record(Box::new(e))
    }
}

/// Reads the DRS object of every target (all `drs://`) and picks each
/// pointer's oid; lines that fail go to `refused`.
pub(super) async fn resolve_drs(
    remote: &Remote,
    targets: Vec<Target>,
    refused: &mut Vec<Refused>,
) -> Vec<Resolved> {
    let drs = match remote.drs() {
        Ok(client) => client,
        Err(e) => {
            refused.extend(targets.into_iter().map(|t| refuse(&t, e.to_string())));
            return Vec::new();
        }
    };
    let started = std::time::Instant::now();
    let uris: Vec<DrsUri> = targets.iter().map(|t| uri_of(t).clone()).collect();
    let objects = drs.objects(&uris).await;
    let mut resolved = Vec::with_capacity(targets.len());
    for (t, object) in targets.into_iter().zip(objects) {
        let outcome = match object {
            Ok(object) => pick_oid(remote, &t, object).await,
            Err(e) => Err(DrsLineFault::from(e)),
        };
        match outcome {
            Ok((entry, oid_from)) => resolved.push(Resolved {
                target: t,
                entry,
                oid_from,
            }),
            Err(fault) => refused.push(refuse(&t, fault.to_string())),
        }
    }
    log::info!(
        "add-url: {} DRS objects read in {:.3} s",
        resolved.len(),
        started.elapsed().as_secs_f64()
    );
    resolved
}

fn uri_of(t: &Target) -> &DrsUri {
    match &t.url {
        ObjectUrl::Drs(uri) => uri,
        _ => unreachable!("only drs:// targets come here"),
    }
}

fn refuse(t: &Target, message: String) -> Refused {
    Refused {
        line: t.no,
        url: t.url.to_string(),
        message,
    }
}

/// The pointer's oid, best first: `--sha256` (which must agree with the DRS
/// record's), the DRS SHA-256 checksum, the access URL's ETag.
async fn pick_oid(
    remote: &Remote,
    t: &Target,
    object: DrsObject,
) -> Result<(Entry, OidFrom), DrsLineFault> {
    let uri = uri_of(t);
    let said = object.sha256()?;
    if said.is_none() && object.md5().is_none() && object.etag().is_none() {
        let kinds: Vec<&str> = object.checksums.iter().map(|c| c.r#type.as_str()).collect();
        if !kinds.is_empty() {
            return Err(DrsLineFault::UnknownChecksums {
                uri: uri.to_string(),
                kinds: kinds.join(", "),
            });
        }
    }
    let (content, oid_from) = match (t.sha256, said) {
        (Some(user), Some(said)) if user != said => {
            return Err(DrsLineFault::Disagrees {
                uri: uri.to_string(),
                user,
                said,
            })
        }
        (Some(user), _) => (Some(user), OidFrom::Sha256Option),
        (None, Some(said)) => (Some(said), OidFrom::DrsChecksum),
        (None, None) => (None, OidFrom::Etag),
    };
    let (etag, last_modified) = match content {
        Some(_) => (object.etag().unwrap_or_default(), None),
        None => {
            let meta = access_head(remote, uri, &object).await?;
            let etag = meta.etag.filter(|e| !e.starts_with("W/")).ok_or_else(|| {
                DrsLineFault::NoStrongEtag {
                    uri: uri.to_string(),
                }
            })?;
            (etag, meta.last_modified)
        }
    };
    let provisional = match content {
        Some(content) => content,
        None => registry::provisional_oid(&t.raw, &etag),
    };
    let entry = Entry {
        path: t.rel.clone(),
        oid: content.unwrap_or(provisional),
        object: ForeignObject {
            url: uri.as_str().into(),
            bucket: None,
            key: None,
            version_id: None,
            etag,
            size: object.size,
            provisional_oid: provisional,
            content_oid: content,
            drs_id: Some(object.id.clone()),
            last_modified,
            recorded_at: registry::now(),
            md5: object.md5(),
            content_read: false,
        },
    };
    Ok((entry, oid_from))
}

/// What the object's access URL says of it (one HEAD), which must agree
/// with the DRS record's size.
async fn access_head(
    remote: &Remote,
    uri: &DrsUri,
    object: &DrsObject,
) -> Result<ObjectMeta, DrsLineFault> {
    let access = remote
        .access_to(uri, object.clone())
        .await
        .map_err(DrsLineFault::Access)?;
    let located = remote.locate(&access.url).map_err(DrsLineFault::Head)?;
    let meta = located
        .origin(&access.headers)
        .head()
        .await
        .map_err(DrsLineFault::Head)?
        .ok_or_else(|| DrsLineFault::NoObject {
            uri: uri.to_string(),
            access: access.url.to_string(),
        })?;
    if meta.size != object.size {
        return Err(DrsLineFault::Size {
            uri: uri.to_string(),
            access: access.url.to_string(),
            got: meta.size,
            said: object.size,
        });
    }
    Ok(meta)
}
