//! The registry's contract suite: one set of test bodies (each taking a
//! [`Fixture`]), run against every engine of the registry by
//! `for_every_engine!`, as `pool/tests.rs` runs the pool's. A new engine
//! joins with a fixture function (a fresh, empty registry over it, and how
//! to open it again as a restarted daemon would) and one line in the macro.
//! Tests of what no engine decides (the provisional oid, the mirror file)
//! stay plain tests below them.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{mpsc, Arc};

use sha2::{Digest, Sha256};

use super::*;
use crate::pool::{GcRecords, MemPins, Oid, PinTable, SeenLog};
use crate::stores::{MultipartUpload, SentObject};

/// A fresh registry over one engine, with the pin table and gc's records
/// of the same engine, and a folder for the test's files.
struct Fixture {
    reg: Registry,
    /// Opens the same records again, as a daemon that restarted would.
    reopen: Box<dyn Fn() -> Registry>,
    pins: Arc<dyn PinTable>,
    /// Opens gc's records (the same ones at each call).
    gc_records: Box<dyn Fn() -> Box<dyn GcRecords>>,
    dir: tempfile::TempDir,
    /// The database of a PostgreSQL fixture, dropped after the registry.
    _db: Option<crate::pg::TestDb>,
}

impl Fixture {
    /// The daemon restarts: another registry opens the same records, and
    /// the old one is dropped (once the new one is open: an engine allows
    /// two openers of the same records anyway, as two machines sharing one
    /// database are).
    fn restart(&mut self) {
        self.reg = (self.reopen)();
    }
}

/// The SQLite engine, in a folder it must create (private, 0700); pins
/// in memory; gc's records in their SQLite file.
fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/registry.sqlite");
    let reopen = Box::new(move || Registry::open(&path).unwrap());
    let seen = dir.path().join("gc.sqlite");
    Fixture {
        reg: reopen(),
        reopen,
        pins: Arc::new(MemPins::default()),
        gc_records: Box::new(move || Box::new(SeenLog::open(&seen).unwrap())),
        dir,
        _db: None,
    }
}

/// The PostgreSQL engine in a database of its own on the tests' server
/// (`DRSD_TEST_PG_URL`; a test fails, naming it, when it is unset), as one
/// node; a restart opens it again as the same node. Pins in memory and
/// gc's records in SQLite until their PostgreSQL tables join this fixture.
fn postgres() -> Fixture {
    let db = crate::pg::TestDb::create();
    let dir = tempfile::tempdir().unwrap();
    let url = db.url.clone();
    let journals = dir.path().to_path_buf();
    let reopen = Box::new(move || {
        pg_registry(
            &url,
            "node-a",
            std::time::Duration::from_secs(60),
            &journals,
        )
    });
    let seen = dir.path().join("gc.sqlite");
    Fixture {
        reg: reopen(),
        reopen,
        pins: Arc::new(MemPins::default()),
        gc_records: Box::new(move || Box::new(SeenLog::open(&seen).unwrap())),
        dir,
        _db: Some(db),
    }
}

/// A registry over the PostgreSQL engine at `url`, as node `node`, its
/// Fence journal the node's SQLite file in `journals` (the same file when
/// the node opens the registry again, as in the daemon's state folder).
pub(super) fn pg_registry(
    url: &str,
    node: &str,
    lease: std::time::Duration,
    journals: &Path,
) -> Registry {
    let server = crate::pg::PgServer::open(url).unwrap();
    let name = postgres::NodeName {
        name: node.into(),
        host: "test-host".into(),
        user: "test-user".into(),
    };
    let urls = postgres::PrivateUrls::in_memory();
    let journal = journals.join(node).join("fence.sqlite");
    Registry::with_engine(
        Arc::new(PgRegistry::open(server, name, lease, urls).unwrap()),
        Arc::new(SqliteRegistry::open(&journal).unwrap()),
    )
}

/// The pins and gc's records of a lab's team database (`pool/pg_pins.rs`,
/// `pool/pg_seen.rs`), in a database of their own on the tests' server
/// (`DRSD_TEST_PG_URL`: the tests fail without it); the registry beside
/// them is SQLite's, which the cases run here do not touch.
fn team_pool_tables() -> Fixture {
    let mut f = sqlite();
    let db = crate::pg::TestDb::create();
    let server = crate::pg::PgServer::open(&db.url).unwrap();
    f.pins = Arc::new(crate::pool::PgPins::new(server.clone(), "test-node").unwrap());
    // The closure owns the database: it is dropped with the fixture.
    f.gc_records = Box::new(move || {
        let _owner = &db;
        Box::new(crate::pool::PgGcRecords::new(server.clone()).unwrap())
    });
    f
}

/// The cases of pins and gc's records, over the team database's tables:
/// `team_tables::<case>`.
macro_rules! for_the_team_tables {
    ($($case:ident),* $(,)?) => {
        mod team_tables {
            $(
                #[test]
                fn $case() {
                    super::$case(super::team_pool_tables());
                }
            )*
        }
    };
}

for_the_team_tables!(
    a_key_pinned_twice_is_left_alone_until_both_pins_are_released,
    a_pin_of_a_key_being_swept_waits_until_the_sweep_of_it_is_done,
    an_entry_counts_from_its_last_reference_or_its_first_sighting,
);

/// One test per engine for a contract case: `<case>::<engine>`.
macro_rules! for_every_engine {
    ($case:ident) => {
        mod $case {
            #[test]
            fn sqlite() {
                super::$case(super::sqlite());
            }
            #[test]
            fn postgres() {
                super::$case(super::postgres());
            }
        }
    };
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {$( for_every_engine!($case); )*};
}

