//! Team mode (issue 31) when things go wrong or get old: gc across the lab
//! (a node's published roots hold its objects until it is forgotten), and
//! the failures a lab sees (the database restarted or cut off mid-run, a
//! full shared folder, a kill between gc's deletes). The machines are
//! `team.rs`'s: two daemons with their own folders sharing one database and
//! one shared folder.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::add_url::{pointer_text, sha256_hex, text};
use super::foreign::{staged, wait_up_to};
use super::team::{body, world, Node, TeamDb};

const LM: &str = "Mon, 07 Dec 2026 08:00:00 GMT";

/// A git-lfs repo `name` on `node`, its object remote the folder `remote`,
/// with `files` committed; returns its path.
fn lfs_repo(node: &Node, name: &str, remote: &Path, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let repo = node.dir.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(remote).unwrap();
    let git = |args: &[&str]| node.ok(Command::new("git").arg("-C").arg(&repo).args(args));
    git(&["init", "-q"]);
    node.drsctl_ok(&repo, &["init", "--remote", remote.to_str().unwrap()]);
    git(&["lfs", "track", "*.bin"]);
    for (file, data) in files {
        std::fs::write(repo.join(file), data).unwrap();
    }
    git(&["add", "."]);
    git(&["commit", "-qm", "data"]);
    repo
}

/// Distinct bytes per `seed`, `len` long.
fn data(seed: u8, len: usize) -> Vec<u8> {
    let mut out = body(len);
    for (i, b) in out.iter_mut().enumerate().step_by(97) {
        *b ^= seed.wrapping_add(i as u8) | 1;
    }
    out
}

/// The oids (hex) a gc report removed.
fn removed(report: &serde_json::Value) -> HashSet<String> {
    report["removed"]
        .as_array()
        .unwrap_or_else(|| panic!("no removed list: {report}"))
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect()
}

/// Whether the team's pool holds `bytes` whole: the kv tier's row in the
/// database, or the large tier's file in the shared folder.
fn in_team_pool(db: &TeamDb, large: &Path, bytes: &[u8]) -> bool {
    let hex = sha256_hex(bytes);
    let file = large
        .join("large")
        .join(&hex[0..2])
        .join(&hex[2..4])
        .join(&hex);
    if let Ok(on_disk) = std::fs::read(&file) {
        return on_disk == bytes;
    }
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let key = hex::decode(&hex).unwrap();
    // No table yet: nothing was stored in the kv tier.
    c.query_opt("SELECT value FROM drsd_kv WHERE key = $1", &[&key])
        .ok()
        .flatten()
        .is_some_and(|row| row.get::<_, Vec<u8>>(0) == bytes)
}

