//! Pool benchmark, printed as the markdown tables in docs/benchmarks.md.
//!
//!     cargo bench -p drsd --bench pool [-- --large-mib N] [--only small|large|readout|team]
//!
//! `team-gc` (PostgreSQL too; `--gc-kv N --gc-large M`, default 1,000,000
//! and 10,000): gc of a lab's shared pool, 10 repos' roots on 2 nodes
//! (`pool/team_gc.rs`).
//!
//! `team` (PostgreSQL, in a database of its own on the server of
//! `DRSD_TEST_PG_URL`: run it under tests/with-servers.sh): the postgres kv
//! engine against sqlite at 4 KiB, one put at a time and in batches of 512;
//! the pg-lo engine against local files for one large put and ranged gets.
//!
//! Small blobs: puts/s and gets/s of the sqlite kv engine against the local
//! files engine at 1-256 KiB, each engine alone behind a pool, so puts pay
//! what the pool really pays (sha256 check, engine write, durability).
//! Large blobs: `Pool::put_file` of one file against `cp` of the same file.
//! Read-out: what leaving the pool for git costs with the sha256 check on
//! the way out against without it (hydrate's export, `drsd get`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsd::pg::PgServer;
use drsd::pool::{Backend, LocalEngine, Oid, PgKvEngine, PgLoEngine, Pool, SqliteEngine};
use rand::{Rng, SeedableRng};

#[path = "pool/team_gc.rs"]
mod team_gc;

const BUDGET: Duration = Duration::from_millis(1500);
const MAX_OPS: usize = 20_000;

fn main() {
    let large_mib: u64 = std::env::args()
        .skip_while(|a| a != "--large-mib")
        .nth(1)
        .map(|n| n.parse().expect("--large-mib N"))
        .unwrap_or(1024);
    let dir = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or("/var/tmp".into()))
        .expect("bench folder");
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    println!("{}", machine());
    if wants("small") {
        small_blobs(dir.path());
        concurrent_small_puts(dir.path());
    }
    if wants("large") {
        large_put_vs_cp(dir.path(), large_mib);
    }
    if wants("readout") {
        read_out_large(dir.path(), large_mib);
        read_out_small(dir.path());
    }
    if only.as_deref() == Some("team-gc") {
        let arg = |name: &str, default: usize| {
            std::env::args()
                .skip_while(|a| a != name)
                .nth(1)
                .map_or(default, |n| n.parse().expect("a count"))
        };
        let db = BenchDb::create();
        team_gc::team_gc(
            dir.path(),
            &db.url,
            arg("--gc-kv", 1_000_000),
            arg("--gc-large", 10_000),
        );
    }
    if only.as_deref() == Some("team") {
        let db = BenchDb::create();
        team_small(dir.path(), &db.url);
        team_large(dir.path(), &db.url, large_mib);
    }
    // The two halves of `team` alone.
    if only.as_deref() == Some("team-kv") {
        team_small(dir.path(), &BenchDb::create().url);
    }
    if only.as_deref() == Some("team-large") {
        team_large(dir.path(), &BenchDb::create().url, large_mib);
    }
}

/// A database of the bench's own on the tests' server, dropped at the end.
struct BenchDb {
    admin: String,
    name: String,
    url: String,
}

