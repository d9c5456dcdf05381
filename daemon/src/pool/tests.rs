//! The contract suite: one set of test bodies, run against every engine on
//! its own (as a one-engine pool) and against the dispatching pool.

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};

use super::*;
use crate::pg::TestDb;

/// Small enough that large-regime tests stay fast.
const T: u64 = 4096;

struct Fixture {
    pool: Pool,
    /// Where the large engine stages, when it stages on disk.
    stage: Option<PathBuf>,
    /// The database of a PostgreSQL engine, dropped after the pool.
    db: Option<TestDb>,
    _dir: tempfile::TempDir,
}

fn fixture(make: impl FnOnce(&Path) -> (Pool, Option<PathBuf>)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (pool, stage) = make(dir.path());
    Fixture {
        pool,
        stage,
        db: PG.with(|db| db.borrow_mut().take()),
        _dir: dir,
    }
}

thread_local! {
    /// The engine of the `mem` fixture built on this thread, for [`corrupt`].
    static MEM: std::cell::RefCell<Option<Arc<MemEngine>>> = const { std::cell::RefCell::new(None) };
    /// The database a PostgreSQL fixture just made, for [`fixture`] to keep.
    static PG: std::cell::RefCell<Option<TestDb>> = const { std::cell::RefCell::new(None) };
}

/// Changes the stored value of `key` in a PostgreSQL engine's tables, as a
/// member of the lab with write access to the database could.
fn corrupt_in_database(db: &TestDb, key: &[u8], bad: &[u8]) {
    let mut c = db.client();
    let kv = c
        .execute(
            "UPDATE drsd_kv SET value = $2 WHERE key = $1",
            &[&key, &bad],
        )
        .unwrap_or(0);
    let lo = c
        .execute(
            "SELECT lo_put(lo, 0, $2) FROM drsd_large WHERE key = $1",
            &[&key, &bad],
        )
        .unwrap_or(0);
    assert_eq!(kv + lo, 1, "the entry is in one table");
}

/// Stage rows, and large objects no row names: what a PostgreSQL engine
/// left behind (0 when its tables do not exist yet).
fn database_leftovers(db: &TestDb) -> usize {
    let mut c = db.client();
    let tables: Option<String> = c
        .query_one("SELECT to_regclass('drsd_large_stage')::text", &[])
        .unwrap()
        .get(0);
    if tables.is_none() {
        return 0;
    }
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM drsd_large_stage) + \
             (SELECT count(*) FROM pg_largeobject_metadata m WHERE m.oid NOT IN \
              (SELECT lo FROM drsd_large UNION ALL SELECT lo FROM drsd_large_quarantine))",
            &[],
        )
        .unwrap();
    row.get::<_, i64>(0) as usize
}

/// Changes the stored value of `oid` under the engine, as rot or a write
/// through a repo's hard link would: a sqlite row through another
/// connection, a large file in place (its modification time moved on, as a
/// write a moment after the put would move it).
fn corrupt(f: &Fixture, oid: &Oid) {
    let mut bad = read_all(&f.pool, oid);
    match bad.first_mut() {
        Some(b) => *b ^= 0xff,
        None => bad.push(1),
    }
    if let Some(mem) = MEM.with(|m| m.borrow().clone()) {
        return mem.overwrite(oid.as_bytes(), &bad);
    }
    if let Some(db) = &f.db {
        return corrupt_in_database(db, oid.as_bytes(), &bad);
    }
    match f.pool.get(oid).unwrap().unwrap() {
        Blob::File { path, .. } => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            io::Write::write_all(&mut &file, &bad).unwrap();
            let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
            file.set_modified(later).unwrap();
        }
        Blob::Bytes(_) => {
            rusqlite::Connection::open(f._dir.path().join("kv.sqlite"))
                .unwrap()
                .execute(
                    "UPDATE blobs SET value = ?2 WHERE key = ?1",
                    rusqlite::params![oid.as_bytes(), bad],
                )
                .unwrap();
        }
    }
}

/// Changes the stored value of `oid` as `rsync --inplace -t` or a write and
/// `touch -r` through a repo's hard link would: a large file's bytes
/// rewritten in place, its length kept, its modification time and mode set
/// back to what they were. Only the ctime (which no unprivileged process
/// can set back) tells. A value held as bytes is changed as [`corrupt`]
/// changes it: nothing caches those.
fn rewrite_keeping_length_and_mtime(f: &Fixture, oid: &Oid) {
    use std::os::unix::fs::PermissionsExt;
    if f.db.is_some() {
        return corrupt(f, oid); // a database's bytes have no mtime to set back
    }
    let Some(Blob::File { path, .. }) = f.pool.get(oid).unwrap() else {
        return corrupt(f, oid);
    };
    let before = std::fs::metadata(&path).unwrap();
    let mut bad = std::fs::read(&path).unwrap();
    bad[0] ^= 0xff;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    io::Write::write_all(&mut &file, &bad).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    std::fs::set_permissions(&path, before.permissions()).unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (
            after.len(),
            after.modified().unwrap(),
            after.permissions().mode()
        ),
        (
            before.len(),
            before.modified().unwrap(),
            before.permissions().mode()
        ),
        "length, mtime and mode as they were"
    );
}

fn one_engine(engine: Arc<dyn Backend>) -> Pool {
    Pool::with_engines(engine.clone(), engine, T)
}

fn mem(_: &Path) -> (Pool, Option<PathBuf>) {
    let engine = Arc::new(MemEngine::new());
    MEM.with(|m| *m.borrow_mut() = Some(engine.clone()));
    (one_engine(engine), None)
}

fn sqlite(dir: &Path) -> (Pool, Option<PathBuf>) {
    let engine = SqliteEngine::open(&dir.join("kv.sqlite")).unwrap();
    (one_engine(Arc::new(engine)), None)
}

