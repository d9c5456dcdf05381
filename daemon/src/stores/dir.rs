//! A folder as an object remote (`file:///shared/lab/objects`): objects at
//! `{dir}/{oid[0:2]}/{oid[2:4]}/{oid}`, the layout of `.git/lfs/objects`.
//!
//! The folder may be shared with other users, who can plant names in it. So
//! every step below the folder itself goes through open folder handles
//! (`openat` with `O_NOFOLLOW`): a shard folder that is a symlink is refused
//! by name, never followed. No existing name is opened for writing: an
//! object is written to a temp name created exclusively in its shard folder,
//! synced, renamed into place, and the folder synced. Bytes are checked both
//! ways: what goes in comes from the pool's verified read (or is hashed while
//! it is copied), and what comes out goes into the pool, whose put checks the
//! sha256, so a planted or rotten file is an error naming the oid and path
//! and never reaches git.
//!
//! Files are created `0444` and folders `0777`, both less the daemon's
//! umask: with a group umask (`002`) and a setgid group folder, the users of
//! a group share one folder.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::pool::{Blob, Oid, Pool, PoolError};
use crate::IoError;

/// A folder object remote: its absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRemote {
    root: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{path} is a symbolic link: drsd does not follow links inside an object folder")]
    Symlink { path: PathBuf },
    #[error("{path} is in the way: it is not a folder")]
    NotAFolder { path: PathBuf },
    #[error("object {oid} at {path} is not a regular file")]
    NotAFile { oid: Oid, path: PathBuf },
    #[error("object {oid} is not in {path}")]
    Missing { oid: Oid, path: PathBuf },
    #[error("object {oid} at {path} holds {held} bytes, the pointer says {size}")]
    WrongSize {
        oid: Oid,
        path: PathBuf,
        held: u64,
        size: u64,
    },
    #[error("{path} is not object {oid}: its content is sha256 {got}; it was not used")]
    NotTheObject { oid: Oid, path: PathBuf, got: Oid },
    #[error("the pool has no object {0} to send")]
    NotInPool(Oid),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Pool(#[from] PoolError),
}

/// Why a text does not name a folder remote: the `why` of the
/// `RemoteError::BadUrl` that names the text.
#[derive(Debug, thiserror::Error)]
pub enum BadDirUrl {
    #[error("the path has . or .. in it: give the folder's own path")]
    DotSegment,
    #[error("{0}")]
    NotAUrl(url::ParseError),
    #[error("a folder remote is file:///absolute/path")]
    NotFile,
    #[error("a file:// URL names a folder on this machine: no host")]
    Host,
    #[error("a file:// URL takes no query or fragment")]
    QueryOrFragment,
    #[error("not an absolute path")]
    NotAbsolute,
}

/// What [`DirRemote::put_blob`] found or did, and the object's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirPut {
    /// The folder held the object already, whole and right.
    Present(u64),
    Written(u64),
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

impl DirRemote {
    /// From `file:///abs/path` (percent-encoded) or a plain absolute path.
    pub fn parse(text: &str) -> Result<DirRemote, BadDirUrl> {
        // Checked in the text: a URL parser would resolve them silently.
        if text
            .split('/')
            .any(|s| matches!(s, "." | ".." | "%2e%2e" | "%2E%2E"))
        {
            return Err(BadDirUrl::DotSegment);
        }
        let root = if text.starts_with('/') {
            PathBuf::from(text)
        } else {
            let url = url::Url::parse(text).map_err(BadDirUrl::NotAUrl)?;
            if url.scheme() != "file" {
                return Err(BadDirUrl::NotFile);
            }
            if url
                .host_str()
                .is_some_and(|h| !h.is_empty() && h != "localhost")
            {
                return Err(BadDirUrl::Host);
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(BadDirUrl::QueryOrFragment);
            }
            url.to_file_path().map_err(|()| BadDirUrl::NotAbsolute)?
        };
        if root.components().any(|c| {
            matches!(
                c,
                std::path::Component::ParentDir | std::path::Component::CurDir
            )
        }) {
            return Err(BadDirUrl::DotSegment);
        }
        let root = PathBuf::from(root.to_string_lossy().trim_end_matches('/'));
        let root = if root.as_os_str().is_empty() {
            PathBuf::from("/")
        } else {
            root
        };
        Ok(DirRemote { root })
    }