contract!(
    each_step_of_a_fence_upload_is_recorded_and_the_did_once_known_is_kept,
    the_parts_of_a_fence_upload_are_kept_while_it_is_open_and_dropped_after,
    a_worker_of_small_objects_is_not_due_for_a_large_object_s_job,
    recorded_objects_are_found_by_location_and_remember_their_content_oid,
    a_registry_reopens_with_its_contents,
    the_mirror_round_trips_and_restores_idempotently_without_overriding,
    a_change_is_appended_to_the_mirror_the_daemon_wrote_and_the_last_line_of_a_path_wins,
    a_mirror_changed_behind_the_daemon_is_rewritten_whole_and_a_planted_link_is_not_followed,
    appended_lines_are_folded_into_a_whole_rewrite_once_they_outnumber_the_entries,
    the_provisional_entries_of_a_repo_are_those_whose_pointer_is_not_their_content,
    an_object_keeps_the_time_it_was_first_recorded,
    the_queue_claims_backs_off_survives_a_restart_and_finishes_with_the_content_oid,
    a_job_failed_for_good_is_not_taken_again_until_it_is_retried,
    the_small_object_lane_claims_only_objects_up_to_its_size,
    a_done_job_with_a_note_is_listed_after_the_open_ones_and_counted_done,
    a_content_oid_named_by_a_claim_is_queued_for_a_read_and_only_a_read_marks_it_read,
    a_mirror_edited_in_place_with_its_mtime_set_back_is_rewritten_whole,
    the_objects_of_jobs_in_a_state_are_listed_whole,
    a_recorded_upload_is_listed_until_it_ends_and_survives_a_reopen,
    a_sent_object_is_found_by_its_key_and_a_later_record_replaces_it,
    a_registration_begun_and_never_answered_is_listed_as_unfinished,
    beginning_again_keeps_the_did_already_recorded,
    a_key_pinned_twice_is_left_alone_until_both_pins_are_released,
    a_pin_of_a_key_being_swept_waits_until_the_sweep_of_it_is_done,
    an_entry_counts_from_its_last_reference_or_its_first_sighting,
    two_claimers_at_once_never_get_the_same_job,
);

fn oid(hex: &str) -> Oid {
    hex.parse().unwrap()
}

pub(super) fn object(url: &str, etag: &str, size: u64) -> ForeignObject {
    ForeignObject {
        url: url.into(),
        bucket: None,
        key: None,
        version_id: None,
        etag: etag.into(),
        size,
        provisional_oid: provisional_oid(url, etag),
        content_oid: None,
        drs_id: None,
        last_modified: None,
        recorded_at: 1,
        md5: None,
        content_read: false,
    }
}

pub(super) fn entry(path: &str, o: &ForeignObject) -> Entry {
    Entry {
        path: path.into(),
        oid: o.content_oid.unwrap_or(o.provisional_oid),
        object: o.clone(),
    }
}

#[test]
fn the_provisional_oid_is_the_etag_s_sha256_only_for_content_etags() {
    let md5 = "900150983cd24fb0d6963f7d28e17f72";
    let sha = |s: &str| hex::encode(Sha256::digest(s.as_bytes()));
    for etag in [md5.to_string(), format!("\"{md5}\""), format!("{md5}-12")] {
        let bare = etag.trim_matches('"');
        assert_eq!(
            provisional_oid("s3://b/k", &etag).to_hex(),
            sha(bare),
            "{etag}"
        );
        assert_eq!(
            provisional_oid("https://h/k?sig=1", &etag).to_hex(),
            sha(bare),
            "{etag}"
        );
    }
    // nginx-style: scoped by the URL without its query.
    let a = provisional_oid("https://h/a.bam?X-Amz-Signature=1", "5f0-1a");
    assert_eq!(a.to_hex(), sha("https://h/a.bam\n5f0-1a"));
    assert_ne!(a, provisional_oid("https://h/b.bam", "5f0-1a"));
    for not_md5 in ["5f0-1a", &md5[1..], &format!("{md5}-"), &format!("{md5}-x")] {
        assert!(!is_content_etag(not_md5), "{not_md5}");
    }
}

fn recorded_objects_are_found_by_location_and_remember_their_content_oid(f: Fixture) {
    let reg = &f.reg;
    let (a, b) = (Path::new("/repos/a"), Path::new("/repos/b"));
    let o = object("https://h/x.bam", "5f-10", 16);
    reg.record(a, &[entry("x.bam", &o)]).unwrap();
    assert_eq!(
        reg.lookup_by_location("https://h/x.bam", "5f-10", 16)
            .unwrap(),
        Some(o.clone())
    );
    assert_eq!(
        reg.lookup_by_location("https://h/x.bam", "5f-10", 17)
            .unwrap(),
        None
    );
    reg.record(b, &[entry("dir/y.bam", &o)]).unwrap();
    let content = oid(&"11".repeat(32));
    let mut repos = reg
        .set_content_oid("https://h/x.bam", "5f-10", 16, &content)
        .unwrap();
    repos.sort();
    assert_eq!(repos, vec![a.to_path_buf(), b.to_path_buf()]);
    let found = reg
        .lookup_by_location("https://h/x.bam", "5f-10", 16)
        .unwrap()
        .unwrap();
    assert_eq!(found.content_oid, Some(content));
    // Recording the object again without a content oid keeps the known one.
    reg.record(a, &[entry("x.bam", &o)]).unwrap();
    assert_eq!(
        reg.for_repo(a).unwrap()[0].object.content_oid,
        Some(content)
    );
    assert_eq!(reg.counts().unwrap(), (1, 1));
    assert_eq!(reg.for_repo(b).unwrap()[0].path, "dir/y.bam");
}

fn a_registry_reopens_with_its_contents(mut f: Fixture) {
    let o = object("s3://b/k", "e", 1);
    f.reg.record(Path::new("/r"), &[entry("k", &o)]).unwrap();
    f.restart();
    assert_eq!(
        f.reg.for_repo(Path::new("/r")).unwrap(),
        vec![entry("k", &o)]
    );
}