#[test]
fn gc_with_no_grace_on_one_machine_keeps_what_the_other_machine_s_repos_hold_until_it_is_forgotten()
{
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    // No least grace, and a short lease, so B is gone soon after its end.
    let more = [
        ("DRSD_TEAM_MIN_GRACE_SECS", "0"),
        ("DRSD_TEAM_LEASE_SECS", "2"),
    ];
    let mut a = Node::new(top, "alice@a", &db, &large, &more);
    let mut b = Node::new(top, "alice@b", &db, &large, &more);
    a.start();
    b.start();
    // Each repo holds one object of each tier: one over the threshold (a
    // file in the shared folder), one under it (a row in the database).
    let a_files = [
        ("a-big.bin", data(1, 300 << 10)),
        ("a-small.bin", data(2, 900)),
    ];
    let b_files = [
        ("b-big.bin", data(3, 300 << 10)),
        ("b-small.bin", data(4, 900)),
    ];
    let gone_files = [
        ("c-big.bin", data(5, 300 << 10)),
        ("c-small.bin", data(6, 900)),
    ];
    let ra = lfs_repo(&a, "ra", &top.join("remote-a"), &a_files);
    let rc = lfs_repo(&a, "rc", &top.join("remote-c"), &gone_files);
    let rb = lfs_repo(&b, "rb", &top.join("remote-b"), &b_files);
    for (_, bytes) in a_files.iter().chain(&b_files).chain(&gone_files) {
        assert!(
            in_team_pool(&db, &large, bytes),
            "not stored in the team pool"
        );
    }
    // A's repo rc goes: nobody holds its objects any more.
    a.drsctl_ok(&ra, &["repos", "remove", rc.to_str().unwrap()]);
    // A first gc sees rc's objects unreferenced, and keeps them: B, live,
    // has not published since they were first seen.
    let first = a.drsctl_ok(&ra, &["gc", "--grace", "0"]);
    assert!(removed(&first).is_empty(), "{first}");
    std::thread::sleep(Duration::from_millis(1100));
    // B publishes its roots (a dry run deletes nothing, and publishes).
    let dry = b.drsctl_ok(&rb, &["gc", "--dry-run", "--grace", "0"]);
    assert_eq!(dry["dry_run"], true, "{dry}");
    std::thread::sleep(Duration::from_millis(1100));

    let report = a.drsctl_ok(&ra, &["gc", "--grace", "0"]);
    let want: HashSet<String> = gone_files.iter().map(|(_, d)| sha256_hex(d)).collect();
    assert_eq!(removed(&report), want, "only rc's objects go: {report}");
    for (name, bytes) in a_files.iter().chain(&b_files) {
        assert!(
            in_team_pool(&db, &large, bytes),
            "{name} is held by a repo of the lab, yet gc on A removed it"
        );
    }
    for (name, bytes) in &gone_files {
        assert!(!in_team_pool(&db, &large, bytes), "{name} is still there");
    }

    // B is gone for good: A's status lists it until A forgets it by name,
    // once it has been silent past its lease.
    b.kill9();
    std::thread::sleep(Duration::from_secs(3));
    let status = a.drsctl_ok(&ra, &["status"]);
    assert!(status.to_string().contains("alice@b"), "{status}");
    let forgot = a.drsctl(&ra, &["team", "forget", "alice@b"]);
    assert!(forgot.status.success(), "{}", text(&forgot));
    assert!(
        text(&forgot).contains("no longer listed among the team's nodes"),
        "{}",
        text(&forgot)
    );
    let status = a.drsctl_ok(&ra, &["status"]);
    let nodes: Vec<&str> = status["team"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert!(!nodes.contains(&"alice@b"), "B is still listed: {nodes:?}");
    assert!(!nodes.is_empty(), "A itself is no longer listed");
    let report = a.drsctl_ok(&ra, &["gc", "--grace", "0"]);
    let want: HashSet<String> = b_files.iter().map(|(_, d)| sha256_hex(d)).collect();
    assert_eq!(
        removed(&report),
        want,
        "B's objects go once B is forgotten, A's stay: {report}"
    );
    for (name, bytes) in &a_files {
        assert!(in_team_pool(&db, &large, bytes), "{name} of A was removed");
    }
    // A's own repo still reads its objects from the pool: a fresh checkout.
    let lfs_objects = ra.join(".git/lfs/objects");
    std::fs::remove_dir_all(&lfs_objects).ok();
    for (name, _) in &a_files {
        std::fs::remove_file(ra.join(name)).unwrap();
    }
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["checkout", "--", "."]));
    for (name, bytes) in &a_files {
        assert!(std::fs::read(ra.join(name)).unwrap() == *bytes, "{name}");
    }
}

/// Waits for `node`'s daemon, which a fail point killed, and checks that it
/// died of SIGKILL.
fn killed_by_failpoint(node: &mut Node, point: &str) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = node.daemon.take().expect("the daemon was started");
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "fail point {point}: the daemon did not die of SIGKILL: {status:?} \
         (the binaries must be a debug build, where fail points are read)"
    );
}

