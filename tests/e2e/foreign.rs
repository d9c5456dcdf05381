//! Foreign objects after add-url: the background prefetch and hash,
//! promotion, and the pre-push safety net, with real git, git-lfs, Ceph RGW
//! and nginx. Each test is its own process (nextest), so the daemon's
//! settings go through this process's environment.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use drsd::pool::Oid;
use drsd::stores::ObjectLayout;

use drsd_e2e::{alive, rt};

use super::add_url::{git, pointer_text, s3, serve, sha256_hex, text, www_dir, World};

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

/// A fresh bucket holding `bytes` at `key` (one PUT: its ETag is the md5).
pub(super) fn source_object(tag: &str, key: &str, bytes: &[u8]) -> String {
    let c = s3();
    let bucket = format!("src-{tag}-{}", std::process::id());
    rt().block_on(async {
        c.create_bucket(&bucket).await.unwrap();
        c.put(&bucket, key, Bytes::from(bytes.to_vec()))
            .await
            .unwrap();
    });
    format!("s3://{bucket}/{key}")
}

/// A repo set up with drsd and an object remote in a fresh bucket.
pub(super) fn drs_repo(world: &World, name: &str) -> (std::path::PathBuf, ObjectLayout) {
    let bucket = format!("dest-{name}-{}", std::process::id());
    rt().block_on(s3().create_bucket(&bucket)).unwrap();
    let remote = format!("s3://{bucket}/lfs");
    let repo = world.repo(name);
    world.drsctl_ok(&repo, &["init", "--remote", &remote]);
    (repo, ObjectLayout::parse(&remote).unwrap())
}

/// Polls `check` for up to a minute.
pub(super) fn wait_for(what: &str, check: impl FnMut() -> bool) {
    wait_up_to(Duration::from_secs(60), what, check);
}