fn the_mirror_round_trips_and_restores_idempotently_without_overriding(f: Fixture) {
    let common = common_in(&f);
    let file = mirror::path_in(&common);
    assert!(mirror::read(&file).unwrap().is_empty());
    let repo = Path::new("/repos/a");
    let x = object("https://h/x", "1-1", 1);
    let y = object("https://h/y", "2-2", 2);
    let entries = vec![entry("x", &x), entry("y", &y)];
    mirror::write(&common, &entries).unwrap();
    assert!(mirror::is_private(&file));
    assert_eq!(mirror::read(&file).unwrap(), entries);

    let reg = &f.reg;
    // The registry already knows x at path "x" pointing elsewhere: it wins.
    let z = object("https://h/z", "3-3", 3);
    reg.record(repo, &[entry("x", &z)]).unwrap();
    assert_eq!(reg.restore(repo, &entries).unwrap(), 1);
    assert_eq!(reg.restore(repo, &entries).unwrap(), 0);
    let now: Vec<_> = reg
        .for_repo(repo)
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.object.url))
        .collect();
    assert_eq!(
        now,
        vec![
            ("x".into(), "https://h/z".into()),
            ("y".into(), "https://h/y".into())
        ]
    );
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).unwrap().ino()
}

fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

/// A repo's common git folder in the fixture's folder.
fn common_in(f: &Fixture) -> std::path::PathBuf {
    let common = f.dir.path().join(".git");
    std::fs::create_dir(&common).unwrap();
    common
}

fn a_change_is_appended_to_the_mirror_the_daemon_wrote_and_the_last_line_of_a_path_wins(
    f: Fixture,
) {
    let (reg, common) = (&f.reg, common_in(&f));
    let repo = Path::new("/repos/a");
    let file = mirror::path_in(&common);
    let (x, y) = (
        object("https://h/x", "1-1", 1),
        object("https://h/y", "2-2", 2),
    );
    reg.record_and_mirror(repo, &common, &[entry("x", &x), entry("y", &y)], &[])
        .unwrap();
    let first = inode(&file);
    assert_eq!(line_count(&file), 2);

    // x is hashed: its pointer promoted, and y's object learnt its content
    // oid though y's pointer stays provisional (a committed pointer).
    let content = oid(&"c".repeat(64));
    reg.set_content_oid("https://h/x", "1-1", 1, &content)
        .unwrap();
    reg.set_content_oid("https://h/y", "2-2", 2, &content)
        .unwrap();
    let promoted = Entry {
        oid: content,
        ..entry("x", &x)
    };
    reg.record_and_mirror(repo, &common, std::slice::from_ref(&promoted), &["y"])
        .unwrap();
    assert_eq!(inode(&file), first, "appended, not rewritten");
    assert_eq!(line_count(&file), 4);
    assert!(mirror::is_private(&file));
    assert_eq!(mirror::read(&file).unwrap(), reg.for_repo(repo).unwrap());
    let read = mirror::read(&file).unwrap();
    assert_eq!(read[0].oid, content);
    assert_eq!(read[1].object.content_oid, Some(content));
    assert!(read[1].is_provisional());

    // Nothing changed: nothing written.
    reg.record_and_mirror(repo, &common, &[], &[]).unwrap();
    assert_eq!(line_count(&file), 4);
}

fn a_mirror_changed_behind_the_daemon_is_rewritten_whole_and_a_planted_link_is_not_followed(
    f: Fixture,
) {
    let (reg, common) = (&f.reg, common_in(&f));
    let repo = Path::new("/repos/a");
    let file = mirror::path_in(&common);
    let x = object("https://h/x", "1-1", 1);
    let y = object("https://h/y", "2-2", 2);
    reg.record_and_mirror(repo, &common, &[entry("x", &x)], &[])
        .unwrap();

    // Another writer replaced it with a file of the same length.
    let text = std::fs::read(&file).unwrap();
    let other = file.with_extension("other");
    std::fs::write(&other, &text).unwrap();
    std::fs::rename(&other, &file).unwrap();
    let planted = inode(&file);
    reg.record_and_mirror(repo, &common, &[entry("y", &y)], &[])
        .unwrap();
    assert_ne!(inode(&file), planted, "rewritten, not appended to");
    assert_eq!(line_count(&file), 2);
    assert_eq!(mirror::read(&file).unwrap(), reg.for_repo(repo).unwrap());

    // A link to a file of the user's: neither appended to nor replaced.
    let outside = f.dir.path().join("outside");
    std::fs::write(&outside, "mine\n").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&outside, &file).unwrap();
    let z = object("https://h/z", "3-3", 3);
    let err = reg
        .record_and_mirror(repo, &common, &[entry("z", &z)], &[])
        .unwrap_err();
    assert!(err.to_string().contains("registry.jsonl"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "mine\n");
    assert!(std::fs::symlink_metadata(&file)
        .unwrap()
        .file_type()
        .is_symlink());
}

fn appended_lines_are_folded_into_a_whole_rewrite_once_they_outnumber_the_entries(f: Fixture) {
    let (reg, common) = (&f.reg, common_in(&f));
    let repo = Path::new("/repos/a");
    let file = mirror::path_in(&common);
    let x = object("https://h/x", "1-1", 1);
    reg.record_and_mirror(repo, &common, &[entry("x", &x)], &[])
        .unwrap();
    let small = inode(&file);
    let many: Vec<Entry> = (0..1100)
        .map(|i| {
            entry(
                &format!("m{i:04}"),
                &object(&format!("https://h/m{i}"), "9-9", 9),
            )
        })
        .collect();
    reg.record_and_mirror(repo, &common, &many, &[]).unwrap();
    let folded = inode(&file);
    assert_ne!(folded, small, "1,101 lines for 1 entry: rewritten");
    assert_eq!(line_count(&file), 1101);
    reg.record_and_mirror(repo, &common, &many[..10], &[])
        .unwrap();
    assert_eq!(inode(&file), folded, "10 more of 1,101: appended");
    assert_eq!(line_count(&file), 1111);
    assert_eq!(mirror::read(&file).unwrap().len(), 1101);
}