#[test]
fn a_gc_killed_between_its_deletes_never_leaves_a_live_object_without_its_bytes() {
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    let node = |more: &[(&'static str, &str)]| {
        let mut all = vec![("DRSD_TEAM_MIN_GRACE_SECS", "0")];
        all.extend_from_slice(more);
        Node::new(top, "alice@a", &db, &large, &all)
    };
    let mut a = node(&[]);
    a.start();
    let live = [
        ("l-big1.bin", data(11, 300 << 10)),
        ("l-big2.bin", data(12, 200 << 10)),
        ("l-small1.bin", data(13, 800)),
        ("l-small2.bin", data(14, 5000)),
    ];
    let garbage: Vec<(String, Vec<u8>)> = (0..4u8)
        .flat_map(|i| {
            [
                (
                    format!("g-big{i}.bin"),
                    data(20 + i, (200 << 10) + i as usize),
                ),
                (format!("g-small{i}.bin"), data(40 + i, 700 + i as usize)),
            ]
        })
        .collect();
    let garbage_files: Vec<(&str, Vec<u8>)> = garbage
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect();
    let ra = lfs_repo(&a, "ra", &top.join("remote-a"), &live);
    let rg = lfs_repo(&a, "rg", &top.join("remote-g"), &garbage_files);
    a.drsctl_ok(&ra, &["repos", "remove", rg.to_str().unwrap()]);
    a.kill9();

    // Each step of a gc, killed right after it: the grace records, the kv
    // tier's rows, the first large file unlinked.
    for point in [
        "gc-after-records",
        "gc-after-kv-deletes",
        "gc-after-one-delete",
    ] {
        let mut a = node(&[("DRSD_FAILPOINT", point)]);
        a.start();
        let out = a.drsctl(&ra, &["gc", "--grace", "0"]);
        assert!(
            !out.status.success(),
            "{point}: gc went through: {}",
            text(&out)
        );
        killed_by_failpoint(&mut a, point);
        for (name, bytes) in &live {
            assert!(
                in_team_pool(&db, &large, bytes),
                "{point}: the live {name} lost its bytes"
            );
        }
    }
    // What the kills did delete is gone whole (never a short file or row).
    let left: Vec<&(String, Vec<u8>)> = garbage
        .iter()
        .filter(|(_, d)| in_team_pool(&db, &large, d))
        .collect();
    assert!(
        left.len() < garbage.len(),
        "the killed gcs deleted nothing: the fail points fired too early"
    );
    assert!(!left.is_empty(), "the killed gcs deleted everything");

    // Restarted: the pool is whole, and the next gc finishes the job.
    let mut a = node(&[]);
    a.start();
    let verify = a.drsctl_ok(&ra, &["pool", "verify"]);
    assert_eq!(verify["bad"], serde_json::json!([]), "{verify}");
    let report = a.drsctl_ok(&ra, &["gc", "--grace", "0"]);
    let want: HashSet<String> = left.iter().map(|(_, d)| sha256_hex(d)).collect();
    assert_eq!(removed(&report), want, "{report}");
    for (name, bytes) in &live {
        assert!(in_team_pool(&db, &large, bytes), "{name} lost its bytes");
    }
    for (name, bytes) in &garbage {
        assert!(!in_team_pool(&db, &large, bytes), "{name} is still there");
    }
    // No file was left half-deleted or staged in the shared folder.
    let stray: Vec<_> = walk(&large.join("large"))
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            !live.iter().any(|(_, d)| sha256_hex(d) == name)
                && !name.ends_with(".json")
                && !name.ends_with(".lock")
        })
        .collect();
    assert!(
        stray.is_empty(),
        "stray files in the shared folder: {stray:?}"
    );
    // The repo still checks out from the pool alone.
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).ok();
    for (name, _) in &live {
        std::fs::remove_file(ra.join(name)).unwrap();
    }
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["checkout", "--", "."]));
    for (name, bytes) in &live {
        assert!(std::fs::read(ra.join(name)).unwrap() == *bytes, "{name}");
    }
}

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A tmpfs of `size` mounted on `dir` for the test, unmounted after it.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        assert!(
            running_as_root(),
            "this test needs root: it mounts a small tmpfs as the full shared folder \
             (run the suite as root, as CI does)"
        );
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount tmpfs: {}", text(&out));
        Tmpfs(dir.to_path_buf())
    }

    /// Grows it in place (its files stay).
    fn grow(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(out.status.success(), "remount tmpfs: {}", text(&out));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn a_full_shared_folder_fails_the_add_naming_it_shows_nothing_half_written_and_the_add_succeeds_once_there_is_room(
) {
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    let tmpfs = Tmpfs::mount(&large, "8m");
    let size = 12 << 20;
    let bytes = data(60, size);
    let oid = sha256_hex(&bytes);
    let liar = drsd_e2e::liar::Liar::start(bytes.clone(), "full-etag", LM);
    let url = liar.url("big/full.bin");
    let mut a = Node::new(top, "alice@a", &db, &large, &[]);
    a.start();
    let ra = a.repo("ra");
    a.drsctl_ok(&ra, &["add-url", &url, "full.bin"]);
    let mut error = String::new();
    wait_up_to(
        Duration::from_secs(90),
        "the job to fail for want of room",
        || {
            let queue = &a.drsctl_ok(&ra, &["status"])["queue"];
            let line = queue["open"].as_array().and_then(|open| {
                open.iter()
                    .find(|j| j["error"].is_string() && j["state"] != "running")
            });
            if let Some(line) = line {
                error = line["error"].as_str().unwrap().to_string();
            }
            !error.is_empty()
        },
    );
    eprintln!("the job's error: {error}");
    assert!(
        error.contains("No space left") || error.contains("ENOSPC"),
        "the error does not say the folder is full: {error}"
    );
    assert!(
        error.contains(&large.display().to_string()),
        "the error does not name the shared folder {}: {error}",
        large.display()
    );
    // Nothing half-visible: no entry for the object, no short file where
    // the pool would look, and the daemon still answers.
    let file = large
        .join("large")
        .join(&oid[0..2])
        .join(&oid[2..4])
        .join(&oid);
    assert!(
        !file.exists(),
        "a short entry is visible at {}",
        file.display()
    );
    assert!(!in_team_pool(&db, &large, &bytes));
    let pid = a.daemon.as_ref().unwrap().id();
    assert!(drsd_e2e::alive(pid), "the daemon died of the full folder");
    assert!(a.drsctl(&ra, &["status"]).status.success());

    tmpfs.grow("64m");
    let retried = a.drsctl(&ra, &["promote", "--retry", "--all"]);
    let promoted = pointer_text(&oid, size as u64);
    wait_up_to(
        Duration::from_secs(120),
        "the add once there is room",
        || staged(&ra, "full.bin") == promoted,
    );
    assert!(in_team_pool(&db, &large, &bytes), "{}", text(&retried));
}

/// A PostgreSQL server of the test's own (`tests/ci/pg-up.sh` on a port of
/// its own), so it can be restarted or cut off without touching the
/// server the other tests share.
struct OwnPg {
    dir: tempfile::TempDir,
    port: u16,
}

impl OwnPg {
    fn start(port: u16) -> OwnPg {
        // The server runs as `postgres` when we are root: its folder's
        // parents must let it through.
        let dir = tempfile::Builder::new()
            .prefix("drsd-pg-")
            .tempdir()
            .unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(dir.path(), mode).unwrap();
        let out = Command::new(ci_script("pg-up.sh"))
            .arg(dir.path().join("pg"))
            .arg(port.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "pg-up.sh: {}", text(&out));
        OwnPg { dir, port }
    }

    fn admin_url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A database on it for one test: its URL.
    fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(&self.admin_url(), postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        format!("postgresql://postgres@127.0.0.1:{}/{name}", self.port)
    }

    fn stop(&self) {
        let out = Command::new(ci_script("pg-down.sh"))
            .arg(self.dir.path().join("pg"))
            .output()
            .unwrap();
        assert!(out.status.success(), "pg-down.sh: {}", text(&out));
    }

    /// Starts the stopped server again, on its data as it was.
    fn restart(&self) {
        let data = self.dir.path().join("pg/data");
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .unwrap()
            .flatten()
            .map(|e| e.path().join("bin"))
            .max()
            .expect("a PostgreSQL server installed");
        let mut cmd = if running_as_root() {
            let owner = std::fs::metadata(&data).unwrap();
            let user = if std::os::unix::fs::MetadataExt::uid(&owner) == 0 {
                "root".to_string()
            } else {
                let out = Command::new("stat")
                    .args(["-c", "%U"])
                    .arg(&data)
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            };
            let mut c = Command::new("runuser");
            c.args(["-u", &user, "--"]).arg(bin.join("pg_ctl"));
            c
        } else {
            Command::new(bin.join("pg_ctl"))
        };
        let out = cmd
            .arg(format!("--pgdata={}", data.display()))
            .arg(format!(
                "--log={}",
                self.dir.path().join("pg/server.log").display()
            ))
            .args(["--wait", "--timeout=60", "start"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl start: {}", text(&out));
    }
}

impl Drop for OwnPg {
    fn drop(&mut self) {
        let _ = Command::new(ci_script("pg-down.sh"))
            .arg(self.dir.path().join("pg"))
            .output();
    }
}

fn ci_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ci").join(name)
}

/// A plain HTTP server of many objects, one per path (bytes `data` seeded
/// by the path), each GET's body sent slowly (in `chunks` pieces, `pause`
/// apart) so that downloads are in flight for a while. Counts the body
/// bytes it sent per path.
struct Shelf {
    port: u16,
    sent: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

impl Shelf {
    fn start(size: usize, chunks: usize, pause: Duration) -> Shelf {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let counts = sent.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = counts.clone();
                std::thread::spawn(move || -> std::io::Result<()> {
                    let mut reader = BufReader::new(stream.try_clone()?);
                    let mut line = String::new();
                    reader.read_line(&mut line)?;
                    let mut parts = line.split_whitespace();
                    let method = parts.next().unwrap_or("").to_string();
                    let path = parts.next().unwrap_or("/").to_string();
                    let mut range = None;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = header.split_once(':') {
                            if k.trim().eq_ignore_ascii_case("range") {
                                range = v.trim().strip_prefix("bytes=").and_then(|r| {
                                    let (a, b) = r.split_once('-')?;
                                    Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()))
                                });
                            }
                        }
                    }
                    let bytes = Shelf::bytes(&path, size);
                    let etag = format!("\"{}\"", &sha256_hex(&bytes)[..16]);
                    let mut out = stream;
                    let common = format!(
                        "Connection: close\r\nETag: {etag}\r\nLast-Modified: {LM}\r\n\
                         Accept-Ranges: bytes\r\n"
                    );
                    if method == "HEAD" {
                        write!(
                            out,
                            "HTTP/1.1 200 OK\r\n{common}Content-Length: {size}\r\n\r\n"
                        )?;
                        return Ok(());
                    }
                    let (first, last) = match range {
                        Some((a, b)) => (a, b.unwrap_or(size - 1).min(size - 1)),
                        None => (0, size - 1),
                    };
                    let part = &bytes[first..=last];
                    if range.is_some() {
                        write!(
                            out,
                            "HTTP/1.1 206 Partial Content\r\n{common}Content-Range: bytes \
                             {first}-{last}/{size}\r\nContent-Length: {}\r\n\r\n",
                            part.len()
                        )?;
                    } else {
                        write!(
                            out,
                            "HTTP/1.1 200 OK\r\n{common}Content-Length: {size}\r\n\r\n"
                        )?;
                    }
                    for piece in part.chunks(part.len().div_ceil(chunks).max(1)) {
                        std::thread::sleep(pause);
                        out.write_all(piece)?;
                        *counts.lock().unwrap().entry(path.clone()).or_insert(0) +=
                            piece.len() as u64;
                    }
                    out.flush()
                });
            }
        });
        Shelf { port, sent }
    }

    /// The object at `path`.
    fn bytes(path: &str, size: usize) -> Vec<u8> {
        let seed = sha256_hex(path.as_bytes());
        data(u8::from_str_radix(&seed[..2], 16).unwrap(), size)
            .into_iter()
            .zip(seed.bytes().cycle())
            .enumerate()
            .map(|(i, (b, s))| if i % 64 == 0 { s } else { b })
            .collect()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Body bytes sent per path so far.
    fn sent(&self) -> std::collections::HashMap<String, u64> {
        self.sent.lock().unwrap().clone()
    }
}