pub(super) fn wait_up_to(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(super) fn staged(repo: &Path, path: &str) -> String {
    git(repo, &["show", &format!(":{path}")])
}

pub(super) fn queue(world: &World, repo: &Path) -> serde_json::Value {
    world.drsctl_ok(repo, &["status"])["queue"].clone()
}

/// The object remote's copy of `oid` (hex): there, of `size` bytes, and
/// labelled with its sha256.
pub(super) fn in_layout(layout: &ObjectLayout, oid: &str, size: u64) -> drsd::stores::ObjectMeta {
    let key = layout.key(&oid.parse::<Oid>().unwrap());
    let there = rt()
        .block_on(s3().head(&layout.bucket, &key))
        .unwrap()
        .unwrap_or_else(|| panic!("s3://{}/{key} is not there", layout.bucket));
    assert_eq!((there.size, there.sha256.as_deref()), (size, Some(oid)));
    there
}

/// `drsctl status` in `repo`: its provisional pointers (path, state).
fn pointer_states(world: &World, repo: &Path) -> Vec<(String, String)> {
    let status = world.drsctl_ok(repo, &["status"]);
    let listed = status["provisional"]["pointers"].as_array().cloned();
    listed
        .unwrap_or_else(|| panic!("no provisional list: {status}"))
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().into(),
                p["state"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// git in `repo` with the world's daemon (hooks, agent), its output and status.
pub(super) fn git_in(world: &World, repo: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .envs(world.env())
        .output()
        .unwrap()
}

/// `drsctl clone` of `bare` as another user on another machine (own HOME,
/// empty pool, no registry); returns the sha256 hex of the file at `path`
/// in the clone.
pub(super) fn clone_elsewhere(bare: &Path, path: &str) -> String {
    let other = World::with_prefetch();
    let out = Command::new(drsd_e2e::bin("drsctl"))
        .current_dir(other.dir())
        .args(["clone", bare.to_str().unwrap(), "b"])
        .envs(other.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    file_sha256(&other.dir().join("b").join(path))
}

/// A bare repo in a folder of its own, added to `repo` as `origin`.
pub(super) fn bare_origin(repo: &Path) -> (tempfile::TempDir, std::path::PathBuf) {
    let remotes = tempfile::tempdir().unwrap();
    let bare = remotes.path().join("remote.git");
    git(
        remotes.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(repo, &["remote", "add", "origin", bare.to_str().unwrap()]);
    (remotes, bare)
}

pub(super) fn ok(out: std::process::Output) {
    assert!(out.status.success(), "{}", text(&out));
}

/// An object in a source bucket, as the flow below needs to know it.
struct Source {
    url: String,
    /// Its content sha256, hex.
    oid: String,
    size: u64,
    /// The file name add-url gives it.
    name: &'static str,
}

/// One PUT (the ETag is the md5) of `bytes` into a fresh bucket.
fn small_source(tag: &str, name: &'static str, bytes: &[u8]) -> Source {
    Source {
        url: source_object(tag, &format!("runs/{name}"), bytes),
        oid: sha256_hex(bytes),
        size: bytes.len() as u64,
        name,
    }
}

/// The flow a steward runs: add-url of an S3 object; the daemon fetches and
/// hashes it and promotes the staged pointer; commit and push, which copies
/// the object server-side into the remote's layout (no byte of it leaves
/// this machine); then another user clones it and gets the same bytes.
/// With `parts`, the copy is expected in that many parts (UploadPartCopy).
fn s3_flow(world: World, src: &Source, parts: Option<u64>, patience: Duration) {
    let (repo, layout) = drs_repo(&world, "a");
    let added = world.drsctl_ok(&repo, &["add-url", &src.url]);
    assert_eq!(added["added"][0]["provisional"], true, "{added}");
    let promoted = pointer_text(&src.oid, src.size);

    // The daemon fetches and hashes it, then promotes the staged pointer.
    wait_up_to(patience, "the staged pointer's promotion", || {
        staged(&repo, src.name) == promoted
    });
    assert_eq!(
        std::fs::read_to_string(repo.join(src.name)).unwrap(),
        promoted
    );
    assert_eq!(
        file_sha256(&lfs_object(&repo, &src.oid)),
        src.oid,
        "hydrated"
    );
    let q = queue(&world, &repo);
    assert_eq!(
        (q["done"].as_u64(), q["failed"].as_u64()),
        (Some(1), Some(0)),
        "{q}"
    );

    // Push: the object goes into the remote's layout by a server-side copy.
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "reads"]));
    let (_remotes, bare) = bare_origin(&repo); // outlives this user's world
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("1 foreign object(s) copied server-side"),
        "{}",
        text(&out)
    );
    let there = in_layout(&layout, &src.oid, src.size);
    let etag = there.etag.unwrap_or_default();
    match parts {
        Some(n) => assert!(etag.ends_with(&format!("-{n}")), "{n} parts: {etag}"),
        None => {
            let (bucket, key) = src.url["s3://".len()..].split_once('/').unwrap();
            let source = rt().block_on(s3().head(bucket, key)).unwrap().unwrap();
            assert_eq!(Some(etag), source.etag, "one CopyObject keeps the ETag");
        }
    }

    // Another user on another machine: own HOME, empty pool, no registry.
    drop(world);
    assert_eq!(clone_elsewhere(&bare, src.name), src.oid);
    let oid: Oid = src.oid.parse().unwrap();
    rt().block_on(s3().delete(&layout.bucket, &layout.key(&oid)))
        .unwrap(); // the store keeps objects in RAM
}

#[test]
fn an_s3_object_added_by_url_is_hashed_promoted_copied_on_push_and_cloned_elsewhere() {
    let body = content((3 << 20) + 17, 1);
    let src = small_source("flow", "reads.bam", &body);
    s3_flow(World::with_prefetch(), &src, None, Duration::from_secs(60));
}

/// Past the largest object one CopyObject may copy (5 GiB on S3; lowered
/// here through the daemon's setting), the copy goes in parts.
#[test]
fn an_s3_object_past_the_whole_copy_limit_is_copied_in_parts() {
    std::env::set_var("DRSD_COPY_WHOLE_MAX", "8M");
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let body = content((13 << 20) + 5, 9);
    let src = small_source("parts", "reads.cram", &body);
    s3_flow(
        World::with_prefetch(),
        &src,
        Some(3),
        Duration::from_secs(60),
    );
}

/// The size: a 4 GiB object uploaded in 64 MiB parts, its `-64`
/// ETag checked during the prefetch, copied server-side on push, cloned
/// elsewhere and verified; never held in memory here.
#[test]
fn a_4_gib_s3_object_goes_through_add_url_push_and_clone() {
    std::env::set_var("DRSD_MULTIPART_PART_SIZE", "64M");
    let spool = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = spool.path().join("big.bam");
    let size = 4u64 << 30;
    let oid = write_pattern(&file, size);
    let bucket = format!("src-big-{}", std::process::id());
    let key = "runs/big.bam";
    let c = s3();
    let meta = rt().block_on(async {
        c.create_bucket(&bucket).await.unwrap();
        c.put_multipart(&bucket, key, &file, 64 << 20, &[])
            .await
            .unwrap()
    });
    assert!(meta.etag.unwrap_or_default().ends_with("-64"));
    drop(spool); // its bytes are in the store now
    let src = Source {
        url: format!("s3://{bucket}/{key}"),
        oid,
        size,
        name: "big.bam",
    };
    s3_flow(World::with_prefetch(), &src, None, Duration::from_secs(600));
    rt().block_on(c.delete(&bucket, key)).unwrap(); // the store keeps objects in RAM
}

/// `size` bytes that no two MiB repeat, written to `path`; their sha256 hex.
fn write_pattern(path: &Path, size: u64) -> String {
    use sha2::{Digest, Sha256};
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut block = content(1 << 20, 7);
    let mut hash = Sha256::new();
    let mut left = size;
    for n in 0u64.. {
        if left == 0 {
            break;
        }
        block[..8].copy_from_slice(&n.to_le_bytes());
        let take = left.min(block.len() as u64) as usize;
        out.write_all(&block[..take]).unwrap();
        hash.update(&block[..take]);
        left -= take as u64;
    }
    out.flush().unwrap();
    hex::encode(hash.finalize())
}

/// Where git-lfs keeps `oid` (hex) in `repo`.
fn lfs_object(repo: &Path, oid: &str) -> std::path::PathBuf {
    drsd::lfs::hydrate::object_path(&repo.join(".git/lfs/objects"), &oid.parse().unwrap())
}

/// The sha256 hex of the file at `path`, read in pieces.
pub(super) fn file_sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path).unwrap(), &mut hash).unwrap();
    hex::encode(hash.finalize())
}

