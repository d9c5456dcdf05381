//! The repo's object remote, as recorded in `.gitattributes`
//! (`drs-remote=`): an S3 prefix or a folder. [`ObjectRemote`] is parsed
//! once from the recorded text, and [`Remote`] dispatches on it (holds,
//! upload, fetch, the reachability check of `drsctl init`), so the
//! transfer operations above do not match on the kind of store.

use std::path::Path;
use std::sync::Arc;

use super::gen3::{CommonsError, Gen3Commons, GEN3_SCHEME};
use super::{
    upload_from_file, upload_from_pool, FetchError, PointerFetchError, Presence, Remote,
    UploadError, UploadOptions, Uploaded,
};
use crate::pool::{Oid, Pool};
use crate::stores::dir::{DirError, DirPut, DirRemote};
use crate::stores::{ObjectLayout, ObjectMeta, RemoteError};

/// Where a repo's objects go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectRemote {
    /// `s3://bucket/prefix`.
    S3(ObjectLayout),
    /// `file:///folder`.
    Dir(DirRemote),
    /// `gen3+https://host`: a Gen3 commons, written through Fence
    /// (`gen3.rs`).
    Gen3(Gen3Commons),
}

/// Why an object remote could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Dir(#[from] DirError),
    /// Reading an object to prove it failed (not for its bytes).
    #[error(transparent)]
    Read(Box<PointerFetchError>),
    #[error(transparent)]
    Io(#[from] crate::IoError),
}

/// Whether an object remote holds an object ([`Remote::proves_held`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Shown to be there.
    Proven,
    Absent,
    /// Something else is under its name: why.
    Other(String),
    /// Not shown, but the object remote claims it (size, `x-amz-meta-sha256`)
    /// and the user trusts it at its word (`trust_claims`).
    Trusted,
}

/// A folder remote's failure to hand on an object, as a pointer fetch's:
/// missing and another size by name, the rest as they are.
pub(super) fn pointer_fetch_error(e: DirError) -> PointerFetchError {
    match e {
        DirError::Missing { oid, path } => PointerFetchError::Missing {
            oid,
            object: path.display().to_string(),
        },
        DirError::WrongSize {
            path, held, size, ..
        } => PointerFetchError::WrongSize {
            object: path.display().to_string(),
            held,
            size,
        },
        e => PointerFetchError::Dir(e),
    }
}

fn upload_to_store(e: UploadError) -> StoreError {
    match e {
        UploadError::Remote(e) => StoreError::Remote(e),
        UploadError::Io(e) => StoreError::Io(e),
        UploadError::Dir(e) => StoreError::Dir(e),
        other => StoreError::Remote(RemoteError::Protocol {
            op: "prove",
            object: String::new(),
            why: other.to_string(),
        }),
    }
}

/// Why `drsctl init` cannot use an object remote, naming the folder or
/// bucket and what to check.
#[derive(Debug, thiserror::Error)]
pub enum UnusableRemote {
    #[error("the folder cannot take objects: {0}")]
    Folder(DirError),
    /// The S3 client could not be built (its settings, its credentials).
    #[error(transparent)]
    Client(RemoteError),
    #[error("bucket {bucket} does not exist")]
    NoBucket { bucket: String },
    #[error("{bucket} refused the credentials: {error}; check AWS_ACCESS_KEY_ID / AWS_PROFILE and the bucket's policy")]
    Refused { bucket: String, error: RemoteError },
    #[error("{bucket} could not be reached: {error}")]
    Unreached { bucket: String, error: RemoteError },
    /// A Gen3 commons not named, or whose Indexd does not answer.
    #[error(transparent)]
    Commons(#[from] CommonsError),
}

const KINDS: &str =
    "an object remote is s3://bucket[/prefix], file:///absolute/folder, an absolute folder path, or gen3+https://commons";

/// What a Gen3 commons answers where a store's own path is asked for:
/// its objects go and come through Fence and DRS, by the transfer layer.
fn through_fence(commons: &Gen3Commons) -> RemoteError {
    RemoteError::Protocol {
        op: "upload",
        object: commons.url(),
        why: "a Gen3 commons takes objects through Fence, in a push (git push), not by a store's own upload".into(),
    }
}

impl ObjectRemote {
    /// From what `drsctl init --remote` was given or `.gitattributes` records.
    pub fn parse(text: &str) -> Result<ObjectRemote, RemoteError> {
        let bad = |why: String| RemoteError::BadUrl {
            url: text.into(),
            why,
        };
        if text.starts_with("s3://") {
            return ObjectLayout::parse(text).map(ObjectRemote::S3);
        }
        if text.starts_with("file:") || text.starts_with('/') {
            return DirRemote::parse(text)
                .map(ObjectRemote::Dir)
                .map_err(|why| bad(why.to_string()));
        }
        if text.starts_with(GEN3_SCHEME) {
            return Gen3Commons::parse(text)
                .map(ObjectRemote::Gen3)
                .map_err(|why| bad(why.to_string()));
        }
        let why = match text.split_once("://") {
            Some((scheme, _)) => format!("unknown scheme {scheme:?}: {KINDS}"),
            None => format!("not a URL or an absolute path: {KINDS}"),
        };
        Err(bad(why))
    }

