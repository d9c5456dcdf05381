//! Moving entries between the pool and files elsewhere on the machine
//! without copying bytes where the filesystem allows: hard links first,
//! then reflinks, then a copy.

use std::fs::{self, File};
use std::io::{ErrorKind, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{IoContext, PoolError, Result};
use super::store::{check, identity, Checked, Put, Tier};
use super::verified::{copy_hashed, sealed, CopyFailed};
use super::{Blob, NodeFile, Oid, Pool};

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
    /// it. What reaches `dest` is the very bytes checked against the oid
    /// ([`Pool::checked`]): our own file linked and found to be the same
    /// inode afterwards (else cloned or copied from the checked
    /// descriptor), another user's file copied and hashed as it is copied.
    /// A corrupt entry is moved aside and nothing reaches `dest`.
    pub fn export(&self, oid: &Oid, dest: &Path) -> Result<Option<Placed>> {
        let _pin = self.pin(oid)?;
        match self.checked(oid)? {
            None => Ok(None),
            Some(Checked::Ours(Blob::Bytes(bytes)) | Checked::Theirs(Blob::Bytes(bytes))) => {
                let mut file = create_new(dest)?;
                file.write_all(&bytes).at("write", dest)?;
                Ok(Some(Placed::Written))
            }
            Some(Checked::Ours(Blob::File { file, path, .. })) => {
                place_ours(&file, &path, dest).map(Some)
            }
            Some(Checked::Theirs(Blob::File { file, path, .. })) => {
                let mut to = create_new(dest)?;
                match self.copy_theirs(oid, &file, &path, &mut to, dest) {
                    Ok(_) => Ok(Some(Placed::Copy)),
                    Err(e) => {
                        let _ = fs::remove_file(dest);
                        Err(e)
                    }
                }
            }
        }
    }

    /// Writes entry `oid` into `to`, a file the caller made; the number of
    /// bytes, or `None` when the pool lacks it. Checked against its oid
    /// first, as [`Pool::export`], and copied from the checked descriptor.
    /// Never a link: for a file the user may change in place (a work-tree
    /// file), which must not be the pool's. (`std::io::copy` between files
    /// is `copy_file_range`: the kernel copies, and shares extents where
    /// the filesystem can.)
    pub fn copy_into(&self, oid: &Oid, to: &mut File) -> Result<Option<u64>> {
        let _pin = self.pin(oid)?;
        let name = PathBuf::from(oid.to_hex());
        match self.checked(oid)? {
            None => Ok(None),
            Some(Checked::Ours(Blob::Bytes(bytes)) | Checked::Theirs(Blob::Bytes(bytes))) => {
                to.write_all(&bytes).at("write", name)?;
                Ok(Some(bytes.len() as u64))
            }
            Some(Checked::Ours(Blob::File { mut file, path, .. })) => {
                file.rewind().at("read", &path)?;
                let copied = std::io::copy(&mut file, to).at("copy", &path)?;
                Ok(Some(copied))
            }
            Some(Checked::Theirs(Blob::File { file, path, .. })) => {
                self.copy_theirs(oid, &file, &path, to, &name).map(Some)
            }
        }
    }

    /// Copies another user's file of entry `oid` into `to`, hashing what
    /// it writes; other bytes move the entry aside and are an error (the
    /// caller removes what was written).
    fn copy_theirs(
        &self,
        oid: &Oid,
        file: &File,
        path: &Path,
        to: &mut File,
        dest: &Path,
    ) -> Result<u64> {
        let (got, len) = copy_hashed(file, to).map_err(|e| match e {
            CopyFailed::Read(e) => PoolError::Io(crate::IoError::new("read", path, e)),
            CopyFailed::Write(e) => PoolError::Io(crate::IoError::new("copy to", dest, e)),
        })?;
        if got != *oid {
            return Err(self.bad_entry(oid, got));
        }
        Ok(len)
    }

    /// Takes the file at `path` (git-lfs's own object, say) into the pool,
    /// checking it hashes to `expect` when given. A large one is hard-linked
    /// in, so the repo and the pool share one copy (and it becomes
    /// read-only), if the link is the very file hashed; across filesystems,
    /// or if the name led elsewhere by then, it is copied.
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
        if self.holds_good(&oid)? {
            return Ok(put);
        }
        let hashed = identity(&file.metadata().at("stat", path)?);
        if let Some(link) = self.link_in_node_dir(path) {
            // The link opened through the folder's checked descriptor: the
            // very file hashed, or it is not taken.
            let opened = link.open_read().ok();
            let same = opened
                .as_ref()
                .and_then(|f| f.metadata().ok())
                .is_some_and(|m| identity(&m) == hashed);
            if let (true, Some(opened)) = (same && sealed(&file).at("stat", path)?, opened) {
                // The engine renames the link into place.
                put.stored = self
                    .large_engine()
                    .adopt_at(oid.as_bytes(), &link, opened)?;
                return Ok(put);
            }
            let _ = link.remove();
        }
        file.rewind().at("read", path)?;
        self.put_stream(Some(&oid), file)
    }
}

impl Pool {
    /// A hard link to `path` made in this node's folder (checked now, and
    /// reached through that check's descriptor only); `None` when there is
    /// no such folder or the link cannot be made there (another file
    /// system): the caller copies instead.
    fn link_in_node_dir(&self, path: &Path) -> Option<NodeFile> {
        let dir = self.partial_dir()?;
        let checked = super::node_dir::check(dir).ok()?;
        let name = super::node_dir::unique_name("adopt-");
        let link = NodeFile::new(std::sync::Arc::new(checked), dir, name);
        link.link_from(path).ok()?;
        Some(link)
    }
}

/// `dest`, created exclusively and never through a symlink planted there
/// (`fs::copy` would open and truncate whatever it points at).
fn create_new(dest: &Path) -> Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dest)
        .at("create", dest)
}

/// Our own checked file `file` (named `src` in the pool) at `dest`: a hard
/// link when `src` still names that very file once linked, else a clone or
/// a copy made from `file` itself, never from the name again.
fn place_ours(file: &File, src: &Path, dest: &Path) -> Result<Placed> {
    let hashed = identity(&file.metadata().at("stat", src)?);
    match fs::hard_link(src, dest) {
        Ok(()) => {
            let linked = fs::symlink_metadata(dest).at("stat", dest)?;
            if identity(&linked) == hashed {
                return Ok(Placed::HardLink);
            }
            // Someone renamed other bytes over the name meanwhile.
            fs::remove_file(dest).at("remove", dest)?;
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Err(e).at("link to", dest),
        Err(_) => {} // another filesystem, or links not allowed: try the next way
    }
    let mut to = create_new(dest)?;
    if reflink_copy::reflink_file(file, &to).is_ok() {
        return Ok(Placed::Reflink);
    }
    let copied = (&*file)
        .rewind()
        .and_then(|()| std::io::copy(&mut &*file, &mut to));
    if let Err(e) = copied {
        let _ = fs::remove_file(dest);
        return Err(e).at("copy to", dest);
    }
    Ok(Placed::Copy)
}