/// A repo moved while its object was being hashed: the daemon cannot settle
/// it then (the old path is gone). Registering it at its new place catches
/// up: the object is hydrated and the staged pointer promoted at once.
#[test]
fn a_repo_registered_after_its_object_was_hashed_is_caught_up() {
    std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "1");
    let mut world = World::with_prefetch();
    let body = content(300_000, 4);
    let src = small_source("late", "late.bam", &body);
    let (repo, _layout) = drs_repo(&world, "m");
    world.drsctl_ok(&repo, &["add-url", &src.url]);
    world.kill();
    let moved = world.dir().join("moved");
    std::fs::rename(&repo, &moved).unwrap();
    std::env::remove_var("DRSD_PREFETCH_MAX_SIZE");
    world.start();
    let provisional = staged(&moved, "late.bam");
    wait_for("the prefetch", || {
        queue(&world, world.dir())["done"].as_u64() == Some(1)
    });
    assert_eq!(
        staged(&moved, "late.bam"),
        provisional,
        "nobody settled it yet"
    );

    world.drsctl_ok(&moved, &["init"]);
    assert_eq!(staged(&moved, "late.bam"), pointer_text(&src.oid, src.size));
    assert_eq!(
        file_sha256(&lfs_object(&moved, &src.oid)),
        src.oid,
        "hydrated"
    );
}

/// The source is overwritten after its prefetch: the push cannot copy it
/// (the copy is pinned to the ETag seen at add-url), so the bytes the
/// prefetch verified go up from the pool, and a clone gets what the pointer
/// names.
#[test]
fn an_s3_source_changed_after_its_prefetch_is_pushed_from_the_pool() {
    let world = World::with_prefetch();
    let body = content((2 << 20) + 9, 11);
    let src = small_source("swap", "swap.bam", &body);
    let (repo, layout) = drs_repo(&world, "s");
    world.drsctl_ok(&repo, &["add-url", &src.url]);
    wait_for("the staged pointer's promotion", || {
        staged(&repo, src.name) == pointer_text(&src.oid, src.size)
    });
    let (bucket, key) = src.url["s3://".len()..].split_once('/').unwrap();
    rt().block_on(s3().put(bucket, key, Bytes::from(content(1000, 12))))
        .unwrap();

    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "swap"]));
    let (_remotes, bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("copied server-side"), "{}", text(&out));
    in_layout(&layout, &src.oid, src.size);
    drop(world);
    assert_eq!(clone_elsewhere(&bare, src.name), src.oid);
}

