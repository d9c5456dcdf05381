//! The Git LFS path end to end: real git and git-lfs, our agent and hooks,
//! a real daemon, Ceph RGW as the object remote, a bare git remote.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use drsd::pool::Oid;
use drsd::stores::{ObjectLayout, S3Client, S3Config, S3Credentials};
use drsd_e2e::{bin, spawn_ready};

/// A daemon of our own (socket, pool, state under one folder), killed on drop.
pub(super) struct Daemon {
    pub(super) dir: PathBuf,
    pub(super) child: Child,
}

impl Daemon {
    pub(super) fn start(dir: &Path) -> Daemon {
        Self::start_with(dir, &[])
    }

    /// A daemon with `extra` in its environment (e.g. another S3 endpoint).
    pub(super) fn start_with(dir: &Path, extra: &[(&str, &str)]) -> Daemon {
        std::fs::create_dir_all(dir).unwrap();
        let child = spawn_ready(
            Command::new(bin("drsd"))
                .args(["serve", "--ready"])
                .envs(Self::env_of(dir))
                .envs(extra.iter().copied())
                .stderr(Stdio::inherit()),
        );
        Daemon {
            dir: dir.to_path_buf(),
            child,
        }
    }

    pub(super) fn env_of(dir: &Path) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("DRSD_SOCKET", dir.join("run/drsd.sock")),
            ("DRSD_POOL", dir.join("pool")),
            ("DRSD_STATE_DIR", dir.join("state")),
            ("DRSD_BIN", bin("drsd")),
            ("DRSD_NO_AUTOSTART", "1".into()),
        ]
    }

    /// git in `repo`, its agent and hooks talking to this daemon.
    pub(super) fn git(&self, repo: &Path, args: &[&str]) -> String {
        self.run(Command::new("git").arg("-C").arg(repo), args)
    }

    /// drsctl run in `dir`, talking to this daemon.
    pub(super) fn drsctl(&self, dir: &Path, args: &[&str]) -> String {
        self.run(Command::new(bin("drsctl")).current_dir(dir), args)
    }

    fn run(&self, cmd: &mut Command, args: &[&str]) -> String {
        let out = cmd
            .args(args)
            .envs(Self::env_of(&self.dir))
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{cmd:?}: {text}");
        text
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub(super) fn s3() -> S3Client {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "run the suite with tests/run.sh (it starts Ceph RGW)"
    );
    S3Client::new(
        S3Config::from_env().unwrap(),
        S3Credentials::from_env().unwrap(),
    )
    .unwrap()
}

pub(super) fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 10) as u8)
        .collect()
}

pub(super) fn lfs_object(repo: &Path, oid: &Oid) -> PathBuf {
    let hex = oid.to_hex();
    repo.join(".git/lfs/objects")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex)
}

/// A HOME with a git identity, a fresh bucket, a folder for repos and daemons.
pub(super) struct World {
    pub(super) top: tempfile::TempDir,
    pub(super) bucket: String,
    pub(super) remote_url: String,
}

impl World {
    pub(super) fn new(tag: &str) -> World {
        let top = tempfile::tempdir().unwrap();
        let home = top.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        // git and git-lfs read the user's config from here (one test per process).
        std::env::set_var("HOME", &home);
        let bucket = format!("lfs-{tag}-{}", std::process::id());
        rt().block_on(s3().create_bucket(&bucket)).unwrap();
        let remote_url = format!("s3://{bucket}/team");
        World {
            top,
            bucket,
            remote_url,
        }
    }

    pub(super) fn dir(&self, name: &str) -> PathBuf {
        self.top.path().join(name)
    }

