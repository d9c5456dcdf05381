//! A repo's own copies in `<common git dir>/lfs/objects/aa/bb/<oid>`:
//! listed, and removed one by one, never through a link. A folder on the
//! way that is a symlink stops the prune (something planted it); a name
//! that is not an oid, or not a plain file, is not ours and is left alone.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::PruneError;
use crate::pool::Oid;
use crate::IoError;

/// One copy of an object in a repo's `lfs/objects`.
#[derive(Debug, Clone)]
pub(super) struct RepoCopy {
    pub oid: Oid,
    pub len: u64,
    /// Its hard links: above 1, it shares its bytes (with the pool, say),
    /// and removing it alone frees nothing.
    pub links: u64,
}

const OBJECTS: &str = "lfs/objects";

/// Every object file in `common`'s `lfs/objects`. Blocking.
pub(super) fn list(common: &Path) -> Result<Vec<RepoCopy>, PruneError> {
    crate::safe_write::check_dirs(common, Path::new(OBJECTS))?;
    let objects = common.join(OBJECTS);
    let mut out = Vec::new();
    for first in folders(&objects)? {
        for second in folders(&first)? {
            let read = std::fs::read_dir(&second).map_err(IoError::at("list", &second))?;
            for entry in read {
                let entry = entry.map_err(IoError::at("list", &second))?;
                let Some(oid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path).map_err(IoError::at("stat", &path))?;
                if meta.file_type().is_file() {
                    out.push(RepoCopy {
                        oid,
                        len: meta.len(),
                        links: meta.nlink(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The two-hex-digit folders in `dir` (none when `dir` is absent); a
/// symlink among them is refused.
fn folders(dir: &Path) -> Result<Vec<PathBuf>, PruneError> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(IoError::new("list", dir, e).into()),
    };
    let mut out = Vec::new();
    for entry in read {
        let entry = entry.map_err(IoError::at("list", dir))?;
        let name = entry.file_name();
        let hex = name
            .to_str()
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()));
        if !hex {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(IoError::at("stat", &path))?;
        if meta.file_type().is_symlink() {
            return Err(crate::safe_write::SafeWriteError::Symlink { path }.into());
        }
        if meta.is_dir() {
            out.push(path);
        }
    }
    Ok(out)
}

/// Removes the copy of `oid` in `common`'s `lfs/objects`, its folders
/// checked first (none a symlink); returns the bytes given back (0 when
/// it shared them, or was gone already). Blocking.
pub(super) fn remove(common: &Path, oid: &Oid) -> Result<u64, PruneError> {
    let hex = oid.to_hex();
    let rel = Path::new(OBJECTS).join(&hex[..2]).join(&hex[2..4]);
    crate::safe_write::check_dirs(common, &rel)?;
    let path = common.join(rel).join(&hex);
    // unlink(2) removes a symlink itself, never what it names.
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(IoError::new("stat", &path, e).into()),
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(IoError::new("remove", &path, e).into()),
    }
    Ok(match meta.file_type().is_file() && meta.nlink() == 1 {
        true => meta.len(),
        false => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_files_named_by_an_oid_are_listed_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let common = tmp.path();
        let oid = Oid::of(b"x");
        let hex = oid.to_hex();
        let dir = common.join(OBJECTS).join(&hex[..2]).join(&hex[2..4]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&hex), b"x").unwrap();
        std::fs::write(dir.join("not-an-oid"), b"y").unwrap();
        let other = Oid::of(b"y");
        std::os::unix::fs::symlink(dir.join("not-an-oid"), dir.join(other.to_hex())).unwrap();
        let listed = list(common).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].oid, listed[0].len, listed[0].links), (oid, 1, 1));
        assert_eq!(remove(common, &oid).unwrap(), 1);
        assert!(!dir.join(&hex).exists());
        assert_eq!(
            remove(common, &oid).unwrap(),
            0,
            "gone already: nothing freed"
        );
        assert!(dir.join("not-an-oid").exists());
    }

    #[test]
    fn a_symlinked_objects_folder_stops_the_listing() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("ab")).unwrap();
        let common = tmp.path().join("git");
        std::fs::create_dir_all(common.join(OBJECTS)).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("ab"), common.join(OBJECTS).join("ab")).unwrap();
        assert!(matches!(list(&common), Err(PruneError::Unsafe(_))));
    }
}