#[test]
fn a_committed_provisional_pointer_refuses_the_push_until_promoted() {
    // A daemon that holds every prefetch: the pointer stays provisional.
    std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "1");
    let mut world = World::with_prefetch();
    let body = content(200_000, 2);
    let url = source_object("held", "sample.cram", &body);
    let (repo, layout) = drs_repo(&world, "h");
    world.drsctl_ok(&repo, &["add-url", &url]);
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "provisional"]));
    let q = queue(&world, &repo);
    assert_eq!(q["held"].as_u64(), Some(1), "{q}");
    assert_eq!(
        pointer_states(&world, &repo),
        [("sample.cram".into(), "held".into())]
    );
    let (_remotes, _bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(
        !out.status.success(),
        "a provisional pointer was pushed: {said}"
    );
    assert!(
        said.contains("sample.cram") && said.contains("provisional"),
        "{said}"
    );

    // A daemon without the limit fetches it; promote rewrites the committed pointer.
    world.kill();
    std::env::remove_var("DRSD_PREFETCH_MAX_SIZE");
    world.start();
    wait_for("status to show the object hashed", || {
        pointer_states(&world, &repo) == [("sample.cram".into(), "hashed".into())]
    });
    let report = world.drsctl_ok(&repo, &["promote", "--all", "--wait"]);
    assert_eq!(
        report["rewritten"],
        serde_json::json!(["sample.cram"]),
        "{report}"
    );
    let content_oid = sha256_hex(&body);
    assert_eq!(
        staged(&repo, "sample.cram"),
        pointer_text(&content_oid, body.len() as u64)
    );
    assert!(pointer_states(&world, &repo).is_empty(), "none left");
    ok(git_in(&world, &repo, &["commit", "-qam", "promoted"]));
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    in_layout(&layout, &content_oid, body.len() as u64);
}

#[test]
fn an_object_changed_on_the_server_after_add_url_fails_its_job_with_the_reason() {
    std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "1");
    // A changed object gets three tries before it has failed for good.
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let mut world = World::with_prefetch();
    let dir = www_dir("changed");
    let url = serve(&format!("{dir}/x.fastq"), &content(5000, 3));
    let repo = world.repo("c");
    world.drsctl_ok(&repo, &["add-url", &url]);
    // The file changes under the same URL (another size: another ETag).
    serve(&format!("{dir}/x.fastq"), &content(6000, 4));
    world.kill();
    std::env::remove_var("DRSD_PREFETCH_MAX_SIZE");
    world.start();
    let mut q = serde_json::Value::Null;
    wait_for("the job to fail", || {
        q = queue(&world, &repo);
        q["failed"].as_u64() == Some(1)
    });
    let why = q["open"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("x.fastq") && why.contains("changed"), "{q}");
    // Nothing was promoted: the pointer keeps its provisional oid.
    let pointer = staged(&repo, "x.fastq");
    assert!(pointer.contains("size 5000"), "{pointer}");
}

#[test]
fn a_prefetch_while_the_store_is_down_fails_then_resumes_when_it_is_back() {
    std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "1");
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let mut world = World::with_prefetch();
    let body = content(300_000, 5);
    let url = source_object("down", "reads.bam", &body);
    let (repo, _) = drs_repo(&world, "d");
    world.drsctl_ok(&repo, &["add-url", &url]);
    // The store is unreachable from the daemon (a closed port).
    world.kill();
    std::env::remove_var("DRSD_PREFETCH_MAX_SIZE");
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    std::env::set_var("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
    world.start();
    let mut q = serde_json::Value::Null;
    // A refused connection may mend: the job waits for its next try
    // (`retrying`), it has not failed for good.
    wait_for("the job to fail and wait for its next try", || {
        q = queue(&world, &repo);
        q["retrying"].as_u64() == Some(1)
    });
    assert_eq!(q["failed"].as_u64(), Some(0), "{q}");
    assert!(
        q["open"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("reads.bam"),
        "{q}"
    );
    // Back: the next daemon retries and completes.
    world.kill();
    std::env::set_var("AWS_ENDPOINT_URL", endpoint);
    world.start();
    let promoted = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the retry and the promotion", || {
        staged(&repo, "reads.bam") == promoted
    });
}

