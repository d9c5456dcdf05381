//! Whether an S3 object remote holds an object: shown, never taken on a
//! claim (DESIGN.md "Trust").
//!
//! A key's size and its `x-amz-meta-sha256` are claims: whoever can write
//! the bucket (a lab member, a planted object) can set both over any
//! bytes, and a `412` to `If-None-Match: *` says only that the key is
//! taken. What shows the bytes at the key are the object, cheapest first:
//!
//! 1. **Sent here**: this daemon sent (or proved) the object at the key and
//!    recorded the ETag the store answered ([`SentObject`]); the key still
//!    answers that ETag. A store gives other bytes another ETag.
//! 2. **The store's MD5**: a single-part ETag is the MD5 the store computed
//!    over the bytes it holds; a multipart `<md5>-N` one is the MD5 of its
//!    parts' MD5s, reproduced here in a part size that cuts the object in
//!    N ([`super::parts::candidates`]). Either must equal the same digest
//!    computed over the bytes this machine has: finding other bytes with
//!    the same MD5 is a second preimage, out of anyone's reach.
//! 3. **A read**: the caller reads the key and hashes it (no bytes here to
//!    compare with): [`super::Remote::proves_held`].
//!
//! A `x-amz-checksum-sha256` is not used: Ceph RGW before Squid neither
//! computes nor checks it, so it would be one more claim there; a store
//! that verifies it needs a probe this module does not make yet.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use md5::{Digest, Md5};

use super::parts::{self, NoPartSize};
use super::UploadError;
use crate::pool::{Blob, Oid};
use crate::stores::{ObjectLayout, ObjectMeta, S3Client, SentObject};

/// Whether `source` (an object remote as recorded, `s3://bucket/prefix`,
/// or an Indexd's base URL) is one the user trusts at its word in the
/// `trust_claims` setting (a comma-separated list; none by default): its
/// claims (`x-amz-meta-sha256` and size; an Indexd record and a HEAD's
/// size) are then taken without the bytes shown. Compared without a
/// trailing `/`.
pub fn trusted(list: Option<&str>, source: &str) -> bool {
    let source = source.trim_end_matches('/');
    list.unwrap_or_default()
        .split(',')
        .map(|s| s.trim().trim_end_matches('/'))
        .any(|s| !s.is_empty() && s == source)
}

/// What is at the key of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Nothing.
    Absent,
    /// The object, shown as [`Proof`] says.
    Proven(Proof, ObjectMeta),
    /// Something not shown to be the object; why. With the bytes here, it
    /// is replaced; without, it is read ([`super::Remote::proves_held`]).
    Unproven(String),
}

/// How an object was shown to be at its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// This daemon sent or proved it, and the key answers the same ETag.
    Sent,
    /// The store's MD5 ETag equals the MD5 of the bytes here.
    Md5,
    /// The store's multipart ETag equals the parts' MD5s of the bytes here.
    Parts,
    /// Read from the key and hashed here.
    Read,
}

/// The bytes this machine has of the object, to compare with the store's
/// digest of its own.
pub enum Local {
    Bytes(bytes::Bytes),
    /// A file of `len` bytes, read with `pread` (a shared offset untouched).
    File(std::fs::File, u64, PathBuf),
}

impl Local {
    /// The bytes of `blob`, without reading a file's yet.
    pub fn of(blob: &Blob) -> Result<Local, UploadError> {
        Ok(match blob {
            Blob::Bytes(b) => Local::Bytes(bytes::Bytes::copy_from_slice(b)),
            Blob::File { file, len, path } => {
                let file = file
                    .try_clone()
                    .map_err(|e| crate::IoError::new("open again", path, e))?;
                Local::File(file, *len, path.clone())
            }
        })
    }
}

impl S3Client {
    /// Records `meta` (its ETag) as what the key of `oid` holds, shown by a
    /// send or a proof.
    pub(super) fn record_sent(&self, bucket: &str, key: &str, oid: Oid, meta: &ObjectMeta) {
        let (Some(journal), Some(etag)) = (self.journal(), meta.etag.as_deref()) else {
            return;
        };
        journal.sent(&SentObject {
            endpoint: self.endpoint().to_string(),
            bucket: bucket.into(),
            key: key.into(),
            oid,
            size: meta.size,
            etag: etag.to_string(),
        });
    }

    pub(super) fn sent_here(&self, bucket: &str, key: &str, oid: Oid, meta: &ObjectMeta) -> bool {
        let (Some(journal), Some(etag)) = (self.journal(), meta.etag.as_deref()) else {
            return false;
        };
        journal
            .sent_at(self.endpoint(), bucket, key)
            .is_some_and(|s| s.oid == oid && s.size == meta.size && s.etag == etag)
    }
}