#[test]
fn a_mirror_line_cut_short_at_the_end_is_left_out_and_one_inside_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let common = tmp.path().join(".git");
    std::fs::create_dir(&common).unwrap();
    let file = mirror::path_in(&common);
    let x = object("https://h/x", "1-1", 1);
    mirror::write(&common, &[entry("x", &x)]).unwrap();
    let mut text = std::fs::read_to_string(&file).unwrap();
    let whole = text.clone();
    text.push_str(&whole[..whole.len() / 2]);
    std::fs::write(&file, &text).unwrap();
    assert_eq!(mirror::read(&file).unwrap(), vec![entry("x", &x)]);
    text.push('\n');
    std::fs::write(&file, &text).unwrap();
    let err = mirror::read(&file).unwrap_err().to_string();
    assert!(err.contains("registry.jsonl line 2"), "{err}");
}

fn the_provisional_entries_of_a_repo_are_those_whose_pointer_is_not_their_content(f: Fixture) {
    let reg = &f.reg;
    let repo = Path::new("/repos/a");
    let content = oid(&"c".repeat(64));
    let (a, b, c) = (
        object("https://h/a", "1-1", 1),
        object("https://h/b", "2-2", 2),
        object("https://h/c", "3-3", 3),
    );
    let promoted = Entry {
        oid: content,
        ..entry("b", &b)
    };
    reg.record(repo, &[entry("a", &a), promoted, entry("c", &c)])
        .unwrap();
    reg.record(Path::new("/repos/other"), &[entry("z", &a)])
        .unwrap();
    // b's pointer carries its content; c's object is hashed, its pointer not.
    reg.set_content_oid("https://h/b", "2-2", 2, &content)
        .unwrap();
    reg.set_content_oid("https://h/c", "3-3", 3, &content)
        .unwrap();
    let all = reg.for_repo(repo).unwrap();
    let expected: Vec<Entry> = all.into_iter().filter(Entry::is_provisional).collect();
    assert_eq!(reg.provisional_for_repo(repo).unwrap(), expected);
    let paths: Vec<String> = expected.into_iter().map(|e| e.path).collect();
    assert_eq!(paths, ["a", "c"]);
    let at: Vec<String> = reg
        .entries_at(repo, &["c", "nope", "b"])
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(at, ["c", "b"]);
}

fn an_object_keeps_the_time_it_was_first_recorded(f: Fixture) {
    let reg = &f.reg;
    let at = |t| ForeignObject {
        recorded_at: t,
        ..object("https://h/x", "1-1", 1)
    };
    let recorded = || {
        reg.lookup_by_location("https://h/x", "1-1", 1)
            .unwrap()
            .unwrap()
            .recorded_at
    };
    reg.record(Path::new("/repos/c"), &[entry("x", &at(50))])
        .unwrap();
    // A mirror written earlier comes back with the first time.
    reg.restore(Path::new("/repos/a"), &[entry("x", &at(10))])
        .unwrap();
    assert_eq!(recorded(), 10);
    reg.record(Path::new("/repos/d"), &[entry("x", &at(90))])
        .unwrap();
    assert_eq!(recorded(), 10);
}

#[test]
fn a_bad_mirror_line_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("registry.jsonl");
    std::fs::write(&file, "\n{\"path\":1}\n").unwrap();
    let err = mirror::read(&file).unwrap_err().to_string();
    assert!(err.contains("registry.jsonl line 2"), "{err}");
}

fn the_queue_claims_backs_off_survives_a_restart_and_finishes_with_the_content_oid(mut f: Fixture) {
    let reg = &f.reg;
    let small = object("s3://b/small", "0123456789abcdef0123456789abcdef", 10);
    let big = object("s3://b/big", "fedcba9876543210fedcba9876543210", 1000);
    reg.record(Path::new("/r"), &[entry("s", &small), entry("b", &big)])
        .unwrap();
    assert_eq!(reg.queue_unhashed(Some(100)).unwrap(), 2);
    assert_eq!(reg.queue_unhashed(Some(100)).unwrap(), 0, "idempotent");
    let c = reg.job_counts().unwrap();
    assert_eq!((c.queued, c.held), (1, 1), "the big one is over the limit");

    let job = reg.claim(50).unwrap().expect("the small one is due");
    assert_eq!(job.object.url, "s3://b/small");
    assert!(reg.claim(50).unwrap().is_none(), "nothing else is due");
    reg.job_failed(&job, "store down", Some(100)).unwrap();
    assert!(reg.claim(99).unwrap().is_none(), "backing off");
    assert_eq!(reg.next_due().unwrap(), Some(100));
    let again = reg.claim(100).unwrap().expect("due again");
    assert_eq!(again.attempts, 1);

    // A kill while running: the next daemon queues it again.
    f.restart();
    let reg = &f.reg;
    assert_eq!(reg.job_counts().unwrap().running, 1);
    assert_eq!(reg.requeue_running().unwrap(), 1);
    let job = reg.claim(100).unwrap().unwrap();
    let repos = reg
        .job_done(&job, &oid(&"ab".repeat(32)), Some(&"cd".repeat(16)), None)
        .unwrap();
    assert_eq!(repos, vec![std::path::PathBuf::from("/r")]);
    let known = reg
        .lookup_by_location("s3://b/small", &small.etag, 10)
        .unwrap();
    let known = known.unwrap();
    assert_eq!(known.content_oid, Some(oid(&"ab".repeat(32))));
    assert_eq!(known.md5, Some("cd".repeat(16)), "the md5 of the same pass");
    assert_eq!(reg.queue_unhashed(Some(100)).unwrap(), 0);

    // A larger limit releases the held one.
    assert_eq!(reg.release_held(None).unwrap(), 1);
    let c = reg.job_counts().unwrap();
    assert_eq!((c.queued, c.held, c.done), (1, 0, 1));
    let open = reg.open_jobs(10).unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].url, "s3://b/big");
}