#[test]
fn a_prefetch_killed_with_sigkill_resumes_after_a_restart() {
    // Slow enough to be caught midway: 256 MiB at 32 MiB/s.
    std::env::set_var("DRSD_PREFETCH_BANDWIDTH", "32M");
    let mut world = World::with_prefetch();
    let rel = format!("{}/big.bam", www_dir("kill"));
    let url = serve(&rel, b"");
    let served = Path::new(&std::env::var("DRSD_TEST_WWW").unwrap()).join(&rel);
    std::fs::File::options()
        .write(true)
        .open(&served)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let repo = world.repo("k");
    world.drsctl_ok(&repo, &["add-url", &url]);
    let partial = world.dir().join("pool/partial");
    let held = || -> u64 {
        std::fs::read_dir(&partial)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    wait_for("part of the download", || held() > 32 << 20);
    world.kill(); // SIGKILL
    let kept = held();
    assert!(kept > 32 << 20 && kept < 256 << 20, "{kept}");
    std::env::remove_var("DRSD_PREFETCH_BANDWIDTH");
    world.start();
    let zeros_oid = sha256_hex(&vec![0u8; 256 << 20]);
    let promoted = pointer_text(&zeros_oid, 256 << 20);
    wait_for("the resumed prefetch", || {
        staged(&repo, "big.bam") == promoted
    });
    assert_eq!(held(), 0, "the partial file was adopted into the pool");
}

#[test]
fn an_https_object_added_by_url_is_pushed_from_the_pool_and_cloned_elsewhere() {
    let world = World::with_prefetch();
    let body = content((1 << 20) + 3, 6);
    let url = serve(&format!("{}/sample.vcf", www_dir("https")), &body);
    let (repo, layout) = drs_repo(&world, "w");
    world.drsctl_ok(&repo, &["add-url", &url]);
    let content_oid = sha256_hex(&body);
    let promoted = pointer_text(&content_oid, body.len() as u64);
    wait_for("the staged pointer's promotion", || {
        staged(&repo, "sample.vcf") == promoted
    });
    // nginx's ETag is no md5: the pass computed none (a registration that
    // wants one reads it from the pool then, off the prefetch's path).
    let mirror = std::fs::read_to_string(repo.join(".git/lfs/foreign/registry.jsonl")).unwrap();
    let md5 = hex::encode(<md5::Md5 as sha2::Digest>::digest(&body));
    assert!(!mirror.contains(&md5), "{mirror}");
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "vcf"]));
    let (_remotes, bare) = bare_origin(&repo);
    // nginx is not the object remote's endpoint: no server-side copy, the
    // prefetched bytes go up from the pool.
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("copied server-side"), "{}", text(&out));
    in_layout(&layout, &content_oid, body.len() as u64);

    drop(world);
    assert_eq!(clone_elsewhere(&bare, "sample.vcf"), content_oid);
}

