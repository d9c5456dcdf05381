//! What a killed daemon or a full disk leaves behind, and how it is cleaned
//! up: multipart uploads aborted at the next start, a push that goes on
//! from the repo's copy when the pool's disk is full, partial downloads no
//! job will resume removed by gc. Real git, git-lfs, Ceph RGW.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use drsd::pool::Oid;
use drsd::remote::{ObjectLayout, S3Client};
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