impl BenchDb {
    fn create() -> BenchDb {
        let admin = std::env::var("DRSD_TEST_PG_URL")
            .expect("DRSD_TEST_PG_URL: run the team bench under tests/with-servers.sh");
        let name = format!(
            "drsd_bench_{}_{}",
            std::process::id(),
            rand::random::<u32>()
        );
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        let url = format!("{base}/{name}");
        BenchDb { admin, name, url }
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Puts/s of `pool.put_many` in batches of `batch`.
fn batched_puts(pool: &Pool, len: usize, batch: usize) -> f64 {
    let mut blobs = Blobs::new(len);
    blobs.base[8] ^= 0x5a; // other contents than `measure` put in the same engine
    let (mut n, mut spent) = (0usize, Duration::ZERO);
    while spent < BUDGET * 2 && n < MAX_OPS * 4 {
        let owned: Vec<(Oid, Vec<u8>)> = (0..batch)
            .map(|_| {
                let (oid, bytes) = blobs.next();
                (oid, bytes.to_vec())
            })
            .collect();
        let entries: Vec<(Oid, &[u8])> = owned.iter().map(|(o, b)| (*o, &b[..])).collect();
        let t = Instant::now();
        let puts = pool.put_many(&entries).unwrap();
        spent += t.elapsed();
        assert!(puts.iter().all(|p| p.stored));
        n += batch;
    }
    n as f64 / spent.as_secs_f64()
}

fn team_small(dir: &Path, url: &str) {
    let server = PgServer::open(url).unwrap();
    let pg = || one_engine_pool(Arc::new(PgKvEngine::new(server.clone())), u64::MAX);
    println!("\n### Team kv: postgres (loopback, fsync on) vs sqlite, 4 KiB, one thread\n");
    println!("| what | sqlite /s | postgres /s | postgres / sqlite |");
    println!("|---|---|---|---|");
    let lite = measure(&sqlite_pool(dir, "team-1"), 4096);
    let post = measure(&pg(), 4096);
    let row = |what: &str, a: f64, b: f64| println!("| {what} | {a:.0} | {b:.0} | {:.2}× |", b / a);
    row("puts, one at a time", lite.puts, post.puts);
    row("gets, one at a time", lite.gets, post.gets);
    let lite = batched_puts(&sqlite_pool(dir, "team-512"), 4096, 512);
    let post = batched_puts(&pg(), 4096, 512);
    row("puts, batches of 512", lite, post);
    // The same on the table as it was before `toast_tuple_target = 8160`
    // (PostgreSQL's default: values past 2 KiB toasted), in a database of
    // its own, measured in the same run.
    let before = BenchDb::create();
    let old = PgServer::open(&before.url).unwrap();
    let old_pool = one_engine_pool(Arc::new(PgKvEngine::new(old.clone())), u64::MAX);
    old_pool.put(&Oid::of(b"x"), b"x").unwrap(); // makes the tables
    let mut c = postgres::Client::connect(&before.url, postgres::NoTls).unwrap();
    c.batch_execute("ALTER TABLE drsd_kv RESET (toast_tuple_target)")
        .unwrap();
    let lite = batched_puts(&sqlite_pool(dir, "team-512-b"), 4096, 512);
    let post = batched_puts(&old_pool, 4096, 512);
    row(
        "puts, batches of 512, table as before (toasted past 2 KiB)",
        lite,
        post,
    );
}

fn team_large(dir: &Path, url: &str, mib: u64) {
    let src = dir.join("team-large.bin");
    write_random(&src, mib);
    // Threshold 1, not 0: a streamed put into a pool of threshold 0 ends at
    // its empty in-memory prefix and stores nothing.
    let local = one_engine_pool(
        Arc::new(LocalEngine::open(&dir.join("large-team")).unwrap()),
        1,
    );
    // The shared folder's engine (on this machine's disk: no NFS here, so
    // this is what the engine adds, group modes and all, not the network).
    let shared = one_engine_pool(
        Arc::new(LocalEngine::open_shared(&dir.join("shared-team"), None).unwrap()),
        1,
    );
    let lo = one_engine_pool(
        Arc::new(PgLoEngine::open(url, &dir.join("team-spool")).unwrap()),
        1,
    );
    println!(
        "\n### Team large: shared-dir and pg-lo (loopback, fsync on) vs local files, {mib} MiB\n"
    );
    println!(
        "| what | local MiB/s | shared-dir MiB/s | pg-lo MiB/s | shared-dir / local | pg-lo / local |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rates = Vec::new();
    for pool in [&local, &shared, &lo] {
        run(&mut Command::new("sync"));
        let t = Instant::now();
        let put = pool.put_file(None, &src).unwrap();
        assert_eq!(put.len, mib << 20);
        let oid = put.oid;
        let put = mib as f64 / t.elapsed().as_secs_f64();
        // Whole value through 8 MiB ranges, then 200 random 1 MiB ranges.
        let t = Instant::now();
        let mut at = 0;
        while at < mib << 20 {
            let got = pool.read_range(&oid, at, 8 << 20).unwrap().unwrap().len();
            assert!(got > 0, "a range inside the value read nothing");
            at += got as u64;
        }
        let sequential = mib as f64 / t.elapsed().as_secs_f64();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let t = Instant::now();
        for _ in 0..200 {
            let offset = rng.gen_range(0..(mib << 20) - (1 << 20));
            assert_eq!(
                pool.read_range(&oid, offset, 1 << 20)
                    .unwrap()
                    .unwrap()
                    .len(),
                1 << 20
            );
        }
        let random = 200.0 / t.elapsed().as_secs_f64();
        // A whole get: a file handle (local), a spooled copy (pg-lo).
        let t = Instant::now();
        let blob = pool.get(&oid).unwrap().unwrap();
        std::io::copy(&mut blob.into_reader(), &mut std::io::sink()).unwrap();
        let get = mib as f64 / t.elapsed().as_secs_f64();
        pool.delete(&oid).unwrap();
        rates.push([put, sequential, random, get]);
    }
    let names = [
        "put_file (read, sha256, stage, commit)",
        "read_range, whole value in 8 MiB ranges",
        "read_range, random 1 MiB ranges (ranges/s)",
        "get and read through (pg-lo: spooled to a local file)",
    ];
    for (i, what) in names.iter().enumerate() {
        let (a, b, c) = (rates[0][i], rates[1][i], rates[2][i]);
        println!(
            "| {what} | {a:.0} | {b:.0} | {c:.0} | {:.2}× | {:.2}× |",
            b / a,
            c / a
        );
    }
    std::fs::remove_file(&src).unwrap();
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    format!(
        "machine: {} cores, {cpu}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}

/// A pool whose every put goes to `engine` (`threshold` picks the tier).
fn one_engine_pool(engine: Arc<dyn Backend>, threshold: u64) -> Pool {
    Pool::with_engines(engine.clone(), engine, threshold)
}

fn sqlite_pool(dir: &Path, tag: &str) -> Pool {
    let engine = SqliteEngine::open(&dir.join(format!("kv-{tag}.sqlite"))).unwrap();
    one_engine_pool(Arc::new(engine), u64::MAX)
}

fn local_pool(dir: &Path, tag: &str) -> Pool {
    let engine = LocalEngine::open(&dir.join(format!("large-{tag}"))).unwrap();
    one_engine_pool(Arc::new(engine), 0)
}

/// Distinct blobs of `len` bytes: a random base with a counter in front.
struct Blobs {
    base: Vec<u8>,
    n: u64,
}

impl Blobs {
    fn new(len: usize) -> Blobs {
        let mut base = vec![0u8; len];
        rand::rngs::StdRng::seed_from_u64(len as u64).fill(&mut base[..]);
        Blobs { base, n: 0 }
    }

    fn next(&mut self) -> (Oid, &[u8]) {
        self.n += 1;
        self.base[..8].copy_from_slice(&self.n.to_le_bytes());
        (Oid::of(&self.base), &self.base)
    }
}

struct Rates {
    puts: f64,
    gets: f64,
}

fn measure(pool: &Pool, len: usize) -> Rates {
    let mut blobs = Blobs::new(len);
    let mut oids = Vec::new();
    let mut spent = Duration::ZERO;
    while spent < BUDGET && oids.len() < MAX_OPS {
        let (oid, bytes) = blobs.next();
        let t = Instant::now();
        pool.put(&oid, bytes).unwrap();
        spent += t.elapsed();
        oids.push(oid);
    }
    let puts = oids.len() as f64 / spent.as_secs_f64();
    // Read back in a shuffled order, whole values, as a client would.
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for i in (1..oids.len()).rev() {
        oids.swap(i, rng.gen_range(0..=i));
    }
    let t = Instant::now();
    let mut n = 0;
    for oid in &oids {
        let value = pool.get(oid).unwrap().unwrap().to_vec().unwrap();
        assert_eq!(value.len(), len);
        n += 1;
        if t.elapsed() > BUDGET {
            break;
        }
    }
    let gets = n as f64 / t.elapsed().as_secs_f64();
    Rates { puts, gets }
}

fn small_blobs(dir: &Path) {
    println!("\n### Small blobs: sqlite kv engine vs local files engine (one thread)\n");
    println!("| size | sqlite puts/s | files puts/s | put ratio | sqlite gets/s | files gets/s | get ratio |");
    println!("|---|---|---|---|---|---|---|");
    for kib in [1usize, 4, 16, 64, 128, 256] {
        let len = kib * 1024;
        let kv = measure(&sqlite_pool(dir, &kib.to_string()), len);
        let files = measure(&local_pool(dir, &kib.to_string()), len);
        println!(
            "| {kib} KiB | {:.0} | {:.0} | {:.1}× | {:.0} | {:.0} | {:.1}× |",
            kv.puts,
            files.puts,
            kv.puts / files.puts,
            kv.gets,
            files.gets,
            kv.gets / files.gets
        );
    }
}

fn concurrent_puts(pool: &Pool, threads: usize, len: usize) -> f64 {
    let t = Instant::now();
    let done: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                s.spawn(move || {
                    let mut blobs = Blobs::new(len);
                    blobs.base[8] = w as u8;
                    let mut n = 0;
                    while t.elapsed() < BUDGET && n < MAX_OPS {
                        let (oid, bytes) = blobs.next();
                        pool.put(&oid, bytes).unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    done as f64 / t.elapsed().as_secs_f64()
}

fn concurrent_small_puts(dir: &Path) {
    println!("\n### 4 KiB puts from several threads at once\n");
    println!("| threads | sqlite puts/s | files puts/s | ratio |");
    println!("|---|---|---|---|");
    for threads in [1usize, 4, 16] {
        let tag = format!("c{threads}");
        let kv = concurrent_puts(&sqlite_pool(dir, &tag), threads, 4096);
        let files = concurrent_puts(&local_pool(dir, &tag), threads, 4096);
        println!("| {threads} | {kv:.0} | {files:.0} | {:.1}× |", kv / files);
    }
}

/// Best of `runs`, each started with nothing dirty in the page cache, so no
/// run pays for the writeback of the one before.
fn best_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs)
        .map(|_| {
            run(&mut Command::new("sync"));
            f()
        })
        .min()
        .unwrap()
}

fn run(cmd: &mut Command) {
    let status = cmd.status().expect("run baseline command");
    assert!(status.success(), "{cmd:?} failed");
}

fn large_put_vs_cp(dir: &Path, mib: u64) {
    let src = dir.join("source.bin");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut buf = vec![0u8; 1 << 20];
        for _ in 0..mib {
            rng.fill(&mut buf[..]);
            f.write_all(&buf).unwrap();
        }
    }
    run(Command::new("cat")
        .arg(&src)
        .stdout(std::process::Stdio::null())); // warm the cache
    let dst = dir.join("copy.bin");
    let cp = best_of(3, || {
        let _ = std::fs::remove_file(&dst);
        let t = Instant::now();
        run(Command::new("cp").arg(&src).arg(&dst));
        t.elapsed()
    });
    let cp_sync = best_of(3, || {
        let _ = std::fs::remove_file(&dst);
        let t = Instant::now();
        run(Command::new("cp").arg(&src).arg(&dst));
        run(Command::new("sync").arg(&dst));
        t.elapsed()
    });
    let _ = std::fs::remove_file(&dst);
    let sha = best_of(3, || {
        let t = Instant::now();
        run(Command::new("openssl")
            .args(["dgst", "-sha256"])
            .arg(&src)
            .stdout(std::process::Stdio::null()));
        t.elapsed()
    });
    let pool = Pool::open(&dir.join("pool-large"), None).unwrap();
    let put = best_of(3, || {
        let t = Instant::now();
        let put = pool.put_file(None, &src).unwrap();
        let spent = t.elapsed();
        assert!(put.stored);
        pool.delete(&put.oid).unwrap();
        spent
    });
    let rate = |d: Duration| mib as f64 / d.as_secs_f64();
    println!("\n### Large put: {mib} MiB file, page cache warm, best of 3\n");
    println!("| what | MiB/s | pool put speed / this |");
    println!("|---|---|---|");
    println!(
        "| `Pool::put_file` (read, sha256, stage, fsync, rename) | {:.0} | |",
        rate(put)
    );
    let baselines = [
        ("`cp`", cp),
        ("`cp` then `sync FILE` (durable, as the pool is)", cp_sync),
        ("`openssl dgst -sha256` (hashing alone: the ceiling)", sha),
    ];
    for (what, d) in baselines {
        println!("| {what} | {:.0} | {:.2}× |", rate(d), rate(put) / rate(d));
    }
}

fn write_random(path: &Path, mib: u64) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(mib);
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        rng.fill(&mut buf[..]);
        f.write_all(&buf).unwrap();
    }
}

/// Best of three runs of `f`, which gets the run's number and a fresh
/// destination path.
fn best_placing(out: &Path, mut f: impl FnMut(usize, &Path)) -> Duration {
    (0..3)
        .map(|i| {
            let dest = out.join(format!("dest-{i}"));
            let t = Instant::now();
            f(i, &dest);
            let spent = t.elapsed();
            let _ = std::fs::remove_file(&dest);
            spent
        })
        .min()
        .unwrap()
}

/// One large entry leaving the pool: hard-linked into a repo (hydrate, the
/// transfer agent) and streamed out (`drsd get`), with and without the check.
fn read_out_large(dir: &Path, mib: u64) {
    let pool_dir = dir.join("pool-readout");
    let src = dir.join("readout.bin");
    write_random(&src, mib);
    let oid = Pool::open(&pool_dir, None)
        .unwrap()
        .put_file(None, &src)
        .unwrap()
        .oid;
    std::fs::remove_file(&src).unwrap();
    let out = dir.join("readout-repo");
    std::fs::create_dir_all(&out).unwrap();
    // A pool opened afresh has verified nothing: a restarted daemon, or
    // `drsd get` in its own process.
    let fresh = || Pool::open(&pool_dir, None).unwrap();
    let pooled = fresh()
        .get(&oid)
        .unwrap()
        .unwrap()
        .path()
        .unwrap()
        .to_path_buf();
    let sink = |blob: drsd::pool::Blob| {
        std::io::copy(&mut blob.into_reader(), &mut std::io::sink()).unwrap();
    };
    let pools = || [fresh(), fresh(), fresh()];
    let link = best_placing(&out, |_, dest| std::fs::hard_link(&pooled, dest).unwrap());
    let fresh_pools = pools();
    let first = best_placing(&out, |i, dest| {
        fresh_pools[i].export(&oid, dest).unwrap().unwrap();
    });
    let warm = fresh();
    warm.export(&oid, &out.join("first")).unwrap();
    let again = best_placing(&out, |_, dest| {
        warm.export(&oid, dest).unwrap().unwrap();
    });
    let get = best_placing(&out, |_, _| sink(warm.get(&oid).unwrap().unwrap()));
    let fresh_pools = pools();
    let get_checked = best_placing(&out, |i, _| {
        sink(fresh_pools[i].get_verified(&oid).unwrap().unwrap())
    });
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("\n### Read-out of one {mib} MiB entry, page cache warm, best of 3\n");
    println!("| what | ms | MiB/s |");
    println!("|---|---|---|");
    let rows = [
        ("hard link, no check (before)", link),
        (
            "hydrate's export, first read-out: sha256, then hard link",
            first,
        ),
        (
            "hydrate's export again, verified since last written: stat, link",
            again,
        ),
        ("`drsd get` to /dev/null, no check (before)", get),
        (
            "`drsd get` to /dev/null, checked: sha256 pass, then the copy",
            get_checked,
        ),
    ];
    for (what, d) in rows {
        println!(
            "| {what} | {:.1} | {:.0} |",
            ms(d),
            mib as f64 / d.as_secs_f64()
        );
    }
}

/// Many small (kv) entries written out, as hydrate writes them into a repo,
/// with the sha256 check on the way out and without.
fn read_out_small(dir: &Path) {
    use std::io::Write;
    let pool = Pool::open(&dir.join("pool-readout-small"), None).unwrap();
    let out = dir.join("readout-small");
    println!("\n### Read-out of 2,000 small entries (written into a folder), best of 5\n");
    println!("| size | no check, ms | checked, ms | check's share |");
    println!("|---|---|---|---|");
    for kib in [1usize, 16, 100] {
        let mut blobs = Blobs::new(kib << 10);
        let oids: Vec<Oid> = (0..2000)
            .map(|_| {
                let (oid, value) = blobs.next();
                pool.put(&oid, value).unwrap().oid
            })
            .collect();
        let time = |check: bool| {
            let _ = std::fs::remove_dir_all(&out);
            std::fs::create_dir_all(&out).unwrap();
            let t = Instant::now();
            for (i, oid) in oids.iter().enumerate() {
                let dest = out.join(i.to_string());
                if check {
                    pool.export(oid, &dest).unwrap().unwrap();
                } else {
                    let bytes = pool.get(oid).unwrap().unwrap().to_vec().unwrap();
                    let mut f = std::fs::File::options()
                        .write(true)
                        .create_new(true)
                        .open(&dest)
                        .unwrap();
                    f.write_all(&bytes).unwrap();
                }
            }
            t.elapsed()
        };
        // Alternated, best of five each: a busy machine's noise hits both.
        let (mut plain, mut checked) = (Duration::MAX, Duration::MAX);
        for _ in 0..5 {
            plain = plain.min(time(false));
            checked = checked.min(time(true));
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {kib} KiB | {:.0} | {:.0} | {:+.0}% |",
            ms(plain),
            ms(checked),
            (checked.as_secs_f64() / plain.as_secs_f64() - 1.0) * 100.0
        );
    }
}