#[test]
fn an_object_added_with_no_fetch_stays_provisional_and_promote_does_not_wait_for_it() {
    let world = World::with_prefetch();
    let body = content(70_000, 7);
    let url = source_object("nofetch", "big.bam", &body);
    let (repo, _) = drs_repo(&world, "n");
    let added = world.drsctl_ok(&repo, &["add-url", "--no-fetch", &url]);
    let oid = added["added"][0]["oid"].as_str().unwrap().to_string();
    assert_eq!(added["added"][0]["provisional"], true, "{added}");
    std::thread::sleep(Duration::from_secs(1)); // time enough for a worker to take it
    let q = queue(&world, &repo);
    assert_eq!(
        (
            q["held"].as_u64(),
            q["done"].as_u64(),
            q["running"].as_u64()
        ),
        (Some(1), Some(0), Some(0)),
        "{q}"
    );
    assert_eq!(
        staged(&repo, "big.bam"),
        pointer_text(&oid, body.len() as u64)
    );
    let out = world.drsctl(&repo, &["--json", "promote", "--all", "--wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["waiting"][0]["state"], "skipped", "{report}");
}

#[test]
fn drsctl_fetch_queues_an_object_added_with_no_fetch_and_it_is_hashed_and_promoted() {
    let world = World::with_prefetch();
    let body = content(70_000, 9);
    let url = source_object("fetchlater", "late.bam", &body);
    let (repo, _) = drs_repo(&world, "f");
    world.drsctl_ok(&repo, &["add-url", "--no-fetch", &url]);
    std::thread::sleep(Duration::from_secs(1)); // a worker would have taken it by now
    assert_eq!(
        pointer_states(&world, &repo),
        [("late.bam".into(), "skipped".into())]
    );
    // A path that is no pointer added by URL (a typo) is refused by name,
    // by fetch and by promote, and queues nothing.
    for verb in ["fetch", "promote"] {
        let out = world.drsctl(&repo, &[verb, "late.bma"]);
        assert!(!out.status.success(), "{verb}: {}", text(&out));
        assert!(
            text(&out).contains("late.bma is not a pointer added by URL"),
            "{verb}: {}",
            text(&out)
        );
    }
    assert_eq!(
        pointer_states(&world, &repo),
        [("late.bam".into(), "skipped".into())]
    );
    let fetched = world.drsctl_ok(&repo, &["fetch", "late.bam"]);
    let state = fetched["fetching"][0]["state"].as_str().unwrap();
    assert!(["queued", "running"].contains(&state), "{fetched}");
    let out = world.drsctl(&repo, &["--json", "promote", "--all", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    let promoted = pointer_text(&sha256_hex(&body), body.len() as u64);
    assert_eq!(staged(&repo, "late.bam"), promoted);
}

#[test]
fn add_url_again_without_no_fetch_queues_the_skipped_object() {
    let world = World::with_prefetch();
    let body = content(70_000, 10);
    let url = source_object("addagain", "again.bam", &body);
    let (repo, _) = drs_repo(&world, "g");
    world.drsctl_ok(&repo, &["add-url", "--no-fetch", &url]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        pointer_states(&world, &repo),
        [("again.bam".into(), "skipped".into())]
    );
    world.drsctl_ok(&repo, &["add-url", &url]);
    let promoted = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the object's prefetch and promotion", || {
        staged(&repo, "again.bam") == promoted
    });
}

#[test]
fn promote_wait_off_a_terminal_prints_a_line_for_each_object_done() {
    // 2 MiB at 1 MiB/s: promote --wait is waiting when the worker hashes
    // the object and promotes its staged pointer itself.
    std::env::set_var("DRSD_PREFETCH_BANDWIDTH", "1M");
    let world = World::with_prefetch();
    let body = content(2 << 20, 11);
    let url = source_object("waitlines", "w.bam", &body);
    let (repo, _) = drs_repo(&world, "l");
    world.drsctl_ok(&repo, &["add-url", &url]);
    // Standard error is a pipe here, not a terminal.
    let out = world.drsctl(&repo, &["promote", "--all", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("drsctl: w.bam: ") && l.contains("promoted")),
        "{err}"
    );
}

#[test]
fn promote_wait_stops_when_drsctl_shutdown_stops_the_daemon_and_starts_no_other() {
    // 8 MiB at 1 MiB/s: the prefetch is still running at the shutdown.
    std::env::set_var("DRSD_PREFETCH_BANDWIDTH", "1M");
    let world = World::with_prefetch();
    let body = content(8 << 20, 12);
    let url = source_object("waitstop", "slow.bam", &body);
    let (repo, _) = drs_repo(&world, "s");
    world.drsctl_ok(&repo, &["add-url", &url]);
    let waiting = Command::new(drsd_e2e::bin("drsctl"))
        .current_dir(&repo)
        .args(["promote", "--all", "--wait"])
        .envs(world.env())
        .env("DRSD_NO_AUTOSTART", "0")
        .env("DRSD_BIN", drsd_e2e::bin("drsd"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    world.drsctl_ok(&repo, &["shutdown"]);
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("no new daemon was started"),
        "{}",
        text(&out)
    );
    let socket = world.dir().join("run/drsd.sock");
    assert!(
        !socket.exists(),
        "a daemon serves {} again",
        socket.display()
    );
}

#[test]
fn a_daemon_started_on_demand_outlives_its_idle_timeout_while_it_prefetches_then_stops() {
    // 3 MiB at 1 MiB/s: the prefetch outlasts a 1 s idle timeout.
    std::env::set_var("DRSD_PREFETCH_BANDWIDTH", "1M");
    std::env::set_var("DRSD_IDLE_TIMEOUT", "1");
    let mut world = World::with_prefetch();
    world.kill(); // the clients below start their own
    let body = content(3 << 20, 8);
    let url = serve(&format!("{}/slow.cram", www_dir("idle")), &body);
    let repo = world.repo("i");
    let on_demand = |args: &[&str]| -> serde_json::Value {
        let out = Command::new(drsd_e2e::bin("drsctl"))
            .current_dir(&repo)
            .arg("--json")
            .args(args)
            .envs(world.env())
            .env("DRSD_NO_AUTOSTART", "0")
            .env("DRSD_BIN", drsd_e2e::bin("drsd"))
            .output()
            .unwrap();
        assert!(out.status.success(), "drsctl {args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    on_demand(&["add-url", &url]);
    let status = on_demand(&["status"]);
    assert_eq!(status["idle_timeout_secs"], 1, "{status}");
    let first = status["pid"].as_u64().unwrap() as u32;
    std::thread::sleep(Duration::from_millis(2500));
    assert!(alive(first), "stopped while its prefetch ran");
    let promoted = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the prefetch and promotion", || {
        staged(&repo, "slow.cram") == promoted
    });
    wait_up_to(Duration::from_secs(15), "the idle daemon to stop", || {
        !alive(first)
    });
    let socket = world.dir().join("run/drsd.sock");
    assert!(!socket.exists(), "its socket is removed");
    let log = std::fs::read_to_string(socket.with_extension("log")).unwrap();
    assert!(log.contains("idle for 1s: stopping"), "{log}");
    // The next client starts another, which knows what the first did.
    let status = on_demand(&["status"]);
    assert_ne!(status["pid"].as_u64(), Some(first as u64));
    assert_eq!(status["queue"]["done"], 1, "{status}");
}

/// `git` on the PATH of this process (and so of the daemon it starts) that
/// appends its parent's pid to the returned log each time it runs, then
/// runs git.
fn counting_git(dir: &Path) -> std::path::PathBuf {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let (bin, log) = (dir.join("bin"), dir.join("git-runs.log"));
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$PPID $1\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real.trim()
    );
    let wrapper = bin.join("git");
    std::fs::write(&wrapper, script).unwrap();
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&wrapper, exec).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    std::env::set_var("PATH", path);
    log
}

/// The git runs logged whose parent was not this test (the daemon's).
fn daemon_runs(log: &Path) -> usize {
    let me = std::process::id().to_string();
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.split(' ').next() != Some(me.as_str()))
        .count()
}

