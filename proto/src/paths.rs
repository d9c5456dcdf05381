//! Where the per-user socket lives.
//!
//! In order: `--socket` / `DRSD_SOCKET`; else `$XDG_RUNTIME_DIR/drsd/drsd.sock`
//! (systemd's per-user runtime folder, private and cleared at logout); else,
//! when `XDG_RUNTIME_DIR` is unset (macOS, cron, some containers),
//! `$TMPDIR/drsd-<uid>/drsd.sock`, the folder created 0700 and refused if
//! another user owns it or can enter it.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::IpcError;

pub const SOCKET_ENV: &str = "DRSD_SOCKET";
pub const SOCKET_NAME: &str = "drsd.sock";

/// The socket path, from an explicit choice, `DRSD_SOCKET`, or the default.
pub fn socket_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    match std::env::var_os(SOCKET_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => default_socket(),
    }
}

/// `$XDG_RUNTIME_DIR/drsd/drsd.sock`, else `$TMPDIR/drsd-<uid>/drsd.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir.join("drsd").join(SOCKET_NAME),
        _ => std::env::temp_dir()
            .join(format!("drsd-{}", current_uid()))
            .join(SOCKET_NAME),
    }
}

/// The daemons' start arbiter next to the socket: whoever holds its `flock` owns the socket.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Whether no process holds the lock of `socket` (no daemon is starting,
/// serving or draining there).
pub fn lock_is_free(socket: &Path) -> bool {
    use rustix::fs::{flock, FlockOperation};
    let Ok(file) = std::fs::File::open(lock_path(socket)) else {
        return true;
    };
    // Closing the file releases the lock taken to test it.
    flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok()
}

pub fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The socket's folder: created 0700 when missing; when present it must be a
/// real folder, ours, and closed to everyone else, or nobody could trust
/// what listens in it.
pub fn ensure_private_dir(dir: &Path) -> Result<(), IpcError> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| IpcError::io("create folder", parent, e))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(IpcError::io("create socket folder", dir, e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| IpcError::io("inspect", dir, e))?;
    check_private_dir(dir, &meta)
}

/// What a client checks before it sends anything on `socket`: its folder is
/// a real folder (not a symlink), ours and closed to everyone else, and the
/// socket in it, when there, is a socket of ours. Another local user who got
/// to a shared `$TMPDIR` first could otherwise listen there and read our
/// requests, signed URLs included. A missing folder or socket passes: the
/// connection then fails as "not running", and a daemon is started in a
/// folder made private. (The peer's uid is checked once connected.)
pub fn check_socket(socket: &Path) -> Result<(), IpcError> {
    let dir = socket_dir(socket);
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => check_private_dir(dir, &meta)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IpcError::io("inspect", dir, e)),
    }
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IpcError::io("inspect", socket, e)),
    };
    let refuse = |why: String| IpcError::SocketFile {
        socket: socket.to_path_buf(),
        why,
    };
    if !meta.file_type().is_socket() {
        return Err(refuse("is not a socket".into()));
    }
    if meta.uid() != current_uid() {
        return Err(refuse(not_ours(meta.uid())));
    }
    Ok(())
}

/// The folder holding `socket` (`.` for a bare file name).
pub fn socket_dir(socket: &Path) -> &Path {
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `meta` (from lstat) must be a real folder, ours, with no access for group or others.
fn check_private_dir(dir: &Path, meta: &std::fs::Metadata) -> Result<(), IpcError> {
    let refuse = |why: String| IpcError::SocketDir {
        dir: dir.to_path_buf(),
        why,
    };
    if meta.file_type().is_symlink() {
        return Err(refuse(
            "is a symbolic link; the socket folder must be a real folder".into(),
        ));
    }
    if !meta.is_dir() {
        return Err(refuse("is not a folder".into()));
    }
    if meta.uid() != current_uid() {
        return Err(refuse(not_ours(meta.uid())));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(refuse(format!(
            "has mode {mode:03o}: other users could reach the socket; make it 0700 (chmod 700)"
        )));
    }
    Ok(())
}

/// Why a path owned by `owner` is refused; nothing is sent to what listens there.
fn not_ours(owner: u32) -> String {
    format!(
        "belongs to uid {owner}, not to us (uid {}): another user may have planted it; \
         nothing was sent; remove it or choose another socket (--socket, XDG_RUNTIME_DIR)",
        current_uid()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_folder_is_created_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a").join("run");
        ensure_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn an_open_folder_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("open");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&dir.display().to_string()) && err.contains("755"),
            "{err}"
        );
    }

    #[test]
    fn a_file_in_place_of_the_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("file");
        std::fs::write(&dir, b"x").unwrap();
        let err = ensure_private_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("is not a folder"), "{err}");
    }

    #[test]
    fn the_explicit_path_wins() {
        let p = Path::new("/x/y.sock");
        assert_eq!(socket_path(Some(p)), p);
    }
}

/// The `--socket` flag of every drsd program that talks to the daemon
/// (flatten it into the commands that do; not global, so commands that never
/// reach the daemon do not offer it).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SocketArg {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/drsd/drsd.sock, else $TMPDIR/drsd-<uid>/drsd.sock]
    #[arg(long, env = "DRSD_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

impl SocketArg {
    /// The path chosen, or the default ([`socket_path`]).
    pub fn path(&self) -> PathBuf {
        socket_path(self.socket.as_deref())
    }
}
