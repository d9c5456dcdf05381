//! A folder as the object remote (`drsctl init --remote /shared/objects`)
//! end to end: real git and git-lfs, real daemons, each "user" with its own
//! HOME, pool and state, sharing one object folder and one bare git remote.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use drsd::pool::Oid;
use drsd_e2e::{bin, spawn_ready};

use super::add_url::{serve, sha256_hex, www_dir};
use super::lfs_transfer::content;

/// One user: a HOME, a daemon with its own pool and state, killed on drop.
struct User {
    dir: PathBuf,
    child: Child,
}

impl User {
    fn start(dir: &Path) -> User {
        Self::start_with_env(dir, &[])
    }

    /// A user whose daemon has `extra` in its environment.
    fn start_with_env(dir: &Path, extra: &[(&str, &str)]) -> User {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        let mut user = User {
            dir: dir.to_path_buf(),
            child: Command::new("true").spawn().unwrap(),
        };
        user.child = spawn_ready(
            Command::new(bin("drsd"))
                .args(["serve", "--ready"])
                .envs(user.env())
                .env("DRSD_PREFETCH_MAX_SIZE", "0")
                .envs(extra.iter().copied())
                .stderr(Stdio::inherit()),
        );
        user.ok(Command::new("git").args(["lfs", "install", "--skip-repo"]));
        user
    }

    fn env(&self) -> Vec<(&'static str, PathBuf)> {
        let d = &self.dir;
        vec![
            ("HOME", d.join("home")),
            ("XDG_CONFIG_HOME", d.join("home/.config")),
            ("DRSD_SOCKET", d.join("run/drsd.sock")),
            ("DRSD_POOL", d.join("pool")),
            ("DRSD_STATE_DIR", d.join("state")),
            ("DRSD_BIN", bin("drsd")),
            ("DRSD_NO_AUTOSTART", "1".into()),
        ]
    }

    fn output(&self, cmd: &mut Command) -> Output {
        cmd.envs(self.env())
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap()
    }

    fn ok(&self, cmd: &mut Command) -> String {
        let out = self.output(cmd);
        assert!(out.status.success(), "{cmd:?}: {}", text(&out));
        text(&out)
    }

    fn git(&self, repo: &Path, args: &[&str]) -> String {
        self.ok(Command::new("git").arg("-C").arg(repo).args(args))
    }

    fn drsctl(&self, dir: &Path, args: &[&str]) -> String {
        self.ok(Command::new(bin("drsctl")).current_dir(dir).args(args))
    }