    /// The folder's `file://` URL, percent-encoded: one word, for
    /// `.gitattributes`.
    pub fn url(&self) -> String {
        url::Url::from_file_path(&self.root)
            .map(String::from)
            .unwrap_or_else(|()| format!("file://{}", self.root.display()))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where object `oid` is kept.
    pub fn path_of(&self, oid: &Oid) -> PathBuf {
        let (a, b, hex) = shard(oid);
        self.root.join(a).join(b).join(hex)
    }

    /// Whether the folder holds `oid` whole: a regular file of `size` bytes
    /// whose content hashes to the oid. A planted file is not "held".
    pub fn holds(&self, oid: &Oid, size: u64) -> Result<bool, DirError> {
        match self.open_object(oid, size) {
            Ok(file) => Ok(hash_of(file, &self.path_of(oid))?.0 == *oid),
            Err(DirError::Missing { .. } | DirError::WrongSize { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads object `oid` of `size` bytes into `pool`, which checks its
    /// sha256: a file of other bytes is an error naming it.
    pub fn fetch_into(&self, pool: &Pool, oid: &Oid, size: u64) -> Result<(), DirError> {
        let file = self.open_object(oid, size)?;
        match pool.put_stream(Some(oid), file) {
            Ok(_) => Ok(()),
            Err(PoolError::HashMismatch { got, .. }) => Err(DirError::NotTheObject {
                oid: *oid,
                path: self.path_of(oid),
                got,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Copies object `oid` of `size` bytes into a fresh file in `dir`
    /// (created exclusively under a random name), hashed as it is written:
    /// for an object the pool cannot take. The file is returned only when
    /// it is the object; otherwise it is removed and the error names the
    /// folder's file.
    pub fn fetch_into_file(
        &self,
        oid: &Oid,
        size: u64,
        dir: &Path,
    ) -> Result<tempfile::TempPath, DirError> {
        let src = self.open_object(oid, size)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".drsd-download-")
            .tempfile_in(dir)
            .map_err(IoError::at("create a temp file in", dir))?;
        let to = tmp.path().to_path_buf();
        let (got, len) = copy_hashing(src, tmp.as_file_mut(), &to)?;
        if got != *oid || len != size {
            return Err(DirError::NotTheObject {
                oid: *oid,
                path: self.path_of(oid),
                got,
            });
        }
        tmp.as_file()
            .sync_data()
            .map_err(IoError::at("sync", &to))?;
        Ok(tmp.into_temp_path())
    }

    /// Object `oid` of `size` bytes read whole (a small one), unchecked:
    /// the caller hashes it.
    pub fn read_whole(&self, oid: &Oid, size: u64) -> Result<Vec<u8>, DirError> {
        let mut file = self.open_object(oid, size)?;
        let mut bytes = Vec::with_capacity(size as usize);
        Read::read_to_end(&mut file, &mut bytes)
            .map_err(IoError::at("read", &self.path_of(oid)))?;
        Ok(bytes)
    }

    /// Puts `bytes`, already checked to be `oid`, in the folder unless it
    /// is there.
    pub fn put_bytes(&self, oid: &Oid, bytes: Vec<u8>) -> Result<DirPut, DirError> {
        self.put_blob(oid, Blob::Bytes(bytes), None)
    }

    /// Puts pool entry `oid` in the folder unless it is there; the pool's
    /// verified read is what goes in.
    pub fn put_from_pool(&self, pool: &Pool, oid: &Oid) -> Result<DirPut, DirError> {
        let blob = pool.get_verified(oid)?.ok_or(DirError::NotInPool(*oid))?;
        self.put_blob(oid, blob, None)
    }

    /// Puts the file at `path` in the folder as object `oid`, hashed while
    /// it is copied: a file of other bytes is refused and nothing is left.
    pub fn put_from_file(&self, path: &Path, oid: &Oid) -> Result<DirPut, DirError> {
        let file = File::open(path).map_err(IoError::at("open", path))?;
        let len = file.metadata().map_err(IoError::at("stat", path))?.len();
        let blob = Blob::File {
            file,
            len,
            path: path.to_path_buf(),
        };
        self.put_blob(oid, blob, Some(path))
    }

    /// Writes `blob` as `oid` (see the module doc). `unchecked`: the blob's
    /// source when its bytes are not verified yet; they are hashed on the way.
    fn put_blob(
        &self,
        oid: &Oid,
        blob: Blob,
        unchecked: Option<&Path>,
    ) -> Result<DirPut, DirError> {
        let len = blob.len();
        if self.holds(oid, len)? {
            return Ok(DirPut::Present(len));
        }
        let (a, b, hex) = shard(oid);
        let root = self.open_root()?;
        let outer = self.subdir(&root, &self.root, &a, true)?;
        let shard_path = self.root.join(&a).join(&b);
        let shard_dir = self.subdir(&outer, &self.root.join(&a), &b, true)?;
        let (mut tmp, tmp_path) = temp_in(&shard_dir, &shard_path)?;
        let io = |op| IoError::at(op, &tmp_path);
        match unchecked {
            Some(source) => {
                let (got, _) = copy_hashing(blob.into_reader(), &mut tmp, &tmp_path)?;
                if got != *oid {
                    return Err(DirError::NotTheObject {
                        oid: *oid,
                        path: source.to_path_buf(),
                        got,
                    });
                }
            }
            None => fill(blob, &mut tmp).map_err(io("write"))?,
        }
        tmp.as_file().sync_all().map_err(io("sync"))?;
        let name = tmp_path.file_name().expect("a temp file has a name");
        // rename(2) replaces the name (a wrong file planted there included),
        // never what a link there points at.
        rustix::fs::renameat(&shard_dir, name, &shard_dir, hex.as_str())
            .map_err(|e| IoError::new("rename into", self.path_of(oid), e.into()))?;
        let _ = tmp.disarm();
        rustix::fs::fsync(&shard_dir).map_err(|e| IoError::new("sync", shard_path, e.into()))?;
        Ok(DirPut::Written(len))
    }

    /// Whether objects can be written here: a temp file created exclusively
    /// in the folder, then removed.
    pub fn check_writable(&self) -> Result<(), DirError> {
        let root = self.open_root()?;
        // Dropped: removed again.
        temp_in(&root, &self.root)?;
        Ok(())
    }

    /// The object's file, opened for reading without following a link at
    /// any step, and found to be a regular file of `size` bytes.
    fn open_object(&self, oid: &Oid, size: u64) -> Result<File, DirError> {
        let (a, b, hex) = shard(oid);
        let path = self.path_of(oid);
        let missing = || DirError::Missing {
            oid: *oid,
            path: path.clone(),
        };
        let root = self.open_root()?;
        let Some(outer) = self.subdir_if(&root, &self.root, &a)? else {
            return Err(missing());
        };
        let Some(inner) = self.subdir_if(&outer, &self.root.join(&a), &b)? else {
            return Err(missing());
        };
        // O_NONBLOCK: a planted FIFO must not hang the open.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = match rustix::fs::openat(&inner, hex.as_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(missing()),
            Err(Errno::LOOP) => return Err(DirError::Symlink { path }),
            Err(e) => return Err(IoError::new("open", path, e.into()).into()),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| IoError::new("stat", &path, e.into()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(DirError::NotAFile { oid: *oid, path });
        }
        let held = stat.st_size as u64;
        if held != size {
            return Err(DirError::WrongSize {
                oid: *oid,
                path,
                held,
                size,
            });
        }
        Ok(File::from(fd))
    }

    /// The folder itself, as the user named it (a link to it is the user's
    /// own choice).
    fn open_root(&self) -> Result<OwnedFd, DirError> {
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        rustix::fs::open(&self.root, flags, Mode::empty())
            .map_err(|e| IoError::new("open the object folder", &self.root, e.into()).into())
    }

    /// `parent/name`, a folder, not a link; `None` when absent.
    fn subdir_if(
        &self,
        parent: &OwnedFd,
        parent_path: &Path,
        name: &str,
    ) -> Result<Option<OwnedFd>, DirError> {
        let path = parent_path.join(name);
        match rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP | Errno::NOTDIR) => Err(not_a_folder(parent, name, path)),
            Err(e) => Err(IoError::new("open", path, e.into()).into()),
        }
    }

    /// `parent/name`, created when absent (and `create`).
    fn subdir(
        &self,
        parent: &OwnedFd,
        parent_path: &Path,
        name: &str,
        create: bool,
    ) -> Result<OwnedFd, DirError> {
        let path = parent_path.join(name);
        if let Some(fd) = self.subdir_if(parent, parent_path, name)? {
            return Ok(fd);
        }
        if create {
            match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o777)) {
                // Another writer made it first: as good.
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(IoError::new("create folder", path, e.into()).into()),
            }
            rustix::fs::fsync(parent).map_err(|e| IoError::new("sync", parent_path, e.into()))?;
        }
        self.subdir_if(parent, parent_path, name)?
            .ok_or_else(|| IoError::new("open", path, Errno::NOENT.into()).into())
    }
}

/// Why `parent/name` could not be opened as a folder: a link, or a file.
fn not_a_folder(parent: &OwnedFd, name: &str, path: PathBuf) -> DirError {
    match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            DirError::Symlink { path }
        }
        _ => DirError::NotAFolder { path },
    }
}

/// `(oid[0:2], oid[2:4], oid)`.
fn shard(oid: &Oid) -> (String, String, String) {
    let hex = oid.to_hex();
    (hex[0..2].to_string(), hex[2..4].to_string(), hex)
}

/// A new file under a random name in the folder `dir` (at `dir_path`),
/// created exclusively (`O_EXCL | O_NOFOLLOW`), `0444` less the umask; it
/// is removed when dropped, unless disarmed.
fn temp_in(dir: &OwnedFd, dir_path: &Path) -> Result<(TempFile, PathBuf), DirError> {
    let made = tempfile::Builder::new()
        .prefix(".drsd-")
        .suffix(".tmp")
        .make_in(dir_path, |p| {
            let name = p.file_name().expect("tempfile names a file");
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o444))
                .map(File::from)
                .map_err(std::io::Error::from)
        })
        .map_err(IoError::at("create a temp file in", dir_path))?;
    let (file, path) = made.into_parts();
    let name = path.file_name().expect("a temp file has a name").to_owned();
    let full = path.to_path_buf();
    // Removed through the folder handle, not the path: `path` is forgotten.
    let _ = path.keep();
    let dir = dir
        .as_fd()
        .try_clone_to_owned()
        .map_err(IoError::at("open", dir_path))?;
    let tmp = TempFile {
        file,
        dir,
        name: Some(name),
    };
    Ok((tmp, full))
}

