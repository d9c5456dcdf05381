//! drsd, drsctl and drs-hook as real processes.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use drsd_e2e::{alive, bin, spawn_ready};
use drsd_proto::{Client, IpcError, Reply, Request};

/// A private folder with a socket, pool and state for one daemon.
struct Home {
    dir: tempfile::TempDir,
}

/// A test's own `drsd serve`, killed if the test ends (or panics) with it still running.
struct Served(Child);

impl std::ops::Deref for Served {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Drop for Home {
    /// Stops a daemon a client started here, should the test have failed before it did.
    fn drop(&mut self) {
        // Not drsctl_alone: a panic here, while unwinding, would abort.
        let _ = self
            .command("drsctl")
            .arg("shutdown")
            .env("DRSD_NO_AUTOSTART", "1")
            .output();
    }
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run").join("drsd.sock")
    }

    fn pool(&self) -> PathBuf {
        self.dir.path().join("pool")
    }

    /// `name` with this home's socket, pool and state in its environment.
    fn command(&self, name: &str) -> Command {
        let program = if name.starts_with("drs") {
            bin(name)
        } else {
            PathBuf::from(name)
        };
        let mut cmd = Command::new(program);
        cmd.env("DRSD_SOCKET", self.socket())
            .env("DRSD_POOL", self.pool())
            .env("DRSD_STATE_DIR", self.dir.path().join("state"))
            .env("DRSD_BIN", bin("drsd"))
            .env_remove("DRSD_NO_AUTOSTART")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null());
        cmd
    }

    /// drsctl told not to start a daemon.
    fn drsctl_alone(&self, args: &[&str]) -> Output {
        self.command("drsctl")
            .args(args)
            .env("DRSD_NO_AUTOSTART", "1")
            .output()
            .expect("drsctl runs")
    }

    fn drsctl(&self, args: &[&str]) -> Output {
        self.command("drsctl")
            .args(args)
            .output()
            .expect("drsctl runs")
    }

    /// `drsd serve --ready`, returned once it accepts connections.
    fn serve(&self, extra: &[&str]) -> Served {
        let child = spawn_ready(
            self.command("drsd")
                .args(["serve", "--ready"])
                .args(extra)
                .stderr(Stdio::piped()),
        );
        Served(child)
    }
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The message of a `--json` error (printed on standard output).
fn error_message(out: &Output) -> String {
    json(out)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, sig).unwrap();
}