fn a_job_failed_for_good_is_not_taken_again_until_it_is_retried(f: Fixture) {
    let reg = &f.reg;
    let obj = object("s3://b/x", "0123456789abcdef0123456789abcdef", 10);
    reg.record(Path::new("/r"), &[entry("x", &obj)]).unwrap();
    reg.queue_unhashed(None).unwrap();
    let job = reg.claim(50).unwrap().unwrap();
    reg.job_failed(&job, "GET s3://b/x: HTTP 404", None)
        .unwrap();
    assert!(reg.claim(u64::MAX / 2).unwrap().is_none(), "never due");
    assert_eq!(reg.next_due().unwrap(), None);
    let c = reg.job_counts().unwrap();
    assert_eq!((c.failed, c.retrying, c.queued), (1, 0, 0));
    let (state, why) = reg.job_state("s3://b/x", &obj.etag, 10).unwrap().unwrap();
    assert_eq!(state, JobState::Failed);
    assert_eq!(why.as_deref(), Some("GET s3://b/x: HTTP 404"));
    let open = reg.open_jobs(10).unwrap();
    assert_eq!((open[0].state, open[0].retry_at), (JobState::Failed, None));

    assert_eq!(
        reg.retry_failed(std::slice::from_ref(&obj.provisional_oid))
            .unwrap(),
        1
    );
    let again = reg.claim(50).unwrap().expect("queued again");
    assert_eq!(again.attempts, 0, "a retried job starts afresh");
    assert_eq!(
        reg.retry_failed(std::slice::from_ref(&obj.provisional_oid))
            .unwrap(),
        0
    );
}

#[test]
fn a_job_waiting_for_its_next_try_in_an_older_registry_is_retrying() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.sqlite");
    let reg = Registry::open(&path).unwrap();
    let obj = object("s3://b/x", "0123456789abcdef0123456789abcdef", 10);
    reg.record(Path::new("/r"), &[entry("x", &obj)]).unwrap();
    reg.queue_unhashed(None).unwrap();
    drop(reg);
    // As the schema before `retrying` left it: `failed` meant "tried again later".
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "UPDATE jobs SET state = 'failed', next_at = 5; DROP TABLE uploads; DROP TABLE indexd_records;
         ALTER TABLE objects DROP COLUMN content_read; DROP TABLE sent; DROP TABLE fence_uploads;
         DROP TABLE fence_upload_parts;
         PRAGMA user_version = 3;",
    )
        .unwrap();
    drop(conn);
    let reg = Registry::open(&path).unwrap();
    assert_eq!(reg.job_counts().unwrap().retrying, 1);
    assert!(reg.claim(5).unwrap().is_some());
}

#[test]
fn a_mirror_line_keeps_its_oids_as_hex_and_a_line_with_a_bad_oid_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let common = tmp.path().join(".git");
    std::fs::create_dir(&common).unwrap();
    let mut o = object("https://h/x", "1-1", 1);
    o.content_oid = Some(Oid::of(b"x"));
    mirror::write(&common, &[entry("x", &o)]).unwrap();
    let text = std::fs::read_to_string(mirror::path_in(&common)).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(line["oid"], Oid::of(b"x").to_hex());
    assert_eq!(line["provisional_oid"], o.provisional_oid.to_hex());
    assert_eq!(line["content_oid"], Oid::of(b"x").to_hex());
    let bad = text.replace(&Oid::of(b"x").to_hex(), "not-an-oid");
    std::fs::write(mirror::path_in(&common), bad).unwrap();
    let err = mirror::read(&mirror::path_in(&common))
        .unwrap_err()
        .to_string();
    assert!(err.contains("registry.jsonl line 1"), "{err}");
}

#[test]
fn a_pointer_is_provisional_until_it_carries_its_object_s_content_oid() {
    let mut o = object("https://h/x", "1-1", 1);
    let mut e = entry("x", &o);
    assert!(e.is_provisional(), "nothing hashed yet");
    o.content_oid = Some(Oid::of(b"x"));
    e.object = o.clone();
    assert!(e.is_provisional(), "hashed, not promoted");
    e.oid = Oid::of(b"x");
    assert!(!e.is_provisional(), "promoted");
    // Added by its checksum, with no ETag: the content oid from the start.
    o.provisional_oid = Oid::of(b"x");
    assert!(!entry("x", &o).is_provisional());
}

fn the_small_object_lane_claims_only_objects_up_to_its_size(f: Fixture) {
    let reg = &f.reg;
    let big = object("s3://b/big", "fedcba9876543210fedcba9876543210", 1000);
    let small = object("s3://b/small", "0123456789abcdef0123456789abcdef", 10);
    // The big one first, so it is the one due first.
    reg.record(Path::new("/r"), &[entry("b", &big)]).unwrap();
    reg.queue_unhashed(None).unwrap();
    reg.record(Path::new("/r"), &[entry("s", &small)]).unwrap();
    reg.queue_unhashed(None).unwrap();

    let job = reg.claim_up_to(50, 999).unwrap().expect("the small one");
    assert_eq!(job.object.url, "s3://b/small");
    assert!(
        reg.claim_up_to(50, 999).unwrap().is_none(),
        "the big one waits"
    );
    let job = reg.claim(50).unwrap().expect("any size");
    assert_eq!(job.object.url, "s3://b/big");
}