fn local(dir: &Path) -> (Pool, Option<PathBuf>) {
    let engine = LocalEngine::open(dir).unwrap();
    (one_engine(Arc::new(engine)), Some(dir.join("stage")))
}

/// The tests' PostgreSQL server, a database of this test's own.
fn test_db() -> String {
    let db = TestDb::create();
    let url = db.url.clone();
    PG.with(|p| *p.borrow_mut() = Some(db));
    url
}

fn postgres(_: &Path) -> (Pool, Option<PathBuf>) {
    let engine = PgKvEngine::open(&test_db()).unwrap();
    (one_engine(Arc::new(engine)), None)
}

fn pg_lo(dir: &Path) -> (Pool, Option<PathBuf>) {
    let engine = PgLoEngine::open(&test_db(), &dir.join("spool")).unwrap();
    (one_engine(Arc::new(engine)), None)
}

fn pool(dir: &Path) -> (Pool, Option<PathBuf>) {
    (
        Pool::open(dir, Some(T)).unwrap(),
        Some(dir.join("large/stage")),
    )
}

fn pool_default(dir: &Path) -> (Pool, Option<PathBuf>) {
    (
        Pool::open(dir, None).unwrap(),
        Some(dir.join("large/stage")),
    )
}

/// One test per engine for a contract case: `<case>::<engine>`.
macro_rules! for_every_engine {
    ($case:ident) => {
        mod $case {
            #[test]
            fn mem() {
                super::$case(&super::fixture(super::mem));
            }
            #[test]
            fn sqlite() {
                super::$case(&super::fixture(super::sqlite));
            }
            #[test]
            fn local() {
                super::$case(&super::fixture(super::local));
            }
            #[test]
            fn postgres() {
                super::$case(&super::fixture(super::postgres));
            }
            #[test]
            fn pg_lo() {
                super::$case(&super::fixture(super::pg_lo));
            }
            #[test]
            fn pool() {
                super::$case(&super::fixture(super::pool));
            }
            #[test]
            fn pool_default_threshold() {
                super::$case(&super::fixture(super::pool_default));
            }
        }
    };
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {$( for_every_engine!($case); )*};
}

contract!(
    roundtrip_in_both_regimes,
    empty_value,
    known_length_put_refuses_a_wrong_key,
    stream_lengths_around_the_threshold,
    stream_error_midway_lands_nothing,
    stream_hash_mismatch_lands_nothing,
    present_key_is_not_read_again,
    sweep_leaves_exactly_the_live_set,
    a_sweep_limited_to_a_listing_leaves_what_came_after,
    pinned_keys_survive_a_sweep,
    batch_puts_survive_concurrent_sweeps,
    concurrent_puts_of_one_key,
    range_reads_at_the_edges,
    delete_removes_once,
    stats_count_entries_and_bytes,
    verify_passes_on_good_entries,
    quarantine_takes_an_entry_out_of_every_lookup,
    a_corrupted_entry_is_refused_on_read_out_and_moved_aside,
    a_verified_entry_rewritten_with_its_mtime_set_back_is_refused_on_read_out,
    verify_names_corrupt_entries_and_moves_them_aside,
);

fn bytes(seed: u64, len: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = vec![0u8; len as usize];
    rng.fill(&mut out[..]);
    out
}

/// A source that yields its bytes in uneven pieces and can fail after `fail_at`.
struct Source {
    data: Vec<u8>,
    pos: usize,
    fail_at: Option<usize>,
}

impl Source {
    fn new(data: Vec<u8>) -> Source {
        Source {
            data,
            pos: 0,
            fail_at: None,
        }
    }

