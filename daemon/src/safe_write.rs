//! Writing files inside a repo (its work tree or its git folder) that may be
//! hostile: a cloned repo can ship a symlink under any name it likes (a
//! temp name a writer uses, a folder on the way, the file itself) to make
//! the writer follow it out of the repo and overwrite what it points at.
//!
//! Every file the daemon writes in a repo goes through [`write`]: a temp file
//! created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`) under a random name
//! in the target's own folder, written, then renamed over the target, so a
//! reader (git) never sees half a file and no existing name is ever opened
//! for writing. A target that is a symlink, and a folder on the way that is
//! a symlink or not a folder, are refused by name. Folders are walked from
//! an anchor the caller trusts (the work tree's canonical top, the common
//! git folder) one component at a time.
//!
//! One exception, in `registry::mirror`: a change to a repo's mirror is
//! appended to the mirror file this daemon itself created and last left,
//! checked on the opened descriptor (`O_NOFOLLOW`, same device, inode and
//! length, one link, 0600, ours); anything else there is replaced whole
//! through [`write`].

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::IoError;

#[derive(Debug, thiserror::Error)]
pub enum SafeWriteError {
    #[error("{path} is a symbolic link: drsd does not write through links in a repo")]
    Symlink { path: PathBuf },
    #[error("{path} is in the way: it is not a folder")]
    NotAFolder { path: PathBuf },
    #[error("{path} is a folder, not a file")]
    IsAFolder { path: PathBuf },
    #[error("{rel} does not name a place inside {anchor}")]
    Outside { rel: PathBuf, anchor: PathBuf },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// How a written file is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    bits: u32,
    /// The bits as they are, not less the umask.
    exact: bool,
    /// The file and its folder synced before returning.
    durable: bool,
}

impl Mode {
    /// A work-tree file (pointer, `.gitattributes`): 0666 less the umask, as
    /// git checks files out; a file replaced keeps its permission bits (an
    /// executable pointer stays executable: git records that bit).
    pub const WORK_TREE: Mode = Mode {
        bits: 0o666,
        exact: false,
        durable: false,
    };
    /// Private to the owner and synced with its folder: survives a crash
    /// and may hold secrets (signed URLs in the registry's mirror).
    pub const PRIVATE: Mode = Mode {
        bits: 0o600,
        exact: true,
        durable: true,
    };
    /// A script git runs (a hook): 0755.
    pub const EXECUTABLE: Mode = Mode {
        bits: 0o755,
        exact: true,
        durable: false,
    };
}

/// Replaces `anchor/rel` with `bytes` (see the module doc), creating the
/// folders of `rel` on the way. `rel` is relative, without `..`.
pub fn write(anchor: &Path, rel: &Path, bytes: &[u8], mode: Mode) -> Result<(), SafeWriteError> {
    write_with(anchor, rel, mode, |file| file.write_all(bytes)).map(|_| ())
}

/// [`write`] of what `fill` writes into the temp file: for content that is
/// not in memory (a pool entry copied in). Returns the written file's stat
/// data as it is after the rename (taken from the open file, not the name).
pub fn write_with(
    anchor: &Path,
    rel: &Path,
    mode: Mode,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<std::fs::Metadata, SafeWriteError> {
    let dir = create_dirs(anchor, rel.parent().unwrap_or(Path::new("")))?;
    let path = anchor.join(rel);
    let old = existing_file(&path)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".drsd-")
        .suffix(".tmp")
        .make_in(&dir, |p| create_exclusive(p, mode.bits))
        .map_err(io("create a temp file in", &dir))?;
    let bits = match &old {
        Some(old) if !mode.exact => old.permissions().mode() & 0o7777,
        _ => mode.bits,
    };
    let file = tmp.as_file_mut();
    fill(file)
        .and_then(|()| match mode.exact || old.is_some() {
            true => file.set_permissions(Permissions::from_mode(bits)),
            false => Ok(()),
        })
        .and_then(|()| match mode.durable {
            true => file.sync_all(),
            false => Ok(()),
        })
        .map_err(io("write", tmp.path()))?;
    // rename(2) replaces the name `path`, never what a symlink there points
    // at; the check above only makes a planted link an error, not a swap.
    let file = tmp
        .persist(&path)
        .map_err(|e| IoError::new("replace", &path, e.error))?;
    if mode.durable {
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", &dir))?;
    }
    file.metadata().map_err(io("stat", &path))
}

/// Creates the folders of `rel` under `anchor` one by one and returns
/// `anchor/rel`; an existing one that is a symlink or not a folder is refused.
pub fn create_dirs(anchor: &Path, rel: &Path) -> Result<PathBuf, SafeWriteError> {
    walk(anchor, rel, true)
}

/// Checks the folders of `rel` under `anchor` that exist, creating nothing:
/// none a symlink, each a folder.
pub fn check_dirs(anchor: &Path, rel: &Path) -> Result<(), SafeWriteError> {
    walk(anchor, rel, false).map(|_| ())
}

