//! The large tier's engine: plain read-only files on the local disk, one
//! per blob, so they can be hard-linked or reflinked into repos instead of
//! copied. Owns the on-disk layout (`{hex[0:2]}/{hex[2:4]}/{hex}`), the
//! stage folder where files are written before they are committed, and
//! the quarantine folder for entries that no longer match their key.

use std::fs::{self, File, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use super::backend::{Backend, Blob, Staged};
use super::error::{IoContext, PoolError, Result};

/// The large-tier engine: one read-only file per blob at
/// `{hex[0:2]}/{hex[2:4]}/{hex}`, written in the engine's own `stage/` folder
/// (same filesystem) and committed by fsync, rename, fsync of the folder.
pub struct LocalEngine {
    root: PathBuf,
    stage: PathBuf,
    /// `local`, or `shared-dir` when opened as a team's shared folder.
    name: &'static str,
    // A shared flock held while open: only an opener that gets it exclusive
    // (no other process has the engine open) may clear the stage folder.
    _lock: File,
}

const STAGE: &str = "stage";
/// Where entries whose bytes do not match their key are moved: not a shard
/// name, so no lookup ever sees them.
pub const QUARANTINE: &str = "quarantine";

impl LocalEngine {
    /// Opens or creates the engine at `root`, removing whatever a crash left
    /// in the stage folder (nothing there was ever committed).
    pub fn open(root: &Path) -> Result<LocalEngine> {
        let stage = root.join(STAGE);
        fs::create_dir_all(&stage).at("create folder", &stage)?;
        let lock_path = root.join("stage.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .at("open", &lock_path)?;
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB).is_ok() {
            for entry in fs::read_dir(&stage).at("list stage folder", &stage)? {
                let path = entry.at("list stage folder", &stage)?.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    remove_quietly(&path)
                };
                removed.at("remove stale stage file", &path)?;
            }
        }
        flock(&lock, libc::LOCK_SH).at("lock", &lock_path)?;
        Ok(LocalEngine {
            root: root.to_path_buf(),
            stage,
            name: "local",
            _lock: lock,
        })
    }

    /// The same engine in a team's shared folder (NFS, Lustre, GPFS): what
    /// it relies on there is close-to-open consistency (a file is read
    /// whole after its writer closed it) and `rename` being atomic within
    /// one folder, which those give; it never relies on `O_EXCL`. Named
    /// `shared-dir` in `status`.
    pub fn open_shared(root: &Path) -> Result<LocalEngine> {
        Ok(LocalEngine {
            name: "shared-dir",
            ..LocalEngine::open(root)?
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Files in the stage folder now: writes in flight, or a crash's leftovers.
    pub fn staged_files(&self) -> Result<usize> {
        Ok(fs::read_dir(&self.stage)
            .at("list stage folder", &self.stage)?
            .count())
    }

    fn path_for(&self, key: &[u8]) -> Result<PathBuf> {
        if key.len() < 2 {
            return Err(PoolError::BadKey {
                engine: "local",
                key: hex::encode(key),
                why: "shorter than the two bytes the folder layout needs",
            });
        }
        let hex = hex::encode(key);
        Ok(self.root.join(&hex[0..2]).join(&hex[2..4]).join(hex))
    }

    /// Keys in one `xx/yy` shard folder whose names decode and sit where they belong.
    fn list_shard(&self, dir: &Path, prefix: &str, out: &mut Vec<Vec<u8>>) -> Result<()> {
        for entry in fs::read_dir(dir).at("list", dir)? {
            let name = entry.at("list", dir)?.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.starts_with(prefix) {
                continue;
            }
            if let Ok(key) = hex::decode(name) {
                if hex::encode(&key) == name {
                    out.push(key);
                }
            }
        }
        Ok(())
    }
}

fn is_shard(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn flock(file: &File, how: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this File owns for the call's duration.
    if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn remove_quietly(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// fsync, read-only, rename into `{hex[0:2]}/{hex[2:4]}/{hex}`, fsync the folder.
fn commit_file(engine: &LocalEngine, file: &File, path: &Path, key: &[u8]) -> Result<()> {
    let dest = engine.path_for(key)?;
    file.sync_all().at("fsync", path)?;
    // Read-only, and for the user alone (a hard link into a repo's
    // `.git/lfs/objects` shares the mode; git-lfs only reads it).
    file.set_permissions(Permissions::from_mode(0o400))
        .at("make read-only", path)?;
    let dir = dest.parent().expect("blob paths have a shard folder");
    create_durable_dirs(&engine.root, dir)?;
    // The same key means the same bytes: a concurrent commit that got there
    // first is as good as ours.
    fs::rename(path, &dest).at("commit (rename) into", &dest)?;
    fsync_dir(dir)
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .at("fsync folder", dir)
}

/// Creates `dir` and its parents up to `root`, fsyncing each parent that
/// gained an entry so the new folders survive a power cut.
fn create_durable_dirs(root: &Path, dir: &Path) -> Result<()> {
    if dir.is_dir() || dir == root {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(root);
    create_durable_dirs(root, parent)?;
    match fs::create_dir(dir) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(()),
        other => other.at("create folder", dir)?,
    }
    fsync_dir(parent)
}

impl Backend for LocalEngine {
    fn name(&self) -> &'static str {
        self.name
    }

    fn has(&self, key: &[u8]) -> Result<bool> {
        let path = self.path_for(key)?;
        match fs::symlink_metadata(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).at("stat", path),
        }
    }

    fn size(&self, key: &[u8]) -> Result<Option<u64>> {
        let path = self.path_for(key)?;
        match fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).at("stat", path),
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Blob>> {
        let path = self.path_for(key)?;
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at("open", path),
        };
        let len = file.metadata().at("stat", &path)?.len();
        Ok(Some(Blob::File { file, len, path }))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.has(key)? {
            return Ok(false);
        }
        let mut staged = self.stage()?;
        staged.write(value)?;
        staged.commit(key)?;
        Ok(true)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        let path = self.path_for(key)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).at("remove", path),
        }
    }

    /// Renames the file into `quarantine/` as `{hex}.{random}` (one oid may
    /// go bad more than once; the earlier bytes stay). One rename: a kill at
    /// any point leaves the file in exactly one of the two places.
    fn quarantine(&self, key: &[u8]) -> Result<Option<String>> {
        let path = self.path_for(key)?;
        let dir = self.root.join(QUARANTINE);
        create_durable_dirs(&self.root, &dir)?;
        let moved = tempfile::Builder::new()
            .prefix(&format!("{}.", hex::encode(key)))
            .rand_bytes(12)
            .make_in(&dir, |name| fs::rename(&path, name));
        let moved = match moved {
            Ok(moved) => moved.into_temp_path(),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at("move aside", path),
        };
        let moved = moved
            .keep()
            .map_err(|e| PoolError::Io(crate::IoError::new("move aside", path.clone(), e.error)))?;
        fsync_dir(&dir)?;
        fsync_dir(path.parent().expect("blob paths have a shard folder"))?;
        Ok(Some(moved.display().to_string()))
    }

    fn list(&self) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        for a in fs::read_dir(&self.root).at("list", &self.root)? {
            let a = a.at("list", &self.root)?;
            let name_a = a.file_name().to_string_lossy().into_owned();
            if !is_shard(&name_a) || !a.path().is_dir() {
                continue;
            }
            for b in fs::read_dir(a.path()).at("list", a.path())? {
                let b = b.at("list", a.path())?;
                let name_b = b.file_name().to_string_lossy().into_owned();
                if is_shard(&name_b) && b.path().is_dir() {
                    self.list_shard(&b.path(), &format!("{name_a}{name_b}"), &mut keys)?;
                }
            }
        }
        Ok(keys)
    }

    fn adopt(&self, key: &[u8], path: &Path) -> Result<bool> {
        if self.has(key)? {
            fs::remove_file(path).at("remove", path)?;
            return Ok(false);
        }
        let file = File::open(path).at("open", path)?;
        commit_file(self, &file, path, key)?;
        Ok(true)
    }

    fn stage(&self) -> Result<Box<dyn Staged + '_>> {
        let file = NamedTempFile::new_in(&self.stage).at("create stage file in", &self.stage)?;
        Ok(Box::new(LocalStage {
            engine: self,
            file,
            written: 0,
            flushed: 0,
        }))
    }
}