/// Waits for `child` to exit, at most `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "drsd still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn racing_clients_start_exactly_one_daemon() {
    let home = Home::new();
    let racers: Vec<_> = (0..8)
        .map(|_| {
            home.command("drsctl")
                .args(["--json", "status"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut pids = Vec::new();
    for racer in racers {
        let out = racer.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let status = json(&out);
        // Started on demand: it stops after 15 idle minutes.
        assert_eq!(status["idle_timeout_secs"], 900, "{status}");
        pids.push(status["pid"].as_u64().unwrap());
    }
    pids.dedup();
    assert_eq!(
        pids.len(),
        1,
        "every client talks to the one daemon: {pids:?}"
    );
    let pid = pids[0] as u32;
    assert!(alive(pid));
    let out = home.drsctl(&["shutdown"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!alive(pid), "shutdown returns once the daemon has exited");
    assert!(!home.socket().exists());
}

#[test]
fn no_daemon_is_started_when_told_not_to() {
    let home = Home::new();
    let out = home.drsctl_alone(&["--json", "status"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(json(&out)["error"]["code"], "unreachable");
    let message = json(&out)["error"]["message"].to_string();
    assert!(
        message.contains(&home.socket().display().to_string()),
        "{message}"
    );
    assert_eq!(stderr(&out), "", "with --json, nothing on standard error");
    let out = home.drsctl_alone(&["status"]);
    assert!(
        stderr(&out).contains(&home.socket().display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(!home.socket().exists());
    // Shutdown never starts a daemon just to stop it.
    assert_eq!(home.drsctl(&["shutdown"]).status.code(), Some(3));
    assert!(!home.socket().exists());
}

/// Listens on `home`'s socket as a daemon that is not ours would: each
/// connection gets `answer` (a line, or nothing) and is closed.
fn stand_in(home: &Home, answer: &'static str) -> std::thread::JoinHandle<()> {
    let dir = home.socket().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(home.socket()).unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        for stream in listener.incoming().take(1) {
            let mut stream = stream.unwrap();
            let mut hello = String::new();
            BufReader::new(&stream).read_line(&mut hello).unwrap();
            assert!(hello.contains("\"hello\""), "{hello}");
            stream.write_all(answer.as_bytes()).unwrap();
        }
    })
}

#[test]
fn a_daemon_of_another_protocol_exits_4_and_one_that_hangs_up_exits_3() {
    let home = Home::new();
    let other = stand_in(
        &home,
        "{\"id\":1,\"kind\":\"error\",\"error\":{\"code\":\"version_mismatch\",\"message\":\"this drsd speaks protocol 9\"}}\n",
    );
    let out = home.drsctl(&["--json", "status"]);
    other.join().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(json(&out)["error"]["code"], "version_mismatch");
    assert!(error_message(&out).contains("protocol 9"), "{}", text(&out));

    // One that takes the connection and closes it unanswered (a daemon on
    // its way out) counts as none running.
    std::fs::remove_file(home.socket()).unwrap();
    let stopping = stand_in(&home, "");
    let out = home.drsctl_alone(&["--json", "status"]);
    stopping.join().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(json(&out)["error"]["code"], "unreachable");
    assert!(
        error_message(&out).contains("closed the connection before the handshake"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_second_daemon_refuses_and_a_killed_ones_socket_is_replaced() {
    let home = Home::new();
    let mut first = home.serve(&[]);
    let out = home.command("drsd").arg("serve").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("already running") && err.contains(&home.socket().display().to_string()),
        "{err}"
    );
    // kill -9 leaves the socket file behind; the next daemon replaces it.
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(
        home.socket().exists(),
        "a killed daemon leaves its socket file"
    );
    let mut second = home.serve(&[]);
    let status = json(&home.drsctl(&["--json", "status"]));
    assert_eq!(status["pid"].as_u64(), Some(second.id() as u64));
    assert!(status.get("idle_timeout_secs").is_none(), "{status}");
    signal(&second, rustix::process::Signal::TERM);
    assert!(wait_within(&mut second, Duration::from_secs(5)).success());
}

/// Puts `n` blobs of `mib` MiB in the pool, so that verifying takes a while.
fn fill_pool(dir: &Path, n: usize, mib: usize) {
    let pool = drsd::pool::Pool::open(dir, None).unwrap();
    for i in 0..n {
        let mut data = vec![0u8; mib << 20];
        data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        pool.put_stream(None, &data[..]).unwrap();
    }
}

/// Starts `pool verify`, sends SIGTERM to `daemon` once the request is in
/// flight (its first progress event), and returns the request's outcome.
fn verify_then_sigterm(socket: &Path, daemon: &Child) -> Result<Reply, IpcError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = Client::connect(socket, "e2e").await.unwrap();
        let mut signalled = false;
        client
            .call_with_progress(Request::PoolVerify, |_| {
                if !signalled {
                    signal(daemon, rustix::process::Signal::TERM);
                    signalled = true;
                }
            })
            .await
    })
}

#[test]
fn sigterm_lets_requests_in_flight_finish() {
    let home = Home::new();
    fill_pool(&home.pool(), 3, 32);
    let mut daemon = home.serve(&[]);
    match verify_then_sigterm(&home.socket(), &daemon).expect("the request in flight is answered") {
        Reply::Verify(report) => assert_eq!((report.entries, report.bad.len()), (3, 0)),
        other => panic!("{other:?}"),
    }
    assert!(wait_within(&mut daemon, Duration::from_secs(10)).success());
    assert!(!home.socket().exists());
}

#[test]
fn sigterm_stops_within_the_drain_bound_even_if_requests_are_stuck() {
    use std::io::Write;
    let home = Home::new();
    let mut daemon = home.serve(&["--drain-timeout", "0.2"]);
    // A client that sends 5,000 requests and reads none of the answers: once
    // its socket buffer is full those requests cannot finish.
    let mut stuck = std::os::unix::net::UnixStream::connect(home.socket()).unwrap();
    let mut flood =
        b"{\"id\":0,\"method\":\"hello\",\"version\":1,\"client\":\"stuck\"}\n".to_vec();
    for id in 1..=5000 {
        flood.extend_from_slice(format!("{{\"id\":{id},\"method\":\"status\"}}\n").as_bytes());
    }
    stuck.write_all(&flood).unwrap();
    std::thread::sleep(Duration::from_millis(300)); // let the daemon read them
    let stopping = Instant::now();
    signal(&daemon, rustix::process::Signal::TERM);
    assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
    let took = stopping.elapsed();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut log).unwrap();
    assert!(
        log.contains("drain timeout"),
        "the daemon gave up on the stuck requests: {log}"
    );
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(!home.socket().exists());
    drop(stuck);
}

#[test]
fn another_user_is_refused_even_when_the_socket_is_open_to_them() {
    assert_eq!(
        drsd_proto::paths::current_uid(),
        0,
        "this test runs as root (as CI does), to act as another user"
    );
    let home = Home::new();
    let mut daemon = home.serve(&[]);
    // Open the way on purpose: only the peer uid check stands.
    for (path, mode) in [
        (home.dir.path().to_path_buf(), 0o755),
        (home.socket().parent().unwrap().to_path_buf(), 0o755),
        (home.socket(), 0o777),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // drsctl run by that user stops first, on its side: the folder is not its own.
    let out = home
        .command("drsctl")
        .args(["--json", "status"])
        .env("DRSD_NO_AUTOSTART", "1")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        error_message(&out).contains("belongs to uid 0"),
        "{}",
        text(&out)
    );
    // A client without that check gets the daemon's refusal (on connecting,
    // before it has said anything).
    let raw = python_as_nobody(
        "import socket, sys\n\
         c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])\n\
         print(c.makefile().readline(), end='')\n",
    )
    .arg(home.socket())
    .output()
    .unwrap();
    let answer: serde_json::Value =
        serde_json::from_slice(&raw.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&raw)));
    assert_eq!(answer["error"]["code"], "permission_denied", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("uid 65534"), "{message}");
    // Our own drsctl will not talk through a folder open to others either...
    let run = home.socket().parent().unwrap().to_path_buf();
    let out = home.drsctl_alone(&["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("mode 755"), "{}", stderr(&out));
    // ...and once it is private again, our own user is served.
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(home.drsctl(&["status"]).status.success());
    signal(&daemon, rustix::process::Signal::TERM);
    assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
}

#[test]
fn repos_commands_print_tables_and_json_and_fail_clearly() {
    let home = Home::new();
    let repo = home.dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    assert!(Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .status()
        .unwrap()
        .success());
    let out = home
        .command("drsctl")
        .args(["repos", "add"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("registered") && text.contains("watching"),
        "{text}"
    );
    let list = json(&home.drsctl(&["--json", "repos", "list"]));
    assert_eq!(
        list[0]["path"],
        repo.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(list[0]["scan"]["pointers"], 0);
    let missing = home.dir.path().join("nope");
    let out = home.drsctl(&["--json", "repos", "add", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["code"], "invalid_argument");
    let message = json(&out)["error"]["message"].to_string();
    assert!(message.contains(missing.to_str().unwrap()), "{message}");
    let text = String::from_utf8_lossy(&home.drsctl(&["repos", "list"]).stdout).into_owned();
    assert!(
        text.contains("last scan") && text.contains(" ago") && text.contains("hard link"),
        "{text}"
    );
    let out = home.drsctl(&["repos", "remove", repo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status = home.drsctl(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("no repos registered") && text.contains("sqlite"),
        "{text}"
    );
    assert!(home.drsctl(&["shutdown"]).status.success());
}

#[test]
fn pool_verify_names_a_bad_entry_and_exits_1() {
    let home = Home::new();
    fill_pool(&home.pool(), 1, 1);
    assert!(home.drsctl(&["pool", "verify"]).status.success());
    // Corrupt the one large file (committed read-only; we are its owner).
    let large = walk_files(&home.pool().join("large"));
    assert_eq!(large.len(), 1, "{large:?}");
    std::fs::set_permissions(&large[0], std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&large[0], b"not what was stored").unwrap();
    let out = home.drsctl(&["--json", "pool", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["entries"], 1);
    assert!(
        report["bad"][0]["problem"]
            .as_str()
            .unwrap()
            .contains("hashes to"),
        "{report}"
    );
    assert!(home.drsctl(&["shutdown"]).status.success());
}

#[test]
fn gc_lists_then_removes_what_no_registered_repo_references() {
    let home = Home::new();
    let file = home.dir.path().join("orphan.bin");
    std::fs::write(&file, vec![7u8; 200 << 10]).unwrap();
    let put = home.command("drsd").arg("put").arg(&file).output().unwrap();
    assert!(put.status.success(), "{}", stderr(&put));
    let oid = String::from_utf8(put.stdout).unwrap().trim().to_string();

    // No repo registered (a lost repos.json looks the same): refused.
    let refused = home.drsctl(&["gc"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("no repo is registered"),
        "{}",
        stderr(&refused)
    );
    let get = |oid: &str| home.command("drsd").args(["get", oid]).output().unwrap();
    assert!(get(&oid).status.success(), "a refused gc removes nothing");
    // Forced with the default grace: stored just now, so it stays.
    let waits = json(&home.drsctl(&["--json", "gc", "--force"]));
    assert_eq!(waits["removed"], serde_json::json!([]), "{waits}");
    assert_eq!(waits["waiting"], 1, "{waits}");

    let dry = home.drsctl(&["gc", "--dry-run", "--force", "--grace", "0"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let shown = String::from_utf8_lossy(&dry.stdout);
    assert!(
        shown.contains(&format!("would remove {oid} (large, ")),
        "{shown}"
    );
    assert!(shown.contains("would remove 1 pool entries"), "{shown}");
    assert!(get(&oid).status.success(), "a dry run removes nothing");

    let done = json(&home.drsctl(&["--json", "gc", "--force", "--grace", "0"]));
    assert_eq!(done["dry_run"], false);
    assert_eq!(done["removed"][0]["key"], oid.as_str(), "{done}");
    assert_eq!(done["bytes"], 200 << 10);
    let gone = get(&oid);
    assert!(!gone.status.success() && stderr(&gone).contains("no entry"));
}

#[test]
fn team_forget_refuses_this_node_and_names_the_known_nodes_for_an_unknown_one() {
    let home = Home::new();
    // One machine's daemon publishes its roots as node "local".
    let own = home.drsctl(&["team", "forget", "local"]);
    assert!(!own.status.success());
    assert!(
        stderr(&own).contains("that is this node"),
        "{}",
        stderr(&own)
    );
    let unknown = home.drsctl(&["team", "forget", "gone-node"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown)
            .contains("no node of that name is listed or published roots (known: none)"),
        "{}",
        stderr(&unknown)
    );
    assert!(home.drsctl(&["shutdown"]).status.success());
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else if !path.to_string_lossy().contains("stage") {
            files.push(path);
        }
    }
    files
}

#[test]
fn verbose_flags_raise_the_log_level() {
    let home = Home::new();
    let log_of = |extra: &[&str]| {
        let mut daemon = home.serve(extra);
        home.drsctl(&["status"]);
        signal(&daemon, rustix::process::Signal::TERM);
        assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
        let mut log = String::new();
        std::io::Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut log).unwrap();
        log
    };
    let quiet_log = log_of(&[]);
    let loud_log = log_of(&["-v"]);
    assert!(
        quiet_log.contains("INFO") && !quiet_log.contains("DEBUG"),
        "{quiet_log}"
    );
    assert!(
        loud_log.contains("DEBUG") && loud_log.contains("request"),
        "{loud_log}"
    );
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new();
    let out = home.drsctl(&[
        "service",
        "install",
        "--kind",
        "systemd",
        "--dir",
        dir.path().to_str().unwrap(),
        "--drsd",
        bin("drsd").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let unit = dir.path().join("drsd.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(&format!("ExecStart={} serve", bin("drsd").display())),
        "{text}"
    );
    assert!(analyze(&unit).is_empty(), "{:?}", analyze(&unit));
    // The check can fail: a unit with an unknown key is reported.
    let broken = dir.path().join("broken.service");
    std::fs::write(
        &broken,
        text.replace("Restart=on-failure", "Restart=on-failure\nRestartt=always"),
    )
    .unwrap();
    assert!(!analyze(&broken).is_empty());
    let out = home.drsctl(&[
        "service",
        "uninstall",
        "--kind",
        "systemd",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success() && !unit.exists(), "{}", stderr(&out));
}

/// What `systemd-analyze verify` says about `unit` (its warnings and errors).
fn analyze(unit: &Path) -> Vec<String> {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .expect("systemd-analyze runs (tests/ci/install-system-deps.sh installs it)");
    let name = unit.file_name().unwrap().to_str().unwrap();
    let mut problems: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(name))
        .map(str::to_string)
        .collect();
    if !out.status.success() {
        problems.push(format!(
            "exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    problems
}

#[test]
fn the_launchd_plist_parses_and_runs_drsd_serve() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new();
    let args = [
        "service",
        "install",
        "--kind",
        "launchd",
        "--dir",
        dir.path().to_str().unwrap(),
        "--drsd",
        "/opt/drs & co/drsd",
    ];
    let out = home.drsctl(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let plist = plist::Value::from_file(dir.path().join("drsd.plist")).expect("a valid plist");
    let dict = plist.as_dictionary().unwrap();
    assert_eq!(dict["Label"].as_string(), Some("drsd"));
    let program: Vec<&str> = dict["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_string().unwrap())
        .collect();
    assert_eq!(program, ["/opt/drs & co/drsd", "serve"]);
    assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
    assert!(dict["StandardErrorPath"]
        .as_string()
        .unwrap()
        .ends_with("Library/Logs/drsd.log"));
    let uninstall = [
        "service",
        "uninstall",
        "--kind",
        "launchd",
        "--dir",
        dir.path().to_str().unwrap(),
    ];
    assert!(home.drsctl(&uninstall).status.success());
    let again = home.drsctl(&uninstall);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("not installed"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn drs_hook_has_help_and_reaches_the_daemon() {
    let home = Home::new();
    let help = home.command("drs-hook").arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("transfer agent"));
    let ping = home.command("drs-hook").arg("ping").output().unwrap();
    assert!(ping.status.success(), "{}", stderr(&ping));
    assert!(String::from_utf8_lossy(&ping.stdout).starts_with("drsd "));
    assert!(home.drsctl(&["shutdown"]).status.success());
}

/// Started by systemd (JOURNAL_STREAM names its standard error), drsd logs to
/// the journal socket, not to standard error. The journal here is a datagram
/// socket of ours, mounted at /run/systemd in drsd's own mount namespace.
#[test]
fn under_systemd_the_logs_go_to_the_journal() {
    use std::os::unix::fs::MetadataExt;
    let home = Home::new();
    let fake_run = home.dir.path().join("run-systemd");
    std::fs::create_dir_all(fake_run.join("journal")).unwrap();
    let journal = std::os::unix::net::UnixDatagram::bind(fake_run.join("journal/socket")).unwrap();
    journal
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let stderr_file = home.dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_file).unwrap();
    let meta = stderr.metadata().unwrap();
    let script = r#"mount --bind "$1" /run/systemd && shift && exec "$@""#;
    let mut daemon = home
        .command("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(&fake_run)
        .arg(bin("drsd"))
        .args(["serve", "--ready"])
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.trim_end() != drsd_proto::READY_LINE {
        let status = daemon.wait().unwrap();
        panic!(
            "drsd did not get ready ({status}): {}",
            std::fs::read_to_string(&stderr_file).unwrap()
        );
    }
    let mut buf = vec![0u8; 65536];
    // The logger first sends an empty datagram to check the journal is there.
    let entry = loop {
        let n = journal.recv(&mut buf).expect("a journal entry arrives");
        if n > 0 {
            break String::from_utf8_lossy(&buf[..n]).into_owned();
        }
    };
    assert!(entry.contains("SYSLOG_IDENTIFIER=drsd\n"), "{entry:?}");
    // MESSAGE travels length-encoded (the journal's binary field form).
    assert!(
        entry.contains("MESSAGE\n")
            && entry.contains(concat!("drsd ", env!("CARGO_PKG_VERSION"), " listening on")),
        "{entry:?}"
    );
    assert!(
        entry.contains("PRIORITY=5\n"),
        "info is logged as notice: {entry:?}"
    );
    signal(&daemon, rustix::process::Signal::TERM);
    assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
    assert_eq!(
        std::fs::read_to_string(&stderr_file).unwrap(),
        "",
        "nothing on standard error"
    );
}

/// Past the inotify watch limit a repo is polled, not half-watched, and
/// changes still show up. The limit is lowered to 4 watches in a user
/// namespace of drsd's own (`/proc/sys/user/max_inotify_watches` is per
/// namespace), so nothing else on the machine is affected.
#[test]
fn past_the_inotify_limit_a_repo_is_polled() {
    let home = Home::new();
    let repo = home.dir.path().join("big");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@drsd.invalid"])
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["lfs", "install", "--local"]);
    git(&["lfs", "track", "*.bam"]);
    std::fs::write(repo.join("a.bam"), b"first").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "a"]);
    let script = r#"echo 4 > /proc/sys/user/max_inotify_watches && exec "$@""#;
    let mut daemon = spawn_ready(
        home.command("unshare")
            .args(["-U", "-r", "sh", "-c", script, "sh"])
            .arg(bin("drsd"))
            .args(["serve", "--ready", "--poll-interval", "0.2"])
            .stderr(Stdio::piped()),
    );
    let out = home.drsctl(&["--json", "repos", "add", repo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let added = json(&out);
    assert_eq!(added["state"], "polling", "{added}");
    assert!(
        added["problem"]
            .as_str()
            .unwrap()
            .contains("max_user_watches"),
        "{added}"
    );
    std::fs::write(repo.join("b.bam"), b"second").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "b"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = json(&home.drsctl(&["--json", "repos", "list"]));
        if list[0]["scan"]["pointers"] == 2 {
            assert_eq!(list[0]["state"], "polling");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the poll never saw the commit: {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&daemon, rustix::process::Signal::TERM);
    assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
}

#[test]
fn the_socket_defaults_to_the_runtime_dir_else_a_private_tmp_folder() {
    let home = Home::new();
    let runtime_dir = home.dir.path().join("xdg-run");
    std::fs::create_dir(&runtime_dir).unwrap();
    let tmp = home.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let cases = [
        (Some(&runtime_dir), runtime_dir.join("drsd/drsd.sock")),
        (
            None,
            tmp.join(format!(
                "drsd-{}/drsd.sock",
                drsd_proto::paths::current_uid()
            )),
        ),
    ];
    for (xdg, want) in cases {
        let mut cmd = home.command("drsctl");
        cmd.args(["--json", "status"])
            .env_remove("DRSD_SOCKET")
            .env("TMPDIR", &tmp);
        match xdg {
            Some(dir) => cmd.env("XDG_RUNTIME_DIR", dir),
            None => cmd.env_remove("XDG_RUNTIME_DIR"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(json(&out)["socket"], want.to_str().unwrap());
        let folder = std::fs::metadata(want.parent().unwrap()).unwrap();
        assert_eq!(folder.permissions().mode() & 0o777, 0o700);
        let out = home
            .command("drsctl")
            .arg("shutdown")
            .env("DRSD_SOCKET", &want)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

#[test]
fn a_real_daemon_serves_two_hundred_clients_at_once() {
    let home = Home::new();
    let mut daemon = home.serve(&[]);
    let socket = home.socket();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pids = runtime.block_on(async {
        let clients: Vec<_> = (0..200)
            .map(|_| {
                let socket = socket.clone();
                tokio::spawn(async move {
                    let mut client = Client::connect(&socket, "e2e").await.unwrap();
                    match client.call(Request::Status).await.unwrap() {
                        Reply::Status(status) => status.pid,
                        other => panic!("{other:?}"),
                    }
                })
            })
            .collect();
        let mut pids = Vec::new();
        for client in clients {
            pids.push(client.await.unwrap());
        }
        pids
    });
    assert_eq!(pids.len(), 200);
    assert!(pids.iter().all(|pid| *pid == daemon.id()));
    signal(&daemon, rustix::process::Signal::TERM);
    assert!(wait_within(&mut daemon, Duration::from_secs(5)).success());
}

#[test]
fn every_error_is_printed_once_with_its_code() {
    let home = Home::new();
    // Before any daemon: the reason the socket is unreachable, once.
    for (program, args) in [("drsctl", &["status"][..]), ("drs-hook", &["ping"][..])] {
        let out = home
            .command(program)
            .args(args)
            .env("DRSD_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{program}: {err}");
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A daemon's error: its message and code, once, on stderr; with --json
    // in the JSON alone.
    let missing = home.dir.path().join("not-a-repo");
    let out = home.drsctl(&["repos", "add", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("is not a git work tree").count(), 1, "{err}");
    assert_eq!(err.matches("(invalid_argument)").count(), 1, "{err}");
    let out = home.drsctl(&["--json", "repos", "add", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "with --json, nothing on standard error");
    let message = json(&out)["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        message.matches("is not a git work tree").count(),
        1,
        "{message}"
    );
}

/// The system's python3 (one user 65534 can run; a per-user install may not
/// be) running `script` as uid 65534, to act as another local user.
fn python_as_nobody(script: &str) -> Command {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args(["-c", script]).uid(65534).gid(65534);
    cmd
}

/// Listens on `socket` as uid 65534, answering a hello as a daemon would (to
/// draw out the request after it), and appends every byte it is sent to
/// `record`. Returned once it listens.
fn planted_listener(socket: &Path, record: &Path) -> Served {
    let hello = format!(
        "{{\"id\":1,\"kind\":\"result\",\"result\":{{\"type\":\"hello\",\"version\":{},\"server\":\"drsd\",\"pid\":1}}}}\n",
        drsd_proto::PROTOCOL_VERSION
    );
    let script = format!(
        r#"import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "wb").close()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(3)
    try:
        while True:
            got = c.recv(65536)
            if not got:
                break
            with open(sys.argv[2], "ab") as f:
                f.write(got)
            if b'"hello"' in got:
                c.sendall({hello:?}.encode())
    except OSError:
        pass
    c.close()
"#
    );
    let mut child = python_as_nobody(&script)
        .arg(socket)
        .arg(record)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs as uid 65534");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim_end(),
        "listening",
        "the planted listener did not start"
    );
    Served(child)
}

#[test]
fn a_socket_folder_planted_by_another_user_gets_nothing_and_drsctl_exits_3() {
    assert_eq!(
        drsd_proto::paths::current_uid(),
        0,
        "this test runs as root (as CI does), to act as another user"
    );
    let home = Home::new();
    // Without XDG_RUNTIME_DIR the socket is $TMPDIR/drsd-<uid>/drsd.sock:
    // user 65534 made that folder first and listens in it.
    std::fs::set_permissions(home.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = home.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    let planted = tmp.join(format!("drsd-{}", drsd_proto::paths::current_uid()));
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let record = planted.join("received");
    let _listener = planted_listener(&planted.join("drsd.sock"), &record);
    let repo = home.dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let signed = "https://example.org/data.bin?X-Amz-Signature=0123456789abcdef";
    let runs: [(&str, &[&str]); 3] = [
        ("drsctl", &["status"]),
        ("drsctl", &["add-url", signed, "data.bin"]),
        ("drs-hook", &["hook", "post-commit"]),
    ];
    for mode in [0o700, 0o777] {
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(mode)).unwrap();
        for (program, args) in runs {
            let out = home
                .command(program)
                .args(args)
                .env_remove("DRSD_SOCKET")
                .env_remove("XDG_RUNTIME_DIR")
                .env("TMPDIR", &tmp)
                .current_dir(&repo)
                .output()
                .unwrap();
            let err = stderr(&out);
            let code = if program == "drsctl" { 3 } else { 1 };
            assert_eq!(out.status.code(), Some(code), "{program} {args:?}: {err}");
            assert!(
                err.contains(&planted.display().to_string()) && err.contains("uid 65534"),
                "{program} {args:?}: {err}"
            );
        }
    }
    let received = std::fs::read(&record).unwrap();
    assert!(
        received.is_empty(),
        "the other user's listener received {:?}",
        String::from_utf8_lossy(&received)
    );
}

/// Entries in the pool at `home`, both tiers, as `drsd stats` counts them.
fn pool_entries(home: &Home) -> u64 {
    let out = home
        .command("drsd")
        .args(["stats", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["entries"].as_u64().unwrap())
        .sum()
}

#[test]
fn kill_9_at_any_point_of_a_gc_leaves_a_pool_that_verifies_and_the_next_gc_finishes() {
    let home = Home::new();
    // Unreferenced entries in both tiers, stored before any daemon runs.
    {
        let pool = drsd::pool::Pool::open(&home.pool(), None).unwrap();
        for i in 0..1500u32 {
            let small = format!("small entry {i}").into_bytes();
            pool.put(&drsd::pool::Oid::of(&small), &small).unwrap();
        }
        for i in 0..300u32 {
            let mut large = vec![(i % 251) as u8; 130 << 10];
            large[..4].copy_from_slice(&i.to_le_bytes());
            pool.put(&drsd::pool::Oid::of(&large), &large).unwrap();
        }
    }
    let mut left = pool_entries(&home);
    assert_eq!(left, 1800);
    // Killed at several points: before, during or after its sweep, the pool
    // left behind verifies whole and holds no more than before.
    for delay_ms in [0u64, 10, 30, 80, 200] {
        let mut daemon = home.serve(&[]);
        let mut gc = home
            .command("drsctl")
            .args(["gc", "--force", "--grace", "0"])
            .env("DRSD_NO_AUTOSTART", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&daemon, rustix::process::Signal::KILL);
        daemon.wait().unwrap();
        gc.wait().unwrap();
        let verify = home.command("drsd").arg("verify").output().unwrap();
        assert!(
            verify.status.success(),
            "after a kill {delay_ms} ms into gc: {}{}",
            String::from_utf8_lossy(&verify.stdout),
            stderr(&verify)
        );
        let now = pool_entries(&home);
        assert!(now <= left, "{now} entries after the kill, {left} before");
        left = now;
    }
    // A daemon started afresh finishes the job.
    let _daemon = home.serve(&[]);
    let done = home.drsctl_alone(&["--json", "gc", "--force", "--grace", "0"]);
    assert!(done.status.success(), "{}", stderr(&done));
    assert_eq!(pool_entries(&home), 0);
    let verify = home.command("drsd").arg("verify").output().unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
}