    /// As it is recorded: one word (a folder's `file://` URL percent-encoded).
    pub fn url(&self) -> String {
        match self {
            ObjectRemote::S3(l) if l.prefix.is_empty() => format!("s3://{}", l.bucket),
            ObjectRemote::S3(l) => format!("s3://{}/{}", l.bucket, l.prefix),
            ObjectRemote::Dir(d) => d.url(),
            ObjectRemote::Gen3(c) => c.url(),
        }
    }

    /// The S3 prefix, when it is one: server-side copies and Indexd
    /// records need it.
    pub fn s3(&self) -> Option<&ObjectLayout> {
        match self {
            ObjectRemote::S3(l) => Some(l),
            ObjectRemote::Dir(_) | ObjectRemote::Gen3(_) => None,
        }
    }

    /// Where object `oid` is kept, for messages.
    pub fn location(&self, oid: &Oid) -> String {
        match self {
            ObjectRemote::S3(l) => format!("s3://{}/{}", l.bucket, l.key(oid)),
            ObjectRemote::Dir(d) => d.path_of(oid).display().to_string(),
            ObjectRemote::Gen3(c) => c.location(oid),
        }
    }
}

impl std::fmt::Display for ObjectRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url())
    }
}

impl Remote {
    /// Whether `remote` holds `oid` of `size` bytes, shown, not claimed
    /// (`proof.rs`): a folder's file is hashed; an S3 key is proven by the
    /// ETag this daemon recorded for it, by the store's MD5 against the
    /// pool's copy when this machine has one, or else read into `pool` and
    /// hashed (range-parallel, as any fetch): a read costs less than the
    /// upload it spares and leaves the object here for the next checkout.
    pub async fn proves_held(
        &self,
        pool: Arc<Pool>,
        remote: &ObjectRemote,
        oid: Oid,
        size: u64,
    ) -> Result<Held, StoreError> {
        let layout = match remote {
            ObjectRemote::S3(layout) => layout,
            ObjectRemote::Dir(dir) => {
                let dir = dir.clone();
                return match crate::blocking(move || dir.holds(&oid, size)).await? {
                    true => Ok(Held::Proven),
                    false => Ok(Held::Absent),
                };
            }
            ObjectRemote::Gen3(c) => return Err(through_fence(c).into()),
        };
        let client = self.s3()?;
        let presence = super::presence(&client, layout, oid, size, None, 0).await;
        let why = match presence.map_err(upload_to_store)? {
            Presence::Absent => return Ok(Held::Absent),
            Presence::Proven(..) => return Ok(Held::Proven),
            Presence::Unproven(why) => why,
        };
        if self.trusts(&remote.url()) {
            let meta = client.head(&layout.bucket, &layout.key(&oid)).await?;
            let hex = oid.to_hex();
            if meta.is_some_and(|m| m.size == size && m.sha256.as_deref() == Some(hex.as_str())) {
                return Ok(Held::Trusted);
            }
        }
        // The bytes here after all (the caller did not look): the store's
        // MD5 against theirs, not a read.
        let here = {
            let pool = pool.clone();
            crate::blocking(move || pool.get_verified(&oid)).await
        };
        if let Ok(Some(blob)) = here {
            let local = super::Local::of(&blob).map_err(upload_to_store)?;
            let presence = super::presence(&client, layout, oid, size, Some(local), 0).await;
            return Ok(match presence.map_err(upload_to_store)? {
                Presence::Absent => Held::Absent,
                Presence::Proven(..) => Held::Proven,
                Presence::Unproven(why) => Held::Other(why),
            });
        }
        let location = remote.location(&oid);
        let key = layout.key(&oid);
        log::info!("{why}: reading it to see whether it is object {oid}");
        let before = client.head(&layout.bucket, &key).await?;
        match self
            .fetch_for_pointer(pool, layout, oid, size, &|_| {})
            .await
        {
            Ok(()) => {
                // Recorded only when the key still has the version read.
                let after = client.head(&layout.bucket, &key).await;
                if let (Some(before), Ok(Some(after))) = (before, after) {
                    if before.etag.is_some() && before.etag == after.etag {
                        client.record_sent(&layout.bucket, &key, oid, &after);
                    }
                }
                Ok(Held::Proven)
            }
            Err(PointerFetchError::Missing { .. }) => Ok(Held::Absent),
            Err(
                e @ (PointerFetchError::Fetch(FetchError::Mismatch { .. })
                | PointerFetchError::WrongSize { .. }),
            ) => {
                log::warn!("{location} is not object {oid}: {e}");
                Ok(Held::Other(format!(
                    "{location} holds other bytes than object {oid} ({e})"
                )))
            }
            Err(e) => Err(StoreError::Read(Box::new(e))),
        }
    }

