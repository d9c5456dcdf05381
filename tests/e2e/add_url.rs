//! `drsctl add-url` end to end: a real daemon, real git and git-lfs, Ceph
//! RGW and nginx (http and https with its own certificate) on loopback.
//! Run under tests/with-servers.sh (tests/run.sh does).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use drsd::stores::{S3Client, S3Config, S3Credentials, SHA256_META};
use drsd_e2e::{bin, fresh_home, rt, spawn_ready};
use sha2::{Digest, Sha256};

/// A throwaway HOME (git identity, git-lfs's filters), a daemon of our own.
pub(super) struct World {
    top: tempfile::TempDir,
    daemon: Option<Child>,
    /// Whether the daemon prefetches (and so promotes) what add-url adds.
    prefetch: bool,
}

impl World {
    /// A world whose daemon holds every prefetch: pointers stay as add-url
    /// wrote them, whatever the timing.
    pub(super) fn new() -> World {
        Self::create(false)
    }

    /// A world whose daemon prefetches, hashes and promotes in the background.
    pub(super) fn with_prefetch() -> World {
        Self::create(true)
    }

    fn create(prefetch: bool) -> World {
        for var in ["AWS_ENDPOINT_URL", "DRSD_TEST_WWW", "DRSD_CA_FILE"] {
            assert!(
                std::env::var(var).is_ok(),
                "run under tests/with-servers.sh ({var} unset)"
            );
        }
        let top = tempfile::tempdir().unwrap();
        fresh_home(top.path());
        let mut world = World {
            top,
            daemon: None,
            prefetch,
        };
        world.run_ok(Command::new("git").args(["lfs", "install", "--skip-repo"]));
        world.start();
        world
    }

    pub(super) fn dir(&self) -> &Path {
        self.top.path()
    }

    pub(super) fn env(&self) -> Vec<(&'static str, PathBuf)> {
        let d = self.dir();
        vec![
            ("DRSD_SOCKET", d.join("run/drsd.sock")),
            ("DRSD_POOL", d.join("pool")),
            ("DRSD_STATE_DIR", d.join("state")),
            ("DRSD_NO_AUTOSTART", "1".into()),
        ]
    }

    pub(super) fn start(&mut self) {
        let mut cmd = Command::new(bin("drsd"));
        cmd.args(["serve", "--ready"])
            .envs(self.env())
            .stderr(Stdio::inherit());
        if !self.prefetch {
            cmd.env("DRSD_PREFETCH_MAX_SIZE", "0");
        }
        let child = spawn_ready(&mut cmd);
        self.daemon = Some(child);
    }

    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A fresh repo under the world's folder.
    pub(super) fn repo(&self, name: &str) -> PathBuf {
        let repo = self.dir().join(name);
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        repo
    }

