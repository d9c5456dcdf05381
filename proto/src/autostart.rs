//! Start on demand: a client that finds no daemon starts `drsd serve` in the
//! background and waits for its ready line.
//!
//! Two clients racing both spawn a daemon; the daemons' lock file picks one.
//! The loser exits with [`EXIT_ALREADY_RUNNING`] and its client simply
//! connects to the winner, so the race ends with exactly one daemon.

use std::ffi::OsString;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::paths::lock_is_free;
use super::{Client, IpcError};

/// Set to `1` to make clients fail instead of starting a daemon.
pub const NO_AUTOSTART_ENV: &str = "DRSD_NO_AUTOSTART";
/// Where clients look for the daemon binary first.
pub const DRSD_BIN_ENV: &str = "DRSD_BIN";
/// What `drsd serve --ready` prints on standard output once it accepts connections.
pub const READY_LINE: &str = "drsd ready";
/// `drsd serve` exit status when another daemon holds the socket.
pub const EXIT_ALREADY_RUNNING: i32 = 3;
/// Seconds a daemon started on demand may sit idle before it stops (`0`:
/// never); read by `drsd serve --idle-timeout`.
pub const IDLE_TIMEOUT_ENV: &str = "DRSD_IDLE_TIMEOUT";
/// The idle timeout of a daemon started on demand when the variable is unset.
const DEFAULT_IDLE_SECS: &str = "900";
/// A daemon log past this size is moved to `drsd.log.1` when the next
/// daemon is started, replacing the one before.
const LOG_ROTATE_BYTES: u64 = 8 << 20;

/// How to start a daemon when none answers.
#[derive(Debug, Clone)]
pub struct Autostart {
    pub drsd: PathBuf,
    /// Extra arguments right after `serve` (e.g. `--pool DIR`).
    pub args: Vec<OsString>,
    /// Extra arguments after `serve --socket PATH --ready`.
    pub serve_args: Vec<OsString>,
    pub timeout: Duration,
}

impl Autostart {
    /// `$DRSD_BIN`, else `drsd` next to the running program, else `drsd` on
    /// PATH; it stops when idle (after `$DRSD_IDLE_TIMEOUT` seconds, which
    /// it reads itself, else 15 minutes).
    pub fn from_env() -> Autostart {
        let idle = match std::env::var_os(IDLE_TIMEOUT_ENV) {
            Some(set) if !set.is_empty() => vec![],
            _ => vec!["--idle-timeout".into(), DEFAULT_IDLE_SECS.into()],
        };
        Autostart {
            drsd: find_drsd(),
            args: Vec::new(),
            serve_args: idle,
            timeout: Duration::from_secs(10),
        }
    }
}

fn find_drsd() -> PathBuf {
    if let Some(bin) = std::env::var_os(DRSD_BIN_ENV).filter(|b| !b.is_empty()) {
        return bin.into();
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("drsd")))
        .filter(|path| path.is_file());
    sibling.unwrap_or_else(|| PathBuf::from("drsd"))
}

/// Whether `DRSD_NO_AUTOSTART=1` is set.
pub fn autostart_disabled() -> bool {
    std::env::var_os(NO_AUTOSTART_ENV).is_some_and(|v| v == "1")
}

/// Connects to the daemon on `socket`, starting one first when none answers,
/// `start` is given and `DRSD_NO_AUTOSTART=1` is not set.
pub async fn connect_or_start(
    socket: &Path,
    client: &str,
    start: Option<&Autostart>,
) -> Result<Client, IpcError> {
    let err = match Client::connect(socket, client).await {
        Err(err @ IpcError::NotRunning { .. }) => err,
        other => return other,
    };
    let Some(start) = start.filter(|_| !autostart_disabled()) else {
        return Err(err);
    };
    let deadline = Instant::now() + start.timeout;
    loop {
        spawn_and_wait(socket, start).await?;
        if let Some(client) = connect_until(socket, client, deadline).await? {
            return Ok(client);
        }
        // The daemon that beat ours was stopping, not starting: try again.
    }
}

/// Spawns `drsd serve --ready` detached, and returns once it is ready or has
/// lost the start race to another daemon.
async fn spawn_and_wait(socket: &Path, start: &Autostart) -> Result<(), IpcError> {
    let log = socket.with_extension("log");
    let failed = |why: String| IpcError::StartFailed {
        drsd: start.drsd.clone(),
        log: log.clone(),
        why,
    };
    super::paths::ensure_private_dir(socket.parent().unwrap_or(Path::new("/")))?;
    // The daemon runs from `/`: it must not hold the client's folder, and so
    // it needs the socket as an absolute path.
    let socket = &std::path::absolute(socket).map_err(|e| failed(e.to_string()))?;
    rotate(&log, LOG_ROTATE_BYTES);
    // Where this daemon's lines begin: an error further up is an older one's.
    let log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let mut child = spawn(socket, start, &log).map_err(|e| failed(e.to_string()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut first = String::new();
    let mut stdout = BufReader::new(stdout);
    let read = stdout.read_line(&mut first);
    match tokio::time::timeout(start.timeout, read).await {
        Ok(Ok(_)) if first.trim_end() == READY_LINE => Ok(()),
        Ok(_) => match child.wait().await {
            Ok(status) if status.code() == Some(EXIT_ALREADY_RUNNING) => Ok(()),
            Ok(status) => {
                let said = last_error_line(&log, log_start)
                    .map(|line| format!(" (its log says: {line})"))
                    .unwrap_or_default();
                Err(failed(format!(
                    "it {} before it was ready{said}",
                    ended(status)
                )))
            }
            Err(e) => Err(failed(e.to_string())),
        },
        Err(_) => Err(failed(format!("not ready after {:?}", start.timeout))),
    }
}

/// "exited with status 1", "was killed by signal 9": how a person says it.
fn ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended ({status})"),
    }
}

