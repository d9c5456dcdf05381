//! The daemon in-process: real sockets, real git and git-lfs, real pool.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::*;
use crate::pool::Tier;
use drsd_proto::*;

mod holds;

struct TestDaemon {
    dir: tempfile::TempDir,
    socket: PathBuf,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), DaemonError>>,
}

fn config_in(dir: &Path) -> Config {
    let mut config = Config::in_dir(dir);
    config.debounce = Duration::from_millis(50);
    config
}

async fn start_in(dir: tempfile::TempDir, config: Config) -> TestDaemon {
    let daemon = Daemon::bind(config).await.expect("daemon binds");
    let (socket, shared) = (daemon.socket().to_path_buf(), daemon.shared.clone());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(daemon.serve(async {
        let _ = rx.await;
    }));
    TestDaemon {
        dir,
        socket,
        shared,
        stop: Some(tx),
        task,
    }
}

async fn start() -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    start_in(dir, config).await
}

impl TestDaemon {
    async fn client(&self) -> Client {
        Client::connect(&self.socket, "test")
            .await
            .expect("client connects")
    }

    async fn status(&self) -> StatusReport {
        match self.client().await.call(Request::Status).await.unwrap() {
            Reply::Status(s) => *s,
            other => panic!("status answered {other:?}"),
        }
    }

    /// Stops the daemon the way SIGTERM does and waits for it.
    async fn stop(mut self) -> tempfile::TempDir {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.await.unwrap().expect("daemon stops cleanly");
        self.dir
    }

    fn repo_state(&self, repo: &Path) -> Option<RepoReport> {
        self.shared.registrar.report(repo)
    }
}

/// Raw lines over a plain Unix socket, to send what no client would.
struct Raw {
    write: std::os::unix::net::UnixStream,
    read: BufReader<std::os::unix::net::UnixStream>,
}

impl Raw {
    fn connect(socket: &Path) -> Raw {
        let write = std::os::unix::net::UnixStream::connect(socket).unwrap();
        write
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let read = BufReader::new(write.try_clone().unwrap());
        Raw { write, read }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.write.write_all(bytes).unwrap();
    }