    fn failing(data: Vec<u8>, at: usize) -> Source {
        Source {
            fail_at: Some(at),
            ..Source::new(data)
        }
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.fail_at.is_some_and(|at| self.pos >= at) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "source broke",
            ));
        }
        let limit = self.fail_at.unwrap_or(self.data.len()).min(self.data.len());
        let piece = 1 + (self.pos * 7919) % 1531; // uneven, never a power of two
        let n = buf.len().min(piece).min(limit - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Stage files on disk, or a PostgreSQL engine's stage rows and orphan
/// large objects: what a put left behind.
fn stage_files(f: &Fixture) -> usize {
    f.stage
        .as_ref()
        .map_or(0, |dir| std::fs::read_dir(dir).unwrap().count())
        + f.db.as_ref().map_or(0, database_leftovers)
}

fn keys(pool: &Pool) -> HashSet<Vec<u8>> {
    let list = pool.list().unwrap();
    let set: HashSet<_> = list.iter().cloned().collect();
    assert_eq!(set.len(), list.len(), "list() names a key twice");
    set
}

fn read_all(pool: &Pool, oid: &Oid) -> Vec<u8> {
    pool.get(oid)
        .unwrap()
        .expect("entry present")
        .to_vec()
        .unwrap()
}

fn sizes(f: &Fixture) -> [u64; 2] {
    let t = f.pool.threshold();
    [t / 2, t * 3 + 17]
}

fn roundtrip_in_both_regimes(f: &Fixture) {
    for (i, len) in sizes(f).into_iter().enumerate() {
        let data = bytes(i as u64, len);
        let oid = Oid::of(&data);
        assert!(!f.pool.has(&oid).unwrap());
        let put = f.pool.put(&oid, &data).unwrap();
        assert!(put.stored);
        assert_eq!(put.tier, f.pool.tier_for(len));
        assert!(f.pool.has(&oid).unwrap());
        assert_eq!(f.pool.size(&oid).unwrap(), Some(len));
        assert_eq!(read_all(&f.pool, &oid), data);
        assert!(
            !f.pool.put(&oid, &data).unwrap().stored,
            "second put is a no-op"
        );
        let blob = f.pool.get(&oid).unwrap().unwrap();
        if put.tier == Tier::Large && f.stage.is_some() {
            assert!(
                matches!(blob, Blob::File { .. }),
                "a large get yields a file handle"
            );
        }
    }
    assert_eq!(keys(&f.pool).len(), 2);
    assert_eq!(stage_files(f), 0);
}

fn empty_value(f: &Fixture) {
    let put = f.pool.put_stream(None, io::empty()).unwrap();
    assert_eq!(put.oid, Oid::of(b""));
    assert_eq!(put.len, 0);
    assert_eq!(read_all(&f.pool, &put.oid), b"");
    assert_eq!(keys(&f.pool).len(), 1);
}

fn known_length_put_refuses_a_wrong_key(f: &Fixture) {
    for len in sizes(f) {
        let data = bytes(7, len);
        let wrong = Oid::of(b"something else");
        let err = f.pool.put(&wrong, &data).unwrap_err();
        assert!(matches!(err, PoolError::HashMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&wrong.to_hex()));
    }
    assert!(keys(&f.pool).is_empty());
    assert_eq!(stage_files(f), 0);
}

fn stream_lengths_around_the_threshold(f: &Fixture) {
    let t = f.pool.threshold();
    for (i, len) in [t - 1, t, t + 1].into_iter().enumerate() {
        let data = bytes(100 + i as u64, len);
        let put = f.pool.put_stream(None, Source::new(data.clone())).unwrap();
        assert_eq!(put.oid, Oid::of(&data));
        assert_eq!(put.len, len);
        assert!(put.stored);
        let want = if len < t { Tier::Kv } else { Tier::Large };
        assert_eq!(put.tier, want, "len {len}");
        assert_eq!(read_all(&f.pool, &put.oid), data);
        // Same content by the known-length path: same tier, nothing new.
        let again = f.pool.put(&put.oid, &data).unwrap();
        assert_eq!((again.tier, again.stored), (want, false));
    }
    assert_eq!(keys(&f.pool).len(), 3);
    assert_eq!(stage_files(f), 0);
}

fn stream_error_midway_lands_nothing(f: &Fixture) {
    let t = f.pool.threshold() as usize;
    let kept = f.pool.put_stream(None, Source::new(bytes(1, 10))).unwrap();
    for fail_at in [t / 2, t * 2 + 3] {
        let data = bytes(2, (t * 4) as u64);
        let err = f
            .pool
            .put_stream(None, Source::failing(data.clone(), fail_at))
            .unwrap_err();
        assert!(matches!(err, PoolError::Stream { .. }), "{err}");
        assert!(!f.pool.has(&Oid::of(&data)).unwrap());
        assert!(!f.pool.has(&Oid::of(&data[..fail_at])).unwrap());
        assert_eq!(stage_files(f), 0, "failing at {fail_at} left a stage file");
    }
    assert_eq!(keys(&f.pool), HashSet::from([kept.oid.as_bytes().to_vec()]));
}

fn stream_hash_mismatch_lands_nothing(f: &Fixture) {
    for len in sizes(f) {
        let data = bytes(3, len);
        let wrong = Oid::of(b"not this");
        let err = f
            .pool
            .put_stream(Some(&wrong), Source::new(data.clone()))
            .unwrap_err();
        match err {
            PoolError::HashMismatch { expected, got, .. } => {
                assert_eq!((expected, got), (wrong, Oid::of(&data)))
            }
            other => panic!("want a hash mismatch, got {other}"),
        }
        assert_eq!(stage_files(f), 0);
    }
    assert!(keys(&f.pool).is_empty());
}

fn present_key_is_not_read_again(f: &Fixture) {
    for len in sizes(f) {
        let data = bytes(4, len);
        let oid = Oid::of(&data);
        f.pool.put(&oid, &data).unwrap();
        let put = f
            .pool
            .put_stream(Some(&oid), Source::failing(data, 0))
            .unwrap();
        assert!(!put.stored);
        assert_eq!(put.len, len);
    }
}

fn put_many(pool: &Pool, n: u64) -> Vec<Oid> {
    let t = pool.threshold();
    (0..n)
        .map(|i| {
            let len = if i % 2 == 0 { i * 13 % t } else { t + i * 101 };
            let put = pool
                .put_stream(None, Source::new(bytes(1000 + i, len)))
                .unwrap();
            assert_eq!(put.tier, pool.tier_for(len));
            put.oid
        })
        .collect()
}

fn sweep_leaves_exactly_the_live_set(f: &Fixture) {
    let all = put_many(&f.pool, 12);
    let live: HashSet<Oid> = all.iter().step_by(3).copied().collect();
    let before = keys(&f.pool);
    let sizes: std::collections::HashMap<Oid, u64> = all
        .iter()
        .map(|o| (*o, f.pool.size(o).unwrap().unwrap()))
        .collect();
    let listed: HashSet<Vec<u8>> = f.pool.list().unwrap().into_iter().collect();
    let dry = f.pool.sweep_listed(&listed, &live, false).unwrap();
    assert_eq!(keys(&f.pool), before, "a dry run deletes nothing");
    let report = f.pool.sweep(&live).unwrap();
    assert_eq!(dry, report, "the dry run named what the sweep deleted");
    for swept in &report.deleted {
        let oid = Oid::from_key(&swept.key).unwrap();
        assert!(all.contains(&oid) && !live.contains(&oid));
        assert_eq!(Some(swept.bytes), sizes.get(&oid).copied(), "{swept:?}");
    }
    let want: HashSet<Vec<u8>> = live.iter().map(|o| o.as_bytes().to_vec()).collect();
    assert_eq!(keys(&f.pool), want);
    assert_eq!(report.kept, live.len());
    assert_eq!(report.deleted.len(), all.len() - live.len());
    for oid in &live {
        assert_eq!(Oid::of(&read_all(&f.pool, oid)), *oid);
    }
    // Live keys the pool does not hold change nothing.
    let mut more = live.clone();
    more.insert(Oid::of(b"absent"));
    assert!(f.pool.sweep(&more).unwrap().deleted.is_empty());
    f.pool.sweep(&HashSet::new()).unwrap();
    assert!(keys(&f.pool).is_empty());
}

fn a_sweep_limited_to_a_listing_leaves_what_came_after(f: &Fixture) {
    let before = put_many(&f.pool, 3);
    let listed: HashSet<Vec<u8>> = f.pool.list().unwrap().into_iter().collect();
    let after = f
        .pool
        .put(&Oid::of(b"stored later"), b"stored later")
        .unwrap();
    let report = f.pool.sweep_listed(&listed, &HashSet::new(), true).unwrap();
    assert_eq!((report.deleted.len(), report.newer), (before.len(), 1));
    let left: HashSet<Vec<u8>> = [after.oid.as_bytes().to_vec()].into();
    assert_eq!(keys(&f.pool), left);
}

fn pinned_keys_survive_a_sweep(f: &Fixture) {
    let all = put_many(&f.pool, 4);
    let pins: Vec<Pin> = all.iter().map(|o| f.pool.pin(o).unwrap()).collect();
    let report = f.pool.sweep(&HashSet::new()).unwrap();
    assert_eq!((report.pinned, report.deleted.len()), (4, 0));
    drop(pins);
    f.pool.sweep(&HashSet::new()).unwrap();
    assert!(keys(&f.pool).is_empty());
}

fn batch_puts_survive_concurrent_sweeps(f: &Fixture) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f.pool.sweep(&HashSet::new()).unwrap();
            }
        });
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let pool = &f.pool;
                s.spawn(move || {
                    for i in 0..20u64 {
                        let mut batch = pool.batch();
                        let len = if i % 2 == 0 {
                            100
                        } else {
                            pool.threshold() + 5
                        };
                        // Every writer puts the same contents, so puts race sweeps of one key.
                        let put = batch.put_stream(None, Source::new(bytes(i, len))).unwrap();
                        assert!(
                            pool.has(&put.oid).unwrap(),
                            "writer {w}: swept while pinned"
                        );
                        assert_eq!(Oid::of(&read_all(pool, &put.oid)), put.oid);
                    }
                })
            })
            .collect();
        let results: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        // Stop the sweeper before reporting, or a failure would hang the scope.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in results {
            r.unwrap();
        }
    });
    assert_eq!(stage_files(f), 0);
}

