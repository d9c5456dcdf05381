//! `drs-bench`: the DRS and Indexd figures of docs/benchmarks.md, as
//! markdown on standard output. Real drsd, drsctl, git and git-lfs; Ceph RGW
//! as the object remote; the tests' DRS + Indexd server in this process
//! (it counts the requests). Debug binaries, like the other benchmarks.
//!
//!   tests/with-servers.sh cargo run -q -p drsd-e2e --bin drs-bench
//!
//! 1. One `drsctl add-url drs://...` (a content pointer from the DRS
//!    checksum): median of 21 runs.
//! 2. 1,000 `drs://` ids through `add-url --from`: with bulk requests (the
//!    server's `maxBulkRequestLength` 100) against one GET per id (bulk off),
//!    in seconds and round trips to the DRS server.
//! 3. A push of 1,000 objects Indexd already holds (registered by a first
//!    push to another object remote): its time, records added, objects sent.
//! 4. A push of 1,000 objects a commons holds under md5-only records (most
//!    Gen3 records) at readable RGW locations: objects uploaded (goal 0),
//!    records added (goal: one version each, none on a second push), time
//!    against the push of 3. (sha256 records).
//! 5. A push of 1 GiB to a Gen3 commons as the object remote (`drsctl init
//!    --gen3`), up through Fence's signed multipart URLs (parts of the
//!    `upload_part_size`, 64 MiB here), against `aws s3 cp` of the same
//!    file to Ceph RGW, alternating, the better of two runs each (`--only gen3`: this
//!    one alone). The commons' bucket is the test server's (bytes kept in
//!    memory, see tests/drs_server/mod.rs); the push also reads the file
//!    into the pool, hashes it (sha256 and md5) and completes the record.
//! 6. `--only team-urls` (issue 31): 1, 2 and 4 daemons of one team adding
//!    the same 100 URLs of 8 MiB at once: bytes fetched and time to all
//!    promoted (see [`team_urls`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drsd_e2e::drs_server::{DrsServer, NewRecord, ObjectSpec};
use drsd_e2e::{rt, spawn_ready};
use sha2::Digest;

const IDS: usize = 1000;

/// A binary built beside this one (`target/<profile>/NAME`).
fn bin(name: &str) -> PathBuf {
    std::env::current_exe()
        .expect("the bench knows its path")
        .with_file_name(name)
}

struct Bench {
    dir: tempfile::TempDir,
    daemon: Option<Child>,
}

impl Bench {
    fn env(&self) -> Vec<(&'static str, PathBuf)> {
        let d = self.dir.path();
        vec![
            ("DRSD_SOCKET", d.join("run/drsd.sock")),
            ("DRSD_POOL", d.join("pool")),
            ("DRSD_STATE_DIR", d.join("state")),
            ("DRSD_NO_AUTOSTART", "1".into()),
            ("DRSD_PREFETCH_MAX_SIZE", "0".into()),
        ]
    }

    fn run(&self, dir: &Path, program: &Path, args: &[&str]) -> String {
        let out = Command::new(program)
            .current_dir(dir)
            .args(args)
            .envs(self.env())
            .output()
            .expect("run a command");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{program:?} {args:?}: {said}");
        said
    }

    fn git(&self, dir: &Path, args: &[&str]) -> String {
        self.run(dir, Path::new("git"), args)
    }

    fn drsctl(&self, dir: &Path, args: &[&str]) -> String {
        self.run(dir, &bin("drsctl"), args)
    }

    fn repo(&self, name: &str) -> PathBuf {
        let repo = self.dir.path().join(name);
        std::fs::create_dir_all(&repo).unwrap();
        self.git(&repo, &["init", "-q"]);
        repo
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn setup(server: &DrsServer) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let home = drsd_e2e::fresh_home(dir.path());
    let (user, password) = server.indexd_login();
    std::fs::write(
        home.join(".netrc"),
        format!("machine 127.0.0.1 login {user} password {password}\n"),
    )
    .unwrap();
    std::env::set_var("DRSD_DRS_SERVERS", format!("dg.TEST={}", server.base_url()));
    let mut bench = Bench { dir, daemon: None };
    bench.git(bench.dir.path(), &["lfs", "install", "--skip-repo"]);
    bench.start();
    bench
}

impl Bench {
    /// A fresh daemon (it learns each DRS server's bulk support anew),
    /// logging to `drsd.log`.
    fn start(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap();
        let mut cmd = Command::new(bin("drsd"));
        cmd.args(["serve", "--ready"])
            .envs(self.env())
            .stderr(Stdio::from(log));
        self.daemon = Some(spawn_ready(&mut cmd));
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("drsd.log")
    }

