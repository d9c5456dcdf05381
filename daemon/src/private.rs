//! Files and folders only their owner may read. The daemon's state (the
//! registry holds signed URLs), its pool, its log and each repo's mirror of
//! the registry are created with these modes whatever the umask, and an
//! existing one found open to others (made by an older drsd, or by hand) is
//! closed when the daemon opens it.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A folder and the parents it lacks, created 0700; an existing one loses
/// its group and other bits.
pub fn dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    tighten(path)
}

/// A file created empty with mode 0600 when missing (so that what opens it
/// next, SQLite say, inherits a private file); an existing one loses its
/// group and other bits.
pub fn file(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        // Never through a link: tightening it would change its target.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    tighten(path)
}

/// An SQLite database at `path`, created 0600 before SQLite opens it: SQLite
/// gives its `-wal` and `-shm` files the database's mode. Existing ones are
/// tightened too.
pub fn sqlite(path: &Path) -> io::Result<()> {
    file(path)?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        match tighten(&PathBuf::from(side)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

/// Takes the group and other bits off `path` when it has any.
pub fn tighten(path: &Path) -> io::Result<()> {
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, Permissions::from_mode(mode & 0o7700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn folders_and_files_are_made_private_and_open_ones_are_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("a/state");
        dir(&state).unwrap();
        assert_eq!(mode(&state), 0o700);
        let db = state.join("registry.sqlite");
        sqlite(&db).unwrap();
        assert_eq!(mode(&db), 0o600);

        std::fs::set_permissions(&state, Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&db, Permissions::from_mode(0o644)).unwrap();
        let wal = state.join("registry.sqlite-wal");
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, Permissions::from_mode(0o644)).unwrap();
        dir(&state).unwrap();
        sqlite(&db).unwrap();
        assert_eq!((mode(&state), mode(&db), mode(&wal)), (0o700, 0o600, 0o600));
        // A read-only file stays read-only, for its owner only.
        let blob = state.join("blob");
        std::fs::write(&blob, b"x").unwrap();
        std::fs::set_permissions(&blob, Permissions::from_mode(0o444)).unwrap();
        tighten(&blob).unwrap();
        assert_eq!(mode(&blob), 0o400);
    }
}
