//! Team mode (issue 31): two machines are two daemons, each with its own
//! folders, socket and repos, sharing one PostgreSQL database (a fresh one
//! per test on the tests' server, `DRSD_TEST_PG_URL`) and one folder for
//! the large tier. Objects are served by the in-process HTTP server of
//! `liar.rs` telling no lies, which counts every request it answers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use drsd_e2e::liar::Liar;
use drsd_e2e::{bin, fresh_home, spawn_ready};

use super::add_url::{git, pointer_text, sha256_hex, text};
use super::foreign::{staged, wait_up_to};

pub(super) const LM: &str = "Mon, 07 Dec 2026 08:00:00 GMT";

/// A database of the test's own on the tests' server, dropped after it.
pub(super) struct TeamDb {
    admin: String,
    name: String,
    pub(super) url: String,
}

impl TeamDb {
    pub(super) fn create() -> TeamDb {
        let admin = std::env::var("DRSD_TEST_PG_URL").expect(
            "DRSD_TEST_PG_URL is unset: run under tests/with-servers.sh (it starts PostgreSQL)",
        );
        let name = format!("drsd_team_{}_{}", std::process::id(), rand::random::<u32>());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let mut url = url::Url::parse(&admin).unwrap();
        url.set_path(&format!("/{name}"));
        TeamDb {
            admin,
            name,
            url: url.to_string(),
        }
    }
}

impl TeamDb {
    /// The database `name` at `url`, made by the test on the server whose
    /// superuser's URL is `admin`; dropped with it.
    pub(super) fn on(admin: &str, name: &str, url: &str) -> TeamDb {
        TeamDb {
            admin: admin.into(),
            name: name.into(),
            url: url.into(),
        }
    }
}

