//! What a killed daemon or a full disk leaves behind, and how it is cleaned
//! up: multipart uploads aborted at the next start, a push that goes on
//! from the repo's copy when the pool's disk is full, partial downloads no
//! job will resume removed by gc. Real git, git-lfs, Ceph RGW.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use drsd::pool::Oid;
use drsd::stores::{ObjectLayout, S3Client};
use drsd_e2e::bin;

use super::lfs_transfer::{content, rt, s3, Daemon, World};

fn uploads(client: &S3Client, bucket: &str) -> Vec<(String, String)> {
    rt().block_on(client.list_uploads(bucket, "")).unwrap()
}

#[test]
fn a_multipart_upload_left_by_a_killed_daemon_is_aborted_at_the_next_start() {
    let world = World::new("mpu");
    let small_parts = [("DRSD_UPLOAD_PART_SIZE", "5M")];
    let mut daemon = Daemon::start_with(&world.dir("d1"), &small_parts);
    let (a, _) = world.source_repo(&daemon, &[("big.bin", content(5, 250 << 20))]);
    let client = s3();
    let mut push = Command::new("git")
        .arg("-C")
        .arg(&a)
        .args(["push", "-q", "origin", "main"])
        .envs(Daemon::env_of(&daemon.dir))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while uploads(&client, &world.bucket).is_empty() {
        assert!(Instant::now() < deadline, "no multipart upload began");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its record is written right after the store names the upload.
    std::thread::sleep(Duration::from_millis(300));
    daemon.child.kill().unwrap(); // SIGKILL, mid-upload
    daemon.child.wait().unwrap();
    assert!(
        !push.wait().unwrap().success(),
        "no push without its daemon"
    );
    assert!(
        !uploads(&client, &world.bucket).is_empty(),
        "the kill left the upload in the bucket (else this proves nothing)"
    );
    drop(daemon);

    let again = Daemon::start_with(&world.dir("d1"), &small_parts);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !uploads(&client, &world.bucket).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left-over uploads after the restart: {:?}",
            uploads(&client, &world.bucket)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    again.git(&a, &["push", "-q", "origin", "main"]);
    assert_eq!(uploads(&client, &world.bucket), Vec::new());
}

/// A tmpfs of `size` mounted at `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount a tmpfs (as root): {out:?}");
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_push_goes_on_from_the_repo_copy_when_the_pool_disk_is_full() {
    let world = World::new("full");
    let pool = world.dir("pool-on-tmpfs");
    let _fs = Tmpfs::mount(&pool, "1M");
    let daemon = Daemon::start_with(&world.dir("d1"), &[("DRSD_POOL", pool.to_str().unwrap())]);
    let data = content(3, 4 << 20);
    let (a, _) = world.source_repo(&daemon, &[("big.bin", data.clone())]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    let layout = ObjectLayout::parse(&world.remote_url).unwrap();
    let key = layout.key(&Oid::of(&data));
    let stored = rt()
        .block_on(s3().get_bytes(&world.bucket, &key, None))
        .unwrap();
    assert!(stored == data, "the remote holds the object's bytes");

    // Something only the pool can take says so, naming the pool.
    let file = world.dir("big.copy");
    std::fs::write(&file, &data).unwrap();
    let out = Command::new(bin("drsd"))
        .env("DRSD_POOL", &pool)
        .arg("put")
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.to_lowercase().contains("no space left") && err.contains(pool.to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn gc_removes_the_partial_downloads_no_job_will_resume() {
    let world = World::new("partials");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, _) = world.source_repo(&daemon, &[("x.bin", content(1, 1000))]);
    let partial_dir = world.dir("d1/pool/partial");
    let plant = |name: &str, age: Duration| {
        let path = partial_dir.join(name);
        std::fs::write(&path, vec![1u8; 3 << 20]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        path
    };
    let stale = plant(
        &format!("{}.part", Oid::of(b"gone")),
        Duration::from_secs(7200),
    );
    let busy = plant(&format!("{}.part", Oid::of(b"busy")), Duration::ZERO);
    let report: serde_json::Value =
        serde_json::from_str(&daemon.drsctl(&a, &["--json", "gc"])).unwrap();
    assert_eq!(
        (
            report["partials"]["files"].as_u64(),
            report["partials"]["bytes"].as_u64()
        ),
        (Some(1), Some(3 << 20)),
        "{report}"
    );
    assert!(!stale.exists(), "the partial no job owns is gone");
    assert!(busy.exists(), "a partial written just now may be in use");
}

/// A daemon, objects added by URL and promoted (add_url's world, with
/// nginx and a source bucket), for the cut promotions and the full pool.
mod by_url {
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::super::add_url::{git, pointer_text, serve, sha256_hex, text, www_dir, World};
    use super::super::foreign::{
        bare_origin, drs_repo, git_in, in_layout, ok, source_object, staged, wait_for,
    };
    use super::Tmpfs;

    /// The provisional pointers `drsctl status` lists in `repo`: (path, state).
    fn provisional(world: &World, repo: &Path) -> Vec<(String, String)> {
        let status = world.drsctl_ok(repo, &["status"]);
        let listed = status["provisional"]["pointers"].as_array().cloned();
        listed
            .unwrap_or_else(|| panic!("no provisional list: {status}"))
            .iter()
            .map(|p| {
                let field = |k: &str| p[k].as_str().unwrap_or_default().to_string();
                (field("path"), field("state"))
            })
            .collect()
    }

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 11) as u8)
            .collect()
    }

    /// An S3 object added by URL to a fresh repo with an object remote,
    /// with the daemon's prefetch held (so it stays provisional); returns
    /// the repo, its remote's layout, and the object's content oid and size.
    fn added_and_held(
        world: &mut World,
        tag: &str,
    ) -> (std::path::PathBuf, drsd::stores::ObjectLayout, String, u64) {
        std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "1");
        world.kill();
        world.start();
        let body = bytes(300_000, 4);
        let url = source_object(tag, "sample.bin", &body);
        let (repo, layout) = drs_repo(world, tag);
        world.drsctl_ok(&repo, &["add-url", &url]);
        git(&repo, &["add", ".gitattributes"]);
        std::env::remove_var("DRSD_PREFETCH_MAX_SIZE");
        (repo, layout, sha256_hex(&body), body.len() as u64)
    }

    #[test]
    fn a_promotion_cut_by_a_held_index_lock_is_finished_by_drsctl_promote_and_pushed() {
        let mut world = World::with_prefetch();
        let (repo, layout, oid, size) = added_and_held(&mut world, "cutlock");
        let provisional_text = staged(&repo, "sample.bin");
        let content_text = pointer_text(&oid, size);
        assert_ne!(provisional_text, content_text);

        // Another git holds the index past the promotion's wait: the worker
        // writes the content pointer in the work tree, then cannot stage it.
        let lock = repo.join(".git/index.lock");
        std::fs::write(&lock, b"").unwrap();
        world.kill();
        world.start();
        wait_for("the work tree's content pointer", || {
            std::fs::read_to_string(repo.join("sample.bin")).unwrap() == content_text
        });
        std::thread::sleep(Duration::from_secs(7)); // past the 5 s wait for the index
        std::fs::remove_file(&lock).unwrap();
        assert_eq!(
            staged(&repo, "sample.bin"),
            provisional_text,
            "the cut state"
        );
        assert_eq!(
            provisional(&world, &repo),
            [("sample.bin".to_string(), "hashed".to_string())]
        );

        // promote finishes the staging instead of calling the file changed.
        let report = world.drsctl_ok(&repo, &["promote", "--all"]);
        assert_eq!(report["changed"], serde_json::json!([]), "{report}");
        assert_eq!(staged(&repo, "sample.bin"), content_text, "{report}");
        assert!(provisional(&world, &repo).is_empty(), "nothing to promote");
        let (_remotes, _bare) = bare_origin(&repo);
        ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
        ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
        in_layout(&layout, &oid, size);
    }

    #[test]
    fn a_committed_pointer_left_half_promoted_by_a_kill_is_staged_at_the_next_start() {
        let mut world = World::with_prefetch();
        let (repo, layout, oid, size) = added_and_held(&mut world, "cutkill");
        ok(git_in(&world, &repo, &["commit", "-qm", "provisional"]));
        let content_text = pointer_text(&oid, size);
        // Hashed, but a committed pointer is promoted only when asked.
        world.kill();
        world.start();
        wait_for("the object hashed", || {
            provisional(&world, &repo) == [("sample.bin".to_string(), "hashed".to_string())]
        });
        // What `drsctl promote` killed -9 between its write and its staging
        // leaves: the content pointer in the work tree, the index as it was.
        world.kill();
        std::fs::write(repo.join("sample.bin"), &content_text).unwrap();
        world.start();
        wait_for("the staging finished at start", || {
            staged(&repo, "sample.bin") == content_text
        });
        assert!(provisional(&world, &repo).is_empty(), "nothing to promote");
        let (_remotes, _bare) = bare_origin(&repo);
        ok(git_in(&world, &repo, &["commit", "-qm", "promoted"]));
        ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
        in_layout(&layout, &oid, size);
    }

    /// `drsctl promote --all --wait` in `repo`: exit code and all it said;
    /// the test fails if it runs past `limit`.
    fn promote_wait(world: &World, repo: &Path, limit: Duration) -> (i32, String) {
        let mut child = Command::new(drsd_e2e::bin("drsctl"))
            .current_dir(repo)
            .args(["promote", "--all", "--wait"])
            .envs(world.env())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "promote --wait still waiting after {limit:?}: {}",
                    text(&out)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        (out.status.code().unwrap_or(-1), text(&out))
    }

    #[test]
    fn promote_wait_ends_with_no_space_naming_the_pool_when_its_disk_is_full_and_resumes_later() {
        let mut world = World::with_prefetch();
        let pool = world.dir().join("pool");
        world.kill();
        let fs = Tmpfs::mount(&pool, "8m");
        world.start();
        let body = bytes(20 << 20, 9);
        let url = serve(&format!("{}/big.bin", www_dir("full")), &body);
        let repo = world.repo("r");
        world.drsctl_ok(&repo, &["add-url", &url]);

        let started = Instant::now();
        let (code, said) = promote_wait(&world, &repo, Duration::from_secs(60));
        assert_eq!(code, 1, "{said}");
        assert!(
            said.contains("no_space") && said.contains(pool.to_str().unwrap()),
            "{said}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        let jobs = world.drsctl_ok(&repo, &["status"])["queue"].clone();
        assert_eq!(jobs["failed"].as_u64(), Some(1), "{jobs}");

        // Room made (the pool off the small disk): the next start takes the job up.
        world.kill();
        drop(fs);
        world.start();
        let (code, said) = promote_wait(&world, &repo, Duration::from_secs(120));
        assert_eq!(code, 0, "{said}");
        assert_eq!(
            staged(&repo, "big.bin"),
            pointer_text(&sha256_hex(&body), body.len() as u64)
        );
    }
}

#[test]
fn a_clone_and_a_git_lfs_pull_get_verified_bytes_when_the_pool_disk_is_full() {
    let world = World::new("fullget");
    let daemon = Daemon::start(&world.dir("d1"));
    let data = content(7, 20 << 20);
    let oid = Oid::of(&data);
    let (a, bare) = world.source_repo(&daemon, &[("big.bin", data.clone())]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    drop(daemon);

    // Another machine whose pool is on a disk too small for the object.
    let d2 = world.dir("d2");
    let _fs = Tmpfs::mount(&d2.join("pool"), "8m");
    let other = Daemon::start(&d2);
    let top = world.top.path();
    other.drsctl(top, &["clone", bare.to_str().unwrap(), "b"]);
    let b = top.join("b");
    assert!(
        std::fs::read(b.join("big.bin")).unwrap() == data,
        "the clone's file"
    );
    assert_eq!(other.git(&b, &["status", "--porcelain"]), "");

    let c = world.dir("c");
    let out = Command::new("git")
        .args(["clone", "-q", bare.to_str().unwrap(), c.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    other.drsctl(&c, &["init"]);
    other.git(&c, &["lfs", "pull"]);
    let got = std::fs::read(c.join("big.bin")).unwrap();
    assert_eq!(Oid::of(&got), oid, "the pulled file is the object");
    let left = std::fs::read_dir(c.join(".git/lfs/tmp"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with(".drsd-download-")
        })
        .count();
    assert_eq!(left, 0, "no download of ours left in lfs/tmp");
    drop(other); // before the tmpfs goes
}