/// What `layout`'s key of `oid` (`len` bytes) holds: see the module's
/// notes. `part_size` is the one this daemon uploads in, tried first for a
/// multipart ETag. Nothing is read from the store but a HEAD.
pub async fn presence(
    client: &S3Client,
    layout: &ObjectLayout,
    oid: Oid,
    len: u64,
    local: Option<Local>,
    part_size: u64,
) -> Result<Presence, UploadError> {
    let key = layout.key(&oid);
    let location = format!("s3://{}/{key}", layout.bucket);
    let Some(meta) = client.head(&layout.bucket, &key).await? else {
        return Ok(Presence::Absent);
    };
    if meta.size != len {
        return Ok(Presence::Unproven(format!(
            "{location} holds {} bytes, not the object's {len}",
            meta.size
        )));
    }
    if client.sent_here(&layout.bucket, &key, oid, &meta) {
        return Ok(Presence::Proven(Proof::Sent, meta));
    }
    let Some(etag) = meta.etag.clone() else {
        return Ok(Presence::Unproven(format!(
            "{location} has no ETag to check"
        )));
    };
    let Some(local) = local else {
        return Ok(Presence::Unproven(format!(
            "{location} was not sent from here, and its bytes are not here to compare with"
        )));
    };
    let path = match &local {
        Local::File(_, _, path) => path.clone(),
        Local::Bytes(_) => PathBuf::new(),
    };
    let proof = crate::blocking(move || store_digest_matches(&etag, len, &local, part_size))
        .await
        .map_err(|e| crate::IoError::new("read, to compare with the store's ETag,", path, e))?;
    match proof {
        Ok(proof) => {
            client.record_sent(&layout.bucket, &key, oid, &meta);
            Ok(Presence::Proven(proof, meta))
        }
        Err(why) => Ok(Presence::Unproven(format!("{location}: {why}"))),
    }
}

/// Why a store's ETag does not show that it holds the object's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unshown {
    #[error("its ETag {etag} is not an MD5 of its bytes, so cannot show what they are")]
    NotMd5 { etag: String },
    #[error("its ETag {etag} is the MD5 of other bytes than the object's ({ours})")]
    OtherBytes { etag: String, ours: String },
    #[error("its multipart ETag {etag} cannot be checked: {why}")]
    Unverifiable { etag: String, why: NoPartSize },
    #[error("its multipart ETag {etag} is not that of the object's bytes in any part size that gives {count} parts")]
    NoPartSizeGivesIt { etag: String, count: u64 },
}

/// Whether the store's ETag `etag` is the digest of `local`'s bytes: the
/// proof, or why not.
fn store_digest_matches(
    etag: &str,
    len: u64,
    local: &Local,
    part_size: u64,
) -> std::io::Result<Result<Proof, Unshown>> {
    if !crate::stores::is_content_etag(etag) {
        return Ok(Err(Unshown::NotMd5 { etag: etag.into() }));
    }
    let etag = etag.to_ascii_lowercase();
    let Some(count) = parts::parts_of(&etag) else {
        let mut md5 = Md5::new();
        each_chunk(local, 0..len, |chunk| md5.update(chunk))?;
        let ours = hex::encode(md5.finalize());
        return Ok(match ours == etag {
            true => Ok(Proof::Md5),
            false => Err(Unshown::OtherBytes { etag, ours }),
        });
    };
    let sizes = match parts::candidates(len, count, Some(part_size), None) {
        Ok(sizes) => sizes,
        Err(why) => return Ok(Err(Unshown::Unverifiable { etag, why })),
    };
    let mut found = false;
    for size in sizes {
        if parts_etag(local, len, size)? == etag {
            found = true;
            break;
        }
    }
    Ok(match found {
        true => Ok(Proof::Parts),
        false => Err(Unshown::NoPartSizeGivesIt { etag, count }),
    })
}

/// A part's index and its md5.
type PartDigest = (u64, [u8; 16]);