fn concurrent_puts_of_one_key(f: &Fixture) {
    for len in sizes(f) {
        let data = bytes(5, len);
        let oid = Oid::of(&data);
        let stored: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let data = data.clone();
                    let pool = &f.pool;
                    s.spawn(move || {
                        let put = if i % 2 == 0 {
                            pool.put(&oid, &data).unwrap()
                        } else {
                            pool.put_stream(None, Source::new(data)).unwrap()
                        };
                        assert_eq!(put.oid, oid);
                        put.stored as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(stored >= 1);
        assert_eq!(read_all(&f.pool, &oid), data);
    }
    assert_eq!(keys(&f.pool).len(), 2);
    assert_eq!(stage_files(f), 0);
}

fn range_reads_at_the_edges(f: &Fixture) {
    for len in sizes(f) {
        let data = bytes(6, len);
        let oid = Oid::of(&data);
        f.pool.put(&oid, &data).unwrap();
        let read = |off, n| f.pool.read_range(&oid, off, n).unwrap().unwrap();
        assert_eq!(read(0, 0), b"");
        assert_eq!(read(0, len), data);
        assert_eq!(read(0, 1), &data[..1]);
        assert_eq!(read(len - 1, 1), &data[len as usize - 1..]);
        assert_eq!(
            read(len - 1, 100),
            &data[len as usize - 1..],
            "cut at the end"
        );
        assert_eq!(read(len, 5), b"", "at the end: empty");
        assert_eq!(read(7, 300), &data[7..307]);
        let err = f.pool.read_range(&oid, len + 1, 1).unwrap_err();
        assert!(matches!(err, PoolError::Range { .. }), "{err}");
    }
    assert_eq!(f.pool.read_range(&Oid::of(b"absent"), 0, 1).unwrap(), None);
}

fn delete_removes_once(f: &Fixture) {
    for (i, oid) in put_many(&f.pool, 2).iter().enumerate() {
        assert!(f.pool.delete(oid).unwrap(), "entry {i}");
        assert!(!f.pool.delete(oid).unwrap());
        assert!(!f.pool.has(oid).unwrap());
        assert!(f.pool.get(oid).unwrap().is_none());
    }
}

fn stats_count_entries_and_bytes(f: &Fixture) {
    let [small, large] = sizes(f);
    f.pool
        .put_stream(None, Source::new(bytes(8, small)))
        .unwrap();
    f.pool
        .put_stream(None, Source::new(bytes(9, large)))
        .unwrap();
    let stats = f.pool.stats().unwrap();
    let entries: u64 = stats.tiers.iter().map(|t| t.stats.entries).sum();
    let total: u64 = stats.tiers.iter().map(|t| t.stats.bytes).sum();
    assert_eq!((entries, total), (2, small + large));
}

fn verify_passes_on_good_entries(f: &Fixture) {
    put_many(&f.pool, 4);
    assert_eq!(f.pool.verify().unwrap(), vec![]);
}

fn totals(pool: &Pool) -> (u64, u64) {
    let stats = pool.stats().unwrap();
    let entries = stats.tiers.iter().map(|t| t.stats.entries).sum();
    let bytes = stats.tiers.iter().map(|t| t.stats.bytes).sum();
    (entries, bytes)
}

fn quarantine_takes_an_entry_out_of_every_lookup(f: &Fixture) {
    let kept = f.pool.put(&Oid::of(b"kept"), b"kept").unwrap().oid;
    for (i, len) in sizes(f).into_iter().enumerate() {
        let data = bytes(10 + i as u64, len);
        let oid = f.pool.put(&Oid::of(&data), &data).unwrap().oid;
        let (entries, total) = totals(&f.pool);
        let place = f.pool.quarantine(&oid).unwrap();
        assert!(place.is_some_and(|p| !p.is_empty()));
        assert!(!f.pool.has(&oid).unwrap());
        assert_eq!(f.pool.size(&oid).unwrap(), None);
        assert!(f.pool.get(&oid).unwrap().is_none());
        assert!(f.pool.get_verified(&oid).unwrap().is_none());
        assert!(!keys(&f.pool).contains(oid.as_bytes().as_slice()));
        assert_eq!(totals(&f.pool), (entries - 1, total - len));
        assert_eq!(f.pool.verify().unwrap(), vec![], "nothing left to find");
        assert_eq!(f.pool.quarantine(&oid).unwrap(), None, "moved once");
        // The good bytes can come back (from the object remote, say).
        assert!(f.pool.put(&oid, &data).unwrap().stored);
        assert_eq!(read_all(&f.pool, &oid), data);
    }
    assert_eq!(read_all(&f.pool, &kept), b"kept");
}

fn a_corrupted_entry_is_refused_on_read_out_and_moved_aside(f: &Fixture) {
    let out = tempfile::tempdir().unwrap();
    for (i, len) in sizes(f).into_iter().enumerate() {
        let data = bytes(20 + i as u64, len);
        let oid = f.pool.put(&Oid::of(&data), &data).unwrap().oid;
        // Good bytes pass, and pass again.
        for _ in 0..2 {
            let blob = f.pool.get_verified(&oid).unwrap().unwrap();
            assert_eq!(blob.to_vec().unwrap(), data);
        }
        corrupt(f, &oid);
        let err = f.pool.get_verified(&oid).unwrap_err();
        assert!(
            matches!(err, PoolError::Corrupt { oid: o, .. } if o == oid),
            "{err}"
        );
        assert!(err.to_string().contains(&oid.to_hex()), "{err}");
        assert!(!f.pool.has(&oid).unwrap(), "moved out of the pool");

        // export (what hydrate and the transfer agent use) refuses too, and
        // writes nothing where it was asked to.
        f.pool.put(&oid, &data).unwrap();
        let good = out.path().join(format!("good-{i}"));
        assert!(f.pool.export(&oid, &good).unwrap().is_some());
        assert_eq!(std::fs::read(&good).unwrap(), data);
        std::fs::remove_file(&good).unwrap();
        corrupt(f, &oid);
        let dest = out.path().join(format!("bad-{i}"));
        let err = f.pool.export(&oid, &dest).unwrap_err();
        assert!(matches!(err, PoolError::Corrupt { .. }), "{err}");
        assert!(!dest.exists(), "nothing placed");
        assert!(!f.pool.has(&oid).unwrap());
    }
}

fn a_verified_entry_rewritten_with_its_mtime_set_back_is_refused_on_read_out(f: &Fixture) {
    for (i, len) in sizes(f).into_iter().enumerate() {
        let data = bytes(40 + i as u64, len);
        let oid = f.pool.put(&Oid::of(&data), &data).unwrap().oid;
        // Read out twice: a large file is now remembered as verified.
        for _ in 0..2 {
            let blob = f.pool.get_verified(&oid).unwrap().unwrap();
            assert_eq!(blob.to_vec().unwrap(), data);
        }
        rewrite_keeping_length_and_mtime(f, &oid);
        let err = f
            .pool
            .get_verified(&oid)
            .map(|b| b.map(|b| b.to_vec().unwrap() == data))
            .expect_err("the changed bytes were handed out");
        assert!(
            matches!(err, PoolError::Corrupt { oid: o, .. } if o == oid),
            "{err}"
        );
        assert!(!f.pool.has(&oid).unwrap(), "moved out of the pool");
    }
}

fn verify_names_corrupt_entries_and_moves_them_aside(f: &Fixture) {
    let oids = put_many(&f.pool, 6);
    corrupt(f, &oids[2]);
    corrupt(f, &oids[3]);
    let bad = f.pool.verify().unwrap();
    let named: HashSet<Vec<u8>> = bad.iter().map(|b| b.key.clone()).collect();
    assert_eq!(
        named,
        HashSet::from([oids[2].as_bytes().to_vec(), oids[3].as_bytes().to_vec()])
    );
    for entry in &bad {
        assert!(entry.problem.contains("hashes to"), "{entry:?}");
        assert!(entry.quarantined.is_some(), "{entry:?}");
    }
    for (i, oid) in oids.iter().enumerate() {
        assert_eq!(f.pool.has(oid).unwrap(), i != 2 && i != 3, "entry {i}");
    }
    assert_eq!(f.pool.verify().unwrap(), vec![], "moved aside once");
}

// Engine-specific parts of the contract.

#[test]
fn sqlite_verify_sees_a_byte_flipped_in_the_file_under_an_open_engine() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open(dir.path(), Some(T)).unwrap();
    let value = bytes(7, 2000);
    let oid = pool.put(&Oid::of(&value), &value).unwrap().oid;
    let other = pool.put(&Oid::of(b"other"), b"other").unwrap().oid;
    let db = dir.path().join("kv.sqlite");
    // Everything into the database file, then the engine reads (and caches) it.
    rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    assert_eq!(read_all(&pool, &oid), value);
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&db)
        .unwrap();
    let on_disk = std::fs::read(&db).unwrap();
    let at = on_disk
        .windows(64)
        .position(|w| w == &value[1000..1064])
        .expect("the value is in the file") as u64;
    file.write_all_at(&[!value[1000]], at).unwrap();

    let bad = pool.verify().unwrap();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].key, oid.as_bytes().to_vec());
    assert_eq!(bad[0].tier, Tier::Kv);
    assert!(
        bad[0].quarantined.as_deref().unwrap().contains("kv.sqlite"),
        "{bad:?}"
    );
    assert!(!pool.has(&oid).unwrap());
    assert_eq!(read_all(&pool, &other), b"other");
}

