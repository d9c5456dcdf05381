//! Digests of an object's bytes on their way out: the one reader of a
//! blob's parts, the one md5 of a blob, the pass that gives a large
//! object's md5, sha256 and parts' md5s at once (what a record registered
//! before its upload names, and the ETags its parts must get), and the
//! threads that hash parts beside their upload. Reads are in steps of at
//! most 8 MiB, none across a part's end.

use std::sync::Arc;

use bytes::Bytes;
use md5::{Digest, Md5};
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::blocking;
use crate::pool::{Blob, Oid, PoolError};

/// Parts waiting for each hash's thread of a [`Hashing`].
const HASH_QUEUE: usize = 2;

/// What stops a digest of an object's bytes.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("reading the object: {0}")]
    Read(#[from] PoolError),
    #[error("the bytes read are not object {oid} (sha256 {got}, or another md5): not sent")]
    NotTheObject { oid: Oid, got: Oid },
    #[error("the hashing of object {oid} stopped before its end (the daemon is stopping)")]
    Stopped { oid: Oid },
}

/// The md5 of `blob`, hex, in one pass on this thread.
pub fn md5_hex(blob: &Blob) -> Result<String, PoolError> {
    pass(blob, Md5::new()).map(hex::encode)
}

/// `len` bytes of `blob` at `offset`, read off the async threads.
pub async fn read_part(blob: Arc<Blob>, offset: u64, len: u64) -> Result<Vec<u8>, PoolError> {
    blocking(move || blob.read_at(offset, len)).await
}

/// The md5 of `blob`, read once off the async threads.
pub async fn md5_of(blob: Arc<Blob>) -> Result<String, PoolError> {
    blocking(move || md5_hex(&blob)).await
}

/// `bytes` are object `oid` (with md5 `md5` when given), or the upload is
/// refused; their md5.
pub fn check_whole(bytes: &[u8], oid: Oid, md5: Option<&str>) -> Result<String, DigestError> {
    let got = Oid::of(bytes);
    let got_md5 = hex::encode(Md5::digest(bytes));
    if got != oid || md5.is_some_and(|md5| md5 != got_md5) {
        return Err(DigestError::NotTheObject { oid, got });
    }
    Ok(got_md5)
}

/// What a pass over an object's bytes gives a record registered before
/// they go up, and the upload after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashes {
    /// The md5 of the whole.
    pub md5: String,
    /// The parts' size, and the md5 of each part of it: the ETags the
    /// store must answer for a multipart upload of those parts.
    pub part_size: u64,
    pub parts: Vec<[u8; 16]>,
}

/// The md5 of `blob` and of each of its parts of `part_size`, in one pass
/// that also shows it hashes to `oid`: the whole md5 on one thread, the
/// sha256 and the parts' md5s on another.
pub async fn checked_hashes(
    blob: Arc<Blob>,
    oid: Oid,
    part_size: u64,
) -> Result<Hashes, DigestError> {
    log::info!("object {oid}: an md5 pass over its {} bytes", blob.len());
    let part_size = part_size.max(1);
    let (md5_of, sha_of) = (blob.clone(), blob);
    let md5 = tokio::task::spawn_blocking(move || pass(&md5_of, Md5::new()));
    let sha = tokio::task::spawn_blocking(move || sha_and_parts(&sha_of, part_size));
    let (md5, sha) = (md5.await, sha.await);
    let (Ok(md5), Ok(sha)) = (md5, sha) else {
        return Err(DigestError::Stopped { oid });
    };
    let (got, parts) = sha?;
    if got != oid {
        return Err(DigestError::NotTheObject { oid, got });
    }
    Ok(Hashes {
        md5: hex::encode(md5?),
        part_size,
        parts,
    })
}

/// Read steps of at most 8 MiB, none across a part's end.
fn steps(len: u64, part_size: u64) -> impl Iterator<Item = (u64, u64)> {
    let step = 8 << 20;
    let mut offset = 0;
    std::iter::from_fn(move || {
        if offset >= len {
            return None;
        }
        let part_end = (offset / part_size + 1) * part_size;
        let n = step.min(part_end - offset).min(len - offset);
        let at = offset;
        offset += n;
        Some((at, n))
    })
}

/// `hasher` over every byte of `blob`.
fn pass<D: Digest>(blob: &Blob, mut hasher: D) -> Result<md5::digest::Output<D>, PoolError> {
    for (offset, n) in steps(blob.len(), u64::MAX) {
        hasher.update(&blob.read_at(offset, n)?);
    }
    Ok(hasher.finalize())
}

/// The sha256 of `blob` and the md5 of each of its parts of `part_size`.
fn sha_and_parts(blob: &Blob, part_size: u64) -> Result<(Oid, Vec<[u8; 16]>), PoolError> {
    let mut sha = Sha256::new();
    let mut parts = Vec::new();
    let mut part = Md5::new();
    for (offset, n) in steps(blob.len(), part_size) {
        let chunk = blob.read_at(offset, n)?;
        Digest::update(&mut sha, &chunk);
        part.update(&chunk);
        if (offset + n) % part_size == 0 || offset + n == blob.len() {
            parts.push(std::mem::replace(&mut part, Md5::new()).finalize().into());
        }
    }
    Ok((Oid::from_digest(Digest::finalize(sha).into()), parts))
}

/// The ETag S3 (and Ceph RGW) gives an object a multipart upload of these
/// parts made: the md5 of their md5s, a dash, their count.
pub fn multipart_etag(parts: &[[u8; 16]]) -> String {
    let mut whole = Md5::new();
    for part in parts {
        whole.update(part);
    }
    format!("{}-{}", hex::encode(whole.finalize()), parts.len())
}