    /// drsctl in `dir`: its output, whether or not it succeeded.
    pub(super) fn drsctl(&self, dir: &Path, args: &[&str]) -> Output {
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
        assert!(out.status.success(), "drsctl {args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub(super) fn run_ok(&self, cmd: &mut Command) -> String {
        let out = cmd.envs(self.env()).output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(super) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(super) fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub(super) fn pointer_text(oid: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
}

/// A file served by nginx under `rel`; returns its https URL.
pub(super) fn serve(rel: &str, bytes: &[u8]) -> String {
    let path = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    format!("{}/{rel}", std::env::var("DRSD_TEST_HTTPS_URL").unwrap())
}

/// A test's own folder in nginx's www, so parallel tests do not meet.
pub(super) fn www_dir(tag: &str) -> String {
    format!("t-{tag}-{}", std::process::id())
}

/// The provisional oid of an nginx object: its ETag is not a content hash,
/// so the oid is scoped by the URL.
fn nginx_oid(url: &str) -> String {
    sha256_hex(format!("{url}\n{}", nginx_etag(url)).as_bytes())
}

/// nginx's ETag for a file: hex(mtime)-hex(size).
fn nginx_etag(url: &str) -> String {
    let rel = url.splitn(4, '/').nth(3).unwrap();
    let path = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(rel);
    let meta = std::fs::metadata(path).unwrap();
    let mtime = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("{mtime:x}-{:x}", meta.len())
}

pub(super) fn s3() -> S3Client {
    S3Client::new(
        S3Config::from_env().unwrap(),
        S3Credentials::from_env().unwrap(),
    )
    .unwrap()
}

/// Asserts `path` holds exactly the pointer, is LFS-tracked, staged with
/// that content, and listed by `git lfs ls-files`.
fn assert_staged_pointer(repo: &Path, path: &str, oid: &str, size: u64) {
    let want = pointer_text(oid, size);
    assert_eq!(
        std::fs::read_to_string(repo.join(path)).unwrap(),
        want,
        "{path}"
    );
    git(
        repo,
        &["lfs", "pointer", "--check", "--strict", "--file", path],
    );
    let attr = git(repo, &["check-attr", "filter", "diff", "merge", "--", path]);
    assert!(
        attr.contains("filter: lfs") && attr.contains("diff: lfs") && attr.contains("merge: lfs"),
        "{attr}"
    );
    assert_eq!(
        git(repo, &["show", &format!(":{path}")]),
        want,
        "the index holds the pointer"
    );
    let listed = git(repo, &["lfs", "ls-files", "--long"]);
    assert!(listed.contains(&format!("{oid} - {path}")), "{listed}");
}

#[test]
fn an_rgw_object_and_an_https_url_become_staged_tracked_pointers() {
    let world = World::new();
    let repo = world.repo("repo");
    let bucket = format!("addurl-{}", std::process::id());
    let c = s3();
    let body = vec![7u8; 1 << 20];
    let etag = rt()
        .block_on(async {
            c.create_bucket(&bucket).await?;
            c.put(&bucket, "cohort/reads.bam", body.clone().into())
                .await
        })
        .unwrap()
        .expect("RGW returns an ETag");
    // An object carrying drsd's own x-amz-meta-sha256 is named by its content.
    let hashed = b"hashed by drsd".to_vec();
    let hex = sha256_hex(&hashed);
    rt().block_on(c.put_with(
        &bucket,
        "h.bin",
        hashed.clone().into(),
        &[(SHA256_META, &hex)],
    ))
    .unwrap();

    let s3_url = format!("s3://{bucket}/cohort/reads.bam");
    let report = world.drsctl_ok(&repo, &["add-url", &s3_url, "data/reads.bam"]);
    assert_eq!(report["added"][0]["oid_from"], "etag", "{report}");
    let provisional = sha256_hex(etag.as_bytes());
    assert_staged_pointer(&repo, "data/reads.bam", &provisional, body.len() as u64);

    let report = world.drsctl_ok(&repo, &["add-url", &format!("s3://{bucket}/h.bin")]);
    assert_eq!(report["added"][0]["oid_from"], "store_checksum", "{report}");
    assert_staged_pointer(&repo, "h.bin", &hex, hashed.len() as u64);

    // An https URL, run from a subfolder: the default path is the URL's file name there.
    let url = serve(&format!("{}/sample.cram", www_dir("both")), b"CRAM....");
    let sub = repo.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    world.drsctl_ok(&sub, &["add-url", &url]);
    assert_staged_pointer(&repo, "sub/sample.cram", &nginx_oid(&url), 8);

    let mirror = repo.join(".git/lfs/foreign/registry.jsonl");
    let lines = std::fs::read_to_string(&mirror).unwrap();
    // One entry per path (a promotion may have appended a later line).
    let entries = drsd::registry::mirror::read(&mirror).unwrap();
    assert_eq!(entries.len(), 3, "{lines}");
    assert!(lines.contains(&s3_url) && lines.contains(&url), "{lines}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&mirror).unwrap().permissions().mode() & 0o077,
        0
    );
    // Nothing beyond the pointers and .gitattributes is staged.
    let staged = git(&repo, &["diff", "--cached", "--name-only"]);
    assert_eq!(
        staged,
        ".gitattributes\ndata/reads.bam\nh.bin\nsub/sample.cram\n"
    );
}

#[test]
fn a_100_gib_sparse_file_is_added_without_reading_it() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/huge.bam", www_dir("sparse")), b"");
    let rel = url.splitn(4, '/').nth(3).unwrap().to_string();
    let file = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(rel);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(100 << 30)
        .unwrap();
    let started = Instant::now();
    world.drsctl_ok(&repo, &["add-url", &url]);
    // Reading 100 GiB over loopback would take minutes.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_staged_pointer(&repo, "huge.bam", &nginx_oid(&url), 100 << 30);
    std::fs::remove_file(file).unwrap();
}

#[test]
fn two_nginx_files_with_one_etag_get_two_oids() {
    let world = World::new();
    let repo = world.repo("repo");
    let dir = www_dir("same");
    let (a, b) = (
        serve(&format!("{dir}/a.bin"), b"AAAA"),
        serve(&format!("{dir}/b.bin"), b"BBBB"),
    );
    let when = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let www = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(&dir);
    for name in ["a.bin", "b.bin"] {
        let f = std::fs::File::options()
            .write(true)
            .open(www.join(name))
            .unwrap();
        f.set_modified(when).unwrap();
    }
    assert_eq!(nginx_etag(&a), nginx_etag(&b), "nginx gives both one ETag");
    world.drsctl_ok(&repo, &["add-url", &a]);
    world.drsctl_ok(&repo, &["add-url", &b]);
    assert_staged_pointer(&repo, "a.bin", &nginx_oid(&a), 4);
    assert_staged_pointer(&repo, "b.bin", &nginx_oid(&b), 4);
    assert_ne!(nginx_oid(&a), nginx_oid(&b));
}

#[test]
fn a_weak_or_missing_etag_is_refused_by_name_and_nothing_is_written() {
    let world = World::new();
    let repo = world.repo("repo");
    let base = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let dir = www_dir("etag");
    serve(&format!("weak-etag/{dir}/w.bin"), b"weak");
    serve(&format!("no-etag/{dir}/n.bin"), b"none");
    let cases = [
        (
            format!("{base}/weak-etag/{dir}/w.bin"),
            "weak ETag (W/5f0-1a)",
        ),
        (format!("{base}/no-etag/{dir}/n.bin"), "no ETag"),
    ];
    for (url, want) in &cases {
        let signed = format!("{url}?X-Amz-Signature=s3cr3t");
        let out = world.drsctl(&repo, &["add-url", &signed, "x.bin"]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains(url.as_str()) && said.contains(want) && said.contains("SHA-256"),
            "{said}"
        );
        assert!(!said.contains("s3cr3t"), "the signature leaked: {said}");
    }
    assert!(!repo.join("x.bin").exists() && !repo.join(".gitattributes").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    // With the content's sha256 given, the same weak object goes in.
    let hex = sha256_hex(b"weak");
    let report = world.drsctl_ok(&repo, &["add-url", &cases[0].0, "w.bin", "--sha256", &hex]);
    assert_eq!(report["added"][0]["oid_from"], "sha256_option", "{report}");
    assert_staged_pointer(&repo, "w.bin", &hex, 4);
}

#[test]
fn an_existing_file_is_replaced_only_with_force() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/r.bam", www_dir("force")), b"remote bytes");
    std::fs::write(repo.join("r.bam"), b"my own work").unwrap();
    let out = world.drsctl(&repo, &["add-url", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not an LFS pointer; --force replaces it"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(repo.join("r.bam")).unwrap(), b"my own work");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "?? r.bam\n");
    world.drsctl_ok(&repo, &["add-url", &url, "--force"]);
    let oid = nginx_oid(&url);
    assert_staged_pointer(&repo, "r.bam", &oid, 12);
    // A pointer is replaced without --force (adding again is fine).
    world.drsctl_ok(&repo, &["add-url", &url]);
    assert_staged_pointer(&repo, "r.bam", &oid, 12);
}

#[test]
fn the_registry_remembers_a_content_oid_across_repos_and_a_wiped_state() {
    let mut world = World::new();
    let (a, b, c) = (world.repo("a"), world.repo("b"), world.repo("c"));
    let bytes = b"ACGT".repeat(100);
    let url = serve(&format!("{}/g.fastq", www_dir("reg")), &bytes);
    let hex = sha256_hex(&bytes);
    world.drsctl_ok(&a, &["add-url", &url, "--sha256", &hex]);
    let report = world.drsctl_ok(&b, &["add-url", &url]);
    assert_eq!(report["added"][0]["oid_from"], "registry", "{report}");
    assert_staged_pointer(&b, "g.fastq", &hex, bytes.len() as u64);

    // The daemon's state is lost; registering repo a again restores its
    // entries from .git/lfs/foreign/registry.jsonl (twice: idempotent).
    world.kill();
    std::fs::remove_dir_all(world.dir().join("state")).unwrap();
    world.start();
    let report = world.drsctl_ok(&c, &["add-url", &url]);
    assert_eq!(
        report["added"][0]["oid_from"], "etag",
        "state wiped: {report}"
    );
    let mirror = a.join(".git/lfs/foreign/registry.jsonl");
    let before = std::fs::read_to_string(&mirror).unwrap();
    world.drsctl_ok(&a, &["repos", "add"]);
    world.drsctl_ok(&a, &["repos", "add"]);
    assert_eq!(std::fs::read_to_string(&mirror).unwrap(), before);
    let report = world.drsctl_ok(&c, &["add-url", &url, "g2.fastq"]);
    assert_eq!(
        report["added"][0]["oid_from"], "registry",
        "restored: {report}"
    );
    // Another ETag (the file changed) is another object: provisional again.
    std::thread::sleep(Duration::from_millis(1100));
    serve(&format!("{}/g.fastq", www_dir("reg")), &bytes);
    let report = world.drsctl_ok(&c, &["add-url", &url, "g3.fastq"]);
    assert_eq!(report["added"][0]["oid_from"], "etag", "{report}");
}

#[test]
fn ten_thousand_urls_from_a_file_are_staged_and_bad_lines_are_named() {
    let world = World::new();
    let repo = world.repo("repo");
    let dir = www_dir("batch");
    let file = batch_list(&world, &dir, 10_000);
    let base = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let mut list = String::from("# 10,000 objects, three bad lines\n");
    list.push_str(&std::fs::read_to_string(&file).unwrap());
    list.push_str(&format!("{base}/{dir}/missing.bin\n"));
    list.push_str("not-a-url x.bin\n");
    list.push_str(&format!("{base}/{dir}/f00001.bin data/f00000.bin\n"));
    std::fs::write(world.dir().join("list.txt"), &list).unwrap();
    let started = Instant::now();
    let out = world.drsctl(&repo, &["add-url", "--from", "../list.txt"]);
    let took = started.elapsed();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for line in [10_002, 10_003, 10_004] {
        assert!(
            said.contains(&format!("line {line}: ")),
            "line {line} not named: {said}"
        );
    }
    assert!(
        said.contains("no such object") && said.contains("earlier line"),
        "{said}"
    );
    let staged = git(&repo, &["diff", "--cached", "--name-only"]);
    assert_eq!(
        staged.lines().count(),
        10_001,
        "10,000 pointers and .gitattributes"
    );
    let listed = git(&repo, &["lfs", "ls-files"]);
    assert_eq!(listed.lines().count(), 10_000);
    assert_eq!(
        std::fs::read_to_string(repo.join("data/f04242.bin"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    eprintln!(
        "10,000 URLs in {took:?}: {:.0} URLs/s",
        10_000.0 / took.as_secs_f64()
    );
    let status = git(&repo, &["status", "--porcelain"]);
    assert!(
        status.lines().all(|l| l.starts_with("A ")),
        "all staged, none modified"
    );
    let www = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(&dir);
    std::fs::remove_dir_all(www).unwrap();
}

#[test]
fn git_drs_add_url_works_through_a_git_drs_link() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/v.vcf.gz", www_dir("gitdrs")), b"VCF");
    let links = world.dir().join("bin");
    std::fs::create_dir_all(&links).unwrap();
    std::os::unix::fs::symlink(bin("drsctl"), links.join("git-drs")).unwrap();
    let path = format!("{}:{}", links.display(), std::env::var("PATH").unwrap());
    let sub = repo.join("calls");
    std::fs::create_dir_all(&sub).unwrap();
    world.run_ok(
        Command::new("git")
            .current_dir(&sub)
            .env("PATH", path)
            .args(["drs", "add-url", &url]),
    );
    assert_staged_pointer(&repo, "calls/v.vcf.gz", &nginx_oid(&url), 3);
}

/// 3,000 files under `dir` in nginx's www and a list adding them under data/.
fn batch_list(world: &World, dir: &str, n: usize) -> PathBuf {
    let www = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(dir);
    std::fs::create_dir_all(&www).unwrap();
    let base = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let mut list = String::new();
    for i in 0..n {
        std::fs::write(www.join(format!("f{i:05}.bin")), format!("object {i}\n")).unwrap();
        list.push_str(&format!("{base}/{dir}/f{i:05}.bin data/f{i:05}.bin\n"));
    }
    let file = world.dir().join(format!("{dir}.txt"));
    std::fs::write(&file, list).unwrap();
    file
}

/// Every pointer file under data/ is whole and listed in the mirror, and
/// the mirror reads back (never torn).
fn assert_consistent(repo: &Path) -> usize {
    let mirror = drsd::registry::mirror::read(&repo.join(".git/lfs/foreign/registry.jsonl"))
        .expect("the mirror reads back");
    let listed: std::collections::HashSet<String> = mirror.iter().map(|e| e.path.clone()).collect();
    let mut pointers = 0;
    for f in std::fs::read_dir(repo.join("data")).into_iter().flatten() {
        let f = f.unwrap();
        let name = f.file_name().to_string_lossy().into_owned();
        if name.starts_with(".drsd-") && name.ends_with(".tmp") {
            continue; // a write cut short before its rename: never seen by git
        }
        let bytes = std::fs::read(f.path()).unwrap();
        drsd::lfs::Pointer::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            listed.contains(&format!("data/{name}")),
            "data/{name} is not in the mirror"
        );
        pointers += 1;
    }
    pointers
}

#[test]
fn kill_9_during_a_batch_leaves_registry_mirror_and_repo_consistent() {
    let mut world = World::new();
    let repo = world.repo("repo");
    let list = batch_list(&world, &www_dir("kill"), 3_000);
    let list = list.to_str().unwrap();
    for delay_ms in [150, 500, 900, 1400] {
        let mut client = Command::new(bin("drsctl"))
            .current_dir(&repo)
            .args(["add-url", "--from", list])
            .envs(world.env())
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        world.kill();
        let _ = client.wait();
        let found = assert_consistent(&repo);
        eprintln!("killed after {delay_ms} ms: {found} pointers written");
        world.start();
    }
    // Running the batch again finishes the job.
    world.drsctl_ok(&repo, &["add-url", "--from", list]);
    assert_eq!(assert_consistent(&repo), 3_000);
    let staged = git(&repo, &["diff", "--cached", "--name-only"]);
    assert_eq!(
        staged.lines().count(),
        3_001,
        "3,000 pointers and .gitattributes"
    );
    let status = git(&repo, &["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.lines().all(|l| l.starts_with("A ")), "{status}");
    // The daemon's registry and the mirror agree.
    let registry =
        drsd::registry::Registry::open(&world.dir().join("state/registry.sqlite")).unwrap();
    let mirror =
        drsd::registry::mirror::read(&repo.join(".git/lfs/foreign/registry.jsonl")).unwrap();
    let repo_key = repo.canonicalize().unwrap();
    assert_eq!(registry.for_repo(&repo_key).unwrap(), mirror);
}

/// Runs drsctl in `dir`, failing the test if it takes longer than `limit`.
fn drsctl_within(world: &World, dir: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(bin("drsctl"))
        .current_dir(dir)
        .args(args)
        .envs(world.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("drsctl {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_endless_from_file_stops_at_the_line_limit_and_the_daemon_serves_on() {
    let world = World::new();
    let repo = world.repo("repo");
    let out = drsctl_within(
        &world,
        &repo,
        &["add-url", "--from", "/dev/zero"],
        Duration::from_secs(10),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("/dev/zero") && said.contains("line 1") && said.contains("65536-byte"),
        "{said}"
    );
    // Standard input (`-`) is read the same way.
    let out = Command::new(bin("drsctl"))
        .current_dir(&repo)
        .args(["add-url", "--from", "-"])
        .envs(world.env())
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("line 1 is longer than the 65536-byte"),
        "{said}"
    );
    // The daemon answers at once: it read nothing of it.
    let status = drsctl_within(&world, &repo, &["--json", "status"], Duration::from_secs(5));
    assert!(status.status.success(), "{}", text(&status));
}

#[test]
fn a_list_of_2500_lines_goes_in_batches_and_failures_keep_their_line_numbers() {
    let world = World::new();
    let repo = world.repo("repo");
    let dir = www_dir("batches");
    let file = batch_list(&world, &dir, 2_500);
    let base = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let mut lines: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // Lines 1,234 and 2,222 (in the second and third batch) fail on the
    // daemon's side; line 2,400 repeats line 3's path (another batch).
    lines[1_233] = "not-a-url x.bin".into();
    lines[2_221] = format!("{base}/{dir}/missing.bin");
    lines[2_399] = format!("{base}/{dir}/f02399.bin data/f00002.bin");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = world.drsctl(
        &repo,
        &["--json", "add-url", "--from", file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<(u64, String)> = report["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let lines_failed: Vec<u64> = failed.iter().map(|f| f.0).collect();
    assert_eq!(lines_failed, [1_234, 2_222, 2_400], "{failed:?}");
    assert!(failed[2].1.contains("earlier line (line 3)"), "{failed:?}");
    let added = report["added"].as_array().unwrap();
    assert_eq!(added.len(), 2_497);
    // Each added line is numbered by its place in the file.
    for a in added {
        let line = a["line"].as_u64().unwrap();
        assert_eq!(a["path"], format!("data/f{:05}.bin", line - 1), "{a}");
    }
    let staged = git(&repo, &["diff", "--cached", "--name-only"]);
    assert_eq!(
        staged.lines().count(),
        2_498,
        "2,497 pointers and .gitattributes"
    );
}

/// The repo's mirror entries, by path (none when there is no mirror).
fn mirrored(repo: &Path) -> Vec<String> {
    let file = repo.join(".git/lfs/foreign/registry.jsonl");
    let entries = drsd::registry::mirror::read(&file).expect("the mirror reads back");
    entries.into_iter().map(|e| e.path).collect()
}

#[test]
fn a_symlink_planted_at_a_temp_name_is_never_followed() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/data.bin", www_dir("plant")), b"remote");
    let outside = world.dir().join("somefile");
    std::fs::write(&outside, "precious\n").unwrap();
    // What a cloned repo can ship: links at every temp name the daemon
    // ever used beside `.gitattributes` and the pointer.
    for name in ["..gitattributes.drsd-tmp", ".data.bin.drsd-tmp"] {
        std::os::unix::fs::symlink("../somefile", repo.join(name)).unwrap();
    }
    world.drsctl_ok(&repo, &["add-url", &url, "data.bin"]);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
    for name in [".gitattributes", "data.bin"] {
        let meta = std::fs::symlink_metadata(repo.join(name)).unwrap();
        assert!(meta.is_file(), "{name} is a regular file: {meta:?}");
    }
    assert_staged_pointer(&repo, "data.bin", &nginx_oid(&url), 6);
}

#[test]
fn a_path_through_an_in_repo_symlink_is_refused_with_nothing_written() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/x.bin", www_dir("linkout")), b"remote");
    let elsewhere = world.dir().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join("linkout")).unwrap();
    std::os::unix::fs::symlink("sub", repo.join("linkin")).unwrap();
    for path in ["linkout/x.bin", "linkout/deeper/x.bin", "linkin/x.bin"] {
        let out = world.drsctl(&repo, &["add-url", &url, path]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{path}: {said}");
        let link = path.split('/').next().unwrap();
        assert!(
            said.contains(link) && said.contains("symbolic link"),
            "{path}: {said}"
        );
    }
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(repo.join("sub")).unwrap().count(), 0);
    assert!(!repo.join(".gitattributes").exists());
    assert_eq!(mirrored(&repo), Vec::<String>::new());
    assert_eq!(git(&repo, &["ls-files", "--stage"]), "");
}

#[test]
fn a_git_folder_in_any_case_is_refused() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/x", www_dir("dotgit")), b"remote");
    for path in [".GIT/hooks/x", "sub/.Git/x", ".git/x", ".git./x", "GIT~1/x"] {
        let out = world.drsctl(&repo, &["add-url", &url, path]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{path}: {said}");
        assert!(
            said.contains("not a file path in the repo's work tree"),
            "{path}: {said}"
        );
    }
    for made in [".GIT", "sub", ".git.", "GIT~1", ".gitattributes"] {
        assert!(!repo.join(made).exists(), "{made} was written");
    }
    assert!(!repo.join(".git/x").exists());
    assert_eq!(mirrored(&repo), Vec::<String>::new());
}

#[test]
fn a_path_a_gitattributes_line_cannot_express_is_refused_by_name() {
    let world = World::new();
    let repo = world.repo("repo");
    let url = serve(&format!("{}/x", www_dir("newline")), b"remote");
    for (path, why) in [
        ("a\nb.bin", "newline"),
        ("a\rb.bin", "carriage return"),
        ("a\tb.bin", "control character"),
    ] {
        let out = world.drsctl(&repo, &["add-url", &url, path]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{path:?}: {said}");
        assert!(said.contains(why), "{path:?}: {said}");
        assert!(
            said.contains(&format!("{path:?}")),
            "the path is named: {said}"
        );
    }
    assert!(!repo.join(".gitattributes").exists());
    assert_eq!(std::fs::read_dir(&repo).unwrap().count(), 1, "only .git");
    // Names that can be expressed are, exactly: `#`, `!`, `"`, globs and
    // spaces; and a top-level name does not track the same name deeper.
    let odd = ["#h.bin", "!n.bin", "\"q\".bin", "s p*[1].bin", "d/x?.bin"];
    for path in odd {
        world.drsctl_ok(&repo, &["add-url", &url, path]);
    }
    let attrs = git(
        &repo,
        &[
            "check-attr",
            "filter",
            "--",
            "sub/#h.bin",
            "s p1.bin",
            "d/xy.bin",
        ],
    );
    assert_eq!(attrs.matches("unspecified").count(), 3, "{attrs}");
    let oid = nginx_oid(&url);
    for path in odd {
        if path.contains('"') {
            // git lfs ls-files quotes this name: check the rest by hand.
            let attr = git(&repo, &["check-attr", "filter", "--", path]);
            assert!(attr.ends_with(": filter: lfs\n"), "{attr}");
            let staged = git(&repo, &["show", &format!(":{path}")]);
            assert_eq!(staged, pointer_text(&oid, 6));
            continue;
        }
        assert_staged_pointer(&repo, path, &oid, 6);
    }
}

#[test]
fn fifty_concurrent_add_urls_into_one_repo_are_all_tracked_staged_and_mirrored() {
    let world = World::new();
    let repo = world.repo("repo");
    let dir = www_dir("race");
    let urls: Vec<String> = (0..50)
        .map(|i| serve(&format!("{dir}/f{i}.bin"), format!("object {i}").as_bytes()))
        .collect();
    let clients: Vec<Child> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| {
            Command::new(bin("drsctl"))
                .current_dir(&repo)
                .args(["add-url", url, &format!("d{}/f{i}.bin", i % 3)])
                .envs(world.env())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "client {i}: {}", text(&out));
    }
    let paths: Vec<String> = (0..50).map(|i| format!("d{}/f{i}.bin", i % 3)).collect();
    let mut args = vec!["check-attr", "filter", "--"];
    args.extend(paths.iter().map(String::as_str));
    let attrs = git(&repo, &args);
    assert_eq!(attrs.matches(": filter: lfs\n").count(), 50, "{attrs}");
    let staged = git(&repo, &["ls-files", "--stage"]);
    let mirror = mirrored(&repo);
    for (i, path) in paths.iter().enumerate() {
        assert!(
            staged.contains(&format!("\t{path}\n")),
            "{path} not staged: {staged}"
        );
        assert!(mirror.contains(path), "{path} not in the mirror");
        assert_staged_pointer(
            &repo,
            path,
            &nginx_oid(&urls[i]),
            format!("object {i}").len() as u64,
        );
    }
    let status = git(&repo, &["status", "--porcelain"]);
    assert!(status.lines().all(|l| l.starts_with("A ")), "{status}");
}

#[test]
fn promote_all_wait_racing_the_workers_over_many_objects_succeeds() {
    let world = World::with_prefetch();
    let repo = world.repo("repo");
    let dir = www_dir("promote-race");
    let list = batch_list(&world, &dir, 400);
    world.drsctl_ok(&repo, &["add-url", "--from", list.to_str().unwrap()]);
    // The workers are hashing and promoting these now; promote does the
    // same paths, again and again until none is waiting.
    let out = world.drsctl(&repo, &["--json", "promote", "--all", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    for i in (0..400).step_by(7) {
        let path = format!("data/f{i:05}.bin");
        let body = format!("object {i}\n");
        let want = pointer_text(&sha256_hex(body.as_bytes()), body.len() as u64);
        assert_eq!(git(&repo, &["show", &format!(":{path}")]), want, "{path}");
        assert_eq!(std::fs::read_to_string(repo.join(&path)).unwrap(), want);
    }
    let status = git(&repo, &["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.lines().all(|l| l.starts_with("A ")), "{status}");
}