/// `status`'s queue, with every job settled: none queued, running or
/// retrying.
fn settled(node: &Node, repo: &Path) -> serde_json::Value {
    let mut queue = serde_json::Value::Null;
    wait_up_to(
        Duration::from_secs(120),
        &format!("{}'s queue to settle", node.name),
        || {
            queue = node.drsctl_ok(repo, &["status"])["queue"].clone();
            queue["queued"] == 0 && queue["running"] == 0 && queue["retrying"] == 0
        },
    );
    queue
}

#[test]
fn postgresql_restarted_during_a_prefetch_of_100_objects_loses_and_duplicates_nothing() {
    let pg = OwnPg::start(15611);
    let url = pg.database("drsd_restart");
    let db = TeamDb::on(&pg.admin_url(), "drsd_restart", &url);
    let (top, large) = world();
    let top = top.path();
    // 100 objects past the kv threshold (through the job queue), each GET
    // taking about half a second: the restart lands mid-run.
    let size = 200 << 10;
    let shelf = Shelf::start(size, 10, Duration::from_millis(50));
    let paths: Vec<String> = (0..100).map(|i| format!("/d/o{i:03}.bin")).collect();
    let list = top.join("urls.txt");
    let lines: Vec<String> = paths.iter().map(|p| shelf.url(p)).collect();
    std::fs::write(&list, lines.join("\n") + "\n").unwrap();
    let list = list.display().to_string();
    let mut a = Node::new(top, "alice@a", &db, &large, &[]);
    let mut b = Node::new(top, "alice@b", &db, &large, &[]);
    a.start();
    b.start();
    let (ra, rb) = (a.repo("ra"), b.repo("rb"));
    std::thread::scope(|s| {
        s.spawn(|| a.drsctl_ok(&ra, &["add-url", "--from", &list]));
        s.spawn(|| b.drsctl_ok(&rb, &["add-url", "--from", &list]));
    });
    wait_up_to(
        Duration::from_secs(60),
        "a quarter of the downloads",
        || shelf.sent().values().filter(|n| **n >= size as u64).count() >= 25,
    );
    pg.stop();
    let done_then = shelf.sent().values().filter(|n| **n >= size as u64).count();
    std::thread::sleep(Duration::from_secs(2));
    pg.restart();
    assert!(done_then < 100, "the run ended before the restart");
    for (node, repo) in [(&a, &ra), (&b, &rb)] {
        wait_up_to(
            Duration::from_secs(180),
            &format!("{}'s promotions", node.name),
            || {
                paths.iter().all(|p| {
                    let name = p.rsplit('/').next().unwrap();
                    let bytes = Shelf::bytes(p, size);
                    staged(repo, name) == pointer_text(&sha256_hex(&bytes), size as u64)
                })
            },
        );
        let queue = settled(node, repo);
        assert_eq!(queue["failed"], 0, "{}: {queue}", node.name);
        let pid = node.daemon.as_ref().unwrap().id();
        assert!(drsd_e2e::alive(pid), "{} died", node.name);
    }
    let sent = shelf.sent();
    let mut again = Vec::new();
    for p in &paths {
        let bytes = Shelf::bytes(p, size);
        assert!(
            in_team_pool(&db, &large, &bytes),
            "{p} is not in the pool whole"
        );
        let n = sent.get(p).copied().unwrap_or(0);
        // A download cut by the restart may be fetched again (resumed from
        // what was committed, or whole): never more than twice.
        assert!(n <= 2 * size as u64, "{p} fetched {n} bytes for {size}");
        if n > size as u64 {
            again.push((p.clone(), n));
        }
    }
    let total: u64 = sent.values().sum();
    eprintln!(
        "restart at {done_then}/100 done: {total} bytes sent for {} ({} objects fetched \
         more than once: {again:?})",
        100 * size,
        again.len()
    );
}