    /// Sends pool entry `oid` to `remote` unless it is there.
    pub async fn upload_pooled(
        &self,
        pool: Arc<Pool>,
        remote: &ObjectRemote,
        oid: Oid,
        opts: UploadOptions,
    ) -> Result<Uploaded, UploadError> {
        match remote {
            ObjectRemote::S3(layout) => {
                let client = self.s3()?;
                upload_from_pool(&client, pool, layout, &oid, opts).await
            }
            ObjectRemote::Dir(dir) => {
                let dir = dir.clone();
                let put = crate::blocking(move || dir.put_from_pool(&pool, &oid));
                match put.await {
                    Err(DirError::NotInPool(oid)) => Err(UploadError::Missing(oid)),
                    put => Ok(uploaded(put?, oid)),
                }
            }
            ObjectRemote::Gen3(c) => Err(through_fence(c).into()),
        }
    }

    /// Sends `bytes`, already checked to be object `oid`, to `remote`
    /// unless it is there: a small object read once (into the pool and
    /// here), not read back out of the pool to be sent.
    pub async fn upload_bytes(
        &self,
        remote: &ObjectRemote,
        oid: Oid,
        bytes: Vec<u8>,
        opts: UploadOptions,
    ) -> Result<Uploaded, UploadError> {
        match remote {
            ObjectRemote::S3(layout) => {
                let client = self.s3()?;
                super::upload::upload_blob(
                    &client,
                    crate::pool::Blob::Bytes(bytes),
                    layout,
                    &oid,
                    opts,
                )
                .await
            }
            ObjectRemote::Dir(dir) => {
                let dir = dir.clone();
                let put = crate::blocking(move || dir.put_bytes(&oid, bytes));
                Ok(uploaded(put.await?, oid))
            }
            ObjectRemote::Gen3(c) => Err(through_fence(c).into()),
        }
    }

    /// Small object `oid` of `size` bytes read whole into memory from
    /// `remote`, its sha256 checked: one GET (or one file read), no pool
    /// write. `None` when it cannot be had that way (missing, another size,
    /// other bytes, an error): the caller then takes the full path
    /// ([`Remote::fetch_pointed`] and the others), which says why.
    pub async fn read_small(&self, remote: &ObjectRemote, oid: Oid, size: u64) -> Option<Vec<u8>> {
        let bytes = match remote {
            ObjectRemote::S3(layout) => {
                let client = self.s3().ok()?;
                client
                    .get_bytes(&layout.bucket, &layout.key(&oid), None)
                    .await
                    .ok()?
            }
            ObjectRemote::Dir(dir) => {
                let dir = dir.clone();
                crate::blocking(move || dir.read_whole(&oid, size))
                    .await
                    .ok()?
            }
            // Through DRS, by the full path.
            ObjectRemote::Gen3(_) => return None,
        };
        (bytes.len() as u64 == size && Oid::of(&bytes) == oid).then_some(bytes)
    }

    /// Sends the file at `path` to `remote` as object `oid` (checked
    /// against the oid) unless it is there.
    pub async fn upload_file(
        &self,
        path: &Path,
        remote: &ObjectRemote,
        oid: Oid,
        opts: UploadOptions,
    ) -> Result<Uploaded, UploadError> {
        match remote {
            ObjectRemote::S3(layout) => {
                let client = self.s3()?;
                upload_from_file(&client, path, layout, &oid, opts).await
            }
            ObjectRemote::Dir(dir) => {
                let (dir, path) = (dir.clone(), path.to_path_buf());
                let put = crate::blocking(move || dir.put_from_file(&path, &oid));
                match put.await {
                    Err(DirError::NotTheObject { path, oid, got }) => {
                        Err(UploadError::NotTheObject {
                            path,
                            want: oid,
                            got,
                        })
                    }
                    put => Ok(uploaded(put?, oid)),
                }
            }
            ObjectRemote::Gen3(c) => Err(through_fence(c).into()),
        }
    }