/// S3's multipart ETag of `local` (`len` bytes) cut in parts of `part`
/// bytes: each part's md5, parts spread over as many threads as the
/// machine has cores (one md5 is one core's work: for a GiB, a second and
/// a half on this machine), then the md5 of those digests, `<hex>-<parts>`.
fn parts_etag(local: &Local, len: u64, part: u64) -> std::io::Result<String> {
    let count = len.div_ceil(part.max(1)).max(1);
    let next = AtomicU64::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(count as usize);
    let hash_parts = || -> std::io::Result<Vec<PartDigest>> {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                return Ok(done);
            }
            let from = i * part;
            let mut md5 = Md5::new();
            each_chunk(local, from..(from + part).min(len), |c| md5.update(c))?;
            done.push((i, md5.finalize().into()));
        }
    };
    let hashed: Vec<std::io::Result<Vec<PartDigest>>> = std::thread::scope(|s| {
        let running: Vec<_> = (0..threads).map(|_| s.spawn(hash_parts)).collect();
        running
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut digests = vec![[0u8; 16]; count as usize];
    for part in hashed {
        for (i, digest) in part? {
            digests[i as usize] = digest;
        }
    }
    Ok(format!(
        "{}-{count}",
        hex::encode(Md5::digest(digests.concat()))
    ))
}

/// Feeds the bytes `range` of `local` to `f`, 8 MiB at a time.
fn each_chunk(
    local: &Local,
    range: std::ops::Range<u64>,
    mut f: impl FnMut(&[u8]),
) -> std::io::Result<()> {
    match local {
        Local::Bytes(b) => {
            f(&b[range.start as usize..range.end as usize]);
            Ok(())
        }
        Local::File(file, _, _) => {
            let mut buf = vec![0u8; (range.end - range.start).min(8 << 20) as usize];
            let mut at = range.start;
            while at < range.end {
                let want = (range.end - at).min(buf.len() as u64) as usize;
                file.read_exact_at(&mut buf[..want], at)?;
                f(&buf[..want]);
                at += want as u64;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PART: u64 = 5 << 20;

    fn expected_etag(bytes: &[u8], part: usize) -> String {
        let digests: Vec<u8> = bytes
            .chunks(part)
            .flat_map(|c| Md5::digest(c).to_vec())
            .collect();
        format!(
            "{}-{}",
            hex::encode(Md5::digest(&digests)),
            bytes.len().div_ceil(part)
        )
    }

    #[test]
    fn a_single_part_etag_proves_only_the_bytes_whose_md5_it_is() {
        let ours = b"the object".as_slice();
        let etag = hex::encode(Md5::digest(ours));
        let local = |b: &'static [u8]| Local::Bytes(bytes::Bytes::from_static(b));
        let got = store_digest_matches(&etag, 10, &local(ours), PART).unwrap();
        assert_eq!(got, Ok(Proof::Md5));
        let got = store_digest_matches(&etag, 10, &local(b"other byte"), PART).unwrap();
        assert!(got.unwrap_err().to_string().contains("MD5 of other bytes"));
    }

    #[test]
    fn a_multipart_etag_proves_the_bytes_in_a_part_size_that_reproduces_it() {
        let ours: Vec<u8> = (0..(12u32 << 20)).map(|i| (i % 251) as u8).collect();
        let etag = expected_etag(&ours, PART as usize);
        let memory = Local::Bytes(bytes::Bytes::from(ours.clone()));
        assert_eq!(parts_etag(&memory, ours.len() as u64, PART).unwrap(), etag);
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(&ours, 0).unwrap();
        let local = Local::File(file, ours.len() as u64, PathBuf::from("x"));
        let got = store_digest_matches(&etag, ours.len() as u64, &local, PART).unwrap();
        assert_eq!(got, Ok(Proof::Parts));
        let mut other = ours.clone();
        other[7 << 20] ^= 1;
        let local = Local::Bytes(bytes::Bytes::from(other));
        let got = store_digest_matches(&etag, ours.len() as u64, &local, PART);
        assert!(got.unwrap().is_err());
    }

    #[test]
    fn only_a_source_named_in_the_setting_is_trusted_at_its_word() {
        let list = Some("s3://lab/lfs/, https://indexd.example.org");
        assert!(trusted(list, "s3://lab/lfs"));
        assert!(trusted(list, "https://indexd.example.org/"));
        assert!(!trusted(list, "s3://lab"));
        assert!(!trusted(list, "s3://lab/lfs/more"));
        assert!(!trusted(None, "s3://lab/lfs"));
        assert!(!trusted(Some(""), ""));
    }

    #[test]
    fn an_etag_that_is_no_md5_proves_nothing() {
        let local = Local::Bytes(bytes::Bytes::from_static(b"abc"));
        let got = store_digest_matches("v1-opaque", 3, &local, PART).unwrap();
        assert!(got.unwrap_err().to_string().contains("not an MD5"));
    }
}