#[test]
fn many_small_objects_hashed_together_are_promoted_in_batches_not_one_git_pass_each() {
    let counting = tempfile::tempdir().unwrap();
    let log = counting_git(counting.path());
    let world = World::with_prefetch();
    let (repo, _) = drs_repo(&world, "many");
    let n = 300;
    let dir = www_dir("batch");
    let mut list = String::new();
    let mut bodies = Vec::new();
    for i in 0..n {
        let mut body = content(4096, i as u8);
        body.extend_from_slice(i.to_string().as_bytes()); // each one distinct
        let url = serve(&format!("{dir}/f{i}"), &body);
        list.push_str(&format!("{url} d/f{i}\n"));
        bodies.push(body);
    }
    std::fs::write(world.dir().join("list"), list).unwrap();
    let list = world.dir().join("list");
    world.drsctl_ok(&repo, &["add-url", "--from", list.to_str().unwrap()]);
    let before = daemon_runs(&log);
    let want: Vec<String> = bodies
        .iter()
        .map(|b| pointer_text(&sha256_hex(b), b.len() as u64))
        .collect();
    wait_for("every pointer's promotion", || {
        (0..n).all(|i| staged(&repo, &format!("d/f{i}")) == want[i])
    });
    let during = daemon_runs(&log) - before;
    eprintln!("{during} git processes for {n} objects");
    // One promotion per object took five git processes or more (locate,
    // ls-files, ls-tree, cat-file, update-index): 1,500 here. Batched, a
    // batch takes those five, and there are a few batches.
    assert!(
        during < n / 3,
        "{during} git processes for {n} objects: not batched"
    );
}