    fn answer(&mut self) -> ResponseFrame {
        let mut line = String::new();
        self.read.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    fn hello(&mut self) {
        self.send(b"{\"id\":0,\"method\":\"hello\",\"version\":1,\"client\":\"raw\"}\n");
        assert!(matches!(self.answer().body, Body::Result { .. }));
    }
}

fn error_code(frame: &ResponseFrame) -> ErrorCode {
    match &frame.body {
        Body::Error { error } => error.code,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_clients_are_all_served() {
    let daemon = start().await;
    let socket = daemon.socket.clone();
    let clients: Vec<_> = (0..200)
        .map(|_| {
            let socket = socket.clone();
            tokio::spawn(async move {
                let mut client = Client::connect(&socket, "load").await?;
                client.call(Request::Status).await
            })
        })
        .collect();
    for client in clients {
        match client.await.unwrap().expect("every client gets its status") {
            Reply::Status(s) => assert_eq!(s.pid, std::process::id()),
            other => panic!("{other:?}"),
        }
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_lines_get_errors_and_the_connection_goes_on() {
    let daemon = start().await;
    let mut raw = Raw::connect(&daemon.socket);
    raw.hello();
    raw.send(b"{this is not json\n");
    let answer = raw.answer();
    assert_eq!(
        (answer.id, error_code(&answer)),
        (None, ErrorCode::BadRequest)
    );
    raw.send(b"{\"id\":7,\"method\":\"no_such_thing\"}\n");
    let answer = raw.answer();
    assert_eq!(
        (answer.id, error_code(&answer)),
        (Some(7), ErrorCode::BadRequest)
    );
    let mut huge = vec![b'x'; MAX_REQUEST_LINE * 3];
    huge.push(b'\n');
    raw.send(&huge);
    assert_eq!(error_code(&raw.answer()), ErrorCode::TooLong);
    raw.send(b"\xff\xfe\n");
    assert_eq!(error_code(&raw.answer()), ErrorCode::BadRequest);
    // Another client is served meanwhile, and so is this one afterwards.
    assert_eq!(daemon.status().await.pid, std::process::id());
    raw.send(b"{\"id\":8,\"method\":\"repos_list\"}\n");
    let answer = raw.answer();
    assert_eq!(answer.id, Some(8));
    assert!(
        matches!(
            answer.body,
            Body::Result {
                result: Reply::Repos { .. }
            }
        ),
        "{answer:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_one_connection_run_concurrently_and_answer_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    fill_pool(&config.pool_dir, 3, 32);
    let daemon = start_in(dir, config).await;
    let mut raw = Raw::connect(&daemon.socket);
    raw.hello();
    raw.send(b"{\"id\":10,\"method\":\"pool_verify\"}\n{\"id\":11,\"method\":\"status\"}\n");
    let mut order = Vec::new();
    while order.last() != Some(&(10, "result")) {
        let answer = raw.answer();
        let kind = match answer.body {
            Body::Progress { .. } => "progress",
            Body::Result { .. } => "result",
            Body::Error { .. } => "error",
        };
        order.push((answer.id.unwrap(), kind));
    }
    // The quick status overtakes the slow verify; verify's progress precedes its result.
    let status_at = order
        .iter()
        .position(|a| *a == (11, "result"))
        .expect("status answered");
    assert!(status_at < order.len() - 1, "{order:?}");
    assert!(order.contains(&(10, "progress")), "{order:?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_hello_and_other_protocol_versions_are_refused() {
    let daemon = start().await;
    let mut raw = Raw::connect(&daemon.socket);
    raw.send(b"{\"id\":1,\"method\":\"status\"}\n");
    assert_eq!(error_code(&raw.answer()), ErrorCode::HandshakeRequired);
    raw.send(b"{\"id\":2,\"method\":\"hello\",\"version\":999,\"client\":\"future\"}\n");
    let answer = raw.answer();
    assert_eq!(error_code(&answer), ErrorCode::VersionMismatch);
    let Body::Error { error } = answer.body else {
        unreachable!()
    };
    assert!(error.message.contains("999"), "{}", error.message);
    // The daemon closes a connection it cannot speak with.
    let mut rest = String::new();
    assert_eq!(raw.read.read_line(&mut rest).unwrap(), 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_0600_in_a_0700_folder_and_gone_after_stop() {
    let daemon = start().await;
    let socket = daemon.socket.clone();
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir = std::fs::metadata(socket.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    daemon.stop().await;
    assert!(!socket.exists(), "the socket file is removed on stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    paths::ensure_private_dir(config.socket.parent().unwrap()).unwrap();
    // A socket file nobody listens on any more, as a killed daemon leaves it.
    drop(std::os::unix::net::UnixListener::bind(&config.socket).unwrap());
    assert!(config.socket.exists());
    let daemon = start_in(dir, config.clone()).await;
    assert_eq!(daemon.status().await.pid, std::process::id());
    let err = Daemon::bind(config.clone())
        .await
        .err()
        .expect("a second daemon is refused");
    assert!(matches!(err, DaemonError::AlreadyRunning { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&config.socket.display().to_string()),
        "{err}"
    );
    // The refused daemon left the live socket alone.
    assert_eq!(daemon.status().await.pid, std::process::id());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_a_socket_is_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    paths::ensure_private_dir(config.socket.parent().unwrap()).unwrap();
    std::fs::write(&config.socket, b"precious").unwrap();
    let err = Daemon::bind(config.clone()).await.err().expect("refused");
    assert!(matches!(err, DaemonError::NotSocket { .. }), "{err}");
    assert_eq!(std::fs::read(&config.socket).unwrap(), b"precious");
}

/// Fills the pool with `n` blobs of `mib` MiB so that verifying takes a while.
fn fill_pool(dir: &Path, n: usize, mib: usize) {
    let pool = Pool::open(dir, None).unwrap();
    for i in 0..n {
        let mut data = vec![0u8; mib << 20];
        data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        pool.put_stream(None, &data[..]).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_waits_for_a_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    fill_pool(&config.pool_dir, 3, 32);
    let daemon = start_in(dir, config).await;
    let mut client = daemon.client().await;
    let (started_tx, started_rx) = oneshot::channel();
    let verify = tokio::spawn(async move {
        let mut started = Some(started_tx);
        client
            .call_with_progress(Request::PoolVerify, |_| {
                if let Some(tx) = started.take() {
                    let _ = tx.send(());
                }
            })
            .await
    });
    started_rx.await.unwrap();
    let socket = daemon.socket.clone();
    daemon.stop().await;
    match verify
        .await
        .unwrap()
        .expect("the request in flight completes")
    {
        Reply::Verify(report) => assert_eq!((report.entries, report.bad.len()), (3, 0)),
        other => panic!("{other:?}"),
    }
    assert!(!socket.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_gives_up_on_requests_after_the_drain_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    config.drain_timeout = Duration::from_millis(50);
    let daemon = start_in(dir, config).await;
    // A client that sends requests and never reads the answers: once its
    // socket buffer and the connection's outbox are full, the requests stay
    // in flight for as long as the client likes.
    let mut raw = Raw::connect(&daemon.socket);
    raw.hello();
    let flood: Vec<u8> = (1..=5000)
        .flat_map(|id| format!("{{\"id\":{id},\"method\":\"status\"}}\n").into_bytes())
        .collect();
    let writer = std::thread::spawn(move || {
        let _ = raw.write.write_all(&flood);
        raw // keep the socket open until the test ends
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.shared.tasks.len() < 2 * connection::OUTBOX {
        assert!(
            Instant::now() < deadline,
            "requests never piled up: {}",
            daemon.shared.tasks.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shared = daemon.shared.clone();
    let stopping = Instant::now();
    daemon.stop().await;
    let took = stopping.elapsed();
    assert!(
        !shared.tasks.is_empty(),
        "the stuck requests were still in flight"
    );
    assert!(
        took >= Duration::from_millis(50) && took < Duration::from_secs(2),
        "{took:?}"
    );
    drop(writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_the_pool_per_tier() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    let pool = Pool::open(&config.pool_dir, None).unwrap();
    pool.put_stream(None, &b"small"[..]).unwrap();
    pool.put_stream(None, &vec![7u8; 200_000][..]).unwrap();
    drop(pool);
    let daemon = start_in(dir, config).await;
    let status = daemon.status().await;
    let tiers: Vec<(Tier, u64, u64)> = status
        .pool
        .tiers
        .iter()
        .map(|t| (t.tier, t.entries, t.bytes))
        .collect();
    assert_eq!(tiers, [(Tier::Kv, 1, 5), (Tier::Large, 1, 200_000)]);
    assert_eq!(status.pool.threshold, crate::pool::DEFAULT_THRESHOLD);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_request_stops_the_daemon() {
    let daemon = start().await;
    let reply = daemon.client().await.call(Request::Shutdown).await.unwrap();
    assert_eq!(reply, Reply::Done);
    let task = daemon.task;
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!daemon.socket.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_stops_but_not_while_a_client_is_connected() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    let limit = Duration::from_millis(300);
    config.idle_timeout = Some(limit);
    let daemon = start_in(dir, config).await;
    let client = daemon.client().await;
    tokio::time::sleep(3 * limit).await;
    assert!(!daemon.task.is_finished(), "a connected client keeps it up");
    drop(client);
    let left = Instant::now();
    let (task, socket) = (daemon.task, daemon.socket);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stops within 5 s of being left alone")
        .unwrap()
        .unwrap();
    assert!(
        left.elapsed() >= limit,
        "stopped after {:?}",
        left.elapsed()
    );
    assert!(!socket.exists());
    // The next client finds no daemon, not a half-open socket.
    assert!(matches!(
        Client::connect(&socket, "test").await,
        Err(IpcError::NotRunning { .. })
    ));
}

// ---- repos -------------------------------------------------------------

/// git with a fixed identity and no user or system config.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=drsd test",
            "-c",
            "user.email=test@drsd.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repo with git-lfs tracking *.bam and one committed LFS file.
fn lfs_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = parent.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["lfs", "install", "--local"]);
    git(&repo, &["lfs", "track", "*.bam"]);
    commit_bam(&repo, "one.bam", b"reads one");
    repo.canonicalize().unwrap()
}

fn commit_bam(repo: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(repo.join(name), bytes).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", name]);
}

async fn add_repo(daemon: &TestDaemon, path: &Path) -> RepoReport {
    let mut client = daemon.client().await;
    client.repos_add(path.to_path_buf()).await.unwrap()
}

/// Polls the daemon's record of `repo` until `done` holds (at most 10 s).
async fn wait_for(
    daemon: &TestDaemon,
    repo: &Path,
    done: impl Fn(&RepoReport) -> bool,
) -> RepoReport {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let report = daemon.repo_state(repo).expect("registered");
        if done(&report) {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "timed out; last report {report:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_with_a_new_lfs_pointer_is_picked_up_by_the_watcher() {
    let daemon = start().await;
    let repo = lfs_repo(daemon.dir.path(), "r");
    let added = add_repo(&daemon, &repo).await;
    assert_eq!(added.state, RepoState::Watching);
    let scan = added.scan.unwrap();
    assert_eq!((scan.pointers, scan.in_repo, scan.absent), (1, 1, 0));
    commit_bam(&repo, "two.bam", b"reads two");
    let report = wait_for(&daemon, &repo, |r| {
        r.scan.as_ref().is_some_and(|s| s.pointers == 2)
    })
    .await;
    let scan = report.scan.unwrap();
    assert_eq!((scan.in_repo, scan.in_pool, scan.absent), (2, 0, 0));
    // An object in the pool but gone from .git/lfs/objects counts as in the
    // pool; the removal alone (a change in lfs/objects) triggers the rescan.
    let oid = Oid::of(b"reads two");
    daemon.shared.care.pool().put(&oid, b"reads two").unwrap();
    let hex = oid.to_hex();
    std::fs::remove_file(
        repo.join(".git/lfs/objects")
            .join(&hex[..2])
            .join(&hex[2..4])
            .join(&hex),
    )
    .unwrap();
    let report = wait_for(&daemon, &repo, |r| {
        r.scan.as_ref().is_some_and(|s| s.in_pool == 1)
    })
    .await;
    assert_eq!(report.scan.unwrap().in_repo, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_deleted_while_watched_is_reported_missing() {
    let daemon = start().await;
    let repo = lfs_repo(daemon.dir.path(), "doomed");
    add_repo(&daemon, &repo).await;
    std::fs::remove_dir_all(&repo).unwrap();
    // The watcher notices by itself, without any request looking.
    let report = wait_for(&daemon, &repo, |r| r.state == RepoState::Missing).await;
    // "no longer exists", or "no longer a git repo" when a scan ran mid-deletion.
    assert!(report.problem.unwrap().contains("no longer"));
    let status = daemon.status().await;
    assert_eq!(status.repos[0].state, RepoState::Missing);
    // It can still be unregistered by its old path.
    let reply = daemon
        .client()
        .await
        .call(Request::ReposRemove(RepoPath { path: repo.clone() }))
        .await
        .unwrap();
    assert!(matches!(reply, Reply::Repo { .. }));
    assert!(daemon.status().await.repos.is_empty());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_moved_away_is_found_missing_by_the_poll_and_back_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    config.poll_interval = Duration::from_millis(100);
    let daemon = start_in(dir, config).await;
    let repo = lfs_repo(daemon.dir.path(), "wanderer");
    add_repo(&daemon, &repo).await;
    let away = daemon.dir.path().join("elsewhere");
    std::fs::rename(&repo, &away).unwrap();
    wait_for(&daemon, &repo, |r| r.state == RepoState::Missing).await;
    std::fs::rename(&away, &repo).unwrap();
    let report = wait_for(&daemon, &repo, |r| r.state == RepoState::Watching).await;
    assert_eq!(report.scan.unwrap().pointers, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_repos_survive_a_restart() {
    let daemon = start().await;
    let repo = lfs_repo(daemon.dir.path(), "kept");
    add_repo(&daemon, &repo).await;
    let dir = daemon.stop().await;
    let config = config_in(dir.path());
    let daemon = start_in(dir, config).await;
    let report = wait_for(&daemon, &repo, |r| r.state == RepoState::Watching).await;
    assert_eq!(report.scan.unwrap().pointers, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_repo_paths_get_errors_naming_them() {
    let daemon = start().await;
    let mut client = daemon.client().await;
    let plain = daemon.dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let cases = [
        (
            plain.clone(),
            ErrorCode::InvalidArgument,
            "not a git work tree",
        ),
        (
            daemon.dir.path().join("nowhere"),
            ErrorCode::InvalidArgument,
            "no such folder",
        ),
        (
            PathBuf::from("relative/repo"),
            ErrorCode::InvalidArgument,
            "relative",
        ),
    ];
    for (path, code, text) in cases {
        let err = client
            .call(Request::ReposAdd(RepoPath { path: path.clone() }))
            .await
            .unwrap_err();
        let IpcError::Daemon(err) = err else {
            panic!("{err}")
        };
        assert_eq!(err.code, code);
        assert!(
            err.message.contains(text) && err.message.contains(path.to_str().unwrap()),
            "{}",
            err.message
        );
    }
    let err = client
        .call(Request::ReposRemove(RepoPath { path: plain }))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            IpcError::Daemon(WireError {
                code: ErrorCode::NotFound,
                ..
            })
        ),
        "{err}"
    );
    daemon.stop().await;
}

// ---- gc ----------------------------------------------------------------

/// A gc with no grace period: every unreferenced entry goes at once.
async fn gc(daemon: &TestDaemon, dry_run: bool) -> Result<GcReport, IpcError> {
    gc_with(daemon, dry_run, false, 0).await
}

async fn gc_with(
    daemon: &TestDaemon,
    dry_run: bool,
    force: bool,
    grace_secs: u64,
) -> Result<GcReport, IpcError> {
    let request = GcRequest {
        dry_run,
        force,
        grace_secs: Some(grace_secs),
    };
    daemon.client().await.gc(request, |_| {}).await
}

fn removed(report: &GcReport) -> Vec<String> {
    let mut keys: Vec<String> = report.removed.iter().map(|e| e.key.clone()).collect();
    keys.sort();
    keys
}

/// Puts `bytes` in the pool; returns its oid.
fn pooled(daemon: &TestDaemon, bytes: &[u8]) -> Oid {
    let oid = Oid::of(bytes);
    daemon.shared.care.pool().put(&oid, bytes).unwrap();
    oid
}

/// A foreign object recorded for `repo` at `path`, hashed to `content`.
fn foreign(daemon: &TestDaemon, repo: &Path, path: &str, content: &Oid) -> Oid {
    use crate::registry::{provisional_oid, Entry, ForeignObject};
    let url = format!("https://h/{path}");
    let object = ForeignObject {
        url: url.clone().into(),
        bucket: None,
        key: None,
        version_id: None,
        etag: format!("{path}-1"),
        size: 9,
        provisional_oid: provisional_oid(&url, &format!("{path}-1")),
        content_oid: Some(*content),
        drs_id: None,
        last_modified: None,
        recorded_at: 1,
        md5: None,
        content_read: false,
    };
    let provisional = object.provisional_oid;
    let entry = Entry {
        path: path.into(),
        oid: provisional,
        object,
    };
    daemon
        .shared
        .workers
        .registry()
        .record(repo, &[entry])
        .unwrap();
    provisional
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_keeps_what_any_ref_index_stash_or_foreign_path_needs_and_removes_the_rest() {
    let daemon = start().await;
    let parent = tempfile::tempdir().unwrap();
    let a = lfs_repo(parent.path(), "a");
    let b = lfs_repo(parent.path(), "b");
    add_repo(&daemon, &a).await;
    add_repo(&daemon, &b).await;
    // In a: a branch not checked out, a stash, a staged file, a committed
    // provisional pointer, and a foreign path whose pointer git never saw.
    git(&a, &["checkout", "-q", "-b", "side"]);
    commit_bam(&a, "side.bam", b"side only");
    git(&a, &["checkout", "-q", "main"]);
    std::fs::write(a.join("one.bam"), b"stashed edit").unwrap();
    git(&a, &["stash", "-q"]);
    std::fs::write(a.join("staged.bam"), b"staged only").unwrap();
    git(&a, &["add", "staged.bam"]);
    let hashed = pooled(&daemon, b"hashed behind a provisional pointer");
    let provisional = foreign(&daemon, &a, "p.bam", &hashed);
    let pointer = Pointer {
        oid: provisional,
        size: 9,
    };
    std::fs::write(a.join("p.bam"), pointer.to_text()).unwrap();
    git(&a, &["add", "p.bam"]);
    git(&a, &["commit", "-q", "-m", "p"]);
    let unstaged = pooled(&daemon, b"foreign, never staged");
    foreign(&daemon, &a, "u.bam", &unstaged);
    let kept_a: Vec<_> = [
        b"reads one".as_slice(),
        b"side only",
        b"stashed edit",
        b"staged only",
    ]
    .iter()
    .map(|bytes| pooled(&daemon, bytes))
    .chain([hashed, unstaged])
    .collect();
    let only_b = pooled(&daemon, b"only in b");
    commit_bam(&b, "b.bam", b"only in b");
    let orphan = pooled(&daemon, b"no repo has this");

    let dry = gc(&daemon, true).await.unwrap();
    assert_eq!(removed(&dry), vec![orphan.to_hex()], "{dry:?}");
    assert_eq!((dry.repos, dry.bytes), (2, 16));
    assert!(
        daemon.shared.care.pool().has(&orphan).unwrap(),
        "a dry run removes nothing"
    );
    let done = gc(&daemon, false).await.unwrap();
    assert_eq!(removed(&done), removed(&dry));
    assert!(!daemon.shared.care.pool().has(&orphan).unwrap());
    for oid in kept_a.iter().chain([&only_b]) {
        assert!(daemon.shared.care.pool().has(oid).unwrap(), "{oid} kept");
    }

    // Unregistered, b no longer holds its objects in the pool.
    let request = Request::ReposRemove(RepoPath { path: b.clone() });
    daemon.client().await.call(request).await.unwrap();
    assert_eq!(
        removed(&gc(&daemon, false).await.unwrap()),
        vec![only_b.to_hex()]
    );
    assert!(
        b.join(".git/lfs/objects").is_dir(),
        "b's own copies are not gc's"
    );

    // A registered repo gc cannot read stops it, naming the repo.
    std::fs::rename(&a, parent.path().join("moved")).unwrap();
    let Err(IpcError::Daemon(e)) = gc(&daemon, false).await else {
        panic!("gc went on without a");
    };
    assert_eq!(e.code, ErrorCode::NotFound);
    assert!(
        e.message.contains(&a.display().to_string()),
        "{}",
        e.message
    );
    for oid in &kept_a {
        assert!(daemon.shared.care.pool().has(oid).unwrap(), "{oid} kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_with_no_registered_repo_refuses_unless_forced() {
    let daemon = start().await;
    let orphan = pooled(&daemon, b"nobody registered references this");
    for dry_run in [true, false] {
        let Err(IpcError::Daemon(e)) = gc(&daemon, dry_run).await else {
            panic!("gc swept with no repo registered");
        };
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert!(e.message.contains("no repo is registered"), "{}", e.message);
        assert!(e.message.contains("repos.json"), "{}", e.message);
        assert!(e.message.contains("--force"), "{}", e.message);
    }
    assert!(daemon.shared.care.pool().has(&orphan).unwrap());
    let forced = gc_with(&daemon, false, true, 0).await.unwrap();
    assert_eq!(removed(&forced), vec![orphan.to_hex()]);
    assert!(!daemon.shared.care.pool().has(&orphan).unwrap());
}

/// Moves every gc sighting `secs` into the past, as if that time had gone by.
fn age_sightings(daemon: &TestDaemon, secs: i64) {
    rusqlite::Connection::open(daemon.dir.path().join("pool/gc.sqlite"))
        .unwrap()
        .execute("UPDATE seen SET at = at - ?1", [secs])
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_unreferenced_for_less_than_the_grace_stays_and_one_past_it_goes() {
    let daemon = start().await;
    let parent = tempfile::tempdir().unwrap();
    let a = lfs_repo(parent.path(), "a");
    let b = lfs_repo(parent.path(), "b");
    add_repo(&daemon, &a).await;
    add_repo(&daemon, &b).await;
    let in_b = pooled(&daemon, b"only in b");
    commit_bam(&b, "b.bam", b"only in b");
    let orphan = pooled(&daemon, b"never referenced");
    let hour = 3600;

    // First sighting: the orphan counts from now, b's object is referenced.
    let first = gc_with(&daemon, false, false, hour).await.unwrap();
    assert!(first.removed.is_empty(), "{first:?}");
    assert_eq!((first.waiting, first.grace_secs), (1, hour), "{first:?}");
    // b unregistered: its object was referenced a moment ago, so it waits.
    let request = Request::ReposRemove(RepoPath { path: b.clone() });
    daemon.client().await.call(request).await.unwrap();
    let dry = gc_with(&daemon, true, false, hour).await.unwrap();
    assert!(dry.removed.is_empty(), "{dry:?}");
    assert_eq!(dry.waiting, 2, "{dry:?}");
    let done = gc_with(&daemon, false, false, hour).await.unwrap();
    assert!(done.removed.is_empty(), "{done:?}");
    assert!(daemon.shared.care.pool().has(&in_b).unwrap());

    // Two hours on, both are past the grace: the dry run and the gc say so.
    age_sightings(&daemon, 2 * hour as i64);
    let dry = gc_with(&daemon, true, false, hour).await.unwrap();
    let mut both = vec![in_b.to_hex(), orphan.to_hex()];
    both.sort();
    assert_eq!(removed(&dry), both, "{dry:?}");
    assert_eq!(dry.waiting, 0);
    assert!(
        daemon.shared.care.pool().has(&orphan).unwrap(),
        "a dry run removes nothing"
    );
    // A longer grace still keeps them.
    let longer = gc_with(&daemon, false, false, 3 * hour).await.unwrap();
    assert!(longer.removed.is_empty(), "{longer:?}");
    let done = gc_with(&daemon, false, false, hour).await.unwrap();
    assert_eq!(removed(&done), both);
    assert!(!daemon.shared.care.pool().has(&in_b).unwrap());
    assert!(!daemon.shared.care.pool().has(&orphan).unwrap());
}

// ---- corrupt pool entries --------------------------------------------------

/// Overwrites the large pool file of `oid` in place with other bytes of its
/// length, as a write through a repo's hard link would (its modification
/// time moves on, as a write's would a moment after the put).
fn corrupt_large(daemon: &TestDaemon, oid: &Oid) {
    let blob = daemon.shared.care.pool().get(oid).unwrap().unwrap();
    let path = blob.path().expect("a large entry").to_path_buf();
    let len = blob.len() as usize;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    Write::write_all(&mut &file, &vec![0xa5; len]).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(2))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_pool_file_is_never_linked_into_a_repo_and_the_error_names_it() {
    let daemon = start().await;
    let parent = tempfile::tempdir().unwrap();
    let repo = lfs_repo(parent.path(), "r");
    let big = vec![3u8; 200 << 10];
    commit_bam(&repo, "big.bam", &big);
    let oid = pooled(&daemon, &big);
    // Only the pool has it: hydrate must take it from there, or not at all.
    std::fs::remove_dir_all(repo.join(".git/lfs/objects")).unwrap();
    corrupt_large(&daemon, &oid);
    let placed = crate::lfs::hydrate::object_path(&repo.join(".git/lfs/objects"), &oid);

    let mut client = daemon.client().await;
    let report = client.hydrate(repo.clone(), |_| {}).await.unwrap();
    let failed = report
        .failed
        .iter()
        .find(|p| p.oid == oid)
        .unwrap_or_else(|| panic!("{report:?}"));
    assert!(failed.why.contains("is corrupt"), "{}", failed.why);
    assert!(failed.why.contains("object remote"), "{}", failed.why);
    assert_eq!(report.from_pool, 0, "{report:?}");
    assert!(
        !placed.exists(),
        "the corrupt file was linked into the repo"
    );
    assert!(!daemon.shared.care.pool().has(&oid).unwrap(), "moved aside");
    let quarantine = daemon.dir.path().join("pool/large/quarantine");
    assert_eq!(std::fs::read_dir(&quarantine).unwrap().count(), 1);

    // The transfer agent's download: an error naming the object, nothing
    // handed to git-lfs.
    pooled(&daemon, &big);
    corrupt_large(&daemon, &oid);
    let request = LfsDownloadRequest {
        repo: repo.clone(),
        oid,
        size: big.len() as u64,
    };
    let mut client = daemon.client().await;
    let Err(IpcError::Daemon(e)) = client.lfs_download(request, |_| {}).await else {
        panic!("a corrupt entry was handed to git-lfs");
    };
    assert!(e.message.contains(&oid.to_hex()), "{}", e.message);
    assert!(e.message.contains("is corrupt"), "{}", e.message);
    let handed = std::fs::read_dir(repo.join(".git/lfs/tmp"))
        .unwrap()
        .count();
    assert_eq!(handed, 0, "nothing left in .git/lfs/tmp");
    assert!(!daemon.shared.care.pool().has(&oid).unwrap());
    daemon.stop().await;
}

/// What one `add_url` with `entries` and `from` gets back.
async fn add_url_error(
    daemon: &TestDaemon,
    entries: Vec<AddUrlEntry>,
    from: Option<PathBuf>,
) -> WireError {
    let request = AddUrlRequest {
        cwd: daemon.dir.path().to_path_buf(),
        entries,
        from,
        force: false,
        no_fetch: false,
    };
    match daemon.client().await.add_url(request, |_| {}).await {
        Err(IpcError::Daemon(error)) => error,
        other => panic!("expected the daemon to refuse, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_entry_limit_or_naming_a_file_to_read_is_refused() {
    let daemon = start().await;
    let entry = |i: usize| AddUrlEntry {
        url: format!("s3://b/k{i}"),
        path: None,
        sha256: None,
        line: Some(i),
        size: None,
        md5: None,
    };
    let over = (0..=MAX_REQUEST_ENTRIES).map(entry).collect();
    let error = add_url_error(&daemon, over, None).await;
    assert_eq!(error.code, ErrorCode::InvalidArgument);
    assert!(
        error
            .message
            .contains(&format!("{} add_url entries", MAX_REQUEST_ENTRIES + 1))
            && error
                .message
                .contains(&format!("limit is {MAX_REQUEST_ENTRIES}")),
        "{}",
        error.message
    );
    let paths = vec![PathBuf::from("x"); MAX_REQUEST_ENTRIES + 1];
    let promote = PromoteRequest {
        cwd: daemon.dir.path().to_path_buf(),
        paths,
        all: false,
        retry: false,
    };
    match daemon.client().await.promote(promote).await {
        Err(IpcError::Daemon(error)) => assert!(
            error.code == ErrorCode::InvalidArgument && error.message.contains("promote paths"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    // The daemon reads no file a client names: not even a short one.
    let list = daemon.dir.path().join("list.txt");
    std::fs::write(&list, "s3://b/k\n").unwrap();
    let error = add_url_error(&daemon, Vec::new(), Some(list.clone())).await;
    assert_eq!(error.code, ErrorCode::InvalidArgument);
    assert!(
        error.message.contains("reads no client-named file")
            && error.message.contains(list.to_str().unwrap()),
        "{}",
        error.message
    );
    // The connection and the daemon serve on.
    assert_eq!(daemon.status().await.pid, std::process::id());
    daemon.stop().await;
}

// ---- small objects in batches ---------------------------------------------

/// A repo of `n` small LFS files (and `one.bam`) whose object remote is the
/// folder `store`, recorded in `.gitattributes`; returns the oids.
fn small_objects_repo(parent: &Path, store: &Path, n: usize) -> (PathBuf, Vec<Oid>) {
    let repo = lfs_repo(parent, "small");
    std::fs::create_dir_all(store).unwrap();
    let mut attributes = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    attributes.push_str(&format!(
        ".gitattributes drs-remote=file://{}\n",
        store.display()
    ));
    std::fs::write(repo.join(".gitattributes"), attributes).unwrap();
    let mut oids = vec![Oid::of(b"reads one")];
    for i in 0..n {
        let bytes = format!("small object {i}\n").repeat(100).into_bytes();
        oids.push(Oid::of(&bytes));
        std::fs::write(repo.join(format!("f{i:03}.bam")), bytes).unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "small ones"]);
    (repo, oids)
}

fn head_of(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_of_forty_small_objects_takes_them_into_the_pool_in_one_transaction() {
    let daemon = start().await;
    let parent = tempfile::tempdir().unwrap();
    let store = parent.path().join("objects");
    let (repo, oids) = small_objects_repo(parent.path(), &store, 40);
    let before = daemon.shared.care.pool().kv_write_transactions();
    let request = PrePushRequest {
        repo: repo.clone(),
        remote: "origin".into(),
        updates: format!(
            "refs/heads/main {} refs/heads/main {}\n",
            head_of(&repo),
            "0".repeat(40)
        ),
    };
    let mut client = daemon.client().await;
    let report = client.pre_push(request, |_| {}).await.unwrap();
    assert_eq!(report.objects, 41, "{report:?}");
    assert_eq!(report.uploaded, 41, "{report:?}");
    assert!(
        report.failed.is_empty() && report.refused.is_empty(),
        "{report:?}"
    );
    let transactions = daemon.shared.care.pool().kv_write_transactions() - before;
    assert_eq!(
        transactions, 1,
        "41 objects took {transactions} pool transactions"
    );
    let remote =
        crate::stores::dir::DirRemote::parse(&format!("file://{}", store.display())).unwrap();
    for oid in &oids {
        assert!(
            daemon.shared.care.pool().has(oid).unwrap(),
            "{oid} not in the pool"
        );
        let sent = std::fs::read(remote.path_of(oid)).unwrap();
        assert_eq!(Oid::of(&sent), *oid);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hydrating_forty_small_objects_from_the_object_remote_writes_the_pool_in_one_transaction() {
    let daemon = start().await;
    let parent = tempfile::tempdir().unwrap();
    let store = parent.path().join("objects");
    let (repo, oids) = small_objects_repo(parent.path(), &store, 40);
    let remote =
        crate::stores::dir::DirRemote::parse(&format!("file://{}", store.display())).unwrap();
    let objects = repo.join(".git/lfs/objects");
    for oid in &oids {
        remote
            .put_from_file(&crate::lfs::hydrate::object_path(&objects, oid), oid)
            .unwrap();
    }
    // A fresh clone's state: neither the repo nor the pool has them.
    std::fs::remove_dir_all(&objects).unwrap();
    let before = daemon.shared.care.pool().kv_write_transactions();
    let mut client = daemon.client().await;
    let report = client.hydrate(repo.clone(), |_| {}).await.unwrap();
    assert_eq!(report.downloaded, 41, "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
    let transactions = daemon.shared.care.pool().kv_write_transactions() - before;
    assert_eq!(
        transactions, 1,
        "41 objects took {transactions} pool transactions"
    );
    for oid in &oids {
        assert!(
            daemon.shared.care.pool().has(oid).unwrap(),
            "{oid} not in the pool"
        );
        let placed = std::fs::read(crate::lfs::hydrate::object_path(&objects, oid)).unwrap();
        assert_eq!(Oid::of(&placed), *oid);
    }
}

/// A loopback HTTP server for `bodies` by name: `HEAD` and `GET /NAME`
/// answer with its length, an ETag and a `Last-Modified`, a `Range` with
/// 206 and its `Content-Range` (what add-url's HEAD and read ask). Returns
/// its port; it serves until the test process ends.
fn serve_bodies(bodies: std::collections::HashMap<String, Vec<u8>>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies = Arc::new(bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let bodies = bodies.clone();
            std::thread::spawn(move || answer_body(stream, &bodies));
        }
    });
    port
}

fn answer_body(
    mut stream: std::net::TcpStream,
    bodies: &std::collections::HashMap<String, Vec<u8>>,
) -> Option<()> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_string(), words.next()?.to_string());
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some(value) = header.to_ascii_lowercase().strip_prefix("range: bytes=") {
            let (a, b) = value.trim().split_once('-')?;
            range = Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?));
        }
    }
    let Some(body) = bodies.get(path.trim_start_matches('/')) else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return Some(());
    };
    let common = format!(
        "ETag: \"e-{}\"\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nConnection: close\r\n",
        body.len()
    );
    let (status, extra, part) = match (method.as_str(), range) {
        ("GET", Some((a, b))) => {
            let b = b.min(body.len() - 1);
            let extra = format!("Content-Range: bytes {a}-{b}/{}\r\n", body.len());
            ("206 Partial Content", extra, &body[a..=b])
        }
        _ => ("200 OK", String::new(), &body[..]),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\n{common}{extra}Content-Length: {}\r\n\r\n",
        part.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    if method == "GET" {
        stream.write_all(part).ok()?;
    }
    Some(())
}

/// add-url reads small objects itself and puts them into the pool a batch
/// (256) per transaction, not one each: 300 objects, two transactions, and
/// every pointer named by its content's sha256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_url_of_three_hundred_small_objects_puts_them_into_the_pool_in_two_transactions() {
    let daemon = start().await;
    let repo = daemon.dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    assert!(Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap()
        .success());
    let bodies: std::collections::HashMap<String, Vec<u8>> = (0..300u32)
        .map(|i| {
            (
                format!("f{i:03}.bai"),
                format!("index {i}\n").repeat(50).into_bytes(),
            )
        })
        .collect();
    let port = serve_bodies(bodies.clone());
    let entries = bodies
        .keys()
        .enumerate()
        .map(|(i, name)| AddUrlEntry {
            url: format!("http://127.0.0.1:{port}/{name}"),
            path: None,
            sha256: None,
            line: Some(i + 1),
            size: None,
            md5: None,
        })
        .collect();
    let request = AddUrlRequest {
        cwd: repo.clone(),
        entries,
        from: None,
        force: false,
        no_fetch: false,
    };
    let before = daemon.shared.care.pool().kv_write_transactions();
    let report = daemon
        .client()
        .await
        .add_url(request, |_| {})
        .await
        .unwrap();
    let transactions = daemon.shared.care.pool().kv_write_transactions() - before;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.added.len(), 300);
    for added in &report.added {
        let body = &bodies[&added.path];
        assert_eq!(added.oid_from, OidSource::Hashed, "{added:?}");
        assert_eq!(added.oid, Oid::of(body), "{added:?}");
        let pooled = daemon
            .shared
            .care
            .pool()
            .get(&added.oid)
            .unwrap()
            .expect("in the pool");
        assert_eq!(&pooled.to_vec().unwrap(), body);
    }
    assert_eq!(
        transactions, 2,
        "300 objects took {transactions} pool transactions"
    );
    daemon.stop().await;
}
