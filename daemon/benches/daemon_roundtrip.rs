//! Daemon round trip (issue 3): a status request through the socket, p50 and
//! p99 over 1,000 requests, against spawning `git lfs version` (what a hook
//! pays today) in the same run; and the daemon's RSS, idle, with 100
//! watched repos. Run: `cargo bench -p drsd --bench daemon_roundtrip`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drsd_proto::{Client, Reply, Request};

const REQUESTS: usize = 1000;
const REPOS: usize = 100;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run").join("drsd.sock");
    let repos = make_repos(dir.path(), REPOS);
    let mut daemon = start_daemon(dir.path(), &socket);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pid = daemon.id();
    let mut rss = vec![("just started, no repos", rss_kib(pid))];
    let (kept, fresh) = runtime.block_on(async {
        let mut client = Client::connect(&socket, "bench").await.unwrap();
        for repo in &repos {
            client.repos_add(repo.clone()).await.unwrap();
        }
        // Idle: let the watcher and allocator settle before reading RSS.
        tokio::time::sleep(Duration::from_secs(3)).await;
        rss.push(("idle, 100 watched repos", rss_kib(pid)));
        let kept = time_status(&mut client).await;
        let fresh = time_fresh_connections(&socket).await;
        (kept, fresh)
    });
    std::thread::sleep(Duration::from_secs(3));
    rss.push(("idle again after the 2,000 requests", rss_kib(pid)));
    let spawn = time_git_lfs_version();
    stop(&mut daemon);
    report(&kept, &fresh, &spawn, &rss);
}

/// One repo with an LFS pointer committed, copied `n` times.
fn make_repos(dir: &Path, n: usize) -> Vec<PathBuf> {
    let template = dir.join("template");
    std::fs::create_dir_all(&template).unwrap();
    for args in [
        &["init", "-q"][..],
        &["lfs", "install", "--local"],
        &["lfs", "track", "*.bam"],
    ] {
        git(&template, args);
    }
    std::fs::write(template.join("reads.bam"), b"ACGT".repeat(4096)).unwrap();
    git(&template, &["add", "."]);
    git(&template, &["commit", "-q", "-m", "reads"]);
    (0..n)
        .map(|i| {
            let repo = dir.join(format!("repo-{i:03}"));
            let ok = Command::new("cp")
                .arg("-a")
                .arg(&template)
                .arg(&repo)
                .status()
                .unwrap();
            assert!(ok.success());
            repo
        })
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@drsd.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "git {args:?}");
}

fn start_daemon(dir: &Path, socket: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drsd"))
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--pool")
        .arg(dir.join("pool"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--ready")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim_end(), drsd_proto::READY_LINE);
    child
}

/// Status round trips on one kept connection.
async fn time_status(client: &mut Client) -> Vec<Duration> {
    for _ in 0..50 {
        client.call(Request::Status).await.unwrap(); // warm-up
    }
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let start = Instant::now();
        let reply = client.call(Request::Status).await.unwrap();
        times.push(start.elapsed());
        assert!(matches!(reply, Reply::Status(ref s) if s.repos.len() == REPOS));
    }
    times
}

/// Connect, hello, status, close: what one short-lived client process pays
/// on the socket.
async fn time_fresh_connections(socket: &Path) -> Vec<Duration> {
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let start = Instant::now();
        let mut client = Client::connect(socket, "bench").await.unwrap();
        client.call(Request::Status).await.unwrap();
        drop(client);
        times.push(start.elapsed());
    }
    times
}

fn time_git_lfs_version() -> Vec<Duration> {
    (0..REQUESTS)
        .map(|_| {
            let start = Instant::now();
            let out = Command::new("git")
                .args(["lfs", "version"])
                .output()
                .unwrap();
            let took = start.elapsed();
            assert!(out.status.success());
            took
        })
        .collect()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn stop(daemon: &mut Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    daemon.wait().unwrap();
}

/// Nearest-rank percentile.
fn pct(times: &[Duration], p: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn report(kept: &[Duration], fresh: &[Duration], spawn: &[Duration], rss: &[(&str, u64)]) {
    println!("| what ({REQUESTS} each) | p50 ms | p99 ms |");
    println!("| --- | ---: | ---: |");
    for (what, times) in [
        ("status, one kept connection", kept),
        ("connect + hello + status", fresh),
        ("spawn `git lfs version`", spawn),
    ] {
        println!(
            "| {what} | {} | {} |",
            ms(pct(times, 50.0)),
            ms(pct(times, 99.0))
        );
    }
    let ratio =
        |a: &[Duration], b: &[Duration], p| pct(b, p).as_secs_f64() / pct(a, p).as_secs_f64();
    println!();
    println!(
        "git lfs version / status round trip: {:.0}x at p50, {:.0}x at p99 (kept connection); {:.0}x at p50, {:.0}x at p99 (fresh connection)",
        ratio(kept, spawn, 50.0),
        ratio(kept, spawn, 99.0),
        ratio(fresh, spawn, 50.0),
        ratio(fresh, spawn, 99.0)
    );
    println!();
    println!("| daemon RSS (VmRSS) | MiB |");
    println!("| --- | ---: |");
    for (when, kib) in rss {
        println!("| {when} | {:.1} |", *kib as f64 / 1024.0);
    }
}
