//! `--only team-gc [--gc-kv N] [--gc-large M]`: gc of a lab's shared pool
//! (issue 31): N kv entries (postgres kv) and M large ones (a shared folder),
//! 10 repos' roots published by 2 nodes, 90% of the entries live, gc on one
//! node with no grace, against the tests' PostgreSQL (DRSD_TEST_PG_URL).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use drsd::ops::gc::{collect, GcTeam};
use drsd::pg::PgServer;
use drsd::pool::{LocalEngine, Oid, PgKvEngine, PgPins, Pool};

const THRESHOLD: u64 = 1024;
const REPOS: usize = 10;

fn kv_value(i: usize) -> String {
    format!("kv {i}")
}

fn large_value(i: usize) -> Vec<u8> {
    let tag = format!("large {i} ");
    tag.as_bytes().repeat(THRESHOLD as usize / tag.len() + 1)
}

/// Entry `i` is garbage when `i % 10 == 0`; else it is live in repo
/// `(i / 10) % 10`, repos 0-4 on node-b and 5-9 on node-a.
fn repo_of(i: usize) -> Option<usize> {
    (i % 10 != 0).then_some((i / 10) % REPOS)
}

pub fn team_gc(dir: &Path, url: &str, kv: usize, large: usize) {
    let server = PgServer::open(url).unwrap();
    let files = dir.join("team-gc-large");
    let pool = Pool::with_engines(
        Arc::new(PgKvEngine::new(server.clone())),
        Arc::new(LocalEngine::open_shared(&files, None).unwrap()),
        THRESHOLD,
    )
    .with_pins(Arc::new(PgPins::new(server.clone(), "node-a").unwrap()));
    let t = Instant::now();
    let mut roots: Vec<HashSet<Oid>> = vec![HashSet::new(); REPOS];
    fill_kv(&pool, url, kv, &mut roots);
    fill_large(&files, large, &mut roots);
    let filled = t.elapsed();

    let (a, b) = (
        GcTeam::postgres(&server, "node-a").unwrap(),
        GcTeam::postgres(&server, "node-b").unwrap(),
    );
    let repo = |r: usize| format!("/home/{}/repo-{r}", if r < 5 { "b" } else { "a" });
    let t = Instant::now();
    for (r, oids) in roots.iter().enumerate().take(5) {
        b.roots.publish("node-b", &repo(r), oids).unwrap();
    }
    let published = t.elapsed();
    let own = || Ok((5..REPOS).map(|r| (repo(r), roots[r].clone())).collect());
    let t = Instant::now();
    let first = collect(&pool, &a, own, false, 0).unwrap();
    let first_time = t.elapsed();
    let expect = kv / 10 + large / 10;
    assert_eq!(first.swept.deleted.len(), expect, "garbage removed");
    let t = Instant::now();
    let second = collect(&pool, &a, own, false, 0).unwrap();
    let second_time = t.elapsed();
    assert!(second.swept.deleted.is_empty());
    let dry = Instant::now();
    collect(&pool, &a, own, true, 0).unwrap();
    let dry = dry.elapsed();

    println!("\n### gc of a shared pool: {kv} kv + {large} large entries, 10 repos on 2 nodes\n");
    println!("| step | s |");
    println!("|---|---|");
    println!(
        "| fill (server-side insert, files written; not gc) | {:.1} |",
        filled.as_secs_f64()
    );
    println!(
        "| node-b publishes its 5 repos' roots (first time) | {:.1} |",
        published.as_secs_f64()
    );
    println!(
        "| gc on node-a, `--grace 0`: publish its 5 repos, read all roots, records, delete {} | {:.1} |",
        first.swept.deleted.len(),
        first_time.as_secs_f64()
    );
    println!(
        "| the same gc again (nothing to delete) | {:.1} |",
        second_time.as_secs_f64()
    );
    println!("| a dry run | {:.1} |", dry.as_secs_f64());
    println!("\nlive oids named by roots: {}", first.live);
}

/// The kv rows, made by the server itself (value `kv {i}`, key its sha256).
fn fill_kv(pool: &Pool, url: &str, n: usize, roots: &mut [HashSet<Oid>]) {
    // The engine makes its tables on its first write.
    let first = kv_value(0);
    pool.put(&Oid::of(first.as_bytes()), first.as_bytes())
        .unwrap();
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.execute(
        "INSERT INTO drsd_kv (key, value) SELECT sha256(v), v FROM \
         (SELECT convert_to('kv ' || i, 'UTF8') v FROM generate_series(1, $1::bigint) i) s \
         ON CONFLICT DO NOTHING",
        &[&(n as i64 - 1)],
    )
    .unwrap();
    for i in 0..n {
        if let Some(r) = repo_of(i) {
            roots[r].insert(Oid::of(kv_value(i).as_bytes()));
        }
    }
}

/// The large files, written in the folder's layout (no fsync: setup).
fn fill_large(root: &Path, n: usize, roots: &mut [HashSet<Oid>]) {
    for i in 0..n {
        let bytes = large_value(i);
        let oid = Oid::of(&bytes);
        let hex = oid.to_hex();
        let dir = root.join(&hex[0..2]).join(&hex[2..4]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&hex), &bytes).unwrap();
        if let Some(r) = repo_of(i) {
            roots[r].insert(oid);
        }
    }
}
