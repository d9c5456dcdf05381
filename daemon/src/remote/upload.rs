//! Uploads from the pool to a bucket under git-lfs's own layout, skipping
//! what the bucket already holds.

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{presence, Local, Presence};
use crate::pool::{Blob, Oid, Pool, PoolError};
use crate::stores::{ObjectLayout, ObjectMeta, PutOutcome, RemoteError, S3Client, SHA256_META};

#[derive(Debug, Clone, Copy)]
pub struct UploadOptions {
    /// Objects of at least this size go up in parts.
    pub multipart_from: u64,
    /// Fixed, so the same content always gets the same multipart ETag.
    pub part_size: u64,
    /// Objects below this size go up with `If-None-Match: *` before any
    /// check: for a new object that is one request instead of a HEAD and a
    /// PUT, and sending a small body costs about what a HEAD does.
    pub put_first_below: u64,
    /// Larger objects are copied server-side in parts of `part_size`
    /// (UploadPartCopy); up to it, in one CopyObject. S3 allows 5 GiB; a
    /// store may allow less (RGW's `rgw_max_put_size`).
    pub copy_whole_max: u64,
}

impl Default for UploadOptions {
    fn default() -> UploadOptions {
        UploadOptions {
            multipart_from: 64 << 20,
            part_size: 64 << 20,
            put_first_below: 1 << 20,
            copy_whole_max: 5 << 30,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uploaded {
    /// The bucket had it: same size, same sha256, readable.
    Skipped(ObjectMeta),
    Sent(ObjectMeta),
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("the pool has no object {0} to upload")]
    Missing(Oid),
    #[error("{object}: after the upload the store reports {got} bytes, not {want}")]
    Size { object: String, want: u64, got: u64 },
    #[error(transparent)]
    Io(#[from] crate::IoError),
    #[error(transparent)]
    Dir(#[from] crate::stores::dir::DirError),
    #[error("{path} is not object {want}: its content is sha256 {got}; nothing was uploaded")]
    NotTheObject { path: PathBuf, want: Oid, got: Oid },
}

/// Uploads pool entry `oid` to `layout`, unless it is there already.
pub async fn upload_from_pool(
    client: &S3Client,
    pool: Arc<Pool>,
    layout: &ObjectLayout,
    oid: &Oid,
    opts: UploadOptions,
) -> Result<Uploaded, UploadError> {
    let blob = {
        let (pool, oid) = (pool.clone(), *oid);
        // Checked against the oid: the bucket must not get corrupt bytes
        // under the name of good ones.
        crate::blocking(move || pool.get_verified(&oid))
            .await?
            .ok_or(UploadError::Missing(oid))?
    };
    upload_blob(client, blob, layout, oid, opts).await
}

/// Uploads the file at `path` (a repo's `.git/lfs/objects` copy) as object
/// `oid` to `layout`, unless it is there already: for when the pool cannot
/// take the object (its disk is full), as the pool is only a cache. The file
/// is hashed first and must be `oid`: only the bytes the oid names go up.
pub async fn upload_from_file(
    client: &S3Client,
    path: &Path,
    layout: &ObjectLayout,
    oid: &Oid,
    opts: UploadOptions,
) -> Result<Uploaded, UploadError> {
    let blob = {
        let (path, want) = (path.to_path_buf(), *oid);
        crate::blocking(move || checked_file(&path, want)).await?
    };
    upload_blob(client, blob, layout, oid, opts).await
}

/// The file at `path` as a blob, once its sha256 is found to be `want`.
fn checked_file(path: &Path, want: Oid) -> Result<Blob, UploadError> {
    let io =
        |op| move |source| UploadError::Io(crate::IoError::new(op, path.to_path_buf(), source));
    let mut file = std::fs::File::open(path).map_err(io("open"))?;
    let mut hasher = Sha256::new();
    let len = std::io::copy(&mut file, &mut hasher).map_err(io("read"))?;
    let got = Oid::from_digest(hasher.finalize().into());
    if got != want {
        return Err(UploadError::NotTheObject {
            path: path.to_path_buf(),
            want,
            got,
        });
    }
    file.seek(SeekFrom::Start(0)).map_err(io("read"))?;
    Ok(Blob::File {
        file,
        len,
        path: path.to_path_buf(),
    })
}

/// Sends `blob`, checked to be object `oid`, to `layout` unless the key
/// holds the object already, shown as `proof.rs` says: a key that holds
/// anything else (another size, bytes whose MD5 is not ours, a multipart
/// ETag no part size reproduces, a mere `x-amz-meta-sha256`) is replaced
/// with the object's bytes, never taken for it.
pub(crate) async fn upload_blob(
    client: &S3Client,
    blob: Blob,
    layout: &ObjectLayout,
    oid: &Oid,
    opts: UploadOptions,
) -> Result<Uploaded, UploadError> {
    let key = layout.key(oid);
    let object = format!("s3://{}/{key}", layout.bucket);
    let (bucket, hex) = (layout.bucket.as_str(), oid.to_hex());
    let len = blob.len();
    let headers = [(SHA256_META, hex.as_str())];
    let sent = |etag| ObjectMeta {
        size: len,
        etag,
        last_modified: None,
        version_id: None,
        sha256: Some(hex.clone()),
    };
    // What goes up: the pool's file in parts, or bytes in one PUT.
    let file = match &blob {
        Blob::File { path, .. } if len >= opts.multipart_from => Some(path.clone()),
        _ => None,
    };
    let local = match file {
        Some(_) => Local::of(&blob)?,
        None => Local::Bytes(Bytes::from(read_all(blob).await?)),
    };
    if let (Local::Bytes(body), true) = (&local, len < opts.put_first_below) {
        match client
            .put_if_absent(bucket, &key, body.clone(), &headers)
            .await?
        {
            PutOutcome::Stored { etag } => {
                let meta = sent(etag);
                client.record_sent(bucket, &key, *oid, &meta);
                return Ok(Uploaded::Sent(meta));
            }
            // The key is taken: by the object, proven below, or replaced.
            PutOutcome::Exists => {}
        }
    }
    let body = match &local {
        Local::Bytes(body) => Some(body.clone()),
        Local::File(..) => None,
    };
    match presence(client, layout, *oid, len, Some(local), opts.part_size).await? {
        Presence::Proven(_, meta) => return Ok(Uploaded::Skipped(meta)),
        Presence::Absent => {}
        Presence::Unproven(why) => log::warn!("{why}; replacing it with object {oid}"),
    }
    let meta = match (file, body) {
        (Some(path), _) => {
            client
                .put_multipart(bucket, &key, &path, opts.part_size, &headers)
                .await?
        }
        // A single PUT answers with the real ETag: no HEAD needed.
        (None, body) => sent(
            client
                .put_with(bucket, &key, body.expect("read when not a file"), &headers)
                .await?,
        ),
    };
    if meta.size != len {
        return Err(UploadError::Size {
            object,
            want: len,
            got: meta.size,
        });
    }
    client.record_sent(bucket, &key, *oid, &meta);
    Ok(Uploaded::Sent(meta))
}

async fn read_all(blob: Blob) -> Result<Vec<u8>, UploadError> {
    let bytes = crate::blocking(move || blob.to_vec()).await?;
    Ok(bytes)
}