/// What the hashes' threads made of the parts fed them.
pub(super) struct Hashed {
    pub sha256: Oid,
    /// The md5 of each part, in order: what the store's ETags must be
    /// (none when they were known before).
    pub parts: Vec<[u8; 16]>,
    /// The md5 of the whole, when it was asked for.
    pub md5: Option<String>,
}

/// The object's sha256, its parts' md5s and (when not known before) its
/// whole md5, each on a thread of the blocking pool of its own, fed the
/// parts in the object's order: no hash waits for another, nor a part's
/// upload for any.
pub(super) struct Hashing {
    sha: Chain<Sha256>,
    parts: Option<Chain<Vec<[u8; 16]>>>,
    md5: Option<Chain<Md5>>,
}

/// Where a hash's thread is fed, and the thread.
type Chain<T> = (mpsc::Sender<Bytes>, JoinHandle<T>);

impl Hashing {
    pub(super) fn start(whole_md5: bool, part_md5s: bool) -> Hashing {
        Hashing {
            sha: chain(Sha256::new(), |h, b| Digest::update(h, b)),
            parts: part_md5s.then(|| chain(Vec::new(), |md5s, b| md5s.push(Md5::digest(b).into()))),
            md5: whole_md5.then(|| chain(Md5::new(), |h, b| h.update(b))),
        }
    }

    /// What hands every hash the next part.
    pub(super) fn feeder(&self) -> Feeder {
        Feeder {
            to: [
                Some(self.sha.0.clone()),
                self.parts.as_ref().map(|(tx, _)| tx.clone()),
                self.md5.as_ref().map(|(tx, _)| tx.clone()),
            ],
        }
    }

    /// The hashes of every part fed; `None` when a thread did not finish
    /// (the runtime shutting down).
    pub(super) async fn finish(self) -> Option<Hashed> {
        let Hashing { sha, parts, md5 } = self;
        let (sha_in, sha) = sha;
        drop(sha_in);
        let parts = match parts {
            Some((parts_in, parts)) => {
                drop(parts_in);
                parts.await.ok()?
            }
            None => Vec::new(),
        };
        let md5 = match md5 {
            Some((md5_in, md5)) => {
                drop(md5_in);
                Some(hex::encode(md5.await.ok()?.finalize()))
            }
            None => None,
        };
        Some(Hashed {
            sha256: Oid::from_digest(Digest::finalize(sha.await.ok()?).into()),
            parts,
            md5,
        })
    }
}

/// Hands a part to every hash's thread.
pub(super) struct Feeder {
    to: [Option<mpsc::Sender<Bytes>>; 3],
}

impl Feeder {
    /// Hands `part` (the next in the object's order) to each; waits while
    /// HASH_QUEUE parts are ahead of it.
    pub(super) async fn feed(self, part: Bytes) {
        // A thread gone (it cannot panic) only leaves its hash short, and
        // the whole is then refused as another object.
        for to in self.to.iter().flatten() {
            let _ = to.send(part.clone()).await;
        }
    }
}

/// A hash `state` fed by `update` with every part sent to it, in order, on
/// a blocking thread; the state once the sender is dropped.
fn chain<T: Send + 'static>(
    mut state: T,
    update: fn(&mut T, &[u8]),
) -> (mpsc::Sender<Bytes>, JoinHandle<T>) {
    let (parts, mut queue) = mpsc::channel::<Bytes>(HASH_QUEUE);
    let thread = tokio::task::spawn_blocking(move || {
        while let Some(part) = queue.blocking_recv() {
            update(&mut state, &part);
        }
        state
    });
    (parts, thread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_gives_the_md5_of_the_whole_and_of_each_part_and_checks_the_sha256() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("object");
        let bytes: Vec<u8> = (0..(20u32 << 20) + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let blob = || {
            let file = std::fs::File::open(&path).unwrap();
            let len = file.metadata().unwrap().len();
            Arc::new(Blob::File {
                len,
                file,
                path: path.clone(),
            })
        };
        let oid = Oid::of(&bytes);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let part_size = 5 << 20;
        let hashes = rt.block_on(checked_hashes(blob(), oid, part_size)).unwrap();
        assert_eq!(hashes.md5, hex::encode(Md5::digest(&bytes)));
        let parts: Vec<[u8; 16]> = bytes
            .chunks(part_size as usize)
            .map(|c| Md5::digest(c).into())
            .collect();
        assert_eq!(hashes.parts.len(), 5);
        assert_eq!(hashes.parts, parts);
        let other = Oid::of(b"other");
        assert!(matches!(
            rt.block_on(checked_hashes(blob(), other, part_size)),
            Err(DigestError::NotTheObject { .. })
        ));
    }

    #[test]
    fn the_multipart_etag_is_the_md5_of_the_parts_md5s_and_their_count() {
        let parts: Vec<[u8; 16]> = [&b"first part"[..], b"second"]
            .iter()
            .map(|p| Md5::digest(p).into())
            .collect();
        let mut joined = Vec::new();
        joined.extend_from_slice(&parts[0]);
        joined.extend_from_slice(&parts[1]);
        assert_eq!(
            multipart_etag(&parts),
            format!("{}-2", hex::encode(Md5::digest(&joined)))
        );
        // Not the md5 of the whole, which a single PUT's ETag is.
        assert_ne!(
            multipart_etag(&parts[..1]),
            hex::encode(Md5::digest(b"first part"))
        );
    }
}