#[test]
fn postgres_batch_is_one_transaction_and_stores_a_repeated_key_once() {
    let db = TestDb::create();
    let engine = PgKvEngine::open(&db.url).unwrap();
    let values: Vec<Vec<u8>> = (0..512).map(|i| bytes(i, 4096)).collect();
    let keys: Vec<Oid> = values.iter().map(|v| Oid::of(v)).collect();
    let mut entries: Vec<(&[u8], &[u8])> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| (k.as_bytes().as_slice(), v.as_slice()))
        .collect();
    entries.push(entries[3]);
    engine.put(entries[0].0, entries[0].1).unwrap();
    let before = engine.write_transactions();
    let stored = engine.put_many(&entries).unwrap();
    assert_eq!(engine.write_transactions(), before + 1, "one transaction");
    assert!(!stored[0], "there before");
    assert!(stored[1..512].iter().all(|s| *s));
    assert!(!stored[512], "the repeat of a key in the batch");
    assert_eq!(engine.stats().unwrap().entries, 512);
    let got = engine.get(keys[300].as_bytes()).unwrap().unwrap();
    assert_eq!(got.to_vec().unwrap(), values[300]);
}

#[test]
fn postgres_without_tables_reads_as_empty_and_reads_create_nothing() {
    let db = TestDb::create();
    let kv = PgKvEngine::open(&db.url).unwrap();
    let spool = tempfile::tempdir().unwrap();
    let lo = PgLoEngine::open(&db.url, spool.path()).unwrap();
    let key = Oid::of(b"x");
    for engine in [&kv as &dyn Backend, &lo] {
        assert!(!engine.has(key.as_bytes()).unwrap());
        assert!(engine.get(key.as_bytes()).unwrap().is_none());
        assert_eq!(engine.size(key.as_bytes()).unwrap(), None);
        assert!(engine.list().unwrap().is_empty());
        assert!(!engine.delete(key.as_bytes()).unwrap());
        assert_eq!(engine.quarantine(key.as_bytes()).unwrap(), None);
        assert_eq!(engine.stats().unwrap(), TierStats::default());
    }
    let tables: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'drsd%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);
}