/// A source object whose `x-amz-meta-sha256` names other bytes: add-url
/// takes the tag as the pointer's oid (a claim may name what to look for),
/// but the push must not copy it server-side on the tag's word, which
/// would leave the remote's key of that oid holding other bytes for every
/// later pusher to believe. Its bytes are read, do not match, and the
/// push is refused with nothing written under the key.
#[test]
fn a_source_whose_sha256_tag_lies_is_not_copied_and_the_push_is_refused() {
    let world = World::new();
    let body = content(300_000, 8);
    let other = content(300_000, 9);
    let lie = sha256_hex(&other);
    let bucket = format!("src-lie-{}", std::process::id());
    rt().block_on(async {
        s3().create_bucket(&bucket).await.unwrap();
        s3().put_with(
            &bucket,
            "cohort/sample.bam",
            Bytes::from(body.clone()),
            &[(drsd::stores::SHA256_META, &lie)],
        )
        .await
        .unwrap();
    });
    let (repo, layout) = drs_repo(&world, "lie");
    let url = format!("s3://{bucket}/cohort/sample.bam");
    let added = world.drsctl_ok(&repo, &["add-url", &url, "sample.bam"]);
    assert_eq!(added["added"][0]["oid_from"], "store_checksum", "{added}");
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "sample"]));
    let (_remotes, _bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(!out.status.success(), "the push went through: {said}");
    assert!(!said.contains("copied server-side"), "{said}");
    assert!(said.contains("sample.bam") && said.contains(&lie), "{said}");
    let key = layout.key(&lie.parse().unwrap());
    let there = rt().block_on(s3().head(&layout.bucket, &key)).unwrap();
    assert!(
        there.is_none(),
        "s3://{}/{key} was written: {there:?}",
        layout.bucket
    );
}

/// An object named by its content oid at add-url (`--sha256`, or a
/// correct checksum header) is still fetched: the push to an S3 remote,
/// which cannot copy an https source server-side, needs its bytes, and
/// the claim is checked against them on the way.
#[test]
fn an_https_object_added_with_its_sha256_is_fetched_checked_and_pushed() {
    let world = World::with_prefetch();
    let body = content(400_003, 10);
    let url = serve(&format!("{}/named.vcf", www_dir("named")), &body);
    let (repo, layout) = drs_repo(&world, "n");
    let oid = sha256_hex(&body);
    let added = world.drsctl_ok(&repo, &["add-url", "--sha256", &oid, &url, "named.vcf"]);
    assert_eq!(added["added"][0]["provisional"], false, "{added}");
    // Its bytes are read and checked in the background like any other's.
    wait_for("the check of the named object", || {
        queue(&world, &repo)["done"].as_u64() == Some(1)
    });
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "vcf"]));
    let (_remotes, bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    in_layout(&layout, &oid, body.len() as u64);
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "named.vcf"), oid);
}

/// The same with a wrong `--sha256`: the check fails the object's job
/// naming both hashes, and the push is refused.
#[test]
fn an_https_object_added_with_a_wrong_sha256_fails_its_check_and_is_not_pushed() {
    let world = World::with_prefetch();
    let body = content(50_001, 11);
    let url = serve(&format!("{}/wrong.vcf", www_dir("wrong")), &body);
    let (repo, layout) = drs_repo(&world, "x");
    let wrong = sha256_hex(b"not these bytes");
    world.drsctl_ok(&repo, &["add-url", "--sha256", &wrong, &url, "wrong.vcf"]);
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "vcf"]));
    let (_remotes, _bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("wrong.vcf") && said.contains(&sha256_hex(&body)),
        "{said}"
    );
    let key = layout.key(&wrong.parse().unwrap());
    assert!(rt()
        .block_on(s3().head(&layout.bucket, &key))
        .unwrap()
        .is_none());
}