    /// Fetches the object a pointer names from `remote` into `pool`, its
    /// sha256 checked (see [`Remote::fetch_for_pointer`] for S3).
    pub async fn fetch_pointed(
        &self,
        pool: Arc<Pool>,
        remote: &ObjectRemote,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<(), PointerFetchError> {
        let dir = match remote {
            ObjectRemote::S3(layout) => {
                return self
                    .fetch_for_pointer(pool, layout, oid, size, report)
                    .await
            }
            ObjectRemote::Dir(dir) => dir.clone(),
            ObjectRemote::Gen3(commons) => {
                return self
                    .fetch_from_commons(pool, commons, oid, size, report)
                    .await
            }
        };
        crate::blocking(move || dir.fetch_into(&pool, &oid, size))
            .await
            .map_err(pointer_fetch_error)?;
        report(size);
        Ok(())
    }

    /// `drsctl init`'s check that `remote` can be used: a folder that
    /// exists and takes a new file; a bucket that exists and answers to
    /// these credentials.
    pub async fn check_reachable(&self, remote: &ObjectRemote) -> Result<(), UnusableRemote> {
        match remote {
            ObjectRemote::Dir(dir) => {
                let dir = dir.clone();
                crate::blocking(move || dir.check_writable())
                    .await
                    .map_err(UnusableRemote::Folder)
            }
            ObjectRemote::S3(layout) => self.check_bucket(layout).await,
            ObjectRemote::Gen3(commons) => self.check_commons(commons).await,
        }
    }

    /// A GET of a key that is not there: S3 says `NoSuchKey` when the
    /// bucket exists and the credentials are good, `NoSuchBucket` or 403
    /// when not (a HEAD would not say which).
    async fn check_bucket(&self, layout: &ObjectLayout) -> Result<(), UnusableRemote> {
        let client = self.s3().map_err(UnusableRemote::Client)?;
        let probe = match layout.prefix.as_str() {
            "" => ".drsd-init-check".to_string(),
            p => format!("{p}/.drsd-init-check"),
        };
        let bucket = format!("s3://{}", layout.bucket);
        match client.get_bytes(&layout.bucket, &probe, Some(0..1)).await {
            Ok(_) => Ok(()),
            Err(RemoteError::Http { code, .. }) if code.contains("NoSuchBucket") => {
                Err(UnusableRemote::NoBucket { bucket })
            }
            Err(RemoteError::Http {
                status: 404 | 416, ..
            }) => Ok(()),
            Err(error @ RemoteError::Auth { .. }) => Err(UnusableRemote::Refused { bucket, error }),
            Err(error) => Err(UnusableRemote::Unreached { bucket, error }),
        }
    }
}

fn uploaded(put: DirPut, oid: Oid) -> Uploaded {
    let (DirPut::Present(size) | DirPut::Written(size)) = put;
    let meta = ObjectMeta {
        size,
        etag: None,
        last_modified: None,
        version_id: None,
        sha256: Some(oid.to_hex()),
    };
    match put {
        DirPut::Present(_) => Uploaded::Skipped(meta),
        DirPut::Written(_) => Uploaded::Sent(meta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_remote_is_an_s3_prefix_or_a_folder_and_nothing_else() {
        let s3 = ObjectRemote::parse("s3://bkt/lfs").unwrap();
        assert_eq!(s3.url(), "s3://bkt/lfs");
        let dir = ObjectRemote::parse("/shared/lab objects/").unwrap();
        assert_eq!(dir.url(), "file:///shared/lab%20objects");
        assert_eq!(ObjectRemote::parse(&dir.url()).unwrap(), dir);
        for bad in [
            "gs://bkt",
            "bkt/lfs",
            "relative/dir",
            "file://host/x",
            "file:///a/../b",
            "file:///a?x=1",
        ] {
            let err = ObjectRemote::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        let err = ObjectRemote::parse("gs://bkt").unwrap_err().to_string();
        assert!(err.contains("unknown scheme \"gs\""), "{err}");
    }
}