/// The last line the daemon wrote as an error after byte `from` of its log
/// (`drsd: ...` from its main, or a logged `ERROR`), at most 500 characters.
fn last_error_line(log: &Path, from: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 << 10;
    let mut file = std::fs::File::open(log).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(from.max(len.saturating_sub(TAIL))))
        .ok()?;
    let mut text = Vec::new();
    file.read_to_end(&mut text).ok()?;
    let text = String::from_utf8_lossy(&text);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("drsd: ") || l.contains(" ERROR "))?;
    Some(line.trim().chars().take(500).collect())
}

fn spawn(socket: &Path, start: &Autostart, log_path: &Path) -> std::io::Result<Child> {
    // Private: what the daemon logs is redacted, but paths and names are
    // still nobody else's business.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        // Never through a link planted where the log goes.
        .custom_flags(libc::O_NOFOLLOW)
        .open(log_path)?;
    // A log made before by a looser umask or another tool: ours only now.
    // Through the open descriptor, so not through a link swapped in since.
    let mode = log.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        log.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Command::new(&start.drsd)
        .arg("serve")
        .args(&start.args)
        .arg("--socket")
        .arg(socket)
        .arg("--ready")
        .args(&start.serve_args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the client must not stop the daemon.
        .process_group(0)
        .spawn()
}

/// Moves a log past `limit` bytes to `NAME.1`. Best effort: a log that
/// cannot be moved is appended to as before.
fn rotate(log: &Path, limit: u64) {
    if std::fs::metadata(log).is_ok_and(|m| m.len() > limit) {
        let mut old = log.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(log, old);
    }
}

/// Retries the connection until `deadline`: the daemon that won a start race
/// may still be binding its socket. `None` when nobody answers and no daemon
/// holds the lock any more (the winner was one that was stopping).
async fn connect_until(
    socket: &Path,
    client: &str,
    deadline: Instant,
) -> Result<Option<Client>, IpcError> {
    let mut pause = Duration::from_millis(5);
    loop {
        match Client::connect(socket, client).await {
            Err(IpcError::NotRunning { .. }) if Instant::now() < deadline => {
                if lock_is_free(socket) {
                    return Ok(None);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other.map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::Duration;

    use super::{connect_or_start, rotate, Autostart};

    /// A stand-in for drsd: a shell script that does `body` and never gets ready.
    fn fake_drsd(dir: &Path, body: &str) -> Autostart {
        let drsd = dir.join("drsd");
        std::fs::write(&drsd, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&drsd, std::fs::Permissions::from_mode(0o700)).unwrap();
        Autostart {
            drsd,
            args: vec![],
            serve_args: vec![],
            timeout: Duration::from_secs(10),
        }
    }

    async fn start_error(body: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(run.join("drsd.log"), "drsd: an older daemon's error\n").unwrap();
        let start = fake_drsd(dir.path(), body);
        let err = connect_or_start(&run.join("drsd.sock"), "test", Some(&start))
            .await
            .err()
            .expect("the start fails");
        crate::one_line(&err)
    }

    #[tokio::test]
    async fn a_daemon_that_exits_is_reported_with_its_status_and_its_last_error() {
        let err = start_error("echo 'drsd: opening the pool at /x: denied' >&2; exit 1").await;
        assert!(err.contains("exited with status 1 before"), "{err}");
        assert!(!err.contains("Some("), "{err}");
        assert!(
            err.contains("its log says: drsd: opening the pool at /x: denied"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_daemon_killed_by_a_signal_is_reported_so_and_an_older_error_is_not_blamed() {
        let err = start_error("kill -9 $$").await;
        assert!(err.contains("was killed by signal 9 before"), "{err}");
        assert!(!err.contains("older daemon"), "{err}");
    }

    #[test]
    fn a_log_past_the_limit_moves_aside_replacing_the_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let (log, old) = (dir.path().join("drsd.log"), dir.path().join("drsd.log.1"));
        std::fs::write(&log, b"0123456789").unwrap();
        rotate(&log, 10);
        assert!(log.exists() && !old.exists(), "at the limit it stays");
        std::fs::write(&old, b"oldest").unwrap();
        std::fs::write(&log, b"0123456789A").unwrap();
        rotate(&log, 10);
        assert!(!log.exists());
        assert_eq!(std::fs::read(&old).unwrap(), b"0123456789A");
        rotate(&log, 10); // no log: nothing to do
        assert!(!log.exists());
    }
}