fn a_done_job_with_a_note_is_listed_after_the_open_ones_and_counted_done(f: Fixture) {
    let reg = &f.reg;
    let noted = object("s3://b/a", "0123456789abcdef0123456789abcdef-15", 10);
    let plain = object("s3://b/b", "fedcba9876543210fedcba9876543210", 10);
    let open = object("s3://b/c", "00112233445566778899aabbccddeeff", 10);
    let entries = [entry("a", &noted), entry("b", &plain), entry("c", &open)];
    reg.record(Path::new("/r"), &entries).unwrap();
    reg.queue_unhashed(None).unwrap();
    let note = "multipart ETag not verifiable: 15 parts of 10 bytes";
    for (n, say) in [(1, Some(note)), (2, None)] {
        let job = reg.claim(50).unwrap().unwrap();
        reg.job_done(&job, &oid(&format!("{n}").repeat(64)), None, say)
            .unwrap();
    }
    assert_eq!(reg.job_counts().unwrap().done, 2);
    let listed = reg.open_jobs(10).unwrap();
    let seen: Vec<_> = listed
        .iter()
        .map(|j| (j.url.as_str(), j.state, j.error.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("s3://b/c", JobState::Queued, None),
            ("s3://b/a", JobState::Done, Some(note)),
        ]
    );
}

fn a_content_oid_named_by_a_claim_is_queued_for_a_read_and_only_a_read_marks_it_read(f: Fixture) {
    let reg = &f.reg;
    let mut claimed = object("https://h/named.vcf", "5f0-1a", 10);
    claimed.content_oid = Some(Oid::of(b"what a header said"));
    let mut read = object("https://h/read.vcf", "5f1-1a", 10);
    read.content_oid = Some(Oid::of(b"hashed at add-url"));
    read.content_read = true;
    reg.record(
        Path::new("/r"),
        &[entry("named", &claimed), entry("read", &read)],
    )
    .unwrap();
    assert_eq!(
        reg.queue_unhashed(None).unwrap(),
        1,
        "only the claim is read again"
    );
    let job = reg
        .claim(i64::MAX as u64)
        .unwrap()
        .expect("the claim's job");
    assert_eq!(job.object.url.expose(), "https://h/named.vcf");
    assert!(!job.object.content_read);
    let known = |url: &str, etag: &str| reg.lookup_by_location(url, etag, 10).unwrap().unwrap();
    // Recorded again from a mirror (a claim): still not read.
    reg.restore(Path::new("/r"), &[entry("named", &claimed)])
        .unwrap();
    assert!(!known("https://h/named.vcf", "5f0-1a").content_read);
    reg.job_done(&job, &claimed.content_oid.unwrap(), None, None)
        .unwrap();
    assert!(known("https://h/named.vcf", "5f0-1a").content_read);
    assert!(known("https://h/read.vcf", "5f1-1a").content_read);
    // The mirror never carries it: a file in the repo is a claim too.
    let line = serde_json::to_string(&read).unwrap();
    assert!(!line.contains("content_read"), "{line}");
}

fn a_mirror_edited_in_place_with_its_mtime_set_back_is_rewritten_whole(f: Fixture) {
    let (reg, common) = (&f.reg, common_in(&f));
    let repo = Path::new("/repos/a");
    let file = mirror::path_in(&common);
    let x = object("https://h/x", "1-1", 1);
    let y = object("https://h/y", "2-2", 2);
    reg.record_and_mirror(repo, &common, &[entry("x", &x)], &[])
        .unwrap();

    // Same inode, same length, same mtime: only the ctime tells.
    let before = std::fs::metadata(&file).unwrap();
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("https://h/x", "https://q/x");
    let f = std::fs::File::options().write(true).open(&file).unwrap();
    std::io::Write::write_all(&mut &f, text.as_bytes()).unwrap();
    f.set_modified(before.modified().unwrap()).unwrap();
    drop(f);
    let edited = inode(&file);
    assert_eq!(edited, std::os::unix::fs::MetadataExt::ino(&before));

    reg.record_and_mirror(repo, &common, &[entry("y", &y)], &[])
        .unwrap();
    assert_ne!(inode(&file), edited, "rewritten, not appended to");
    assert_eq!(mirror::read(&file).unwrap(), reg.for_repo(repo).unwrap());
}

fn the_objects_of_jobs_in_a_state_are_listed_whole(f: Fixture) {
    let reg = &f.reg;
    let obj = object("https://h/owned.vcf", "5f2-1a", 10);
    reg.record(Path::new("/r"), &[entry("owned", &obj)])
        .unwrap();
    reg.queue_unhashed(None).unwrap();
    let queued = reg.job_objects(&[JobState::Queued]).unwrap();
    assert_eq!(queued, vec![obj]);
    assert!(reg.job_objects(&[JobState::Failed]).unwrap().is_empty());
}

fn upload(id: &str) -> MultipartUpload {
    MultipartUpload {
        endpoint: "http://127.0.0.1:8000/".into(),
        bucket: "b".into(),
        key: "team/ab/cd/abcd".into(),
        upload_id: id.into(),
    }
}

fn a_recorded_upload_is_listed_until_it_ends_and_survives_a_reopen(mut f: Fixture) {
    f.reg.upload_started(&upload("one")).unwrap();
    f.reg.upload_started(&upload("two")).unwrap();
    f.restart();
    let registry = &f.reg;
    let mut open = registry.open_uploads().unwrap();
    open.sort_by(|a, b| a.upload_id.cmp(&b.upload_id));
    assert_eq!(open, vec![upload("one"), upload("two")]);
    registry.upload_ended(&upload("one")).unwrap();
    assert_eq!(registry.open_uploads().unwrap(), vec![upload("two")]);
}

