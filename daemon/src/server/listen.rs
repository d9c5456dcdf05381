//! Claiming the socket: one daemon per socket path.
//!
//! The lock file next to the socket is the arbiter: the daemon that holds
//! its `flock` owns the socket, for as long as it lives (the kernel drops the
//! lock when the process dies, even by kill -9). A socket file left behind
//! by a dead daemon is removed only after a connect to it fails.

use std::fs::File;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use interprocess::local_socket::tokio::Listener;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;

use super::DaemonError;
use drsd_proto::paths::{ensure_private_dir, lock_path};

pub(crate) struct Claimed {
    pub listener: Listener,
    /// Held for the daemon's lifetime.
    pub _lock: File,
}

/// Takes the socket: private folder, lock, stale file check, bind (mode 0600).
pub(crate) fn claim(socket: &Path) -> Result<Claimed, DaemonError> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    ensure_private_dir(dir)?;
    let lock = take_lock(socket)?;
    clear_stale(socket)?;
    let listener = bind(socket)?;
    Ok(Claimed {
        listener,
        _lock: lock,
    })
}

fn take_lock(socket: &Path) -> Result<File, DaemonError> {
    let path = lock_path(socket);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| DaemonError::io("open lock file", &path, e))?;
    // A daemon killed while it was starting a child process leaves the lock
    // with that child until it execs: a few tries bridge the moment.
    for attempt in 0..10 {
        let lock = rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        match lock {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(e) => return Err(DaemonError::io("lock", &path, e.into())),
        }
        if attempt < 9 {
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
    }
    Err(DaemonError::AlreadyRunning {
        socket: socket.to_path_buf(),
        how: "another drsd holds its lock file",
    })
}

/// Removes a socket file nobody answers on; refuses a live one or a non-socket.
fn clear_stale(socket: &Path) -> Result<(), DaemonError> {
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(DaemonError::io("inspect", socket, e)),
    };
    if !meta.file_type().is_socket() {
        return Err(DaemonError::NotSocket {
            path: socket.to_path_buf(),
        });
    }
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        return Err(DaemonError::AlreadyRunning {
            socket: socket.to_path_buf(),
            how: "a daemon answers on the socket",
        });
    }
    log::info!(
        "removing stale socket {} (nothing answers on it)",
        socket.display()
    );
    std::fs::remove_file(socket).map_err(|e| DaemonError::io("remove stale socket", socket, e))
}

fn bind(socket: &Path) -> Result<Listener, DaemonError> {
    let name = socket
        .to_fs_name::<GenericFilePath>()
        .map_err(|e| DaemonError::io("use as a socket name", socket, e))?;
    let listener = ListenerOptions::new()
        .name(name)
        .mode(0o600)
        // Remove the socket file when the listener is dropped.
        .reclaim_name(true)
        .create_tokio()
        .map_err(|e| DaemonError::io("listen on", socket, e))?;
    Ok(listener)
}