fn walk(anchor: &Path, rel: &Path, create: bool) -> Result<PathBuf, SafeWriteError> {
    let mut at = anchor.to_path_buf();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            if c == Component::CurDir {
                continue;
            }
            return Err(SafeWriteError::Outside {
                rel: rel.to_path_buf(),
                anchor: anchor.to_path_buf(),
            });
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(SafeWriteError::Symlink { path: at });
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(SafeWriteError::NotAFolder { path: at }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => break,
            // mkdir(2) does not follow a symlink at its last component: a
            // link planted since the check makes it fail, not follow.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Ok(()) => {}
                // Made by a concurrent writer meanwhile: look again.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let m = std::fs::symlink_metadata(&at).map_err(io("check", &at))?;
                    if !m.is_dir() || m.file_type().is_symlink() {
                        return Err(SafeWriteError::NotAFolder { path: at });
                    }
                }
                Err(e) => return Err(io("create folder", &at)(e)),
            },
            Err(e) => return Err(io("check", &at)(e)),
        }
    }
    Ok(at)
}

/// The metadata of a regular file at `path`, if there is one; a symlink or
/// a folder there is refused.
fn existing_file(path: &Path) -> Result<Option<std::fs::Metadata>, SafeWriteError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(SafeWriteError::Symlink {
            path: path.to_path_buf(),
        }),
        Ok(m) if m.is_dir() => Err(SafeWriteError::IsAFolder {
            path: path.to_path_buf(),
        }),
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("check", path)(e)),
    }
}

/// A new file at `path`: never an existing name, never through a symlink.
fn create_exclusive(path: &Path, bits: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(bits)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SafeWriteError {
    let at = IoError::at(op, path);
    move |source| at(source).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Every temp name the old writers used for `name` in `dir`: the fixed
    /// `.NAME.drsd-tmp`, and a few of the `drs-...` names of hydration.
    fn old_temp_names(name: &str) -> Vec<String> {
        vec![
            format!(".{name}.drsd-tmp"),
            format!("{name}.drsd-tmp"),
            format!(".{name}.tmp"),
            format!("{name}.tmp"),
        ]
    }

    #[test]
    fn a_symlinked_temp_name_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (top, outside) = (tmp.path().join("repo"), tmp.path().join("outside"));
        std::fs::create_dir_all(&top).unwrap();
        std::fs::write(&outside, "precious\n").unwrap();
        for name in [".gitattributes", "data.bin"] {
            for old in old_temp_names(name) {
                symlink(&outside, top.join(old)).unwrap();
            }
            write(&top, Path::new(name), b"new\n", Mode::WORK_TREE).unwrap();
            let meta = std::fs::symlink_metadata(top.join(name)).unwrap();
            assert!(meta.is_file(), "{name} is a regular file");
            assert_eq!(std::fs::read(top.join(name)).unwrap(), b"new\n");
        }
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious\n");
        // Nothing is left behind but the planted links and the two files.
        assert_eq!(std::fs::read_dir(&top).unwrap().count(), 2 + 8);
    }

    #[test]
    fn a_target_that_is_a_symlink_is_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (top, outside) = (tmp.path().join("repo"), tmp.path().join("outside"));
        std::fs::create_dir_all(&top).unwrap();
        std::fs::write(&outside, "precious\n").unwrap();
        symlink(&outside, top.join(".gitattributes")).unwrap();
        let err = write(&top, Path::new(".gitattributes"), b"x", Mode::WORK_TREE).unwrap_err();
        assert!(matches!(err, SafeWriteError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains(".gitattributes"), "{err}");
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious\n");
        assert!(std::fs::symlink_metadata(top.join(".gitattributes"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_dir(&top).unwrap().count(), 1, "no temp left");
    }

    #[test]
    fn a_symlinked_folder_on_the_way_is_refused_and_nothing_lands_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let (top, elsewhere) = (tmp.path().join("repo"), tmp.path().join("elsewhere"));
        std::fs::create_dir_all(&top).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        symlink(&elsewhere, top.join("linkout")).unwrap();
        for rel in ["linkout/x.bin", "linkout/deeper/x.bin"] {
            let err = write(&top, Path::new(rel), b"x", Mode::WORK_TREE).unwrap_err();
            assert!(
                matches!(err, SafeWriteError::Symlink { ref path } if path.ends_with("linkout")),
                "{err}"
            );
            assert!(check_dirs(&top, Path::new(rel).parent().unwrap()).is_err());
        }
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // A file where a folder should be is named too.
        std::fs::write(top.join("file"), "x").unwrap();
        let err = write(&top, Path::new("file/x.bin"), b"x", Mode::WORK_TREE).unwrap_err();
        assert!(matches!(err, SafeWriteError::NotAFolder { .. }), "{err}");
        let err = write(&top, Path::new("../x.bin"), b"x", Mode::WORK_TREE).unwrap_err();
        assert!(matches!(err, SafeWriteError::Outside { .. }), "{err}");
    }

    #[test]
    fn modes_are_kept_or_set_as_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        let mode = |p: &str| std::fs::metadata(top.join(p)).unwrap().permissions().mode() & 0o777;
        write(top, Path::new("a/b/secret"), b"s", Mode::PRIVATE).unwrap();
        assert_eq!(mode("a/b/secret"), 0o600);
        write(top, Path::new("hook"), b"#!/bin/sh\n", Mode::EXECUTABLE).unwrap();
        assert_eq!(mode("hook"), 0o755);
        std::fs::write(top.join("ptr"), "old").unwrap();
        std::fs::set_permissions(top.join("ptr"), Permissions::from_mode(0o750)).unwrap();
        write(top, Path::new("ptr"), b"new", Mode::WORK_TREE).unwrap();
        assert_eq!(mode("ptr"), 0o750, "a replaced file keeps its bits");
    }
}
