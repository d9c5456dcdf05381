//! Prefetches that cannot succeed: a 404, a content that does not match
//! its ETag. They end (`failed`, with the reason) instead of being retried
//! forever, `drsctl promote --all --wait` returns naming them, and
//! `--retry` asks again. The server is a tiny one in this process, which
//! says exactly what each test needs and counts what it is asked.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use md5::{Digest, Md5};

use super::add_url::{text, World};

/// What the tiny server answers a GET with.
#[derive(Clone, Copy)]
pub(super) enum Get {
    /// The body, in full or the range asked, under `etag`.
    Body(&'static [u8]),
    NotFound,
}

/// A server on loopback for one object: a HEAD says its size and `etag`,
/// a GET answers as `get` says. Counts GETs.
pub(super) struct Tiny {
    port: u16,
    gets: Arc<AtomicUsize>,
}

impl Tiny {
    pub(super) fn start(etag: String, size: usize, get: Get) -> Tiny {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let gets = Arc::new(AtomicUsize::new(0));
        let counted = gets.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push(line);
                }
                let method = head
                    .first()
                    .map(|l| l.split(' ').next().unwrap_or("").to_string());
                let reply = match (method.as_deref(), get) {
                    (Some("HEAD"), _) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\netag: \"{etag}\"\r\nconnection: close\r\n\r\n"
                    )
                    .into_bytes(),
                    (Some("GET"), Get::Body(body)) => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let mut out = format!(
                            "HTTP/1.1 206 Partial Content\r\ncontent-length: {}\r\ncontent-range: bytes 0-{}/{}\r\netag: \"{etag}\"\r\nconnection: close\r\n\r\n",
                            body.len(),
                            body.len() - 1,
                            body.len()
                        )
                        .into_bytes();
                        out.extend_from_slice(body);
                        out
                    }
                    _ => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = conn.write_all(&reply);
            }
        });
        Tiny { port, gets }
    }

    pub(super) fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }
}

pub(super) const BODY: &[u8] = b"reads that are not what the ETag says they are\n";

/// An md5-shaped ETag that is not the md5 of [`BODY`].
pub(super) fn wrong_md5() -> String {
    hex::encode(Md5::digest(b"some other content"))
}

fn queue(world: &World, repo: &Path) -> serde_json::Value {
    world.drsctl_ok(repo, &["status"])["queue"].clone()
}

fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `drsctl promote --all --wait ARGS` in `repo`, given at most `limit`:
/// its exit code, standard output and standard error.
fn promote_wait(
    world: &World,
    repo: &Path,
    extra: &[&str],
    limit: Duration,
) -> (i32, String, String) {
    let mut child = Command::new(drsd_e2e::bin("drsctl"))
        .current_dir(repo)
        .args(["promote", "--all", "--wait"])
        .args(extra)
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
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn promote_all_wait_ends_with_exit_1_naming_an_object_whose_md5_mismatches() {
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let world = World::with_prefetch();
    let server = Tiny::start(wrong_md5(), BODY.len(), Get::Body(BODY));
    let repo = world.repo("m");
    world.drsctl_ok(&repo, &["add-url", &server.url("bad.bam")]);

    let (code, stdout, stderr) = promote_wait(&world, &repo, &[], Duration::from_secs(90));
    assert_eq!(code, 1, "{stdout}{stderr}");
    // The error names the object and why; off a terminal, a line per change.
    assert!(
        stderr.contains("bad.bam") && stderr.contains("md5") && stderr.contains("--retry"),
        "{stderr}"
    );
    assert!(stderr.contains("drsctl: bad.bam: failed"), "{stderr}");
    assert!(stdout.contains("failed   bad.bam"), "{stdout}");
    // A bounded number of tries, then no more.
    assert_eq!(server.gets(), 3, "three tries for a content mismatch");
    let q = queue(&world, &repo);
    assert_eq!(
        (q["failed"].as_u64(), q["retrying"].as_u64()),
        (Some(1), Some(0)),
        "{q}"
    );
    assert_eq!(q["open"][0]["state"], "failed", "{q}");
    assert_eq!(q["open"][0]["attempts"], 3, "{q}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(server.gets(), 3, "a failed job is not taken up again");

    // --retry asks again, and the answer is the same.
    let (code, _, stderr) = promote_wait(&world, &repo, &["--retry"], Duration::from_secs(90));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("bad.bam") && stderr.contains("md5"),
        "{stderr}"
    );
    assert_eq!(server.gets(), 6, "--retry gives the job its tries again");
}

#[test]
fn a_prefetch_answered_404_is_asked_once_and_fails_for_good() {
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let world = World::with_prefetch();
    let server = Tiny::start(wrong_md5(), BODY.len(), Get::NotFound);
    let repo = world.repo("g");
    world.drsctl_ok(&repo, &["add-url", &server.url("gone.bam")]);
    let mut q = serde_json::Value::Null;
    wait_for(Duration::from_secs(60), "the job to fail", || {
        q = queue(&world, &repo);
        q["failed"].as_u64() == Some(1)
    });
    let why = q["open"][0]["error"].as_str().unwrap_or_default();
    assert!(why.contains("gone.bam") && why.contains("404"), "{q}");
    // Backoff is 1 s: a job retried would have asked again by now.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(server.gets(), 1, "a 404 is asked once");
    let q = queue(&world, &repo);
    assert_eq!(q["failed"].as_u64(), Some(1), "{q}");
}