/// A TCP proxy to `target` on a port of its own, which can be cut (every
/// connection closed, new ones refused) and mended: a network partition
/// between one node and the database.
struct Proxy {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (is_cut, conns) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if is_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut held = conns.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                drop(held);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_node_cut_off_from_the_database_mid_download_loses_its_claim_to_the_other_which_finishes_it() {
    let pg = OwnPg::start(15612);
    let url = pg.database("drsd_partition");
    let db = TeamDb::on(&pg.admin_url(), "drsd_partition", &url);
    let proxy = Proxy::start(pg.port);
    // A reaches the database through the proxy, with a password in its URL
    // (trust authentication ignores it) that no log line may show.
    let a_url = format!(
        "postgresql://postgres:sekrit-pw@127.0.0.1:{}/drsd_partition",
        proxy.port
    );
    let (top, large) = world();
    let top = top.path();
    let size = 6 << 20;
    // Counts the bytes it actually sent (A reads slowly: its socket stops
    // taking them), 6 MiB in 60 pieces, 3 s for a whole copy.
    let shelf = Shelf::start(size, 60, Duration::from_millis(50));
    let bytes = Shelf::bytes("/big/cut.bin", size);
    let object = shelf.url("/big/cut.bin");
    let log_a = top.join("a.log");
    let mut a = Node::new(
        top,
        "alice@a",
        &db,
        &large,
        &[
            ("DRSD_TEAM_DB", a_url.as_str()),
            ("DRSD_TEAM_LEASE_SECS", "2"),
            ("DRSD_PREFETCH_BANDWIDTH", "512K"),
        ],
    );
    let mut b = Node::new(
        top,
        "alice@b",
        &db,
        &large,
        &[("DRSD_TEAM_LEASE_SECS", "2")],
    );
    a.start_logging_to(&log_a);
    let ra = a.repo("ra");
    a.drsctl_ok(&ra, &["add-url", &object, "cut.bin"]);
    wait_up_to(Duration::from_secs(60), "A's download to start", || {
        let status = a.drsctl_ok(&ra, &["status"]);
        status["queue"]["active"]
            .as_array()
            .is_some_and(|active| active.iter().any(|j| j["done"].as_u64() > Some(0)))
    });
    proxy.cut();
    // A's lease lapses; B takes the job over and finishes it.
    b.start();
    let rb = b.repo("rb");
    b.drsctl_ok(&rb, &["add-url", &object, "cut.bin"]);
    let promoted = pointer_text(&sha256_hex(&bytes), size as u64);
    wait_up_to(Duration::from_secs(90), "B to finish A's job", || {
        staged(&rb, "cut.bin") == promoted
    });
    assert!(
        drsd_e2e::alive(a.daemon.as_ref().unwrap().id()),
        "A died of the cut"
    );
    // The network comes back: A goes on, and promotes its own repo from
    // what B stored; nothing is stored twice or left running.
    proxy.mend();
    wait_up_to(Duration::from_secs(90), "A's promotion once mended", || {
        staged(&ra, "cut.bin") == promoted
    });
    assert!(in_team_pool(&db, &large, &bytes));
    let queue = settled(&b, &rb);
    assert_eq!(queue["done"], 1, "{queue}");
    assert_eq!(queue["failed"], 0, "{queue}");
    let verify = a.drsctl_ok(&ra, &["pool", "verify"]);
    assert_eq!(verify["bad"], serde_json::json!([]), "{verify}");
    assert_eq!(verify["entries"], 1, "{verify}");
    assert!(drsd_e2e::alive(a.daemon.as_ref().unwrap().id()), "A died");
    // What A logged of the cut names the server, never the password.
    let said = std::fs::read_to_string(&log_a).unwrap_or_default();
    assert!(
        said.contains(&format!("127.0.0.1:{}", proxy.port)),
        "A's log does not name the server: {said}"
    );
    assert!(!said.contains("sekrit-pw"), "A's log shows the password");
    // A gave its download up once its claim lapsed rather than fetch a
    // second copy to its end. (What the server sent A is no measure of it:
    // loopback's socket buffers take megabytes A never read.)
    assert!(
        said.contains("abandoned"),
        "A did not give its download up: {said}"
    );
    let served: u64 = shelf.sent().values().sum();
    eprintln!("bytes sent for the {size}-byte object: {served}");
    assert!(served <= 2 * size as u64, "{served} bytes sent for {size}");
}

impl Node {
    /// Starts the daemon with its log (stderr) written to `log`.
    fn start_logging_to(&mut self, log: &Path) {
        let file = std::fs::File::create(log).unwrap();
        let mut cmd = Command::new(drsd_e2e::bin("drsd"));
        cmd.args(["serve", "--ready"]).envs(self.env()).stderr(file);
        self.daemon = Some(drsd_e2e::spawn_ready(&mut cmd));
    }
}