    /// The seconds in the last log line containing `what` (`... in X s`).
    fn logged_secs(&self, what: &str) -> f64 {
        let log = std::fs::read_to_string(self.log()).unwrap();
        let line = log.lines().rev().find(|l| l.contains(what)).unwrap_or("");
        line.rsplit(" in ")
            .next()
            .and_then(|t| t.trim_end_matches(" s").trim().parse().ok())
            .unwrap_or(f64::NAN)
    }
}

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn main() {
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    match only.as_deref() {
        Some("gen3") => push_gib_to_commons(),
        Some("team-urls") => team_urls(),
        _ => {
            main_drs();
            push_gib_to_commons();
        }
    }
}

/// `--only team-urls` (issue 31): N = 1, 2, 4 daemons, each a machine of
/// one team (its own folders, socket and repo; one PostgreSQL database and
/// one shared folder between them), add the same 100 URLs of 8 MiB at
/// once (`drsctl add-url --from`), then each waits for all of them
/// promoted in its repo (`drsctl promote --all --wait`). The object server
/// (the tests' liar, telling no lies) counts the bytes of every GET it
/// answers. Goals: bytes fetched 1x the objects' whatever N; time to all
/// promoted at most 1.2x of N = 1's.
fn team_urls() {
    let admin = std::env::var("DRSD_TEST_PG_URL")
        .expect("DRSD_TEST_PG_URL: run under tests/with-servers.sh (it starts PostgreSQL)");
    let (objects, size) = (100usize, 8usize << 20);
    let body: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 9) as u8)
        .collect();
    println!(
        "| daemons | MiB fetched from the server | / the objects' MiB | s to all promoted on every daemon | / N = 1 | CPU s: daemons, drsctl, git / PostgreSQL / server | CPU s / 2 cores | s / the machine's limit |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut first = None;
    for n in [1usize, 2, 4] {
        let top = tempfile::tempdir().unwrap();
        drsd_e2e::fresh_home(top.path());
        let out = Command::new("git")
            .args(["lfs", "install", "--skip-repo"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let db = TeamBenchDb::create(&admin, n);
        let liar = drsd_e2e::liar::Liar::start(body.clone(), "bench-team-etag", LM);
        let shared = top.path().join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let nodes: Vec<TeamNode> = (0..n)
            .map(|i| TeamNode::start(top.path(), i, &db.url, &shared))
            .collect();
        let list = top.path().join("urls.txt");
        let lines: String = (0..objects)
            .map(|k| format!("{} d/{k}.bin\n", liar.url(&format!("o/{k}.bin"))))
            .collect();
        std::fs::write(&list, lines).unwrap();
        let list = list.to_str().unwrap();
        let cpu_before = Cpu::now();
        let start = Instant::now();
        std::thread::scope(|s| {
            for node in &nodes {
                s.spawn(move || {
                    node.drsctl(&["add-url", "--from", list]);
                    node.drsctl(&["promote", "--all", "--wait"]);
                });
            }
        });
        let secs = start.elapsed().as_secs_f64();
        // The daemons are waited for: their CPU, and their children's,
        // is then this process's children's.
        drop(nodes);
        std::thread::sleep(Duration::from_millis(500));
        let cpu = Cpu::now().since(&cpu_before);
        let fetched = gets_bytes(&liar, size as u64) as f64 / (1 << 20) as f64;
        let want = (objects * size) as f64 / (1 << 20) as f64;
        let base = *first.get_or_insert(secs);
        // The machine's limit for N: the time of N = 1, or all the CPU the
        // run took spread over both cores, whichever is longer.
        let spread = cpu.total() / 2.0;
        println!(
            "| {n} | {fetched:.0} | {:.2}x | {secs:.1} | {:.2}x | {:.1} / {:.1} / {:.1} | {spread:.1} | {:.2}x |",
            fetched / want,
            secs / base,
            cpu.ours,
            cpu.postgres,
            cpu.server,
            secs / base.max(spread)
        );
    }
}

const LM: &str = "Mon, 07 Dec 2026 08:00:00 GMT";

/// CPU seconds used so far: by this process's waited-for children and
/// theirs (the daemons, drsctl, git), by PostgreSQL (every `postgres`
/// process's own, and what the postmaster waited for), and by this process
/// (the object server's threads).
struct Cpu {
    ours: f64,
    postgres: f64,
    server: f64,
}

impl Cpu {
    fn now() -> Cpu {
        Cpu {
            ours: rusage(libc::RUSAGE_CHILDREN),
            postgres: postgres_cpu(),
            server: rusage(libc::RUSAGE_SELF),
        }
    }

    fn since(&self, before: &Cpu) -> Cpu {
        Cpu {
            ours: self.ours - before.ours,
            postgres: self.postgres - before.postgres,
            server: self.server - before.server,
        }
    }

    fn total(&self) -> f64 {
        self.ours + self.postgres + self.server
    }
}

fn rusage(who: libc::c_int) -> f64 {
    // SAFETY: `rusage` is plain data: all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given, which is ours.
    assert_eq!(unsafe { libc::getrusage(who, &mut usage) }, 0);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The CPU seconds of PostgreSQL's processes, from /proc: each one's own,
/// and the postmaster's waited-for children's (backends that exited).
fn postgres_cpu() -> f64 {
    let tick = rustix::param::clock_ticks_per_second() as f64;
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        if !comm.ends_with("(postgres") {
            continue;
        }
        // After the name: state, ppid, ... utime is the 12th, cutime 14th.
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let (utime, stime, cutime, cstime) = (fields[10], fields[11], fields[12], fields[13]);
        ticks += utime + stime + cutime + cstime;
    }
    ticks as f64 / tick
}

/// Bytes sent for the GETs the server answered: a whole body, or a range.
fn gets_bytes(liar: &drsd_e2e::liar::Liar, size: u64) -> u64 {
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

/// A database of the bench's own for one N, dropped after it.
struct TeamBenchDb {
    admin: String,
    name: String,
    url: String,
}

impl TeamBenchDb {
    fn create(admin: &str, n: usize) -> TeamBenchDb {
        let name = format!("drsd_bench_team_{}_{n}", std::process::id());
        let mut c = postgres::Client::connect(admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let mut url = url::Url::parse(admin).unwrap();
        url.set_path(&format!("/{name}"));
        TeamBenchDb {
            admin: admin.into(),
            name,
            url: url.to_string(),
        }
    }
}

impl Drop for TeamBenchDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// One machine of the team: its folders, its daemon, its repo.
struct TeamNode {
    env: Vec<(&'static str, String)>,
    repo: PathBuf,
    daemon: Child,
}

impl TeamNode {
    fn start(top: &Path, i: usize, db: &str, shared: &Path) -> TeamNode {
        let dir = top.join(format!("node{i}"));
        let repo = dir.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let out = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(out.status.success());
        let at = |p: &str| dir.join(p).display().to_string();
        let env = vec![
            ("DRSD_SOCKET", at("run/drsd.sock")),
            ("DRSD_POOL", at("pool")),
            ("DRSD_STATE_DIR", at("state")),
            ("DRSD_CONFIG", String::new()),
            ("XDG_CONFIG_HOME", at("config")),
            ("DRSD_NO_AUTOSTART", "1".into()),
            ("DRSD_TEAM_DB", db.into()),
            ("DRSD_TEAM_LARGE", shared.display().to_string()),
            ("DRSD_TEAM_NODE", format!("bench@node{i}")),
        ];
        let log = std::fs::File::create(dir.join("drsd.log")).unwrap();
        let mut cmd = Command::new(bin("drsd"));
        cmd.args(["serve", "--ready"])
            .envs(env.iter().cloned())
            .stderr(Stdio::from(log));
        let daemon = spawn_ready(&mut cmd);
        TeamNode { env, repo, daemon }
    }

    fn drsctl(&self, args: &[&str]) {
        let out = Command::new(bin("drsctl"))
            .current_dir(&self.repo)
            .args(args)
            .envs(self.env.iter().cloned())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "drsctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TeamNode {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn main_drs() {
    let server = DrsServer::start();
    for i in 0..IDS {
        // The compact form `dg.TEST:b-i` asks for Indexd's did `dg.TEST/b-i`.
        server.add_object(ObjectSpec::blob(&format!("dg.TEST/b-{i}"), object(i)));
    }
    let mut bench = setup(&server);
    println!("| measure | value |\n|---|---|");
    one_add_url(&bench, "loopback", "one");
    // A DRS server across a network: 20 ms added to every answer.
    server.set_latency(Duration::from_millis(20));
    one_add_url(&bench, "20 ms server latency", "one-far");
    for (latency, tag) in [(0, "near"), (20, "far")] {
        server.set_latency(Duration::from_millis(latency));
        bench.start();
        let bulk = from_list(&bench, &server, Some(100), &format!("bulk-{tag}"));
        bench.start();
        let single = from_list(&bench, &server, None, &format!("single-{tag}"));
        println!(
            "| {latency} ms latency: bulk vs one GET per id | DRS reads {:.1}x faster, whole add-url {:.1}x faster, {:.0}x fewer round trips |",
            single.1 / bulk.1,
            single.0 / bulk.0,
            single.2 as f64 / bulk.2 as f64
        );
    }
    server.set_latency(Duration::ZERO);
    let held_by_sha256 = push_held(&bench, &server);
    push_md5_only(&bench, &server, held_by_sha256);
}

fn object(i: usize) -> Vec<u8> {
    format!("bench object {i}\n").into_bytes()
}

fn one_add_url(bench: &Bench, how: &str, tag: &str) {
    let repo = bench.repo(tag);
    let times: Vec<f64> = (0..21)
        .map(|i| {
            let start = Instant::now();
            bench.drsctl(
                &repo,
                &[
                    "add-url",
                    &format!("drs://dg.TEST:b-{i}"),
                    &format!("o/{i}"),
                ],
            );
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    println!(
        "| one `drsctl add-url drs://...`, {how} (median of 21) | {:.1} ms |",
        median(times)
    );
}

/// `add-url --from` of every id into a fresh repo; (seconds, requests).
/// `add-url --from` of every id into a fresh repo; (seconds in all,
/// seconds reading the DRS objects, requests).
fn from_list(bench: &Bench, server: &DrsServer, bulk: Option<usize>, tag: &str) -> (f64, f64, u64) {
    server.set_bulk_limit(bulk);
    let repo = bench.repo(tag);
    let list: String = (0..IDS)
        .map(|i| format!("drs://dg.TEST:b-{i} d/{i}.txt\n"))
        .collect();
    let file = bench.dir.path().join(format!("{tag}.txt"));
    std::fs::write(&file, list).unwrap();
    server.reset_counts();
    let start = Instant::now();
    bench.drsctl(&repo, &["add-url", "--from", file.to_str().unwrap()]);
    let secs = start.elapsed().as_secs_f64();
    let reads = bench.logged_secs("DRS objects read");
    let c = server.counts();
    let trips = c.objects_get + c.bulk_post + c.service_info + c.objects_options;
    let kind = match bulk {
        Some(_) => "bulk (limit 100)",
        None => "no bulk: one GET each, 32 at once",
    };
    let latency = match tag.ends_with("far") {
        true => "20 ms latency",
        false => "loopback",
    };
    println!(
        "| {IDS} ids via --from, {kind}, {latency} | {secs:.2} s in all, {reads:.3} s reading DRS objects, {trips} requests ({} bulk POST, {} GET) |",
        c.bulk_post,
        c.objects_get
    );
    (secs, reads, trips.max(1))
}

/// Pushes `IDS` local objects to one object remote (registering them), then
/// the same objects from another repo to another object remote; returns the
/// second push's seconds.
fn push_held(bench: &Bench, server: &DrsServer) -> f64 {
    let pid = std::process::id();
    let mut times = Vec::new();
    for (n, name) in ["first", "second"].iter().enumerate() {
        let bucket = format!("bench-drs-{name}-{pid}");
        rt().block_on(s3().create_bucket(&bucket)).unwrap();
        let repo = bench.repo(&format!("push-{name}"));
        let remote = format!("s3://{bucket}/lfs");
        bench.drsctl(
            &repo,
            &["init", "--remote", &remote, "--indexd", server.base_url()],
        );
        bench.git(&repo, &["lfs", "track", "*.dat"]);
        for i in 0..IDS {
            std::fs::write(repo.join(format!("{i}.dat")), object(i)).unwrap();
        }
        bench.git(&repo, &["add", "."]);
        bench.git(&repo, &["commit", "-qm", "objects"]);
        let bare = bench.dir.path().join(format!("{name}.git"));
        bench.git(
            bench.dir.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        server.reset_counts();
        let start = Instant::now();
        let said = bench.git(&repo, &["push", "-q", bare.to_str().unwrap(), "main"]);
        let secs = start.elapsed().as_secs_f64();
        let pre_push = bench.logged_secs("pre-push");
        let c = server.counts();
        let sent = (0..IDS)
            .filter(|&i| {
                let oid: drsd::pool::Oid = hex::encode(<sha2::Sha256 as Digest>::digest(object(i)))
                    .parse()
                    .unwrap();
                let layout = drsd::stores::ObjectLayout::parse(&remote).unwrap();
                rt().block_on(s3().head(&bucket, &layout.key(&oid)))
                    .unwrap()
                    .is_some()
            })
            .count();
        let summary = said
            .lines()
            .find(|l| l.contains("Indexd:"))
            .unwrap_or("")
            .trim()
            .to_string();
        println!(
            "| push of {IDS} objects, {} | {secs:.2} s (`git push` in all), {pre_push:.2} s in the pre-push check; {} Indexd lookups, {} records added, {sent} objects in the object remote; hook: {summary} |",
            if n == 0 { "new to Indexd" } else { "all held by Indexd" },
            c.index_by_hash,
            c.index_post
        );
        times.push(secs);
    }
    println!(
        "| second push vs first | {:.1}x faster |",
        times[0] / times[1]
    );
    times[1]
}

fn legacy_object(i: usize) -> Vec<u8> {
    format!("legacy bench object {i}, registered by md5 only\n").into_bytes()
}

/// `IDS` objects a commons holds under md5-only records at their own RGW
/// locations (one PUT each: the ETag is the md5), pushed from a repo with
/// Indexd: what is uploaded, what is registered, and the time against
/// `held_by_sha256` (the same count held under sha256 records).
fn push_md5_only(bench: &Bench, server: &DrsServer, held_by_sha256: f64) {
    let pid = std::process::id();
    let legacy = format!("bench-drs-legacy-{pid}");
    let c = s3();
    rt().block_on(async {
        c.create_bucket(&legacy).await.unwrap();
        for i in 0..IDS {
            let key = format!("legacy/{i}.bam");
            c.put(&legacy, &key, legacy_object(i).into()).await.unwrap();
        }
    });
    for i in 0..IDS {
        let bytes = legacy_object(i);
        let mut hashes = std::collections::BTreeMap::new();
        hashes.insert(
            "md5".to_string(),
            hex::encode(<md5::Md5 as Digest>::digest(&bytes)),
        );
        server
            .add_record(NewRecord {
                form: "object".into(),
                size: bytes.len() as u64,
                hashes,
                urls: vec![format!("s3://{legacy}/legacy/{i}.bam")],
                file_name: Some(format!("{i}.bam")),
                authz: vec!["/programs/p/projects/q".into()],
                acl: Vec::new(),
                did: None,
            })
            .unwrap();
    }
    let bucket = format!("bench-drs-md5-{pid}");
    rt().block_on(c.create_bucket(&bucket)).unwrap();
    let remote = format!("s3://{bucket}/lfs");
    let repo = bench.repo("push-md5");
    bench.drsctl(
        &repo,
        &["init", "--remote", &remote, "--indexd", server.base_url()],
    );
    bench.git(&repo, &["lfs", "track", "*.bam"]);
    for i in 0..IDS {
        std::fs::write(repo.join(format!("{i}.bam")), legacy_object(i)).unwrap();
    }
    bench.git(&repo, &["add", "."]);
    bench.git(&repo, &["commit", "-qm", "objects"]);
    for round in ["first", "second"] {
        // Each round pushes every object anew (a fresh bare repo: all of
        // them are in the pushed range), as a second clone's push would.
        let bare = bench.dir.path().join(format!("md5-{round}.git"));
        let bare = bare.to_str().unwrap();
        bench.git(bench.dir.path(), &["init", "-q", "--bare", bare]);
        server.reset_counts();
        let start = Instant::now();
        bench.git(&repo, &["push", "-q", bare, "main"]);
        let secs = start.elapsed().as_secs_f64();
        let counts = server.counts();
        let uploaded = (0..IDS)
            .filter(|&i| {
                let oid: drsd::pool::Oid =
                    hex::encode(<sha2::Sha256 as Digest>::digest(legacy_object(i)))
                        .parse()
                        .unwrap();
                let layout = drsd::stores::ObjectLayout::parse(&remote).unwrap();
                rt().block_on(c.head(&bucket, &layout.key(&oid)))
                    .unwrap()
                    .is_some()
            })
            .count();
        println!(
            "| push of {IDS} objects held under md5-only records, {round} push | {secs:.2} s (`git push` in all, {:.2}x the push of objects held under sha256 records); {uploaded} objects uploaded, {} records added, {} versions added (sha256 published) |",
            secs / held_by_sha256,
            counts.index_post,
            counts.index_version,
        );
    }
}

const GIB: usize = 1 << 30;
/// How long after the commit the measured push is made: the daemon hashes
/// a commit's large objects ahead of their push to a commons meanwhile.
const SETTLE_SECS: u64 = 8;

/// 5.: `git push` of 1 GiB to a commons through Fence against `aws s3 cp`
/// of the same bytes to RGW, alternating, two runs each. The commons' Fence
/// signs into a bucket of the same RGW, as a deployed commons signs into its
/// store; a bare multipart upload through those signed URLs is the limit.
fn push_gib_to_commons() {
    const KEY: &str = "gen3-bench-api-key-5e4d3c2b1a09";
    // The commons' bucket is in RGW, as aws's is: Fence signs into it.
    let commons_bucket = format!("bench-commons-{}", std::process::id());
    rt().block_on(s3().create_bucket(&commons_bucket)).unwrap();
    let server = DrsServer::start_on_s3(&drsd_e2e::drs_server::S3Target::from_env(&commons_bucket));
    let mut stored = 0;
    server.set_api_key("key-1", KEY);
    server.set_auth(drsd_e2e::drs_server::Auth::Bearer);
    server.set_arborist(true);
    let dir = tempfile::tempdir().unwrap();
    drsd_e2e::fresh_home(dir.path());
    let key_file = dir.path().join("gen3.json");
    std::fs::write(
        &key_file,
        format!(r#"{{"api_key": "{KEY}", "key_id": "key-1"}}"#),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::env::set_var("DRSD_GEN3_CREDENTIALS", &key_file);
    std::env::set_var(
        "DRSD_DRS_SERVERS",
        format!("127.0.0.1:{}={}", server.port(), server.base_url()),
    );
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "64M");
    // RGW assembles the GiB at the complete, which a loaded machine can
    // keep past the 30 s a metadata call is given by default.
    std::env::set_var("DRSD_METADATA_TIMEOUT", "120");
    let mut bench = Bench { dir, daemon: None };
    bench.git(bench.dir.path(), &["lfs", "install", "--skip-repo"]);
    bench.start();
    let bucket = format!("bench-gen3-{}", std::process::id());
    rt().block_on(s3().create_bucket(&bucket)).unwrap();
    let (mut ours, mut aws, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hashed_floor, mut md5_core) = (Vec::new(), Vec::new());
    let mut cold = Vec::new();
    for run in 0..2u8 {
        let bytes = gib(run);
        // The server's own limit: the same multipart upload through Fence
        // by a client that hashes nothing and reads from memory.
        server.reset_counts();
        let start = Instant::now();
        raw_fence_upload(&server, KEY, &bytes, &format!("raw-{run}.bam"), false);
        floor.push(start.elapsed().as_secs_f64());
        stored += GIB as u64;
        // The same with the hashing drsd cannot skip (the sha256 that shows
        // the bytes are the object, the md5 the record needs), each on a
        // thread of its own beside the upload.
        let start = Instant::now();
        raw_fence_upload(&server, KEY, &bytes, &format!("raw-hashed-{run}.bam"), true);
        hashed_floor.push(start.elapsed().as_secs_f64());
        stored += GIB as u64;
        assert_eq!(bucket_bytes(&commons_bucket), stored);
        // What one core does: the md5 of the whole, alone.
        let start = Instant::now();
        std::hint::black_box(md5::Md5::digest(&bytes));
        md5_core.push(start.elapsed().as_secs_f64());
        let file = bench.dir.path().join(format!("cp-{run}.bam"));
        std::fs::write(&file, &bytes).unwrap();
        let start = Instant::now();
        let target = format!("s3://{bucket}/cp-{run}.bam");
        let out = Command::new("aws")
            .args(["s3", "cp", "--quiet", file.to_str().unwrap(), &target])
            .output()
            .expect("aws (tests/ci/install-system-deps.sh installs it)");
        assert!(
            out.status.success(),
            "aws s3 cp: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        aws.push(start.elapsed().as_secs_f64());
        std::fs::remove_file(&file).unwrap();

        drop(bytes);
        // drsd: the push right after the commit (the md5 the record
        // registered first needs is still being hashed ahead), then, of
        // other bytes, the push of a commit made a while before (as a
        // steward commits, then pushes): the md5 hashed ahead is known.
        for (settle, times) in [(0, &mut cold), (SETTLE_SECS, &mut ours)] {
            let name = format!("gen3-{run}-{settle}");
            let bytes = gib(run + 2 * u8::from(settle > 0));
            let repo = bench.repo(&name);
            bench.drsctl(
                &repo,
                &[
                    "init",
                    "--gen3",
                    server.base_url(),
                    "--authz",
                    "/programs/p/projects/q",
                ],
            );
            bench.git(&repo, &["lfs", "track", "*.bam"]);
            std::fs::write(repo.join("big.bam"), &bytes).unwrap();
            drop(bytes);
            bench.git(&repo, &["add", "."]);
            bench.git(&repo, &["commit", "-qm", "big"]);
            std::thread::sleep(Duration::from_secs(settle));
            let bare = bench.dir.path().join(format!("{name}.git"));
            let bare = bare.to_str().unwrap();
            bench.git(bench.dir.path(), &["init", "-q", "--bare", bare]);
            server.reset_counts();
            let start = Instant::now();
            bench.git(&repo, &["push", "-q", bare, "main"]);
            times.push(start.elapsed().as_secs_f64());
            let counts = server.counts();
            stored += GIB as u64;
            assert_eq!(bucket_bytes(&commons_bucket), stored);
            // One record, registered under the content's did before the
            // bytes went up, its location set once they were read back.
            assert_eq!(
                (counts.index_post, counts.index_update),
                (1, 1),
                "{counts:?}"
            );
        }
    }
    // The better of two runs each: the machine's noise only slows a run.
    let best = |runs: Vec<f64>| runs.into_iter().fold(f64::INFINITY, f64::min);
    let (ours, aws, floor, cold) = (best(ours), best(aws), best(floor), best(cold));
    let (hashed_floor, md5_core) = (best(hashed_floor), best(md5_core));
    let mib = (GIB >> 20) as f64;
    println!(
        "| push of 1 GiB to a Gen3 commons through Fence-signed multipart (64 MiB parts), {SETTLE_SECS} s after its commit, vs `aws s3 cp` to RGW | drsd {ours:.2} s ({:.0} MiB/s) vs aws {aws:.2} s ({:.0} MiB/s): {:.2}x |",
        mib / ours,
        mib / aws,
        aws / ours
    );
    println!(
        "| the push right after the commit ({SETTLE_SECS} s sooner: the md5 hashed ahead still under way) | drsd {cold:.2} s ({:.0} MiB/s) vs aws {aws:.2} s: {:.2}x |",
        mib / cold,
        aws / cold
    );
    println!(
        "| the same push vs the limit of Fence over RGW (the same multipart upload through Fence-signed URLs from memory, nothing hashed, 3 parts at once) | drsd {ours:.2} s vs limit {floor:.2} s ({:.0} MiB/s): {:.2}x |",
        mib / floor,
        floor / ours
    );
    println!(
        "| the same push vs that upload with the sha256 and md5 drsd must compute, each on a thread beside it | drsd {ours:.2} s vs {hashed_floor:.2} s ({:.0} MiB/s): {:.2}x; aws vs it: {:.2}x |",
        mib / hashed_floor,
        hashed_floor / ours,
        hashed_floor / aws
    );
    println!(
        "| one core's md5 of the 1 GiB in memory, alone (the md5 of a whole object cannot be split) | {md5_core:.2} s ({:.0} MiB/s) |",
        mib / md5_core
    );
}

/// The bytes bucket `bucket` of the tests' RGW holds, as `aws` sums them.
fn bucket_bytes(bucket: &str) -> u64 {
    let out = Command::new("aws")
        .args([
            "s3",
            "ls",
            "--recursive",
            "--summarize",
            &format!("s3://{bucket}"),
        ])
        .output()
        .expect("aws (tests/ci/install-system-deps.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Total Size: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("aws s3 ls of {bucket}: {text}"))
}

/// A multipart upload of `bytes` through the commons' Fence as a client
/// that does nothing else would make it: token, init, a signed URL and a
/// PUT per 64 MiB part (three at once), complete. With `hash`, the sha256
/// and the md5 of the whole are computed meanwhile, each on a thread of its
/// own, and the upload completed once both are done.
fn raw_fence_upload(server: &DrsServer, key: &str, bytes: &[u8], name: &str, hash: bool) {
    use serde_json::{json, Value};
    let http = reqwest::blocking::Client::new();
    let base = server.base_url();
    let post = |path: &str, token: Option<&str>, body: Value| -> Value {
        let mut req = http.post(format!("{base}{path}")).json(&body);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().unwrap()
    };
    let token = post(
        "/user/credentials/api/access_token",
        None,
        json!({ "api_key": key }),
    );
    let token = token["access_token"].as_str().unwrap().to_string();
    let init = post(
        "/user/data/multipart/init",
        Some(&token),
        json!({ "file_name": name, "authz": ["/programs/p/projects/q"] }),
    );
    let (guid, upload) = (
        init["guid"].as_str().unwrap(),
        init["uploadId"].as_str().unwrap(),
    );
    let object_key = format!("{guid}/{name}");
    let parts: Vec<(u32, &[u8])> = bytes
        .chunks(64 << 20)
        .zip(1u32..)
        .map(|(c, n)| (n, c))
        .collect();
    let etags = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        if hash {
            s.spawn(|| std::hint::black_box(sha2::Sha256::digest(bytes)));
            s.spawn(|| std::hint::black_box(md5::Md5::digest(bytes)));
        }
        for lane in 0..3 {
            let (parts, etags, post, http) = (&parts, &etags, &post, &http);
            let (token, object_key) = (&token, &object_key);
            s.spawn(move || {
                for (number, chunk) in parts.iter().skip(lane).step_by(3) {
                    let signed = post(
                        "/user/data/multipart/upload",
                        Some(token),
                        json!({ "key": object_key, "uploadId": upload, "partNumber": number }),
                    );
                    let url = signed["presigned_url"].as_str().unwrap();
                    let resp = http.put(url).body(chunk.to_vec()).send().unwrap();
                    assert!(
                        resp.status().is_success(),
                        "part {number}: {}",
                        resp.status()
                    );
                    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
                    etags.lock().unwrap().push((*number, etag));
                }
            });
        }
    });
    let mut etags = etags.into_inner().unwrap();
    etags.sort();
    let parts: Vec<Value> = etags
        .into_iter()
        .map(|(n, e)| json!({ "PartNumber": n, "ETag": e }))
        .collect();
    post(
        "/user/data/multipart/complete",
        Some(&token),
        json!({ "key": object_key, "uploadId": upload, "parts": parts }),
    );
}

/// 1 GiB of bytes no other run shares.
fn gib(run: u8) -> Vec<u8> {
    let mut bytes = vec![0u8; GIB];
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(run);
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    bytes
}

fn s3() -> drsd::stores::S3Client {
    drsd::stores::S3Client::new(
        drsd::stores::S3Config::from_env().unwrap(),
        drsd::stores::S3Credentials::from_env().unwrap(),
    )
    .unwrap()
}
