//! The Git LFS path end to end: real git and git-lfs, our agent and hooks,
//! a real daemon, Ceph RGW as the object remote, a bare git remote.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use drsd::pool::Oid;
use drsd::remote::{ObjectLayout, S3Client, S3Config, S3Credentials};
use drsd_e2e::bin;

/// A daemon of our own (socket, pool, state under one folder), killed on drop.
struct Daemon {
    dir: PathBuf,
    child: Child,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        std::fs::create_dir_all(dir).unwrap();
        let mut child = Command::new(bin("drsd"))
            .args(["serve", "--ready"])
            .envs(Self::env_of(dir))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("drsd starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim_end(), drsd::ipc::READY_LINE);
        Daemon {
            dir: dir.to_path_buf(),
            child,
        }
    }

    fn env_of(dir: &Path) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("DRSD_SOCKET", dir.join("run/drsd.sock")),
            ("DRSD_POOL", dir.join("pool")),
            ("DRSD_STATE_DIR", dir.join("state")),
            ("DRSD_BIN", bin("drsd")),
            ("DRSD_NO_AUTOSTART", "1".into()),
        ]
    }

    /// git in `repo`, its agent and hooks talking to this daemon.
    fn git(&self, repo: &Path, args: &[&str]) -> String {
        self.run(Command::new("git").arg("-C").arg(repo), args)
    }

    /// drsctl run in `dir`, talking to this daemon.
    fn drsctl(&self, dir: &Path, args: &[&str]) -> String {
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

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn s3() -> S3Client {
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

fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 10) as u8)
        .collect()
}

fn lfs_object(repo: &Path, oid: &Oid) -> PathBuf {
    let hex = oid.to_hex();
    repo.join(".git/lfs/objects")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex)
}

#[test]
fn push_then_clone_through_the_agent_serves_pooled_objects_by_link() {
    let top = tempfile::tempdir().unwrap();
    let home = top.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    std::env::set_var("HOME", &home); // git and git-lfs read the user's config from here
    let bucket = format!("lfs-{}", std::process::id());
    rt().block_on(s3().create_bucket(&bucket)).unwrap();
    let remote_url = format!("s3://{bucket}/team");

    let daemon = Daemon::start(&top.path().join("d1"));
    let a = top.path().join("a");
    std::fs::create_dir(&a).unwrap();
    daemon.git(&a, &["init", "-q"]);
    daemon.drsctl(&a, &["init", "--remote", &remote_url]);
    daemon.git(&a, &["lfs", "track", "*.bin"]);
    let files = [
        ("small.bin", content(1, 1000)),
        ("mid.bin", content(2, 300_000)),
        ("big.bin", content(3, 3 << 20)),
    ];
    for (name, data) in &files {
        std::fs::write(a.join(name), data).unwrap();
    }
    daemon.git(&a, &["add", "."]);
    daemon.git(&a, &["commit", "-qm", "data"]);
    let bare = top.path().join("remote.git");
    daemon.git(
        top.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    daemon.git(&a, &["remote", "add", "origin", bare.to_str().unwrap()]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);

    // Every object is in the bucket under the layout, with its sha256.
    let layout = ObjectLayout::parse(&remote_url).unwrap();
    for (name, data) in &files {
        let oid = Oid::of(data);
        let meta = rt()
            .block_on(s3().head(&bucket, &layout.key(&oid)))
            .unwrap();
        let meta = meta.unwrap_or_else(|| panic!("{name} was not uploaded"));
        assert_eq!(
            (meta.size, meta.sha256),
            (data.len() as u64, Some(oid.to_hex()))
        );
    }

    // A second clone on this machine: served from the pool, by hard link.
    let b = top.path().join("b");
    daemon.drsctl(top.path(), &["clone", bare.to_str().unwrap(), "b"]);
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

    // Another machine (its own empty pool): everything comes from RGW.
    drop(daemon);
    let other = Daemon::start(&top.path().join("d2"));
    let c = top.path().join("c");
    other.drsctl(top.path(), &["clone", bare.to_str().unwrap(), "c"]);
    for (name, data) in &files {
        assert_eq!(
            &std::fs::read(c.join(name)).unwrap(),
            data,
            "{name} from RGW"
        );
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
