//! Moving entries between the pool and files elsewhere on the machine
//! without copying bytes where the filesystem allows: hard links first,
//! then reflinks, then a copy.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::{IoContext, Result};
use super::store::{check, Put, Tier};
use super::{Blob, Oid, Pool};

/// How an entry reached its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placed {
    /// The pool's own file, linked: no bytes written, one copy on disk.
    HardLink,
    Reflink,
    Copy,
    /// A kv entry, written out.
    Written,
}

impl Pool {
    /// Puts entry `oid` at `dest`, which must not exist. The result is
    /// read-only when it shares the pool's file. `None` when the pool lacks
    /// it. The entry is checked against its oid first ([`Pool::get_verified`]):
    /// a corrupt one is moved aside and nothing reaches `dest`.
    pub fn export(&self, oid: &Oid, dest: &Path) -> Result<Option<Placed>> {
        let _pin = self.pin(oid)?;
        match self.get_verified(oid)? {
            None => Ok(None),
            Some(Blob::Bytes(bytes)) => {
                let mut file = File::options()
                    .write(true)
                    .create_new(true)
                    .open(dest)
                    .at("create", dest)?;
                file.write_all(&bytes).at("write", dest)?;
                Ok(Some(Placed::Written))
            }
            Some(Blob::File { path, .. }) => place_file(&path, dest).map(Some),
        }
    }

    /// Writes entry `oid` into `to`, a file the caller made; the number of
    /// bytes, or `None` when the pool lacks it. Checked against its oid
    /// first, as [`Pool::export`]. Never a link: for a file the user may
    /// change in place (a work-tree file), which must not be the pool's.
    /// (`std::io::copy` between files is `copy_file_range`: the kernel
    /// copies, and shares extents where the filesystem can.)
    pub fn copy_into(&self, oid: &Oid, to: &mut File) -> Result<Option<u64>> {
        let _pin = self.pin(oid)?;
        match self.get_verified(oid)? {
            None => Ok(None),
            Some(Blob::Bytes(bytes)) => {
                to.write_all(&bytes).at("write", oid.to_hex())?;
                Ok(Some(bytes.len() as u64))
            }
            Some(Blob::File { path, .. }) => {
                let mut from = File::open(&path).at("open", &path)?;
                let copied = std::io::copy(&mut from, to).at("copy", &path)?;
                Ok(Some(copied))
            }
        }
    }

    /// Takes the file at `path` (git-lfs's own object, say) into the pool,
    /// checking it hashes to `expect` when given. A large one is hard-linked
    /// in, so the repo and the pool share one copy (and it becomes
    /// read-only); across filesystems it is copied.
    pub fn adopt_file(&self, path: &Path, expect: Option<&Oid>) -> Result<Put> {
        let mut file = File::open(path).at("open", path)?;
        let len = file.metadata().at("stat", path)?.len();
        if self.tier_for(len) == Tier::Kv {
            return self.put_stream(expect, file);
        }
        let mut hasher = Sha256::new();
        std::io::copy(&mut file, &mut hasher).at("read", path)?;
        let oid = Oid::from_digest(hasher.finalize().into());
        check(expect, oid, len)?;
        let _pin = self.pin(&oid)?;
        let mut put = Put {
            oid,
            len,
            tier: Tier::Large,
            stored: false,
        };
        if self.has(&oid)? {
            return Ok(put);
        }
        if let Some(dir) = self.partial_dir() {
            let link = tempfile::Builder::new()
                .prefix("adopt-")
                .make_in(dir, |p| fs::hard_link(path, p));
            if let Ok(link) = link {
                // The engine renames the link into place; keep() stops the
                // temp guard from deleting the adopted name afterwards.
                put.stored = self.large_engine().adopt(oid.as_bytes(), link.path())?;
                let _ = link.into_temp_path().keep();
                return Ok(put);
            }
        }
        self.put_file(Some(&oid), path)
    }
}

fn place_file(src: &Path, dest: &Path) -> Result<Placed> {
    match fs::hard_link(src, dest) {
        Ok(()) => return Ok(Placed::HardLink),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Err(e).at("link to", dest),
        Err(_) => {} // another filesystem, or links not allowed: try the next way
    }
    if reflink_copy::reflink(src, dest).is_ok() {
        return Ok(Placed::Reflink);
    }
    // Created exclusively, never through a symlink at `dest` (fs::copy
    // would open and truncate whatever a link planted there points at).
    let mut to = File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dest)
        .at("copy to", dest)?;
    let mut from = File::open(src).at("open", src)?;
    if let Err(e) = std::io::copy(&mut from, &mut to) {
        let _ = fs::remove_file(dest);
        return Err(e).at("copy to", dest);
    }
    Ok(Placed::Copy)
}
