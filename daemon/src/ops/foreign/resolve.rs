//! One HEAD per planned line, at most [`CONCURRENT_HEADS`] at once, never
//! a read of the content; then the oid each pointer gets, best first:
//! `--sha256`, the store's checksum, the registry's content oid for this
//! URL/ETag/size, the provisional oid from the ETag
//! ([`crate::registry::provisional_oid`]).

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::plan::Target;
use super::Refused;
use crate::pool::Oid;
use crate::registry::{self, Entry, ForeignObject, Registry};
use crate::remote::Remote;
use crate::stores::{ObjectMeta, ObjectUrl, RemoteError};

/// Why a line's URL could not be named by its HEAD.
#[derive(Debug, thiserror::Error)]
pub enum HeadFault {
    /// The HEAD of `url` failed.
    #[error(transparent)]
    Head(RemoteError),
    #[error("{url}: no such object (HTTP 404)")]
    NoObject { url: String },
    /// The store's `x-amz-checksum-sha256` (or like) is not an oid.
    #[error("the store's SHA-256 checksum {given:?} is not 64 hex digits")]
    BadChecksum { given: String },
}

/// HEADs in flight at once for a batch.
const CONCURRENT_HEADS: usize = 32;

/// Where a pointer's oid came from: the wire's enum, the domain has no other.
pub use drsd_proto::OidSource as OidFrom;

/// A target with the oid its pointer gets.
pub(super) struct Resolved {
    pub target: Target,
    pub entry: Entry,
    pub oid_from: OidFrom,
}

/// HEADs every target (or reads its DRS object, `drs.rs`) and picks its
/// oid; lines that fail go to `refused`.
pub(super) async fn resolve(
    registry: &Arc<Registry>,
    remote: &Remote,
    targets: Vec<Target>,
    on_head: &(dyn Fn(u64, u64) + Sync),
    refused: &mut Vec<Refused>,
) -> Vec<Resolved> {
    let (drs, plain): (Vec<Target>, Vec<Target>) = targets
        .into_iter()
        .partition(|t| matches!(t.url, ObjectUrl::Drs(_)));
    let mut resolved = match drs.is_empty() {
        true => Vec::new(),
        false => super::drs::resolve_drs(remote, drs, refused).await,
    };
    let headed = head_all(remote, plain, on_head, refused).await;
    let registry = registry.clone();
    let (picked, failed) = crate::blocking(move || pick_oids(&registry, headed)).await;
    resolved.extend(picked);
    refused.extend(failed);
    super::expected::hold_to(resolved, refused)
}

/// The targets with what their HEAD said; reports every 64th and the last.
async fn head_all(
    remote: &Remote,
    targets: Vec<Target>,
    on_head: &(dyn Fn(u64, u64) + Sync),
    refused: &mut Vec<Refused>,
) -> Vec<(Target, ObjectMeta)> {
    let total = targets.len() as u64;
    let mut done = 0;
    let mut heads = stream::iter(targets)
        .map(|t| async move {
            let meta = head(remote, &t.url).await;
            (t, meta)
        })
        .buffer_unordered(CONCURRENT_HEADS);
    let mut headed = Vec::with_capacity(total as usize);
    while let Some((t, meta)) = heads.next().await {
        done += 1;
        if done % 64 == 0 || done == total {
            on_head(done, total);
        }
        match meta {
            Ok(meta) => headed.push((t, meta)),
            Err(fault) => refused.push(Refused {
                line: t.no,
                url: t.url.to_string(),
                message: fault.to_string(),
            }),
        }
    }
    log::debug!("add-url: {total} HEADs done");
    headed
}

async fn head(remote: &Remote, url: &ObjectUrl) -> Result<ObjectMeta, HeadFault> {
    match remote.head(url).await {
        Ok(Some(meta)) => Ok(meta),
        Ok(None) => Err(HeadFault::NoObject {
            url: url.to_string(),
        }),
        Err(e) => Err(HeadFault::Head(e)),
    }
}

fn pick_oids(
    registry: &Registry,
    headed: Vec<(Target, ObjectMeta)>,
) -> (Vec<Resolved>, Vec<Refused>) {
    let mut resolved = Vec::new();
    let mut refused = Vec::new();
    for (t, meta) in headed {
        match pick_oid(registry, t, meta) {
            Ok(r) => resolved.push(r),
            Err(f) => refused.push(f),
        }
    }
    (resolved, refused)
}

/// The oid for the target's pointer (see the module's notes) and the
/// registry entry it makes.
fn pick_oid(registry: &Registry, t: Target, meta: ObjectMeta) -> Result<Resolved, Refused> {
    let fail = |message: String| Refused {
        line: t.no,
        url: t.url.to_string(),
        message,
    };
    let strong = meta.etag.clone().filter(|e| !e.starts_with("W/"));
    let etag = strong.clone().unwrap_or_default();
    let known = match &strong {
        Some(tag) => registry
            .lookup_by_location(&t.raw, tag, meta.size)
            .map_err(|e| fail(e.to_string()))?,
        None => None,
    };
    let store = store_checksum(&meta).map_err(|e| fail(e.to_string()))?;
    let (content, oid_from) = match (t.sha256, store, known.and_then(|k| k.content_oid)) {
        (Some(user), _, _) => (Some(user), OidFrom::Sha256Option),
        (None, Some(store), _) => (Some(store), OidFrom::StoreChecksum),
        (None, None, Some(known)) => (Some(known), OidFrom::Registry),
        (None, None, None) => (None, OidFrom::Etag),
    };
    let provisional = match (&strong, content) {
        (Some(tag), _) => registry::provisional_oid(&t.raw, tag),
        // No ETag: the object is known by its content oid alone.
        (None, Some(content)) => content,
        (None, None) => return Err(fail(no_identity(&t.url, &meta))),
    };
    let (bucket, key) = match &t.url {
        ObjectUrl::S3 { bucket, key } => (Some(bucket.clone()), Some(key.clone())),
        ObjectUrl::Https(_) | ObjectUrl::Drs(_) => (None, None),
    };
    let object = ForeignObject {
        url: t.raw.as_str().into(),
        bucket,
        key,
        version_id: meta.version_id,
        etag,
        size: meta.size,
        provisional_oid: provisional,
        content_oid: content,
        drs_id: None,
        last_modified: meta.last_modified,
        recorded_at: registry::now(),
        md5: None,
        content_read: false,
    };
    let entry = Entry {
        path: t.rel.clone(),
        oid: content.unwrap_or(provisional),
        object,
    };
    Ok(Resolved {
        target: t,
        entry,
        oid_from,
    })
}

/// The store's SHA-256 checksum as an oid, when it sent one.
fn store_checksum(meta: &ObjectMeta) -> Result<Option<Oid>, HeadFault> {
    let Some(hex) = &meta.sha256 else {
        return Ok(None);
    };
    hex.parse()
        .map(Some)
        .map_err(|_| HeadFault::BadChecksum { given: hex.clone() })
}

fn no_identity(url: &ObjectUrl, meta: &ObjectMeta) -> String {
    let etag = match &meta.etag {
        Some(weak) => format!("only a weak ETag ({weak}), which does not identify the content,"),
        None => "no ETag".to_string(),
    };
    format!(
        "{url}: the server sent {etag} and no SHA-256 checksum; cannot name the object without reading it (give --sha256 HEX if you know its hash)"
    )
}