    /// Repo `a` set up with drsd and the object remote, `files` committed
    /// as LFS objects, and a bare `origin` (not pushed yet).
    pub(super) fn source_repo(
        &self,
        daemon: &Daemon,
        files: &[(&str, Vec<u8>)],
    ) -> (PathBuf, PathBuf) {
        let a = self.dir("a");
        std::fs::create_dir(&a).unwrap();
        daemon.git(&a, &["init", "-q"]);
        daemon.drsctl(&a, &["init", "--remote", &self.remote_url]);
        daemon.git(&a, &["lfs", "track", "*.bin"]);
        for (name, data) in files {
            std::fs::write(a.join(name), data).unwrap();
        }
        daemon.git(&a, &["add", "."]);
        daemon.git(&a, &["commit", "-qm", "data"]);
        let bare = self.dir("remote.git");
        daemon.git(
            self.top.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        daemon.git(&a, &["remote", "add", "origin", bare.to_str().unwrap()]);
        (a, bare)
    }
}

#[test]
fn push_then_clone_through_the_agent_serves_pooled_objects_by_link() {
    let world = World::new("small");
    let daemon = Daemon::start(&world.dir("d1"));
    let files = [
        ("small.bin", content(1, 1000)),
        ("mid.bin", content(2, 300_000)),
        ("big.bin", content(3, 3 << 20)),
    ];
    let (a, bare) = world.source_repo(&daemon, &files);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    let (top, bucket, remote_url) = (&world.top, &world.bucket, &world.remote_url);

    // Every object is in the bucket under the layout, with its sha256.
    let layout = ObjectLayout::parse(remote_url).unwrap();
    for (name, data) in &files {
        let oid = Oid::of(data);
        let meta = rt().block_on(s3().head(bucket, &layout.key(&oid))).unwrap();
        let meta = meta.unwrap_or_else(|| panic!("{name} was not uploaded"));
        assert_eq!(
            (meta.size, meta.sha256),
            (data.len() as u64, Some(oid.to_hex()))
        );
    }

    // A second clone on this machine: served from the pool, by hard link.
    let b = top.path().join("b");
    let cloned: serde_json::Value = serde_json::from_str(&daemon.drsctl(
        top.path(),
        &["--json", "clone", bare.to_str().unwrap(), "b"],
    ))
    .unwrap();
    let h = &cloned["hydrate"];
    assert_eq!(
        (
            h["objects"].as_u64(),
            h["from_pool"].as_u64(),
            h["downloaded"].as_u64()
        ),
        (Some(files.len() as u64), Some(files.len() as u64), Some(0)),
        "{cloned}"
    );
    for (name, data) in &files {
        assert_eq!(
            &std::fs::read(b.join(name)).unwrap(),
            data,
            "{name} in the second clone"
        );
    }
    let big = Oid::of(&files[2].1);
    let pooled = top
        .path()
        .join("d1/pool/large")
        .join(&big.to_hex()[..2])
        .join(&big.to_hex()[2..4])
        .join(big.to_hex());
    assert_eq!(
        std::fs::metadata(lfs_object(&b, &big)).unwrap().ino(),
        std::fs::metadata(&pooled).unwrap().ino(),
        "the clone's object is the pool's file"
    );
    // The work tree's files were written by the daemon from the pool, not
    // smudged through git; each is a copy (a user may change it in place),
    // and git has their stat data: diff-files compares stat data only.
    assert_eq!(
        (
            cloned["checkout"]["written"].as_u64(),
            cloned["checkout"]["to_git"].as_array().map(Vec::len)
        ),
        (Some(files.len() as u64), Some(0)),
        "{cloned}"
    );
    assert_ne!(
        std::fs::metadata(b.join(files[2].0)).unwrap().ino(),
        std::fs::metadata(&pooled).unwrap().ino(),
        "the work tree's file is not the pool's"
    );
    daemon.git(&b, &["diff-files", "--quiet"]);
    assert_eq!(daemon.git(&b, &["status", "--porcelain"]), "");

    // Another machine (its own empty pool): everything comes from RGW.
    drop(daemon);
    let other = Daemon::start(&top.path().join("d2"));
    let c = top.path().join("c");
    // Two clones at once: both want every object; each is downloaded once.
    std::thread::scope(|s| {
        for name in ["c", "c2"] {
            let (other, top, bare) = (&other, top.path(), &bare);
            s.spawn(move || other.drsctl(top, &["clone", bare.to_str().unwrap(), name]));
        }
    });
    for (name, data) in &files {
        for clone in [&c, &top.path().join("c2")] {
            assert_eq!(
                &std::fs::read(clone.join(name)).unwrap(),
                data,
                "{name} from RGW"
            );
        }
    }
    // Pushing again sends nothing new: every object is skipped as present.
    other.git(&c, &["lfs", "push", "--all", "origin"]);
    let undone: serde_json::Value =
        serde_json::from_str(&other.drsctl(&c, &["--json", "init", "--undo"])).unwrap();
    assert!(
        !undone["changed"].as_array().unwrap().is_empty(),
        "{undone}"
    );
    let agent = Command::new("git")
        .arg("-C")
        .arg(&c)
        .args(["config", "--get", "lfs.standalonetransferagent"])
        .output()
        .unwrap();
    assert!(!agent.status.success(), "undo unset the agent");
}

/// `git` in `repo` with this daemon, expected to fail: its output.
pub(super) fn git_fails(daemon: &Daemon, repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .envs(Daemon::env_of(&daemon.dir))
        .output()
        .unwrap();
    assert!(!out.status.success(), "git {args:?} should have failed");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_upload_to_an_unreachable_store_fails_clearly_and_a_retry_succeeds() {
    let world = World::new("retry");
    let files = [
        ("one.bin", content(7, 200_000)),
        ("two.bin", content(8, 2 << 20)),
    ];
    // init checks the store, so the repo is set up while it is reachable;
    // then it goes away.
    let (a, _) = world.source_repo(&Daemon::start(&world.dir("d1")), &files);
    let down = Daemon::start_with(
        &world.dir("d1"),
        &[("AWS_ENDPOINT_URL", "http://127.0.0.1:9")],
    );
    let text = git_fails(&down, &a, &["push", "-q", "origin", "main"]);
    let oid = Oid::of(&files[1].1);
    assert!(
        text.contains(&oid.to_hex()[..8]) || text.contains("two.bin"),
        "names the object: {text}"
    );
    assert!(!text.contains("X-Amz-Signature"), "{text}");
    drop(down);
    let up = Daemon::start(&world.dir("d1"));
    up.git(&a, &["push", "-q", "origin", "main"]);
    let layout = ObjectLayout::parse(&world.remote_url).unwrap();
    for (_, data) in &files {
        let meta = rt().block_on(s3().head(&world.bucket, &layout.key(&Oid::of(data))));
        assert_eq!(meta.unwrap().map(|m| m.size), Some(data.len() as u64));
    }
}

#[test]
fn a_one_gib_object_survives_a_daemon_killed_mid_download() {
    let world = World::new("gib");
    let daemon = Daemon::start(&world.dir("d1"));
    let big = content(9, 1 << 30);
    let oid = Oid::of(&big);
    let (a, bare) = world.source_repo(&daemon, &[("huge.bin", big)]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    drop(daemon);

    // Another machine: an empty pool, so the object comes from RGW.
    let d2 = world.dir("d2");
    let mut other = Daemon::start(&d2);
    let c = world.dir("c");
    let out = Command::new("git")
        .args(["clone", "-q", bare.to_str().unwrap(), c.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    other.drsctl(&c, &["init"]);
    let mut pull = Command::new("git")
        .arg("-C")
        .arg(&c)
        .args(["lfs", "pull"])
        .envs(Daemon::env_of(&d2))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill the daemon once a good part of the object has arrived.
    let partial = d2.join("pool/partial");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let largest = || {
        std::fs::read_dir(&partial)
            .map(|d| {
                d.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0)
    };
    while largest() < 64 << 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the download never got going"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    other.child.kill().unwrap(); // SIGKILL
    other.child.wait().unwrap();
    assert!(
        !pull.wait().unwrap().success(),
        "the pull cannot finish without its daemon"
    );
    assert!(largest() > 0, "the partial download stays for the retry");

    let again = Daemon::start(&d2);
    again.git(&c, &["lfs", "pull"]);
    let got = std::fs::read(c.join("huge.bin")).unwrap();
    assert_eq!(Oid::of(&got), oid, "the retried download is the object");
    assert_eq!(largest(), 0, "the partial file was adopted into the pool");
    drop(other);
}

#[test]
fn objects_git_lfs_stored_itself_are_adopted_into_the_pool_by_link() {
    let world = World::new("adopt");
    let daemon = Daemon::start(&world.dir("d1"));
    let data = content(11, 500_000);
    let (a, _) = world.source_repo(&daemon, &[("local.bin", data.clone())]);
    // The commit's post-commit hook told the daemon; ask once more so the
    // rescan has certainly run before we look.
    daemon.drsctl(&a, &["repos", "add"]);
    let oid = Oid::of(&data);
    let hex = oid.to_hex();
    let pooled = world
        .dir("d1/pool/large")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex);
    let repo_copy = lfs_object(&a, &oid);
    assert_eq!(
        std::fs::metadata(&pooled).map(|m| m.ino()).ok(),
        Some(std::fs::metadata(&repo_copy).unwrap().ino()),
        "the pool holds git-lfs's own object, as the same file"
    );
    let status: serde_json::Value =
        serde_json::from_str(&daemon.drsctl(&a, &["--json", "status"])).unwrap();
    let repo = &status["repos"][0]["scan"];
    assert_eq!(
        (repo["pointers"].as_u64(), repo["in_repo"].as_u64()),
        (Some(1), Some(1)),
        "{status}"
    );
}

#[test]
fn two_thousand_small_objects_go_up_and_come_back() {
    let world = World::new("many");
    let daemon = Daemon::start(&world.dir("d1"));
    let files: Vec<(String, Vec<u8>)> = (0..2000u32)
        .map(|i| {
            (
                format!("f{i:04}.bin"),
                format!("object {i}\n").repeat(40).into_bytes(),
            )
        })
        .collect();
    let named: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let (a, bare) = world.source_repo(&daemon, &named);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    drop(daemon);

    // A clone with an empty pool fetches all 2,000 from RGW.
    let other = Daemon::start(&world.dir("d2"));
    let cloned: serde_json::Value = serde_json::from_str(&other.drsctl(
        world.top.path(),
        &["--json", "clone", bare.to_str().unwrap(), "c"],
    ))
    .unwrap();
    // The daemon hydrated every object before git-lfs ran.
    let h = &cloned["hydrate"];
    assert_eq!(
        (
            h["objects"].as_u64(),
            h["downloaded"].as_u64(),
            h["failed"].as_array().map(Vec::len)
        ),
        (Some(2000), Some(2000), Some(0)),
        "{cloned}"
    );
    let c = world.dir("c");
    for (name, data) in &files {
        assert_eq!(&std::fs::read(c.join(name)).unwrap(), data, "{name}");
    }
    // `repos add` rescans now (the watcher's rescan may still be debouncing).
    let repo: serde_json::Value =
        serde_json::from_str(&other.drsctl(&c, &["--json", "repos", "add"])).unwrap();
    let scan = &repo["scan"];
    assert_eq!(
        (scan["pointers"].as_u64(), scan["in_repo"].as_u64()),
        (Some(2000), Some(2000)),
        "{repo}"
    );
}

#[test]
fn git_lfs_prune_in_one_repo_leaves_what_another_repo_needs() {
    let world = World::new("prune");
    let daemon = Daemon::start(&world.dir("d1"));
    let shared = content(9, 300 << 10); // large tier: repos link to the pool's file
    let (a, bare) = world.source_repo(&daemon, &[("shared.bin", shared.clone())]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    daemon.drsctl(world.top.path(), &["clone", bare.to_str().unwrap(), "b"]);
    let b = world.dir("b");
    let oid = Oid::of(&shared);

    // Repo a drops the file; prune keeps nothing it calls recent or unpushed.
    daemon.git(&a, &["rm", "-q", "shared.bin"]);
    daemon.git(&a, &["commit", "-qm", "drop"]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    for (key, value) in [
        ("lfs.fetchrecentrefsdays", "0"),
        ("lfs.fetchrecentcommitsdays", "0"),
        ("lfs.pruneoffsetdays", "0"),
    ] {
        daemon.git(&a, &["config", key, value]);
    }
    assert!(lfs_object(&a, &oid).exists());
    daemon.git(&a, &["lfs", "prune"]);
    assert!(
        !lfs_object(&a, &oid).exists(),
        "git lfs prune did not prune a's copy: the test proves nothing"
    );

    // b keeps its object and its file; the pool keeps its copy.
    assert_eq!(std::fs::read(lfs_object(&b, &oid)).unwrap(), shared);
    assert_eq!(std::fs::read(b.join("shared.bin")).unwrap(), shared);
    daemon.git(&b, &["lfs", "fsck", "--objects"]);
    let pooled = world
        .dir("d1/pool/large")
        .join(&oid.to_hex()[..2])
        .join(&oid.to_hex()[2..4])
        .join(oid.to_hex());
    assert_eq!(std::fs::read(&pooled).unwrap(), shared);

    // And a gets it back from the pool: the bucket no longer has it.
    let layout = ObjectLayout::parse(&world.remote_url).unwrap();
    rt().block_on(s3().delete(&world.bucket, &layout.key(&oid)))
        .unwrap();
    daemon.git(&a, &["checkout", "-q", "HEAD~1", "--", "shared.bin"]);
    assert_eq!(std::fs::read(a.join("shared.bin")).unwrap(), shared);
}

/// The pool's file for `oid` in `daemon_dir`'s pool.
fn pool_file(daemon_dir: &Path, oid: &Oid) -> PathBuf {
    let hex = oid.to_hex();
    daemon_dir
        .join("pool/large")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex)
}

/// Writes other bytes of the same length over a pool file, in place (the
/// inode every repo that links it shares).
fn corrupt_in_place(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let len = std::fs::metadata(path).unwrap().len() as usize;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(path, vec![0x5a; len]).unwrap();
}

#[test]
fn corrupt_pool_entries_are_moved_aside_and_a_clone_gets_the_good_bytes_from_the_remote() {
    let world = World::new("corrupt");
    let d1 = world.dir("d1");
    let daemon = Daemon::start(&d1);
    let files = [
        ("verified.bin", content(21, 2 << 20)),
        ("unverified.bin", content(22, 3 << 20)),
    ];
    let (a, bare) = world.source_repo(&daemon, &files);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    let [verified, unverified] = files.each_ref().map(|(_, data)| Oid::of(data));
    for oid in [&verified, &unverified] {
        corrupt_in_place(&pool_file(&d1, oid));
    }

    // pool verify names both and moves both aside.
    let out = Command::new(bin("drsctl"))
        .args(["pool", "verify"])
        .envs(Daemon::env_of(&d1))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for oid in [&verified, &unverified] {
        assert!(text.contains(&oid.to_hex()), "{text}");
        assert!(!pool_file(&d1, oid).exists(), "{oid} still in the pool");
    }
    assert!(text.contains("quarantined: moved to"), "{text}");
    let quarantine = d1.join("pool/large/quarantine");
    assert_eq!(std::fs::read_dir(&quarantine).unwrap().count(), 2);

    // One back in the pool, good, then corrupt again, unverified this
    // time: the clone's hydrate checks it on the way out and downloads it,
    // as it downloads the one verify moved aside. (a's copy was the pool's
    // inode, corrupt too: a fresh file for the put.)
    let copy = lfs_object(&a, &unverified);
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, &files[1].1).unwrap();
    let blob = Command::new(bin("drsd"))
        .arg("put")
        .arg(&copy)
        .envs(Daemon::env_of(&d1))
        .output()
        .unwrap();
    assert!(blob.status.success(), "{blob:?}");
    corrupt_in_place(&pool_file(&d1, &unverified));

    let cloned: serde_json::Value = serde_json::from_str(&daemon.drsctl(
        world.top.path(),
        &["--json", "clone", bare.to_str().unwrap(), "b"],
    ))
    .unwrap();
    // The unverified one may also be mended before the clone reads it: the
    // daemon, seeing a's fresh copy, checks the entry it would drop it for
    // and replaces the bad bytes with it. Either way no bad byte is served.
    let h = &cloned["hydrate"];
    let (objects, downloaded, from_pool) = (
        h["objects"].as_u64(),
        h["downloaded"].as_u64().unwrap_or(0),
        h["from_pool"].as_u64().unwrap_or(0),
    );
    assert_eq!(objects, Some(2), "{cloned}");
    assert!(downloaded >= 1 && downloaded + from_pool == 2, "{cloned}");
    let b = world.dir("b");
    for (name, data) in &files {
        assert_eq!(&std::fs::read(b.join(name)).unwrap(), data, "{name}");
    }
    daemon.git(&b, &["lfs", "fsck", "--objects"]);

    // drsd get of a corrupt entry fails naming it, and writes nothing.
    corrupt_in_place(&pool_file(&d1, &verified));
    let got = Command::new(bin("drsd"))
        .args(["get", &verified.to_hex()])
        .envs(Daemon::env_of(&d1))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(!got.status.success(), "drsd get served a corrupt entry");
    assert!(stderr.contains(&verified.to_hex()), "{stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert!(
        got.stdout.is_empty(),
        "{} bytes handed on",
        got.stdout.len()
    );
    assert!(!pool_file(&d1, &verified).exists(), "moved aside");
}