#[test]
fn postgres_reconnects_after_the_server_ends_its_sessions() {
    let db = TestDb::create();
    let engine = PgKvEngine::open(&db.url).unwrap();
    let key = Oid::of(b"kept");
    engine.put(key.as_bytes(), b"kept").unwrap();
    // What a restart of the server does to every open session.
    let ended: i64 = db
        .client()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db.name],
        )
        .unwrap()
        .get(0);
    assert!(ended >= 1, "the engine's connection was open");
    assert!(engine.has(key.as_bytes()).unwrap());
    assert!(engine.put(Oid::of(b"new").as_bytes(), b"new").unwrap());
}

#[test]
fn postgres_down_is_an_error_naming_the_server_and_not_the_password() {
    let url = "postgresql://someone:s3cret-word@127.0.0.1:1/lab?connect_timeout=5";
    for err in [
        PgKvEngine::open(url).err().unwrap(),
        PgLoEngine::open(url, tempfile::tempdir().unwrap().path())
            .err()
            .unwrap(),
    ] {
        let text = format!("{err}: {:?}", std::error::Error::source(&err));
        assert!(text.contains("someone@127.0.0.1:1/lab"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[test]
fn pg_lo_delete_unlinks_the_large_object_in_the_same_transaction() {
    let db = TestDb::create();
    let spool = tempfile::tempdir().unwrap();
    let engine = PgLoEngine::open(&db.url, spool.path()).unwrap();
    let objects = || -> i64 {
        db.client()
            .query_one("SELECT count(*) FROM pg_largeobject_metadata", &[])
            .unwrap()
            .get(0)
    };
    let value = bytes(1, (9 << 20) + 5); // more than two pieces
    let key = Oid::of(&value);
    assert!(engine.put(key.as_bytes(), &value).unwrap());
    assert!(!engine.put(key.as_bytes(), &value).unwrap());
    assert_eq!((objects(), engine.staged().unwrap()), (1, 0));
    let blob = engine.get(key.as_bytes()).unwrap().unwrap();
    assert_eq!(blob.len(), value.len() as u64);
    assert_eq!(
        blob.read_at(9 << 20, 10).unwrap(),
        &value[9 << 20..(9 << 20) + 5]
    );
    let (range, size) = engine
        .read_range(key.as_bytes(), (4 << 20) - 3, 7)
        .unwrap()
        .unwrap();
    assert_eq!(
        (&range[..], size),
        (&value[(4 << 20) - 3..(4 << 20) + 4], value.len() as u64)
    );
    assert!(engine.delete(key.as_bytes()).unwrap());
    assert_eq!(objects(), 0, "unlinked with its row");
    assert!(!engine.delete(key.as_bytes()).unwrap());
}

#[test]
fn pg_lo_open_reaps_a_dead_writer_s_stage_but_not_a_live_one() {
    let db = TestDb::create();
    let spool = tempfile::tempdir().unwrap();
    let first = PgLoEngine::open(&db.url, spool.path()).unwrap();
    let mut live = first.stage().unwrap();
    live.write(b"in flight").unwrap();
    // A writer killed two hours ago: its stage row and object are still there.
    db.client()
        .batch_execute(
            "INSERT INTO drsd_large_stage (lo, touched) \
             VALUES (lo_from_bytea(0, 'half'), now() - interval '2 hours')",
        )
        .unwrap();
    assert_eq!(first.staged().unwrap(), 2);
    let second = PgLoEngine::open(&db.url, spool.path()).unwrap();
    assert_eq!(second.staged().unwrap(), 1, "the dead writer's stage went");
    live.commit(Oid::of(b"in flight").as_bytes()).unwrap();
    assert_eq!(second.staged().unwrap(), 0);
    let got = second
        .get(Oid::of(b"in flight").as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(got.to_vec().unwrap(), b"in flight");
    let orphans: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM pg_largeobject_metadata WHERE oid NOT IN (SELECT lo FROM drsd_large)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0);
}

#[test]
fn pg_lo_get_spools_a_read_only_copy_that_goes_once_linked_elsewhere() {
    use std::os::unix::fs::PermissionsExt;
    let db = TestDb::create();
    let spool = tempfile::tempdir().unwrap();
    let pool = Pool::with_engines(
        Arc::new(PgKvEngine::open(&db.url).unwrap()),
        Arc::new(PgLoEngine::open(&db.url, spool.path()).unwrap()),
        T,
    );
    let value = bytes(2, T * 3);
    let oid = pool.put(&Oid::of(&value), &value).unwrap().oid;
    let repo = tempfile::tempdir().unwrap();
    let dest = repo.path().join("object");
    assert_eq!(pool.export(&oid, &dest).unwrap(), Some(Placed::HardLink));
    assert_eq!(std::fs::read(&dest).unwrap(), value);
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o400);
    // The next read prunes the spool's name of the linked copy.
    assert_eq!(pool.read_range(&oid, 1, 2).unwrap().unwrap(), &value[1..3]);
    pool.get(&oid).unwrap().unwrap();
    let names: Vec<_> = std::fs::read_dir(spool.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "only the last get's copy: {names:?}");
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        value,
        "the repo's copy stays"
    );
}

#[test]
fn local_quarantine_moves_the_file_into_its_folder_and_keeps_each_copy() {
    let dir = tempfile::tempdir().unwrap();
    let engine = LocalEngine::open(dir.path()).unwrap();
    let oid = Oid::of(b"twice");
    for round in 1..=2 {
        engine.put(oid.as_bytes(), b"twice").unwrap();
        let place = engine.quarantine(oid.as_bytes()).unwrap().unwrap();
        assert!(place.starts_with(&dir.path().join("quarantine").display().to_string()));
        assert!(place.contains(&oid.to_hex()), "{place}");
        assert_eq!(std::fs::read(&place).unwrap(), b"twice");
        let held = std::fs::read_dir(dir.path().join("quarantine")).unwrap();
        assert_eq!(held.count(), round);
    }
    assert!(engine.list().unwrap().is_empty());
    assert_eq!(engine.quarantine(oid.as_bytes()).unwrap(), None);
}

#[test]
fn sqlite_without_tables_reads_as_empty_and_reads_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("virgin.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("CREATE TABLE other (x)", [])
        .unwrap();
    let engine = SqliteEngine::open(&path).unwrap();
    let key = Oid::of(b"x");
    assert!(!engine.has(key.as_bytes()).unwrap());
    assert!(engine.get(key.as_bytes()).unwrap().is_none());
    assert_eq!(engine.size(key.as_bytes()).unwrap(), None);
    assert!(engine.list().unwrap().is_empty());
    assert!(!engine.delete(key.as_bytes()).unwrap());
    assert_eq!(engine.stats().unwrap(), TierStats::default());
    let tables: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'blobs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
    engine.put(key.as_bytes(), b"x").unwrap();
    assert!(engine.has(key.as_bytes()).unwrap());
}

#[test]
fn sqlite_compacts_after_a_sweep_and_its_file_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = sqlite(dir.path());
    let on_disk = || -> u64 {
        ["kv.sqlite", "kv.sqlite-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.path().join(f)).ok())
            .map(|m| m.len())
            .sum()
    };
    let keep = pool.put(&Oid::of(b"kept"), b"kept").unwrap().oid;
    for i in 0..1000u64 {
        let value = bytes(i, 4096);
        pool.put(&Oid::of(&value), &value).unwrap();
    }
    assert_eq!(pool.compact().unwrap(), 0, "nothing free yet");
    let full = on_disk();
    pool.sweep(&[keep].into()).unwrap();
    let freed = pool.compact().unwrap();
    assert!(freed > 3 << 20, "{freed}");
    assert!(on_disk() < full / 4, "{} of {full} bytes", on_disk());
    assert_eq!(read_all(&pool, &keep), b"kept");
    assert_eq!(pool.compact().unwrap(), 0, "once is enough");
}

#[test]
fn sqlite_runs_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.sqlite");
    SqliteEngine::open(&path).unwrap();
    let mode: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn local_layout_is_sharded_read_only_and_ignores_strangers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let engine = LocalEngine::open(dir.path()).unwrap();
    let oid = Oid::of(b"blob");
    engine.put(oid.as_bytes(), b"blob").unwrap();
    let hex = oid.to_hex();
    let path = dir.path().join(&hex[..2]).join(&hex[2..4]).join(&hex);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o400, "read-only, not world-readable");
    std::fs::write(dir.path().join("README"), "not a blob").unwrap();
    std::fs::write(path.with_file_name("zz-not-hex"), "").unwrap();
    std::fs::write(dir.path().join(&hex[..2]).join(&hex[2..4]).join("abcd"), "").unwrap();
    assert_eq!(engine.list().unwrap(), vec![oid.as_bytes().to_vec()]);
}

