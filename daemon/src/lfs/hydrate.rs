//! Hydration: putting an object's real bytes in a repo's `.git/lfs/objects`,
//! where git-lfs's smudge and checkout find them without any transfer.
//!
//! git-lfs trusts what is there (it checks the size only), so only pool
//! entries go in, each checked against its oid on the way out
//! ([`Pool::export`]): a corrupt one is moved aside and is an error, for the
//! caller to fetch the object elsewhere.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use tempfile::TempPath;

use crate::pool::{Oid, Pool, PoolError};
use crate::safe_write;

/// What [`hydrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hydrated {
    /// The repo already had a file of the right size.
    Present,
    /// Linked (else copied) from the pool.
    Placed,
    /// The pool does not hold it.
    NotInPool,
}

/// `<objects>/<oid[0:2]>/<oid[2:4]>/<oid>`: git-lfs's layout.
pub fn object_path(objects: &Path, oid: &Oid) -> PathBuf {
    let hex = oid.to_hex();
    objects.join(&hex[0..2]).join(&hex[2..4]).join(&hex)
}

/// Puts pool entry `oid` (of `size` bytes) in `lfs_dir/objects`, through a
/// fresh name in `lfs_dir/tmp` and a rename, so git-lfs never sees half a
/// file. A hard link where it can: the repo and the pool share one copy,
/// and a `git lfs prune` here removes the repo's name, not the pool's.
/// Folders on the way that are symlinks, and an object path that is one,
/// are refused: nothing is written through a link planted in `.git`.
pub fn hydrate(pool: &Pool, lfs_dir: &Path, oid: &Oid, size: u64) -> Result<Hydrated, PoolError> {
    if present(lfs_dir, oid, size)? {
        return Ok(Hydrated::Present);
    }
    if pool.size(oid)? != Some(size) {
        return Ok(Hydrated::NotInPool);
    }
    let place = Place::open(lfs_dir, oid)?;
    let Some(tmp) = export_to_temp(pool, oid, &place.tmp_dir)? else {
        return Ok(Hydrated::NotInPool); // swept between the check and the export
    };
    place.commit(tmp)
}

/// Puts `bytes`, already checked to be object `oid`, in `lfs_dir/objects`
/// as [`hydrate`] puts a pool entry there (a fresh name in `lfs_dir/tmp`,
/// then a rename; no folder or name that is a symlink is written through):
/// for an object just fetched, whose bytes are in memory, so it is not read
/// back out of the pool.
pub fn place_bytes(lfs_dir: &Path, oid: &Oid, bytes: &[u8]) -> Result<Hydrated, PoolError> {
    if present(lfs_dir, oid, bytes.len() as u64)? {
        return Ok(Hydrated::Present);
    }
    let place = Place::open(lfs_dir, oid)?;
    let io = |op, e| PoolError::Io(crate::IoError::new(op, place.tmp_dir.clone(), e));
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!("drs-{oid}-"))
        .tempfile_in(&place.tmp_dir)
        .map_err(|e| io("create a temp file in", e))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(|e| io("write into", e))?;
    place.commit(tmp.into_temp_path())
}

/// Puts the file at `tmp`, in `lfs_dir/tmp` and already checked to be
/// object `oid` of `size` bytes, in `lfs_dir/objects` by a rename (no
/// folder or name that is a symlink is written through): for an object
/// fetched around the pool, which could not take it.
pub fn place_file(
    lfs_dir: &Path,
    oid: &Oid,
    size: u64,
    tmp: TempPath,
) -> Result<Hydrated, PoolError> {
    if present(lfs_dir, oid, size)? {
        return Ok(Hydrated::Present);
    }
    Place::open(lfs_dir, oid)?.commit(tmp)
}

/// Whether the repo has a file of `size` bytes at the object's path; an
/// object path that is a symlink is refused. Presence by length is git-lfs's
/// own rule for its store, and the pool vouches for nothing here: it hands
/// out nothing and trusts nothing of the repo's copy (what the pool takes
/// from a repo is hashed, `Pool::adopt_file`; `git lfs fsck` checks the
/// repo's copy).
fn present(lfs_dir: &Path, oid: &Oid, size: u64) -> Result<bool, PoolError> {
    let dest = object_path(&lfs_dir.join("objects"), oid);
    match std::fs::symlink_metadata(&dest) {
        Ok(m) if m.file_type().is_symlink() => Err(refused(&dest)),
        Ok(m) => Ok(m.is_file() && m.len() == size),
        Err(_) => Ok(false),
    }
}

/// Where an object goes in a repo: its path, and the temp folder it is
/// written in first, both reached through no symlink.
struct Place {
    dest: PathBuf,
    tmp_dir: PathBuf,
}

