//! Checking an entry against its oid on its way out of the pool, and
//! remembering which large files were checked since they last changed.
//!
//! A pool entry was verified when it was stored, but bytes rot and a large
//! file is shared by hard link with every repo that holds it, where any tool
//! can write through it. So what leaves the pool for git is hashed again,
//! unless this process verified the very file since it was last changed:
//! same device, inode, length, modification time and status-change time
//! (ctime). The modification time alone is not enough: a tool writing
//! through a repo's link can set it back (`rsync --inplace -t`, `touch -r`),
//! but every write, chmod, link or rename moves the ctime, and no
//! unprivileged process can set that back. So a link the pool or git-lfs
//! makes to the file also costs one more hash at its next read-out: the
//! price of not telling our own changes from anyone else's. What is left
//! is a change within one tick of the filesystem's clock after the stamp
//! was taken (git's "racily clean" case); and bit rot, which changes no
//! stamp and is what `pool verify` is for. kv entries are small and always
//! hashed.
//!
//! All of that holds for a file only this user can change: one of ours,
//! writable by no one else ([`sealed`]). In a lab's shared folder an entry
//! may be another member's file, which its owner can make writable and
//! change at any moment after any check (through any link to it): such a
//! file is never linked into a repo nor handed on as it is, only copied,
//! and hashed as it is copied ([`copy_hashed`]), so what goes on is the
//! very bytes that were hashed.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::backend::Blob;
use super::Oid;

/// What identifies one state of a file: a write changes the ctime (and the
/// modification time, which may be set back), a replacement the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(file: &File) -> std::io::Result<Stamp> {
        let m = file.metadata()?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// The stamp of a large blob's open file; `None` for bytes.
    pub(crate) fn of_blob(blob: &Blob) -> std::io::Result<Option<Stamp>> {
        match blob {
            Blob::Bytes(_) => Ok(None),
            Blob::File { file, .. } => Stamp::of(file).map(Some),
        }
    }
}

/// Large files verified by this process, each with the stamp it had then.
/// In memory: a restarted daemon hashes each file once more.
#[derive(Default)]
pub(crate) struct Verified(Mutex<HashMap<Oid, Stamp>>);

impl Verified {
    /// The map, taken over from a panicked holder (`crate::lock`): it only
    /// ever holds whole entries, and a wrong miss costs one more hash,
    /// never a wrong hit.
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Oid, Stamp>> {
        crate::lock::lock(&self.0)
    }

    pub(crate) fn record(&self, oid: Oid, stamp: Stamp) {
        self.map().insert(oid, stamp);
    }

    /// True when `oid`'s file was verified and has not changed since.
    pub(crate) fn holds(&self, oid: &Oid, stamp: &Stamp) -> bool {
        self.map().get(oid) == Some(stamp)
    }

    pub(crate) fn forget(&self, oid: &Oid) {
        self.map().remove(oid);
    }
}

/// Read size of [`hash_blob`].
const CHUNK: usize = 1 << 20;

/// The sha256 of a blob's whole value. A file is read with positioned reads,
/// so the blob can still be read from its start afterwards.
pub(crate) fn hash_blob(blob: &Blob) -> std::io::Result<Oid> {
    let mut hasher = Sha256::new();
    match blob {
        Blob::Bytes(bytes) => hasher.update(bytes),
        Blob::File { file, .. } => {
            let mut buf = vec![0u8; CHUNK];
            let mut at = 0u64;
            loop {
                let n = file.read_at(&mut buf, at)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                at += n as u64;
            }
        }
    }
    Ok(Oid::from_digest(hasher.finalize().into()))
}

/// Whether only this process's user can change `file`'s bytes: it is ours
/// and no group or other may write it. Another member's file in a shared
/// folder is not (its owner may chmod it and write), nor one of ours that
/// someone made group-writable.
pub(crate) fn sealed(file: &File) -> std::io::Result<bool> {
    let meta = file.metadata()?;
    let me = rustix::process::geteuid().as_raw();
    Ok(meta.uid() == me && meta.mode() & 0o022 == 0)
}

/// Where [`copy_hashed`] failed: reading the source or writing the copy.
#[derive(Debug)]
pub(crate) enum CopyFailed {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copies `file` from its start into `to`, hashing exactly the buffers
/// written: the digest and length of what `to` received, whatever the
/// source's owner does to it meanwhile.
pub(crate) fn copy_hashed(file: &File, to: &mut dyn Write) -> Result<(Oid, u64), CopyFailed> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at).map_err(CopyFailed::Read)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n]).map_err(CopyFailed::Write)?;
        at += n as u64;
    }
    to.flush().map_err(CopyFailed::Write)?;
    Ok((Oid::from_digest(hasher.finalize().into()), at))
}