/// A stage file; dropped uncommitted, `tempfile` removes it.
struct LocalStage<'a> {
    engine: &'a LocalEngine,
    file: NamedTempFile,
    written: u64,
    flushed: u64,
}

/// Start writeback every this many bytes, so the commit's fsync finds most of
/// the file already on its way to disk instead of all of it dirty.
pub(crate) const WRITEBACK_EVERY: u64 = 64 << 20;

#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a hint on a descriptor we own; failure only loses the overlap.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn start_writeback(_: &File, _: u64, _: u64) {}

impl Staged for LocalStage<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(e) = self.file.write_all(bytes) {
            return Err(e).at("write stage file", self.file.path());
        }
        self.written += bytes.len() as u64;
        if self.written - self.flushed >= WRITEBACK_EVERY {
            start_writeback(
                self.file.as_file(),
                self.flushed,
                self.written - self.flushed,
            );
            self.flushed = self.written;
        }
        Ok(())
    }

    fn commit(self: Box<Self>, key: &[u8]) -> Result<()> {
        let LocalStage { engine, file, .. } = *self;
        // On failure the NamedTempFile still owns the path and removes it.
        commit_file(engine, file.as_file(), file.path(), key)?;
        let _ = file.into_temp_path().keep();
        Ok(())
    }
}