/// A temp file removed from its folder (through the folder's handle) when
/// dropped, unless disarmed.
struct TempFile {
    file: File,
    dir: OwnedFd,
    name: Option<std::ffi::OsString>,
}

impl TempFile {
    fn as_file(&self) -> &File {
        &self.file
    }

    fn disarm(&mut self) -> Option<std::ffi::OsString> {
        self.name.take()
    }
}

impl Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = rustix::fs::unlinkat(&self.dir, name.as_os_str(), AtFlags::empty());
        }
    }
}

/// Verified bytes into `tmp`: a reflink of the pool's file where the file
/// system shares blocks (same file system, btrfs/XFS), else a copy. Not a
/// hard link: the pool's files are owner-only and a link shares that mode,
/// so the folder's other users could not read the object.
fn fill(blob: Blob, tmp: &mut TempFile) -> std::io::Result<()> {
    if let Blob::File { file, .. } = &blob {
        if reflink_copy::reflink_file(file, &tmp.file).is_ok() {
            return Ok(());
        }
    }
    std::io::copy(&mut blob.into_reader(), tmp).map(|_| ())
}

/// Copies `src` into `dst`, hashing it: its oid and length.
fn copy_hashing(
    mut src: impl Read,
    dst: &mut impl Write,
    path: &Path,
) -> Result<(Oid, u64), DirError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = src.read(&mut buf).map_err(IoError::at("read for", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])
            .map_err(IoError::at("write", path))?;
        len += n as u64;
    }
    Ok((Oid::from_digest(hasher.finalize().into()), len))
}

/// The sha256 of `file`'s content.
fn hash_of(file: File, path: &Path) -> Result<(Oid, u64), DirError> {
    copy_hashing(file, &mut std::io::sink(), path)
}

#[cfg(test)]
mod tests;