fn a_sent_object_is_found_by_its_key_and_a_later_record_replaces_it(f: Fixture) {
    let registry = &f.reg;
    let sent = |oid: Oid, etag: &str| SentObject {
        endpoint: "http://127.0.0.1:8000/".into(),
        bucket: "b".into(),
        key: "lfs/ab/cd/x".into(),
        oid,
        size: 5,
        etag: etag.into(),
    };
    assert_eq!(
        registry
            .sent_object("http://127.0.0.1:8000/", "b", "lfs/ab/cd/x")
            .unwrap(),
        None
    );
    registry.record_sent(&sent(Oid::of(b"one"), "e1")).unwrap();
    registry.record_sent(&sent(Oid::of(b"two"), "e2")).unwrap();
    let got = registry
        .sent_object("http://127.0.0.1:8000/", "b", "lfs/ab/cd/x")
        .unwrap();
    assert_eq!(got, Some(sent(Oid::of(b"two"), "e2")));
    assert_eq!(
        registry
            .sent_object("http://other/", "b", "lfs/ab/cd/x")
            .unwrap(),
        None
    );
}

fn a_registration_begun_and_never_answered_is_listed_as_unfinished(f: Fixture) {
    let r = &f.reg;
    let oid = Oid::from_digest([7; 32]);
    r.indexd_begin("http://i", oid).unwrap();
    assert_eq!(r.indexd_unfinished("http://i").unwrap(), vec![oid]);
    assert_eq!(
        r.indexd_registration("http://i", oid).unwrap(),
        Some(IndexdRegistration { oid, did: None })
    );
    r.indexd_registered("http://i", oid, "dg.TEST/1").unwrap();
    assert!(r.indexd_unfinished("http://i").unwrap().is_empty());
    let done = r.indexd_registration("http://i", oid).unwrap().unwrap();
    assert_eq!(done.did.as_deref(), Some("dg.TEST/1"));
}

fn beginning_again_keeps_the_did_already_recorded(f: Fixture) {
    let r = &f.reg;
    let oid = Oid::from_digest([9; 32]);
    r.indexd_registered("http://i", oid, "dg.TEST/2").unwrap();
    r.indexd_begin("http://i", oid).unwrap();
    let got = r.indexd_registration("http://i", oid).unwrap().unwrap();
    assert_eq!(got.did.as_deref(), Some("dg.TEST/2"));
    assert_eq!(r.indexd_registration("http://other", oid).unwrap(), None);
}

fn a_key_pinned_twice_is_left_alone_until_both_pins_are_released(f: Fixture) {
    let (a, b) = (Oid::of(b"a"), Oid::of(b"b"));
    f.pins.pin(a).unwrap();
    f.pins.pin(a).unwrap();
    let mut runs = 0;
    let mut sweep = |oid| {
        let mut delete = || {
            runs += 1;
            Ok(())
        };
        f.pins.unless_pinned(oid, &mut delete).unwrap()
    };
    assert!(!sweep(a), "pinned twice");
    assert!(sweep(b), "never pinned");
    f.pins.unpin(a);
    assert!(!sweep(a), "pinned once more");
    f.pins.unpin(a);
    assert!(sweep(a), "released");
    assert_eq!(runs, 2, "the sweep ran only where it was let");
}

fn a_pin_of_a_key_being_swept_waits_until_the_sweep_of_it_is_done(f: Fixture) {
    let oid = Oid::of(b"swept");
    let (started, started_rx) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let deleted = std::sync::atomic::AtomicBool::new(false);
    let (pins, deleted) = (&f.pins, &deleted);
    std::thread::scope(|s| {
        let sweeper = s.spawn(move || {
            pins.unless_pinned(oid, &mut || {
                started.send(()).unwrap();
                // Wait until the pinner is about to pin, then a while.
                go_rx.recv().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                deleted.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            })
            .unwrap()
        });
        started_rx.recv().unwrap();
        go.send(()).unwrap();
        pins.pin(oid).unwrap();
        assert!(
            deleted.load(std::sync::atomic::Ordering::SeqCst),
            "the pin was taken while the sweep of its key was running"
        );
        assert!(sweeper.join().unwrap());
    });
    let mut ran = false;
    let mut sweep = || {
        ran = true;
        Ok(())
    };
    assert!(!f.pins.unless_pinned(oid, &mut sweep).unwrap());
    assert!(!ran);
}

fn an_entry_counts_from_its_last_reference_or_its_first_sighting(f: Fixture) {
    let (a, b) = (Oid::of(b"a"), Oid::of(b"b"));
    let key = |o: &Oid| o.as_bytes().to_vec();
    let listed: HashSet<Vec<u8>> = [key(&a), key(&b)].into();
    let mut log = (f.gc_records)();
    // First gc: a referenced, b first seen; both at 100.
    let last = log
        .last_referenced(&listed, &[a].into(), 100, true)
        .unwrap();
    assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 100));
    // A dry run at 150 with a referenced: computed, not written.
    let last = log
        .last_referenced(&listed, &[a].into(), 150, false)
        .unwrap();
    assert_eq!((last[&key(&a)], last[&key(&b)]), (150, 100));
    // Reopened (a restarted daemon): neither referenced at 200.
    let mut log = (f.gc_records)();
    let last = log
        .last_referenced(&listed, &HashSet::new(), 200, true)
        .unwrap();
    assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 100));
    // b left the pool: its record goes; a new sighting of it starts over.
    let only_a: HashSet<Vec<u8>> = [key(&a)].into();
    log.last_referenced(&only_a, &HashSet::new(), 300, true)
        .unwrap();
    let last = log
        .last_referenced(&listed, &HashSet::new(), 400, true)
        .unwrap();
    assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 400));
}

