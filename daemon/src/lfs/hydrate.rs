//! Hydration: putting an object's real bytes in a repo's `.git/lfs/objects`,
//! where git-lfs's smudge and checkout find them without any transfer.
//!
//! git-lfs trusts what is there (it checks the size only), so only pool
//! entries go in, each checked against its oid on the way out
//! ([`Pool::export`]): a corrupt one is moved aside and is an error, for the
//! caller to fetch the object elsewhere.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::pool::{Oid, Pool, PoolError};

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
/// temporary name in `lfs_dir/tmp` and a rename, so git-lfs never sees half
/// a file. A hard link where it can: the repo and the pool share one copy,
/// and a `git lfs prune` here removes the repo's name, not the pool's.
pub fn hydrate(pool: &Pool, lfs_dir: &Path, oid: &Oid, size: u64) -> Result<Hydrated, PoolError> {
    let dest = object_path(&lfs_dir.join("objects"), oid);
    if std::fs::metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == size) {
        return Ok(Hydrated::Present);
    }
    if pool.size(oid)? != Some(size) {
        return Ok(Hydrated::NotInPool);
    }
    let tmp_dir = lfs_dir.join("tmp");
    let parent = dest.parent().expect("object paths have shards");
    for dir in [&tmp_dir, &parent.to_path_buf()] {
        std::fs::create_dir_all(dir).map_err(|source| PoolError::Io {
            op: "create",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let tmp = tmp_dir.join(format!(
        "drs-hydrate-{oid}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    if pool.export(oid, &tmp)?.is_none() {
        return Ok(Hydrated::NotInPool); // swept between the check and the export
    }
    std::fs::rename(&tmp, &dest).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        PoolError::Io {
            op: "rename into",
            path: dest.clone(),
            source,
        }
    })?;
    Ok(Hydrated::Placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hydrates_from_the_pool_once_and_skips_what_the_pool_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("pool"), Some(1024)).unwrap();
        let lfs = dir.path().join("repo/.git/lfs");
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