    fn drsctl_fails(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.output(Command::new(bin("drsctl")).current_dir(dir).args(args));
        assert!(
            !out.status.success(),
            "drsctl {args:?} succeeded: {}",
            text(&out)
        );
        text(&out)
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Where the folder keeps `oid`.
fn in_folder(folder: &Path, oid: &Oid) -> PathBuf {
    let hex = oid.to_hex();
    folder.join(&hex[..2]).join(&hex[2..4]).join(&hex)
}

/// A repo `name` of `user`, set up with the folder remote, `files` committed
/// as LFS objects, with `bare` as its origin.
fn source_repo(
    user: &User,
    top: &Path,
    folder: &Path,
    files: &[(&str, Vec<u8>)],
) -> (PathBuf, PathBuf) {
    let a = top.join("a");
    std::fs::create_dir(&a).unwrap();
    user.git(&a, &["init", "-q"]);
    user.drsctl(&a, &["init", "--remote", folder.to_str().unwrap()]);
    user.git(&a, &["lfs", "track", "*.bin"]);
    for (name, data) in files {
        std::fs::write(a.join(name), data).unwrap();
    }
    user.git(&a, &["add", "."]);
    user.git(&a, &["commit", "-qm", "data"]);
    let bare = top.join("remote.git");
    user.git(top, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    user.git(&a, &["remote", "add", "origin", bare.to_str().unwrap()]);
    (a, bare)
}

#[test]
fn a_push_to_a_folder_remote_comes_back_in_clones_with_an_empty_pool() {
    let top = tempfile::tempdir().unwrap();
    let folder = top.path().join("shared objects");
    std::fs::create_dir(&folder).unwrap();
    let alice = User::start(&top.path().join("alice"));
    let files = [
        ("big.bin", content(1, 3 << 20)),
        ("small.bin", content(2, 500)),
    ];
    let (a, bare) = source_repo(&alice, top.path(), &folder, &files);
    let attrs = std::fs::read_to_string(a.join(".gitattributes")).unwrap();
    assert!(attrs.contains("drs-remote=file://"), "{attrs}");
    assert!(attrs.contains("shared%20objects"), "{attrs}");
    alice.git(&a, &["push", "-q", "origin", "main"]);
    for (name, data) in &files {
        let at = in_folder(&folder, &Oid::of(data));
        assert_eq!(&std::fs::read(&at).unwrap(), data, "{name} in the folder");
    }
    // Another user, with an empty pool: drsctl clone and a plain git clone.
    let bob = User::start(&top.path().join("bob"));
    bob.drsctl(top.path(), &["clone", bare.to_str().unwrap(), "b"]);
    // git-lfs's smudge would ask the bare repo: clone without it, then set
    // up and pull through the agent.
    bob.ok(Command::new("git")
        .current_dir(top.path())
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .args(["clone", "-q", bare.to_str().unwrap(), "c-plain"]));
    let plain = top.path().join("c-plain");
    bob.drsctl(&plain, &["init"]);
    bob.git(&plain, &["lfs", "pull"]);
    for (name, data) in &files {
        let b = top.path().join("b");
        assert_eq!(
            &std::fs::read(b.join(name)).unwrap(),
            data,
            "{name} by drsctl clone"
        );
        assert_eq!(
            &std::fs::read(plain.join(name)).unwrap(),
            data,
            "{name} by git clone"
        );
    }
    // Bob adds an object and pushes; Alice pulls it through the folder.
    let b = top.path().join("b");
    let more = content(3, 200_000);
    std::fs::write(b.join("more.bin"), &more).unwrap();
    bob.git(&b, &["add", "more.bin"]);
    bob.git(&b, &["commit", "-qm", "more"]);
    bob.git(&b, &["push", "-q", "origin", "main"]);
    assert!(in_folder(&folder, &Oid::of(&more)).is_file());
    alice.git(&a, &["pull", "-q", "origin", "main"]);
    assert_eq!(std::fs::read(a.join("more.bin")).unwrap(), more);
}

#[test]
fn a_clone_writes_canonical_pointers_from_the_pool_and_leaves_other_pointer_texts_to_git_lfs() {
    let top = tempfile::tempdir().unwrap();
    let folder = top.path().join("objects");
    std::fs::create_dir(&folder).unwrap();
    let alice = User::start(&top.path().join("alice"));
    let files = [
        ("run.bin", content(4, 3 << 19)),
        ("crlf.bin", content(5, 2 << 20)),
        ("plain.bin", content(6, 700)),
    ];
    let (a, bare) = source_repo(&alice, top.path(), &folder, &files);
    // run.bin executable; crlf.bin's blob the same pointer with CRLF lines,
    // which git-lfs reads as a pointer but does not write.
    alice.git(&a, &["update-index", "--chmod=+x", "run.bin"]);
    let crlf = Oid::of(&files[1].1);
    let text = format!(
        "version https://git-lfs.github.com/spec/v1\r\noid sha256:{crlf}\r\nsize {}\r\n",
        files[1].1.len()
    );
    std::fs::write(top.path().join("crlf.txt"), &text).unwrap();
    let blob = alice.git(&a, &["hash-object", "-w", "../crlf.txt"]);
    let info = format!("100644,{},crlf.bin", blob.trim());
    alice.git(&a, &["update-index", "--cacheinfo", &info]);
    alice.git(&a, &["commit", "-qm", "exec and crlf"]);
    alice.git(&a, &["push", "-q", "origin", "main"]);

    let bob = User::start(&top.path().join("bob"));
    let cloned: serde_json::Value = serde_json::from_str(&bob.drsctl(
        top.path(),
        &["--json", "clone", bare.to_str().unwrap(), "b"],
    ))
    .unwrap();
    let checkout = &cloned["checkout"];
    assert_eq!(checkout["written"].as_u64(), Some(2), "{cloned}");
    assert_eq!(
        checkout["to_git"],
        serde_json::json!(["crlf.bin"]),
        "{cloned}"
    );
    let b = top.path().join("b");
    for (name, data) in &files {
        assert_eq!(&std::fs::read(b.join(name)).unwrap(), data, "{name}");
    }
    let mode = std::fs::metadata(b.join("run.bin")).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111,
        0o111,
        "run.bin keeps its executable bit"
    );
    // run.bin (1.5 MiB) is stamped, plain.bin too small to be: the refresh
    // took the one's pointer from its stamp and hashed the other.
    let stamped: Vec<&str> = checkout["stamps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(stamped, ["run.bin"], "{cloned}");
    // git has the stat data of the files the daemon wrote, and finds them
    // unchanged (crlf.bin cleans to the canonical text, not its blob's: so
    // it is with stock git-lfs too).
    let debug = bob.git(&b, &["ls-files", "--debug", "--", "run.bin"]);
    assert!(debug.contains(&format!("size: {}", 3 << 19)), "{debug}");
    let debug = bob.git(&b, &["ls-files", "--debug", "--", "plain.bin"]);
    assert!(debug.contains("size: 700"), "{debug}");
    let status = bob.git(&b, &["status", "--porcelain", "--", "run.bin", "plain.bin"]);
    assert_eq!(status, "");
}

#[test]
fn a_corrupted_object_in_the_folder_is_refused_on_clone_by_oid_and_path() {
    let top = tempfile::tempdir().unwrap();
    let folder = top.path().join("objects");
    std::fs::create_dir(&folder).unwrap();
    let alice = User::start(&top.path().join("alice"));
    let data = content(4, 100_000);
    let (a, bare) = source_repo(&alice, top.path(), &folder, &[("x.bin", data.clone())]);
    alice.git(&a, &["push", "-q", "origin", "main"]);
    let oid = Oid::of(&data);
    let at = in_folder(&folder, &oid);
    // Rotten bytes of the same size, put there by rename as a writer would.
    let rotten = top.path().join("rotten");
    std::fs::write(&rotten, vec![0u8; data.len()]).unwrap();
    std::fs::rename(&rotten, &at).unwrap();
    let bob = User::start(&top.path().join("bob"));
    let out = text(
        &bob.output(Command::new(bin("drsctl")).current_dir(top.path()).args([
            "clone",
            bare.to_str().unwrap(),
            "b",
        ])),
    );
    assert!(out.contains(&oid.to_hex()), "names the oid: {out}");
    assert!(
        out.contains(&at.display().to_string()),
        "names the path: {out}"
    );
    let b = top.path().join("b");
    let checked_out = std::fs::read(b.join("x.bin")).unwrap_or_default();
    assert_ne!(
        checked_out,
        vec![0u8; data.len()],
        "the rotten bytes reached git"
    );
    let held = Command::new("find")
        .arg(top.path().join("bob/pool"))
        .args(["-name", &oid.to_hex()])
        .output()
        .unwrap();
    assert!(held.stdout.is_empty(), "the rotten bytes reached the pool");
}

#[test]
fn a_foreign_object_added_by_url_is_fetched_and_written_into_the_folder_on_push() {
    let top = tempfile::tempdir().unwrap();
    let folder = top.path().join("objects");
    std::fs::create_dir(&folder).unwrap();
    let alice = User::start(&top.path().join("alice"));
    let (a, bare) = source_repo(&alice, top.path(), &folder, &[("x.bin", content(5, 1000))]);
    let body = content(6, 300_000);
    let url = serve(&format!("{}/data.bin", www_dir("dirremote")), &body);
    let hex = sha256_hex(&body);
    alice.drsctl(
        &a,
        &["add-url", &url, "data.bin", "--sha256", &hex, "--no-fetch"],
    );
    alice.git(&a, &["commit", "-qm", "by url"]);
    let said = alice.git(&a, &["push", "-q", "origin", "main"]);
    assert!(!said.contains("missing"), "{said}");
    let oid = Oid::of(&body);
    assert_eq!(std::fs::read(in_folder(&folder, &oid)).unwrap(), body);
    let bob = User::start(&top.path().join("bob"));
    bob.drsctl(top.path(), &["clone", bare.to_str().unwrap(), "b"]);
    assert_eq!(std::fs::read(top.path().join("b/data.bin")).unwrap(), body);
}

/// Promoted small foreign objects live in the pool alone (no file, and
/// mostly no folder, each in `.git/lfs/objects`): the push sends them from
/// the pool and names none missing, git checks one out through the agent,
/// and a clone elsewhere gets them all.
#[test]
fn promoted_small_foreign_objects_stay_in_the_pool_and_are_pushed_checked_out_and_cloned() {
    let top = tempfile::tempdir().unwrap();
    let folder = top.path().join("objects");
    std::fs::create_dir(&folder).unwrap();
    let alice = User::start_with_env(
        &top.path().join("alice"),
        &[("DRSD_PREFETCH_MAX_SIZE", "1M")],
    );
    let (a, bare) = source_repo(&alice, top.path(), &folder, &[("x.bin", content(5, 1000))]);
    let www = www_dir("dirsmall");
    let bodies: Vec<(String, Vec<u8>)> = (0..3u8)
        .map(|i| (format!("s{i}.bin"), content(40 + i, 4096)))
        .collect();
    for (name, body) in &bodies {
        let url = serve(&format!("{www}/{name}"), body);
        alice.drsctl(&a, &["add-url", &url, name]);
    }
    alice.drsctl(&a, &["promote", "--all", "--wait"]);
    let lfs_objects = a.join(".git/lfs/objects");
    for (name, body) in &bodies {
        let oid = Oid::of(body);
        let pointer = std::fs::read_to_string(a.join(name)).unwrap();
        assert!(pointer.contains(&oid.to_hex()), "{name}: {pointer}");
        let copy = drsd::lfs::hydrate::object_path(&lfs_objects, &oid);
        assert!(!copy.exists(), "{name} was written to {}", copy.display());
    }
    alice.git(&a, &["commit", "-qm", "by url"]);
    let said = alice.git(&a, &["push", "origin", "main"]);
    assert!(!said.contains("missing"), "{said}");
    for (name, body) in &bodies {
        let there = std::fs::read(in_folder(&folder, &Oid::of(body)));
        assert_eq!(there.unwrap(), *body, "{name} in the folder remote");
    }
    std::fs::remove_file(a.join("s0.bin")).unwrap();
    alice.git(&a, &["checkout", "--", "s0.bin"]);
    assert_eq!(std::fs::read(a.join("s0.bin")).unwrap(), bodies[0].1);
    let bob = User::start(&top.path().join("bob"));
    bob.drsctl(top.path(), &["clone", bare.to_str().unwrap(), "b"]);
    for (name, body) in &bodies {
        assert_eq!(
            std::fs::read(top.path().join("b").join(name)).unwrap(),
            *body
        );
    }
}

#[test]
fn init_refuses_a_remote_it_cannot_use_and_records_nothing() {
    let top = tempfile::tempdir().unwrap();
    let user = User::start(&top.path().join("u"));
    let repo = top.path().join("r");
    std::fs::create_dir(&repo).unwrap();
    user.git(&repo, &["init", "-q"]);
    let missing = top.path().join("no such folder");
    let bucket = format!("s3://drsd-no-such-bucket-{}/p", std::process::id());
    let cases = [
        ("gs://bkt/p", "unknown scheme"),
        ("relative/folder", "absolute"),
        ("file://otherhost/x", "no host"),
        (missing.to_str().unwrap(), "no such folder"),
        (&bucket, "does not exist"),
    ];
    for (remote, why) in cases {
        let out = user.drsctl_fails(&repo, &["init", "--remote", remote]);
        assert!(out.contains(why), "{remote}: {out}");
        assert!(!repo.join(".gitattributes").exists(), "{remote}: recorded");
        assert!(
            !repo.join(".git/hooks/pre-push").exists(),
            "{remote}: set up anyway"
        );
    }
    // A file where the folder should be.
    let file = top.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = user.drsctl_fails(&repo, &["init", "--remote", file.to_str().unwrap()]);
    assert!(out.contains("a-file"), "{out}");
}

#[test]
fn init_refuses_a_bucket_whose_credentials_are_refused() {
    let top = tempfile::tempdir().unwrap();
    let user = User::start_with_env(
        &top.path().join("u"),
        &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
    );
    let repo = top.path().join("r");
    std::fs::create_dir(&repo).unwrap();
    user.git(&repo, &["init", "-q"]);
    let bucket = format!("lfs-creds-{}", std::process::id());
    super::lfs_transfer::rt()
        .block_on(super::lfs_transfer::s3().create_bucket(&bucket))
        .unwrap();
    let out = user.drsctl_fails(&repo, &["init", "--remote", &format!("s3://{bucket}/p")]);
    assert!(out.contains("refused the credentials"), "{out}");
    assert!(!out.contains("not-the-secret"), "{out}");
    assert!(!repo.join(".gitattributes").exists());
}

#[test]
fn init_replaces_the_recorded_remote_removes_it_and_says_when_there_is_none() {
    let top = tempfile::tempdir().unwrap();
    let user = User::start(&top.path().join("u"));
    let repo = top.path().join("r");
    std::fs::create_dir(&repo).unwrap();
    user.git(&repo, &["init", "-q"]);
    let out = user.drsctl(&repo, &["init"]);
    assert!(out.contains("no object remote"), "{out}");
    assert!(out.contains("drsctl init --remote"), "{out}");
    let (one, two) = (top.path().join("one"), top.path().join("two"));
    for d in [&one, &two] {
        std::fs::create_dir(d).unwrap();
    }
    user.drsctl(&repo, &["init", "--remote", one.to_str().unwrap()]);
    let out = user.drsctl(
        &repo,
        &["init", "--remote", &format!("file://{}", two.display())],
    );
    assert!(!out.contains("no object remote"), "{out}");
    let attrs = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    assert_eq!(attrs.matches("drs-remote=").count(), 1, "{attrs}");
    assert!(
        attrs.contains(&format!("drs-remote=file://{}", two.display())),
        "{attrs}"
    );
    user.drsctl(&repo, &["init", "--no-remote"]);
    let attrs = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    assert!(!attrs.contains("drs-remote"), "{attrs}");
    let out = user.drsctl(&repo, &["init"]);
    assert!(out.contains("no object remote"), "{out}");
    // An Indexd needs an S3 remote: a folder one is refused with it.
    let out = user.drsctl_fails(
        &repo,
        &[
            "init",
            "--remote",
            one.to_str().unwrap(),
            "--indexd",
            "https://data.example.org",
        ],
    );
    assert!(out.contains("needs an s3:// object remote"), "{out}");
    let attrs = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    assert!(
        !attrs.contains("drs-remote") && !attrs.contains("drs-indexd"),
        "{attrs}"
    );
}