#[test]
fn local_open_clears_a_crash_s_stage_files_but_not_a_live_opener_s() {
    let dir = tempfile::tempdir().unwrap();
    let first = LocalEngine::open(dir.path()).unwrap();
    let mut staged = first.stage().unwrap();
    staged.write(b"in flight").unwrap();
    // A second opener while the first is alive must not clear its stage.
    let second = LocalEngine::open(dir.path()).unwrap();
    assert_eq!(second.staged_files().unwrap(), 1);
    staged.commit(Oid::of(b"in flight").as_bytes()).unwrap();
    drop((first, second));
    std::fs::write(dir.path().join("stage/leftover"), "crash").unwrap();
    let third = LocalEngine::open(dir.path()).unwrap();
    assert_eq!(third.staged_files().unwrap(), 0);
    assert!(third.has(Oid::of(b"in flight").as_bytes()).unwrap());
}

#[test]
fn pool_threshold_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Pool::open(dir.path(), Some(1000)).unwrap().threshold(),
        1000
    );
    assert_eq!(Pool::open(dir.path(), None).unwrap().threshold(), 1000);
    let err = Pool::open(dir.path(), Some(2000)).err().unwrap();
    assert!(err.to_string().contains("pool.json"), "{err}");
}

#[test]
fn pool_verify_names_corrupt_entries_in_both_tiers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open(dir.path(), Some(T)).unwrap();
    let small = pool.put_stream(None, &bytes(1, 10)[..]).unwrap().oid;
    let large = pool.put_stream(None, &bytes(2, T * 2)[..]).unwrap().oid;
    let good = pool.put_stream(None, &bytes(3, T * 2)[..]).unwrap().oid;
    rusqlite::Connection::open(dir.path().join("kv.sqlite"))
        .unwrap()
        .execute(
            "UPDATE blobs SET value = x'00' WHERE key = ?1",
            [small.as_bytes()],
        )
        .unwrap();
    let path = pool
        .get(&large)
        .unwrap()
        .unwrap()
        .path()
        .unwrap()
        .to_path_buf();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&path, b"flipped").unwrap();
    let bad: HashSet<Vec<u8>> = pool.verify().unwrap().into_iter().map(|b| b.key).collect();
    assert_eq!(
        bad,
        HashSet::from([small.as_bytes().to_vec(), large.as_bytes().to_vec()])
    );
    assert!(!bad.contains(good.as_bytes().as_slice()));
}