impl Place {
    /// The folders on the way made or checked, through no symlink.
    fn open(lfs_dir: &Path, oid: &Oid) -> Result<Place, PoolError> {
        let (anchor, lfs) = split(lfs_dir);
        let hex = oid.to_hex();
        let shard = lfs.join("objects").join(&hex[0..2]).join(&hex[2..4]);
        let tmp_dir = safe_dir(&anchor, &lfs.join("tmp"))?;
        safe_dir(&anchor, &shard)?;
        let dest = object_path(&lfs_dir.join("objects"), oid);
        Ok(Place { dest, tmp_dir })
    }

    /// rename(2) replaces a name, never what a link there points at.
    fn commit(self, tmp: TempPath) -> Result<Hydrated, PoolError> {
        tmp.persist(&self.dest).map_err(|e| {
            PoolError::Io(crate::IoError::new(
                "rename into",
                self.dest.clone(),
                e.error,
            ))
        })?;
        Ok(Hydrated::Placed)
    }
}

/// Exports pool entry `oid` to a new random name in `dir`, created
/// exclusively (never through an existing name or a symlink); `None` when
/// the pool lacks it. The name is removed when the result is dropped,
/// unless persisted or kept.
pub fn export_to_temp(pool: &Pool, oid: &Oid, dir: &Path) -> Result<Option<TempPath>, PoolError> {
    let mut failed = None;
    let made = tempfile::Builder::new()
        .prefix(&format!("drs-{oid}-"))
        .make_in(dir, |p| match pool.export(oid, p) {
            Ok(placed) => Ok(placed),
            // Taken (a name planted or raced): make_in tries another.
            Err(PoolError::Io(crate::IoError { source, .. }))
                if source.kind() == ErrorKind::AlreadyExists =>
            {
                Err(source)
            }
            Err(e) => {
                failed = Some(e);
                Err(std::io::Error::other("export failed"))
            }
        });
    match (made, failed) {
        (_, Some(e)) => Err(e),
        (Ok(file), None) if file.as_file().is_some() => Ok(Some(file.into_temp_path())),
        (Ok(_), None) => Ok(None),
        (Err(source), None) => Err(PoolError::Io(crate::IoError::new(
            "create a temp file in",
            dir.to_path_buf(),
            source,
        ))),
    }
}

/// `lfs_dir` as its parent (the common git folder, trusted as git named
/// it) and the rest, walked without following links.
fn split(lfs_dir: &Path) -> (PathBuf, PathBuf) {
    match (lfs_dir.parent(), lfs_dir.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
        _ => (lfs_dir.to_path_buf(), PathBuf::new()),
    }
}

fn safe_dir(anchor: &Path, rel: &Path) -> Result<PathBuf, PoolError> {
    safe_write::create_dirs(anchor, rel).map_err(|e| {
        PoolError::Io(crate::IoError::new(
            "hydrate into",
            anchor.to_path_buf(),
            std::io::Error::other(e.to_string()),
        ))
    })
}

fn refused(path: &Path) -> PoolError {
    PoolError::Io(crate::IoError::new(
        "hydrate",
        path,
        std::io::Error::other("it is a symbolic link: drsd does not write through links in a repo"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hydrates_from_the_pool_once_and_skips_what_the_pool_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("pool"), Some(1024)).unwrap();
        let lfs = dir.path().join("repo/.git/lfs");
        std::fs::create_dir_all(lfs.parent().unwrap()).unwrap();
        let big = vec![5u8; 4096];
        let small = b"tiny".to_vec();
        let big_oid = pool.put(&Oid::of(&big), &big).unwrap().oid;
        let small_oid = pool.put(&Oid::of(&small), &small).unwrap().oid;
        for (oid, body) in [(big_oid, &big), (small_oid, &small)] {
            let size = body.len() as u64;
            assert_eq!(hydrate(&pool, &lfs, &oid, size).unwrap(), Hydrated::Placed);
            let placed = object_path(&lfs.join("objects"), &oid);
            assert_eq!(&std::fs::read(&placed).unwrap(), body);
            assert_eq!(hydrate(&pool, &lfs, &oid, size).unwrap(), Hydrated::Present);
        }
        let absent = Oid::of(b"absent");
        assert_eq!(
            hydrate(&pool, &lfs, &absent, 6).unwrap(),
            Hydrated::NotInPool
        );
        // A wrong size is not what the pointer names: nothing is placed.
        assert_eq!(
            hydrate(&pool, &lfs, &big_oid, 1).unwrap(),
            Hydrated::NotInPool
        );
        assert_eq!(std::fs::read_dir(lfs.join("tmp")).unwrap().count(), 0);
    }
}