impl Drop for TeamDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// One machine of the team: its own folders, socket and daemon.
pub(super) struct Node {
    pub(super) dir: PathBuf,
    pub(super) name: String,
    pub(super) team: Vec<(&'static str, String)>,
    pub(super) daemon: Option<Child>,
}

impl Node {
    pub(super) fn new(
        top: &Path,
        name: &str,
        db: &TeamDb,
        large: &Path,
        more: &[(&'static str, &str)],
    ) -> Node {
        let dir = top.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut team = vec![
            ("DRSD_TEAM_DB", db.url.clone()),
            ("DRSD_TEAM_LARGE", large.display().to_string()),
            ("DRSD_TEAM_NODE", name.to_string()),
        ];
        team.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
        Node {
            dir,
            name: name.into(),
            team,
            daemon: None,
        }
    }

    pub(super) fn env(&self) -> Vec<(&'static str, String)> {
        let d = &self.dir;
        let mut env = vec![
            ("DRSD_SOCKET", d.join("run/drsd.sock").display().to_string()),
            ("DRSD_POOL", d.join("pool").display().to_string()),
            ("DRSD_STATE_DIR", d.join("state").display().to_string()),
            ("DRSD_CONFIG", String::new()),
            ("XDG_CONFIG_HOME", d.join("config").display().to_string()),
            ("DRSD_NO_AUTOSTART", "1".into()),
        ];
        env.extend(self.team.iter().cloned());
        env
    }

    pub(super) fn start(&mut self) {
        let mut cmd = Command::new(bin("drsd"));
        cmd.args(["serve", "--ready"])
            .envs(self.env())
            .stderr(Stdio::inherit());
        self.daemon = Some(spawn_ready(&mut cmd));
    }

    pub(super) fn kill9(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(super) fn drsctl(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new(bin("drsctl"))
            .current_dir(dir)
            .args(args)
            .envs(self.env())
            .output()
            .unwrap()
    }

    pub(super) fn drsctl_ok(&self, dir: &Path, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.drsctl(dir, &all);
        assert!(
            out.status.success(),
            "{} drsctl {args:?}: {}",
            self.name,
            text(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub(super) fn repo(&self, name: &str) -> PathBuf {
        let repo = self.dir.join(name);
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        repo
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Bytes sent for the GETs the server answered: a whole body, or a range.
pub(super) fn bytes_served(liar: &Liar, size: u64) -> u64 {
    liar.requests()
        .iter()
        .filter_map(|r| r.strip_prefix("GET "))
        .map(|range| match range.strip_prefix("bytes=") {
            None => size,
            Some(r) => {
                let (a, b) = r.split_once('-').unwrap();
                let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
                b.min(size - 1) + 1 - a
            }
        })
        .sum()
}

pub(super) fn body(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 9) as u8)
        .collect()
}

/// The test's HOME, its two machines' parent folder and the shared folder.
pub(super) fn world() -> (tempfile::TempDir, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    fresh_home(top.path());
    let out = Command::new("git")
        .args(["lfs", "install", "--skip-repo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let large = top.path().join("shared");
    std::fs::create_dir_all(&large).unwrap();
    (top, large)
}

#[test]
fn the_same_20_urls_added_on_two_machines_at_once_are_downloaded_once_and_promoted_on_both() {
    let db = TeamDb::create();
    let (top, large) = world();
    // Past the kv tier's threshold: each goes through the job queue, never
    // add-url's own read of a small object.
    let size = 300 << 10;
    let bytes = body(size);
    let liar = Liar::start(bytes.clone(), "team-etag-1", LM);
    let urls: Vec<String> = (0..20)
        .map(|i| liar.url(&format!("d/f{i:02}.bin")))
        .collect();
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &[]);
    let mut b = Node::new(top.path(), "alice@b", &db, &large, &[]);
    a.start();
    b.start();
    let (ra, rb) = (a.repo("ra"), b.repo("rb"));
    let list = top.path().join("urls.txt");
    std::fs::write(&list, urls.join("\n") + "\n").unwrap();
    let list = list.display().to_string();
    std::thread::scope(|s| {
        s.spawn(|| a.drsctl_ok(&ra, &["add-url", "--from", &list]));
        s.spawn(|| b.drsctl_ok(&rb, &["add-url", "--from", &list]));
    });
    let promoted = pointer_text(&sha256_hex(&bytes), size as u64);
    for (node, repo) in [(&a, &ra), (&b, &rb)] {
        wait_up_to(
            Duration::from_secs(120),
            &format!("{}'s promotion", node.name),
            || (0..20).all(|i| staged(repo, &format!("f{i:02}.bin")) == promoted),
        );
    }
    let served = bytes_served(&liar, size as u64);
    assert_eq!(
        served,
        20 * size as u64,
        "each object downloaded once lab-wide: {:?}",
        liar.requests()
    );
    // Both see the team: its engines and its two nodes.
    let status = a.drsctl_ok(&ra, &["status"]);
    assert_eq!(status["registry_engine"], "postgres", "{status}");
    let engines: Vec<String> = status["pool"]["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{} {}",
                t["tier"].as_str().unwrap(),
                t["engine"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(engines, ["kv postgres", "large shared-dir"], "{status}");
    let mut nodes: Vec<String> = status["team"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["alice@a", "alice@b"], "{status}");
    assert!(!status.to_string().contains("password"));
    let human = b.drsctl(&rb, &["status"]);
    let human = text(&human);
    assert!(
        human.contains("engines kv postgres, large shared-dir, registry postgres"),
        "{human}"
    );
    assert!(
        human.contains("alice@a") && human.contains("alice@b"),
        "{human}"
    );
}

#[test]
fn a_claiming_daemon_killed_mid_download_loses_its_job_to_the_other_machine_which_finishes_it() {
    let db = TeamDb::create();
    let (top, large) = world();
    let size = 8 << 20;
    let bytes = body(size);
    let liar = Liar::start(bytes.clone(), "team-etag-2", LM);
    let url = liar.url("big/slow.bin");
    let lease = [("DRSD_TEAM_LEASE_SECS", "2")];
    // A crawls (256 KiB/s: half a minute for the object); B is not started
    // yet, so A is the one that claims.
    let slow = [
        ("DRSD_TEAM_LEASE_SECS", "2"),
        ("DRSD_PREFETCH_BANDWIDTH", "256K"),
    ];
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &slow);
    let mut b = Node::new(top.path(), "alice@b", &db, &large, &lease);
    a.start();
    let ra = a.repo("ra");
    a.drsctl_ok(&ra, &["add-url", &url, "slow.bin"]);
    wait_up_to(Duration::from_secs(60), "A's download to start", || {
        let status = a.drsctl_ok(&ra, &["status"]);
        status["queue"]["active"]
            .as_array()
            .is_some_and(|active| active.iter().any(|j| j["done"].as_u64() > Some(0)))
    });
    a.kill9();
    b.start();
    let rb = b.repo("rb");
    b.drsctl_ok(&rb, &["add-url", &url, "slow.bin"]);
    let promoted = pointer_text(&sha256_hex(&bytes), size as u64);
    wait_up_to(
        Duration::from_secs(90),
        "B to take the job over and finish it",
        || staged(&rb, "slow.bin") == promoted,
    );
    let status = b.drsctl_ok(&rb, &["status"]);
    assert_eq!(status["queue"]["done"], 1, "{status}");
    assert_eq!(status["queue"]["running"], 0, "{status}");
    // A comes back: it finds its object hashed by B and promotes its repo.
    a.start();
    wait_up_to(
        Duration::from_secs(60),
        "A's promotion after its restart",
        || staged(&ra, "slow.bin") == promoted,
    );
}

#[test]
fn a_team_database_that_is_down_at_start_stops_the_daemon_with_an_error_naming_it() {
    let (top, large) = world();
    // A port nothing listens on (bound, then let go).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = top.path().join("n");
    let url = format!("postgresql://alice:hunter2@127.0.0.1:{port}/lab?connect_timeout=3");
    let run = |required: &str| {
        Command::new(bin("drsd"))
            .args(["serve", "--ready", "--idle-timeout", "1"])
            .env("DRSD_SOCKET", dir.join("run/drsd.sock"))
            .env("DRSD_POOL", dir.join("pool"))
            .env("DRSD_STATE_DIR", dir.join("state"))
            .env("DRSD_TEAM_DB", &url)
            .env("DRSD_TEAM_LARGE", &large)
            .env("DRSD_TEAM_REQUIRED", required)
            .output()
            .unwrap()
    };
    let out = run("true");
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
    assert!(said.contains("team database"), "{said}");
    assert!(!said.contains("hunter2"), "the password was shown: {said}");
    // Told to run without the team, it does, and says so.
    let out = run("false");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("running without the team"), "{said}");
    assert!(!said.contains("hunter2"), "the password was shown: {said}");
}

impl Node {
    /// `cmd` with this machine's environment (its daemon for the hooks).
    pub(super) fn ok(&self, cmd: &mut Command) -> String {
        let out = cmd
            .envs(self.env())
            .env("DRSD_BIN", bin("drsd"))
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {cmd:?}: {}",
            self.name,
            text(&out)
        );
        text(&out)
    }
}

#[test]
fn machine_b_clones_machine_a_s_push_from_the_team_pool_with_the_object_remote_gone() {
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    let folder = top.join("objects");
    std::fs::create_dir(&folder).unwrap();
    let mut a = Node::new(top, "alice@a", &db, &large, &[]);
    let mut b = Node::new(top, "alice@b", &db, &large, &[]);
    a.start();
    b.start();
    // Both tiers: one object under the threshold (kv, in the database), one
    // over it (large, in the shared folder).
    let files = [("big.bin", body(3 << 20)), ("small.bin", body(700))];
    let ra = a.dir.join("ra");
    std::fs::create_dir(&ra).unwrap();
    a.ok(Command::new("git").arg("-C").arg(&ra).args(["init", "-q"]));
    a.drsctl_ok(&ra, &["init", "--remote", folder.to_str().unwrap()]);
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["lfs", "track", "*.bin"]));
    for (name, data) in &files {
        std::fs::write(ra.join(name), data).unwrap();
    }
    a.ok(Command::new("git").arg("-C").arg(&ra).args(["add", "."]));
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["commit", "-qm", "data"]));
    let bare = top.join("origin.git");
    a.ok(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare));
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["remote", "add", "origin"])
        .arg(&bare));
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["push", "-q", "origin", "main"]));
    // The object remote is gone: only the team's pool has the bytes.
    std::fs::remove_dir_all(&folder).unwrap();
    b.ok(Command::new(bin("drsctl")).current_dir(top).args([
        "clone",
        bare.to_str().unwrap(),
        "rb",
    ]));
    for (name, data) in &files {
        let got = std::fs::read(top.join("rb").join(name)).unwrap();
        assert!(got == *data, "{name} on B is not A's bytes");
    }
}