#[test]
fn export_links_large_entries_and_writes_small_ones() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open(&dir.path().join("pool"), Some(T)).unwrap();
    let large = bytes(1, T * 3);
    let small = bytes(2, 10);
    let large_oid = pool.put(&Oid::of(&large), &large).unwrap().oid;
    let small_oid = pool.put(&Oid::of(&small), &small).unwrap().oid;
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();

    let dest = repo.join("large");
    assert_eq!(
        pool.export(&large_oid, &dest).unwrap(),
        Some(Placed::HardLink)
    );
    let pooled = pool
        .get(&large_oid)
        .unwrap()
        .unwrap()
        .path()
        .unwrap()
        .to_path_buf();
    let (a, b) = (
        std::fs::metadata(&dest).unwrap(),
        std::fs::metadata(&pooled).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "one copy on disk");
    assert_eq!(std::fs::read(&dest).unwrap(), large);
    let err = pool.export(&large_oid, &dest).unwrap_err();
    assert!(err.to_string().contains("repo/large"), "{err}");

    let dest = repo.join("small");
    assert_eq!(
        pool.export(&small_oid, &dest).unwrap(),
        Some(Placed::Written)
    );
    assert_eq!(std::fs::read(&dest).unwrap(), small);
    assert_eq!(
        pool.export(&Oid::of(b"absent"), &repo.join("x")).unwrap(),
        None
    );

    // Deleting the repo's link leaves the pool's copy (what `git lfs prune` does).
    std::fs::remove_file(repo.join("large")).unwrap();
    assert_eq!(
        pool.get(&large_oid).unwrap().unwrap().to_vec().unwrap(),
        large
    );
}

#[test]
fn adopt_file_links_a_repo_object_in_and_checks_it() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::open(&dir.path().join("pool"), Some(T)).unwrap();
    let data = bytes(3, T * 2 + 1);
    let object = dir.path().join("object");
    std::fs::write(&object, &data).unwrap();

    let wrong = Oid::of(b"other");
    let err = pool.adopt_file(&object, Some(&wrong)).unwrap_err();
    assert!(matches!(err, PoolError::HashMismatch { .. }), "{err}");
    assert!(pool.list().unwrap().is_empty());

    let put = pool.adopt_file(&object, Some(&Oid::of(&data))).unwrap();
    assert_eq!(
        (put.oid, put.tier, put.stored),
        (Oid::of(&data), Tier::Large, true)
    );
    let pooled = pool
        .get(&put.oid)
        .unwrap()
        .unwrap()
        .path()
        .unwrap()
        .to_path_buf();
    assert_eq!(
        std::fs::metadata(&pooled).unwrap().ino(),
        std::fs::metadata(&object).unwrap().ino()
    );
    assert!(
        !pool.adopt_file(&object, None).unwrap().stored,
        "already there"
    );
    assert_eq!(
        std::fs::read_dir(pool.partial_dir().unwrap())
            .unwrap()
            .count(),
        0
    );

    let small = dir.path().join("small");
    std::fs::write(&small, b"tiny").unwrap();
    let put = pool.adopt_file(&small, None).unwrap();
    assert_eq!((put.oid, put.tier), (Oid::of(b"tiny"), Tier::Kv));
    assert!(pool.verify().unwrap().is_empty());
}