fn each_step_of_a_fence_upload_is_recorded_and_the_did_once_known_is_kept(mut f: Fixture) {
    let oid = Oid::from_digest([3; 32]);
    let c = "gen3+http://c";
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Begun, Some("d-1"), None)
        .unwrap();
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Uploading, None, Some("up-1"))
        .unwrap();
    f.restart();
    let got = f.reg.fence_journal().fence_upload(c, oid).unwrap().unwrap();
    assert_eq!(got.did.as_deref(), Some("d-1"));
    assert_eq!(got.step, FenceStep::Uploading);
    assert_eq!(got.upload_id.as_deref(), Some("up-1"));
    let open = f.reg.fence_journal().fence_unfinished().unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].0, c);
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Done, None, None)
        .unwrap();
    assert!(f.reg.fence_journal().fence_unfinished().unwrap().is_empty());
    assert_eq!(
        f.reg
            .fence_journal()
            .fence_upload(c, oid)
            .unwrap()
            .unwrap()
            .upload_id,
        None
    );
    f.reg.fence_journal().fence_forget(c, oid).unwrap();
    assert_eq!(f.reg.fence_journal().fence_upload(c, oid).unwrap(), None);
    assert_eq!(
        f.reg
            .fence_journal()
            .fence_upload("gen3+http://other", oid)
            .unwrap(),
        None
    );
}

fn the_parts_of_a_fence_upload_are_kept_while_it_is_open_and_dropped_after(mut f: Fixture) {
    let oid = Oid::from_digest([4; 32]);
    let c = "gen3+http://c";
    let part = |upload: &str, number: u32| FencePart {
        upload_id: upload.into(),
        key: "guid/name.bam".into(),
        number,
        etag: format!("etag-{number}"),
    };
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Uploading, Some("d-1"), Some("up-1"))
        .unwrap();
    f.reg
        .fence_journal()
        .fence_part_sent(c, oid, &part("up-1", 2))
        .unwrap();
    f.reg
        .fence_journal()
        .fence_part_sent(c, oid, &part("up-1", 1))
        .unwrap();
    f.restart();
    assert_eq!(
        f.reg.fence_journal().fence_parts(c, oid, "up-1").unwrap(),
        vec![part("up-1", 1), part("up-1", 2)],
        "the parts, by number, outlive a restart"
    );
    assert!(f
        .reg
        .fence_journal()
        .fence_parts(c, oid, "up-0")
        .unwrap()
        .is_empty());
    // The same upload resumed keeps them; another upload drops them.
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Begun, Some("d-1"), Some("up-1"))
        .unwrap();
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Uploading, None, Some("up-1"))
        .unwrap();
    assert_eq!(
        f.reg
            .fence_journal()
            .fence_parts(c, oid, "up-1")
            .unwrap()
            .len(),
        2
    );
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Uploading, None, Some("up-2"))
        .unwrap();
    assert!(f
        .reg
        .fence_journal()
        .fence_parts(c, oid, "up-1")
        .unwrap()
        .is_empty());
    f.reg
        .fence_journal()
        .fence_part_sent(c, oid, &part("up-2", 1))
        .unwrap();
    f.reg
        .fence_journal()
        .fence_step(c, oid, FenceStep::Uploaded, None, None)
        .unwrap();
    assert!(f
        .reg
        .fence_journal()
        .fence_parts(c, oid, "up-2")
        .unwrap()
        .is_empty());
    f.reg
        .fence_journal()
        .fence_part_sent(c, oid, &part("up-3", 1))
        .unwrap();
    f.reg.fence_journal().fence_forget(c, oid).unwrap();
    assert!(f
        .reg
        .fence_journal()
        .fence_parts(c, oid, "up-3")
        .unwrap()
        .is_empty());
}

fn a_worker_of_small_objects_is_not_due_for_a_large_object_s_job(f: Fixture) {
    let reg = &f.reg;
    let big = object("s3://b/big", "fedcba9876543210fedcba9876543210", 1000);
    reg.record(Path::new("/r"), &[entry("b", &big)]).unwrap();
    reg.queue_unhashed(None).unwrap();
    assert!(reg.next_due().unwrap().is_some(), "the big one waits");
    assert_eq!(
        reg.next_due_up_to(999).unwrap(),
        None,
        "a lane of objects under 1000 bytes would wake for nothing it takes"
    );
    let small = object("s3://b/small", "0123456789abcdef0123456789abcdef", 10);
    reg.record(Path::new("/r"), &[entry("s", &small)]).unwrap();
    reg.queue_unhashed(None).unwrap();
    assert!(reg.next_due_up_to(999).unwrap().is_some());
}

fn two_claimers_at_once_never_get_the_same_job(f: Fixture) {
    let objects: Vec<ForeignObject> = (0..40)
        .map(|i| object(&format!("s3://b/k{i}"), &format!("{i:032x}"), 10 + i))
        .collect();
    let entries: Vec<Entry> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| entry(&format!("f{i}"), o))
        .collect();
    f.reg.record(Path::new("/r"), &entries).unwrap();
    assert_eq!(f.reg.queue_unhashed(None).unwrap(), 40);
    // A second opener of the same records: a second daemon, or a second
    // machine on a shared database.
    let other = (f.reopen)();
    let claim_all = |reg: &Registry| {
        let mut got = Vec::new();
        while let Some(job) = reg.claim(100).unwrap() {
            got.push(job.object.url.expose().to_string());
        }
        got
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| claim_all(&f.reg));
        let b = s.spawn(|| claim_all(&other));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut all: Vec<String> = a.iter().chain(&b).cloned().collect();
    all.sort();
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a job claimed twice: {a:?} / {b:?}"
    );
    assert_eq!(all.len(), 40, "every job claimed once");
    assert_eq!(f.reg.job_counts().unwrap().running, 40);
}
