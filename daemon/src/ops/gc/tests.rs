//! gc over a lab's shared pool: roots published by other nodes keep their
//! entries, a forgotten node's do not, and a kill at the steps that delete
//! (a publish between its delete and its insert; a sweep between a row
//! deleted and a file unlinked) loses nothing live. Against the tests'
//! real PostgreSQL (`DRSD_TEST_PG_URL`; they fail without it).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::pg::TestDb;
use crate::pool::{Backend, Blob, LocalEngine, MemEngine, PgKvEngine, PgPins, PoolError, Staged};

/// Below it, kv rows; from it, large files.
const THRESHOLD: u64 = 1024;

struct Lab {
    _db: TestDb,
    server: Arc<PgServer>,
    _dir: tempfile::TempDir,
    pool: Pool,
}

/// A shared pool as a lab has it: kv rows and pins in the team database,
/// large files in a shared folder; `large` wraps the folder's engine.
fn lab(large: impl FnOnce(LocalEngine) -> Arc<dyn Backend>) -> Lab {
    let db = TestDb::create();
    let server = PgServer::open(&db.url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = LocalEngine::open(&dir.path().join("large")).unwrap();
    let pool = Pool::with_engines(
        Arc::new(PgKvEngine::new(server.clone())),
        large(files),
        THRESHOLD,
    )
    .with_pins(Arc::new(PgPins::new(server.clone(), "node-a").unwrap()));
    Lab {
        _db: db,
        server,
        _dir: dir,
        pool,
    }
}

fn small(tag: &str) -> Vec<u8> {
    format!("small {tag}").into_bytes()
}

fn large(tag: &str) -> Vec<u8> {
    tag.as_bytes()
        .repeat(2 * THRESHOLD as usize / tag.len() + 1)
}

fn put(pool: &Pool, bytes: &[u8]) -> Oid {
    let oid = Oid::of(bytes);
    pool.put(&oid, bytes).unwrap();
    oid
}

fn own(repo: &str, oids: &[Oid]) -> Vec<(String, HashSet<Oid>)> {
    vec![(repo.to_string(), oids.iter().copied().collect())]
}

/// Every oid of `live` still reads back, checked against its oid.
fn all_there(pool: &Pool, live: &[Oid]) {
    for oid in live {
        let blob = pool.get_verified(oid).unwrap();
        assert!(blob.is_some(), "live entry {oid} lost its bytes");
    }
}

#[test]
fn gc_on_one_node_keeps_what_another_node_published_even_with_no_grace() {
    let lab = lab(|files| Arc::new(files));
    let a = GcTeam::postgres(&lab.server, "node-a").unwrap();
    let b = GcTeam::postgres(&lab.server, "node-b").unwrap();
    let (b_small, b_large) = (put(&lab.pool, &small("b")), put(&lab.pool, &large("b")));
    let a_own = put(&lab.pool, &small("a"));
    let garbage = [put(&lab.pool, &small("x")), put(&lab.pool, &large("x"))];
    // node-b's gc (or its scan) published its repo's roots.
    b.roots
        .publish("node-b", "/home/b/repo", &[b_small, b_large].into())
        .unwrap();

    let done = collect(
        &lab.pool,
        &a,
        || Ok(own("/home/a/repo", &[a_own])),
        false,
        0,
    )
    .unwrap();
    all_there(&lab.pool, &[b_small, b_large, a_own]);
    for oid in garbage {
        assert!(!lab.pool.has(&oid).unwrap(), "garbage {oid} kept");
    }
    assert_eq!(done.swept.deleted.len(), 2);

    // node-b is gone for good: forgotten, its entries go at the next gc.
    let gone = a.roots.forget("node-b").unwrap();
    assert_eq!((gone.repos, gone.roots), (1, 2));
    collect(
        &lab.pool,
        &a,
        || Ok(own("/home/a/repo", &[a_own])),
        false,
        0,
    )
    .unwrap();
    assert!(!lab.pool.has(&b_small).unwrap() && !lab.pool.has(&b_large).unwrap());
    all_there(&lab.pool, &[a_own]);
    let nodes = a.roots.nodes().unwrap();
    assert_eq!(roots::node_names(&nodes), vec!["node-a".to_string()]);
}

#[test]
fn a_publish_killed_between_dropping_and_adding_roots_leaves_the_old_set_whole() {
    let lab = lab(|files| Arc::new(files));
    let b = PgRoots::new(lab.server.clone()).unwrap();
    let (kept, replaced) = (
        put(&lab.pool, &small("kept")),
        put(&lab.pool, &large("old")),
    );
    b.publish("node-b", "/r", &[kept, replaced].into()).unwrap();

    b.fail_between.store(true, Ordering::SeqCst);
    let new = Oid::of(b"not stored yet");
    let failed = b.publish("node-b", "/r", &[kept, new].into());
    assert!(failed.is_err(), "the failpoint did not stop the publish");
    assert_eq!(
        b.all_live().unwrap(),
        [kept, replaced].into(),
        "a publish stopped halfway left a mix"
    );

    // node-a's gc with no grace, meanwhile: node-b's old set still holds.
    let a = GcTeam::postgres(&lab.server, "node-a").unwrap();
    collect(&lab.pool, &a, || Ok(Vec::new()), false, 0).unwrap();
    all_there(&lab.pool, &[kept, replaced]);
}

/// A large tier whose deletes stop (as a daemon killed there would) once
/// `allowed` of them have run.
struct KilledAfter {
    files: LocalEngine,
    allowed: AtomicUsize,
}

impl Backend for KilledAfter {
    fn name(&self) -> &'static str {
        "local, killed mid-sweep"
    }
    fn has(&self, key: &[u8]) -> crate::pool::Result<bool> {
        self.files.has(key)
    }
    fn size(&self, key: &[u8]) -> crate::pool::Result<Option<u64>> {
        self.files.size(key)
    }
    fn get(&self, key: &[u8]) -> crate::pool::Result<Option<Blob>> {
        self.files.get(key)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> crate::pool::Result<bool> {
        self.files.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> crate::pool::Result<bool> {
        let left = self.allowed.load(Ordering::SeqCst);
        if left == 0 {
            return Err(PoolError::Io(crate::IoError::new(
                "unlink (killed here)",
                Path::new(&hex::encode(key)).to_path_buf(),
                std::io::Error::other("killed"),
            )));
        }
        self.allowed.store(left - 1, Ordering::SeqCst);
        self.files.delete(key)
    }
    fn quarantine(&self, key: &[u8]) -> crate::pool::Result<Option<String>> {
        self.files.quarantine(key)
    }
    fn list(&self) -> crate::pool::Result<Vec<Vec<u8>>> {
        self.files.list()
    }
    fn stage(&self) -> crate::pool::Result<Box<dyn Staged + '_>> {
        self.files.stage()
    }
}

#[test]
fn a_gc_killed_between_deleting_rows_and_unlinking_files_loses_nothing_live() {
    let engine = Arc::new(std::sync::OnceLock::<Arc<KilledAfter>>::new());
    let keep = engine.clone();
    let lab = lab(move |files| {
        let faulty = Arc::new(KilledAfter {
            files,
            allowed: AtomicUsize::new(1),
        });
        keep.set(faulty.clone()).ok();
        faulty
    });
    let a = GcTeam::postgres(&lab.server, "node-a").unwrap();
    let b = GcTeam::postgres(&lab.server, "node-b").unwrap();
    let live = [
        put(&lab.pool, &small("live a")),
        put(&lab.pool, &large("live a")),
        put(&lab.pool, &small("live b")),
        put(&lab.pool, &large("live b")),
    ];
    let garbage = [
        put(&lab.pool, &small("g1")),
        put(&lab.pool, &small("g2")),
        put(&lab.pool, &large("g3")),
        put(&lab.pool, &large("g4")),
        put(&lab.pool, &large("g5")),
    ];
    b.roots
        .publish("node-b", "/b", &[live[2], live[3]].into())
        .unwrap();
    let a_own = || Ok(own("/a", &live[..2]));

    // Killed after the kv rows went and one file was unlinked.
    let killed = collect(&lab.pool, &a, a_own, false, 0);
    assert!(killed.is_err(), "the kill did not stop the gc");
    all_there(&lab.pool, &live);
    let left: Vec<&Oid> = garbage
        .iter()
        .filter(|o| lab.pool.has(o).unwrap())
        .collect();
    assert_eq!(left.len(), 2, "the kill stopped elsewhere: {left:?} left");

    // The daemon restarts (no more faults): the next gc finishes the job.
    engine
        .get()
        .unwrap()
        .allowed
        .store(usize::MAX, Ordering::SeqCst);
    collect(&lab.pool, &a, a_own, false, 0).unwrap();
    all_there(&lab.pool, &live);
    for oid in garbage {
        assert!(!lab.pool.has(&oid).unwrap(), "garbage {oid} kept");
    }
}

#[test]
fn one_machine_s_gc_keeps_its_own_roots_only_and_drops_unregistered_repos() {
    let dir = tempfile::tempdir().unwrap();
    let kv: Arc<dyn Backend> = Arc::new(MemEngine::default());
    let pool = Pool::with_engines(kv.clone(), kv, THRESHOLD);
    let team = GcTeam::local(dir.path());
    let (x, y) = (put(&pool, &small("x")), put(&pool, &small("y")));
    let two = || Ok([own("/r1", &[x]), own("/r2", &[y])].concat());
    collect(&pool, &team, two, false, 0).unwrap();
    all_there(&pool, &[x, y]);
    // /r2 unregistered: its roots are dropped, not kept from the last gc.
    collect(&pool, &team, || Ok(own("/r1", &[x])), false, 0).unwrap();
    all_there(&pool, &[x]);
    assert!(!pool.has(&y).unwrap());
    let published = team.roots.nodes().unwrap();
    assert_eq!(published.len(), 1);
    assert_eq!((published[0].repo.as_str(), published[0].roots), ("/r1", 1));
}
