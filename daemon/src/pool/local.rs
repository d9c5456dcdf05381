//! The large tier's engine: plain read-only files on the local disk, one
//! per blob, so they can be hard-linked or reflinked into repos instead of
//! copied. Owns the on-disk layout (`{hex[0:2]}/{hex[2:4]}/{hex}`), the
//! stage folder where files are written before they are committed, and
//! the quarantine folder for entries that no longer match their key.

use std::fs::{self, File, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use rustix::process::geteuid;
use tempfile::NamedTempFile;

use super::backend::{Backend, Blob, Staged};
use super::error::{IoContext, PoolError, Result};
use super::node_dir::NodeFile;

/// The large-tier engine: one read-only file per blob at
/// `{hex[0:2]}/{hex[2:4]}/{hex}`, written in the engine's own `stage/` folder
/// (same filesystem) and committed by fsync, rename, fsync of the folder.
pub struct LocalEngine {
    root: PathBuf,
    stage: PathBuf,
    /// `local`, or `shared-dir` when opened as a team's shared folder.
    name: &'static str,
    /// The group of a lab's shared folder (several users, one group): its
    /// files are made group-readable and its folders setgid to it. `None`
    /// for a user's own pool: owner only.
    group: Option<u32>,
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
        LocalEngine::open_as(root, None)
    }

    /// Opens or creates the engine in a folder several users of one group
    /// share (a lab's `team_large` on NFS, Lustre, GPFS): committed files
    /// are read-only to the owner and the group (0440), folders group-
    /// writable and setgid (2770) so what any member makes stays the
    /// group's. The group is `group`, else the folder's own. A member can
    /// still plant or replace a file (the folders are the group's to write):
    /// what leaves the pool is checked against its oid
    /// ([`super::Pool::get_verified`]), and a bad file is moved aside.
    /// What it relies on there is close-to-open consistency (a file is read
    /// whole after its writer closed it) and `rename` being atomic within
    /// one folder, which those give; it never relies on `O_EXCL`. Named
    /// `shared-dir` in `status`.
    pub fn open_shared(root: &Path, group: Option<u32>) -> Result<LocalEngine> {
        use std::os::unix::fs::MetadataExt;
        fs::create_dir_all(root).at("create folder", root)?;
        let gid = match group {
            Some(gid) => gid,
            None => fs::metadata(root).at("stat", root)?.gid(),
        };
        share_dir(root, gid)?;
        Ok(LocalEngine {
            name: "shared-dir",
            ..LocalEngine::open_as(root, Some(gid))?
        })
    }

    fn open_as(root: &Path, group: Option<u32>) -> Result<LocalEngine> {
        let stage = root.join(STAGE);
        match group {
            Some(gid) => create_durable_dirs(root, &stage, Some(gid))?,
            None => fs::create_dir_all(&stage).at("create folder", &stage)?,
        }
        let lock_path = root.join("stage.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .at("open", &lock_path)?;
        if let Some(gid) = group {
            // Every member opens it to write (for its lock): the group's.
            share_lock_file(&lock, &lock_path, gid)?;
        }
        if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
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
        flock(&lock, FlockOperation::LockShared).at("lock", &lock_path)?;
        Ok(LocalEngine {
            root: root.to_path_buf(),
            stage,
            name: "local",
            group,
            _lock: lock,
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
        Ok(key_path(&self.root, key))
    }
}

/// A shared folder's mode and group: setgid, group-writable (2770). A
/// folder that already gives the group that (made by another member, or
/// by the lab's admin) is left as it is.
///
/// The folder is opened without following a symbolic link and changed
/// through that handle: another member who may write the shared folder
/// could replace it with a link to a folder of ours (`~/.ssh`), which a
/// chown and chmod by path would then hand to the group. A link is
/// refused (`ELOOP`), naming the folder.
fn share_dir(dir: &Path, gid: u32) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let handle = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .at("open the shared folder (not through a link)", dir)?;
    let meta = handle.metadata().at("stat", dir)?;
    let wanted = 0o2770;
    if meta.gid() == gid && meta.mode() & wanted == wanted {
        return Ok(());
    }
    // The lab's bytes are the group's, not every user's of the machine.
    std::os::unix::fs::fchown(&handle, None, Some(gid)).at("give the team's group", dir)?;
    handle
        .set_permissions(Permissions::from_mode(wanted))
        .at("share with the group", dir)
}

/// The stage lock of a shared folder, group-writable (0660) and the
/// group's, when we made it; one another member made is theirs to set.
fn share_lock_file(file: &File, path: &Path, gid: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().at("stat", path)?;
    if meta.uid() != geteuid().as_raw() || (meta.gid() == gid && meta.mode() & 0o660 == 0o660) {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, None, Some(gid)).at("give the team's group", path)?;
    file.set_permissions(Permissions::from_mode(0o660))
        .at("share with the group", path)
}

/// Every key stored under `root` in the engine's layout (`xx/yy/hex`),
/// each once; nothing else there (the stage, the quarantine, a stray file)
/// is a key. Reads only: also how a join lists a pool it must not change.
pub(crate) fn list_keys(root: &Path) -> Result<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    for a in fs::read_dir(root).at("list", root)? {
        let a = a.at("list", root)?;
        let name_a = a.file_name().to_string_lossy().into_owned();
        if !is_shard(&name_a) || !a.path().is_dir() {
            continue;
        }
        for b in fs::read_dir(a.path()).at("list", a.path())? {
            let b = b.at("list", a.path())?;
            let name_b = b.file_name().to_string_lossy().into_owned();
            if is_shard(&name_b) && b.path().is_dir() {
                list_shard(&b.path(), &format!("{name_a}{name_b}"), &mut keys)?;
            }
        }
    }
    Ok(keys)
}

/// Keys in one `xx/yy` shard folder whose names decode and sit where they belong.
fn list_shard(dir: &Path, prefix: &str, out: &mut Vec<Vec<u8>>) -> Result<()> {
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

/// Where the engine at `root` keeps `key`'s file (`xx/yy/hex`).
pub(crate) fn key_path(root: &Path, key: &[u8]) -> PathBuf {
    let hex = hex::encode(key);
    root.join(&hex[0..2]).join(&hex[2..4]).join(hex)
}

fn is_shard(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn flock(file: &File, how: FlockOperation) -> std::io::Result<()> {
    Ok(rustix::fs::flock(file, how)?)
}

fn remove_quietly(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// fsync, read-only, rename into `{hex[0:2]}/{hex[2:4]}/{hex}`, fsync the folder.
fn commit_file(engine: &LocalEngine, file: &File, path: &Path, key: &[u8]) -> Result<()> {
    commit_from(engine, file, Source::Path(path), key)
}

/// Where a file to commit is named: a path of the daemon's own, or a name
/// in this node's checked folder ([`NodeFile`]: never its path again).
#[derive(Clone, Copy)]
enum Source<'a> {
    Path(&'a Path),
    At(&'a NodeFile),
}

impl Source<'_> {
    fn shown(&self) -> &Path {
        match self {
            Source::Path(path) => path,
            Source::At(file) => &file.shown,
        }
    }

    /// Renamed to `dest` (a path in the pool's own folder).
    fn rename_to(&self, dest: &Path) -> std::io::Result<()> {
        match self {
            Source::Path(path) => fs::rename(path, dest),
            Source::At(file) => file.rename_to_path(dest),
        }
    }

    /// Renamed to `name` in the open folder `dir`.
    fn rename_into(&self, dir: &File, name: &std::ffi::OsStr) -> std::io::Result<()> {
        match self {
            Source::Path(path) => rename_into(path, dir, name),
            Source::At(file) => file.rename_into(dir, name),
        }
    }
}

fn commit_from(engine: &LocalEngine, file: &File, source: Source<'_>, key: &[u8]) -> Result<()> {
    let path = source.shown();
    let dest = engine.path_for(key)?;
    file.sync_all().at("fsync", path)?;
    // Read-only, and for the user alone (a hard link into a repo's
    // `.git/lfs/objects` shares the mode; git-lfs only reads it); in a
    // team's shared folder, for the group too.
    let mode = match engine.group {
        Some(gid) => {
            std::os::unix::fs::fchown(file, None, Some(gid)).at("give the team's group", path)?;
            0o440
        }
        None => 0o400,
    };
    file.set_permissions(Permissions::from_mode(mode))
        .at("make read-only", path)?;
    let dir = dest.parent().expect("blob paths have a shard folder");
    create_durable_dirs(&engine.root, dir, engine.group)?;
    let Some(gid) = engine.group else {
        // The same key means the same bytes: a concurrent commit that got
        // there first is as good as ours.
        source.rename_to(&dest).at("commit (rename) into", &dest)?;
        return fsync_dir(dir);
    };
    // A shared folder: into the shard folder only once it is found to be
    // the group's, through the handle it was checked by (a folder swapped
    // for another, or a link, after the check is never written into).
    let shard = group_shard(&engine.root, key, gid)?;
    let name = dest.file_name().expect("blob paths have a file name");
    source
        .rename_into(&shard, name)
        .at("commit (rename) into", &dest)?;
    shard.sync_all().at("fsync folder", dir)
}

/// The `xx/yy` shard folder of `key` in a shared folder, opened, each level
/// found to be the group's (see [`is_the_groups`]). A level someone else
/// made otherwise (another member's folder that the group cannot write,
/// where an entry could neither be replaced nor moved aside) is refused:
/// moved aside whole within its parent, named in the log with its owner,
/// and made again as the group's.
fn group_shard(root: &Path, key: &[u8], gid: u32) -> Result<File> {
    let hex = hex::encode(key);
    let mut dir = open_dir(root).at("open the shared folder (not through a link)", root)?;
    let mut at = root.to_path_buf();
    for level in [&hex[0..2], &hex[2..4]] {
        at.push(level);
        create_durable_dirs(root, &at, Some(gid))?;
        dir = match open_group_dir(&dir, level, gid) {
            Ok(next) => next,
            Err(why) => {
                refuse_dir(&dir, level, &at, &why.to_string())?;
                create_durable_dirs(root, &at, Some(gid))?;
                open_group_dir(&dir, level, gid).map_err(|why| PoolError::NotTheGroups {
                    path: at.clone(),
                    why: why.to_string(),
                })?
            }
        };
    }
    Ok(dir)
}

/// `name` in `parent`, opened without following a link, if it is a folder
/// that is the group's; else why not. One of ours that is not is made so.
fn open_group_dir(parent: &File, name: &str, gid: u32) -> std::result::Result<File, GroupDir> {
    use std::os::unix::fs::MetadataExt;
    let dir = open_dir_at(parent, name).map_err(GroupDir::NotAFolder)?;
    let meta = dir.metadata().map_err(GroupDir::Io)?;
    if is_the_groups(&meta, gid) {
        return Ok(dir);
    }
    if meta.uid() == geteuid().as_raw() {
        std::os::unix::fs::fchown(&dir, None, Some(gid)).map_err(GroupDir::Io)?;
        dir.set_permissions(Permissions::from_mode(0o2770))
            .map_err(GroupDir::Io)?;
        return Ok(dir);
    }
    Err(GroupDir::Others {
        owner: owner_name(meta.uid()),
        mode: meta.mode() & 0o7777,
        gid: meta.gid(),
        want: gid,
    })
}

/// Why a folder of the shared folder is not one the team's group can use.
#[derive(Debug, thiserror::Error)]
enum GroupDir {
    #[error("cannot be opened as a folder: {0}")]
    NotAFolder(#[source] std::io::Error),
    #[error("{0}")]
    Io(#[source] std::io::Error),
    #[error("it is {owner}'s, mode {mode:o}, group {gid}: not the team group's ({want}) to write, setgid")]
    Others {
        owner: String,
        mode: u32,
        gid: u32,
        want: u32,
    },
}

/// Whether a shared folder's folder is as the team needs it: the group's,
/// setgid, group-writable, and not sticky (an entry in it can be replaced
/// or moved aside by any member).
fn is_the_groups(meta: &fs::Metadata, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode();
    meta.is_dir() && meta.gid() == gid && mode & 0o2070 == 0o2070 && mode & libc::S_ISVTX == 0
}

/// Moves the folder `name` of `parent` (at `path`) aside within `parent`
/// (a rename in one folder needs no right on the folder moved), so a
/// person can look at it; nothing in it is a lookup's any more.
fn refuse_dir(parent: &File, name: &str, path: &Path, why: &str) -> Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let aside = format!(".{name}.not-the-groups.{}.{now}", std::process::id());
    log::warn!(
        "shared folder {}: {why}; moved aside to {aside}",
        path.display()
    );
    renameat(parent, name, parent, &aside).map_err(|e| PoolError::NotTheGroups {
        path: path.to_path_buf(),
        why: format!("{why}; moving it aside failed: {e}"),
    })
}

fn open_dir(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn open_dir_at(parent: &File, name: &str) -> std::io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(parent, name, flags, Mode::empty())?.into())
}

fn renameat(from_dir: &File, from: &str, to_dir: &File, to: &str) -> std::io::Result<()> {
    Ok(rustix::fs::renameat(from_dir, from, to_dir, to)?)
}

/// Renames the file at `path` to `name` in the open folder `dir`.
fn rename_into(path: &Path, dir: &File, name: &std::ffi::OsStr) -> std::io::Result<()> {
    Ok(rustix::fs::renameat(rustix::fs::CWD, path, dir, name)?)
}

/// A user's name, else `uid N` (getpwuid_r: the daemon has many threads).
fn owner_name(uid: u32) -> String {
    super::node_dir::user_name(uid).unwrap_or_else(|| format!("uid {uid}"))
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .at("fsync folder", dir)
}

/// Creates `dir` and its parents up to `root`, fsyncing each parent that
/// gained an entry so the new folders survive a power cut; in a shared
/// folder (`group`), each one the group's, setgid.
fn create_durable_dirs(root: &Path, dir: &Path, group: Option<u32>) -> Result<()> {
    if dir.is_dir() || dir == root {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(root);
    create_durable_dirs(root, parent, group)?;
    match fs::create_dir(dir) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(()),
        other => other.at("create folder", dir)?,
    }
    if let Some(gid) = group {
        share_dir(dir, gid)?;
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

    fn stored_by_another(&self, key: &[u8]) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        if self.group.is_none() {
            return Ok(false);
        }
        let path = self.path_for(key)?;
        match fs::symlink_metadata(&path) {
            Ok(meta) => Ok(meta.uid() != geteuid().as_raw()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).at("stat", path),
        }
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
        create_durable_dirs(&self.root, &dir, self.group)?;
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
        list_keys(&self.root)
    }

    /// Commits the file over whatever holds the name: the pool adopts only
    /// when no good entry is there ([`super::Pool::holds_good`]).
    fn adopt(&self, key: &[u8], path: &Path) -> Result<bool> {
        let file = File::open(path).at("open", path)?;
        commit_file(self, &file, path, key)?;
        Ok(true)
    }

    /// As [`adopt`](Self::adopt): the file opened through this node's
    /// folder's descriptor is the one renamed into place, by its name in
    /// that very folder.
    fn adopt_at(&self, key: &[u8], file: &NodeFile, opened: File) -> Result<bool> {
        commit_from(self, &opened, Source::At(file), key)?;
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

    fn identity(&self) -> Option<(u64, u64)> {
        let meta = self.file.as_file().metadata().ok()?;
        Some(super::store::identity(&meta))
    }

    fn commit(self: Box<Self>, key: &[u8]) -> Result<()> {
        let LocalStage { engine, file, .. } = *self;
        // On failure the NamedTempFile still owns the path and removes it.
        commit_file(engine, file.as_file(), file.path(), key)?;
        let _ = file.into_temp_path().keep();
        Ok(())
    }
}

/// A lab's shared folder: several users of one group. The tests run as
/// root in CI containers, so "another member" is a file given another
/// owner; as an ordinary user they check the modes and the planted bytes.
#[cfg(test)]
mod shared_folder {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::sync::Arc;

    use super::*;
    use crate::pool::{Oid, Pool, PoolError};

    const THRESHOLD: u64 = 16;

    /// A group of ours: root's tests take any, a user's its own first one.
    fn our_group() -> u32 {
        if geteuid().is_root() {
            4242
        } else {
            rustix::process::getegid().as_raw()
        }
    }

    fn shared_pool(root: &Path, gid: u32) -> Pool {
        let large = LocalEngine::open_shared(root, Some(gid)).unwrap();
        let kv = Arc::new(crate::pool::MemEngine::default());
        Pool::with_engines(kv, Arc::new(large), THRESHOLD)
    }

    #[test]
    fn files_in_a_shared_folder_are_group_readable_and_folders_setgid_to_the_group() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("team");
        let gid = our_group();
        let pool = shared_pool(&root, gid);
        let bytes = b"a large entry for the whole lab".repeat(4);
        let oid = Oid::of(&bytes);
        pool.put(&oid, &bytes).unwrap();
        let hex = oid.to_hex();
        let file = root.join(&hex[0..2]).join(&hex[2..4]).join(&hex);
        let meta = fs::metadata(&file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o440, "file mode");
        assert_eq!(meta.gid(), gid, "file group");
        for dir in [
            root.clone(),
            root.join(&hex[0..2]),
            root.join(&hex[0..2]).join(&hex[2..4]),
            root.join(STAGE),
        ] {
            let meta = fs::metadata(&dir).unwrap();
            assert_eq!(
                meta.permissions().mode() & 0o7777,
                0o2770,
                "{}",
                dir.display()
            );
            assert_eq!(meta.gid(), gid, "{}", dir.display());
        }
        let lock = fs::metadata(root.join("stage.lock")).unwrap();
        assert_eq!(lock.permissions().mode() & 0o777, 0o660);
    }

    #[test]
    fn a_shared_folder_replaced_by_a_link_is_refused_and_the_links_target_keeps_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let private = tmp.path().join("private");
        fs::create_dir(&private).unwrap();
        fs::set_permissions(&private, Permissions::from_mode(0o700)).unwrap();
        let planted = tmp.path().join("team");
        std::os::unix::fs::symlink(&private, &planted).unwrap();
        let err = LocalEngine::open_shared(&planted, Some(our_group()))
            .err()
            .expect("a link is not a shared folder");
        assert!(err.to_string().contains("team"), "{err}");
        let meta = fs::metadata(&private).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    }

    #[test]
    fn bytes_planted_by_another_member_are_moved_aside_and_never_served() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("team");
        let pool = shared_pool(&root, our_group());
        let real = b"the bytes git asked for, and nothing else".to_vec();
        let oid = Oid::of(&real);
        // Another member writes other bytes under that oid's name first
        // (the folders are the group's to write).
        let hex = oid.to_hex();
        let shard = root.join(&hex[0..2]).join(&hex[2..4]);
        fs::create_dir_all(&shard).unwrap();
        let planted = shard.join(&hex);
        fs::write(&planted, b"someone else's bytes, same length as real!").unwrap();
        if geteuid().is_root() {
            std::os::unix::fs::chown(&planted, Some(65534), None).unwrap();
        }
        // The read-out hashes it, moves it aside and hands out nothing.
        match pool.get_verified(&oid) {
            Err(PoolError::Corrupt { oid: bad, .. }) => assert_eq!(bad, oid),
            Err(other) => panic!("planted bytes: {other}"),
            Ok(Some(_)) => panic!("the planted bytes were served"),
            Ok(None) => panic!("the planted file was not seen"),
        }
        assert!(
            pool.get_verified(&oid).unwrap().is_none(),
            "served after the move"
        );
        let aside = fs::read_dir(root.join(QUARANTINE)).unwrap().count();
        assert_eq!(
            aside, 1,
            "the planted file is kept aside for a person to see"
        );
        // The real bytes go in now and are what comes out.
        assert!(pool.put(&oid, &real).unwrap().stored);
        let blob = pool.get_verified(&oid).unwrap().unwrap();
        assert_eq!(blob.to_vec().unwrap(), real);
    }

    #[test]
    fn fresh_bytes_for_an_oid_replace_the_bad_entry_planted_under_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("team");
        let pool = shared_pool(&root, our_group());
        let real = b"the bytes git asked for, and nothing else".to_vec();
        let oid = Oid::of(&real);
        let hex = oid.to_hex();
        let shard = root.join(&hex[0..2]).join(&hex[2..4]);
        fs::create_dir_all(&shard).unwrap();
        fs::write(
            shard.join(&hex),
            b"planted, and the same length as real!!!!!",
        )
        .unwrap();
        // The name is taken by bad bytes: the put checks them and replaces
        // them instead of dropping its own.
        assert!(pool.put(&oid, &real).unwrap().stored, "fresh bytes dropped");
        let blob = pool.get_verified(&oid).unwrap().unwrap();
        assert_eq!(blob.to_vec().unwrap(), real);
        // A good entry there is kept, and the put stores nothing.
        assert!(!pool.put(&oid, &real).unwrap().stored);
    }
}
