//! What only a shared engine has: the nodes, and the leases of their
//! claims. The rest of [`PgRegistry`] is held to the registry's contract
//! suite (`registry/tests.rs`).

use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

use crate::pg::TestDb;
use crate::registry::tests::{entry, object, pg_registry};
use crate::registry::{ForeignObject, JobState, Registry};

fn one_queued_job(reg: &Registry) -> ForeignObject {
    let o = object("s3://b/big.bam", "0123456789abcdef0123456789abcdef", 1000);
    reg.record(Path::new("/r"), &[entry("big.bam", &o)])
        .unwrap();
    assert_eq!(reg.queue_unhashed(None).unwrap(), 1);
    o
}

#[test]
fn a_live_node_s_claim_is_neither_taken_nor_requeued_by_another_node() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_millis(600);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    let b = pg_registry(&db.url, "alice@b", lease, dir.path());
    one_queued_job(&a);
    let job = a.claim(100).unwrap().expect("A takes the job");
    // Past several leases: A's heartbeat keeps renewing its claim.
    sleep(lease * 3);
    assert!(b.claim(100).unwrap().is_none(), "B took a live node's job");
    assert_eq!(
        b.requeue_running().unwrap(),
        0,
        "B's start put back A's claim"
    );
    assert_eq!(b.job_counts().unwrap().running, 1);
    let repos = a
        .job_done(&job, &crate::pool::Oid::of(b"x"), None, None)
        .unwrap();
    assert_eq!(repos, vec![Path::new("/r").to_path_buf()]);
    assert_eq!(
        b.job_state("s3://b/big.bam", &job.object.etag, 1000)
            .unwrap(),
        Some((JobState::Done, None))
    );
}

#[test]
fn a_lapsed_lease_is_taken_over_by_another_node() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_millis(500);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    let b = pg_registry(&db.url, "alice@b", lease, dir.path());
    let o = one_queued_job(&a);
    let job = a.claim(100).unwrap().expect("A takes the job");
    assert_eq!(job.object.url, o.url.expose());
    // A dies: no more heartbeats.
    drop(a);
    assert!(
        b.claim(100).unwrap().is_none(),
        "the lease is still running"
    );
    let due = b
        .next_due()
        .unwrap()
        .expect("B looks again when the lease ends");
    assert!(due <= crate::registry::now() + 2, "due {due}");
    sleep(lease * 2);
    let taken = b.claim(100).unwrap().expect("the lapsed claim is B's now");
    assert_eq!(taken.id, job.id);
    // B's own claim is live: a third node does not take it.
    let c = pg_registry(&db.url, "bob@c", lease, dir.path());
    sleep(lease * 2);
    assert!(c.claim(100).unwrap().is_none());
}

#[test]
fn a_lease_no_node_would_write_is_read_back_capped_and_the_job_taken_over() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_secs(30);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    one_queued_job(&a);
    // A member leases the job to a node that does not exist, for ever.
    db.client()
        .execute(
            "UPDATE drsd_reg_jobs SET state = 'running', claimed_by = 'ghost@nowhere', \
             lease_until = 'infinity'",
            &[],
        )
        .unwrap();
    let due = a.next_due().unwrap().expect("a due time, not an error");
    assert!(
        due <= crate::registry::now() + lease.as_secs() + 2,
        "due {due}"
    );
    let job = a
        .claim(100)
        .unwrap()
        .expect("the job is taken over at once");
    assert_eq!(a.job_counts().unwrap().running, 1);
    drop(job);
    // And a lease a year ahead is put back by a restart, as a lapsed one.
    db.client()
        .execute(
            "UPDATE drsd_reg_jobs SET claimed_by = 'ghost@nowhere', \
             lease_until = now() + interval '365 days'",
            &[],
        )
        .unwrap();
    assert_eq!(a.requeue_running().unwrap(), 1);
}

#[test]
fn a_restarted_node_puts_back_its_own_claims_and_the_lapsed_ones_only() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_millis(500);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    let b = pg_registry(&db.url, "alice@b", lease, dir.path());
    for i in 0..3 {
        let o = object(&format!("s3://b/{i}"), &format!("{i:032x}"), 10);
        a.record(Path::new("/r"), &[entry(&format!("{i}"), &o)])
            .unwrap();
    }
    a.queue_unhashed(None).unwrap();
    let _mine = a.claim(100).unwrap().unwrap();
    let _theirs = b.claim(100).unwrap().unwrap();
    // A restarts (its old engine gone, a new one as the same node).
    drop(a);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    assert_eq!(a.requeue_running().unwrap(), 1, "its own claim only");
    sleep(lease * 2);
    assert_eq!(
        a.job_counts().unwrap().running,
        1,
        "B's claim is still live"
    );
}

#[test]
fn every_node_that_opened_the_team_is_listed_with_when_it_was_last_seen() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let a = pg_registry(&db.url, "alice@a", Duration::from_secs(60), dir.path());
    let _b = pg_registry(&db.url, "bob@b", Duration::from_secs(60), dir.path());
    let nodes = a.team_nodes().unwrap();
    let mut names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["alice@a", "bob@b"]);
    assert!(nodes.iter().all(|n| n.seen_secs_ago < 30), "{nodes:?}");
    assert_eq!(nodes[0].host, "test-host");
    let team = a.team().expect("a team engine");
    assert_eq!(team.node, "alice@a");
    assert!(!team.server.contains("password"), "{}", team.server);
}

#[test]
fn a_repo_s_paths_are_its_node_s_own() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let a = pg_registry(&db.url, "alice@a", Duration::from_secs(60), dir.path());
    let b = pg_registry(&db.url, "alice@b", Duration::from_secs(60), dir.path());
    let o = one_queued_job(&a);
    // The same path on B is another repo: it sees none of A's entries...
    assert!(b.for_repo(Path::new("/r")).unwrap().is_empty());
    b.record(Path::new("/r"), &[entry("other.bam", &o)])
        .unwrap();
    // ...but the object is one: hashed on A, known on B.
    let job = a.claim(100).unwrap().unwrap();
    let content = crate::pool::Oid::of(b"content");
    assert_eq!(
        a.job_done(&job, &content, None, None).unwrap(),
        vec![Path::new("/r").to_path_buf()]
    );
    let on_b = b.for_repo(Path::new("/r")).unwrap();
    assert_eq!(on_b.len(), 1);
    assert_eq!(on_b[0].path, "other.bam");
    assert_eq!(on_b[0].object.content_oid, Some(content));
    assert!(
        on_b[0].is_provisional(),
        "B's pointer waits for B's promotion"
    );
}

#[test]
fn a_claim_after_the_server_closed_every_connection_is_made_on_a_new_one() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let a = pg_registry(&db.url, "alice@a", Duration::from_secs(60), dir.path());
    one_queued_job(&a);
    assert_eq!(a.job_counts().unwrap().queued, 1);
    // What a restart does to the pooled connections: closed server-side.
    let mut admin = db.client();
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .unwrap();
    sleep(Duration::from_millis(200));
    let job = a
        .claim(100)
        .unwrap()
        .expect("claimed on a fresh connection");
    assert_eq!(a.job_counts().unwrap().running, 1);
    a.job_done(&job, &crate::pool::Oid::of(b"x"), None, None)
        .unwrap();
}

/// Every text of every row of the engine's tables, as one string.
fn every_row(db: &TestDb) -> String {
    let mut c = db.client();
    let tables: Vec<String> = c
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = 'public' AND table_name LIKE 'drsd_%'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut all = String::new();
    for table in tables {
        for row in c
            .query(&format!("SELECT row_to_json(t)::text FROM {table} t"), &[])
            .unwrap()
        {
            all.push_str(row.get::<_, &str>(0));
            all.push('\n');
        }
    }
    all
}

#[test]
fn a_urls_secrets_stay_with_its_node_and_only_that_node_claims_its_job() {
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_secs(30);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    let b = pg_registry(&db.url, "bob@b", lease, dir.path());
    let url = "https://alice:hunter2@h.example/b/x.bam?versionId=7\
               &X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=deadbeef";
    let o = object(url, "0123456789abcdef0123456789abcdef", 1000);
    a.record(Path::new("/r"), &[entry("x.bam", &o)]).unwrap();
    let everything = every_row(&db);
    for secret in ["hunter2", "AKIAEXAMPLE", "deadbeef"] {
        assert!(!everything.contains(secret), "{secret} in {everything}");
    }
    assert!(everything.contains("versionId=7"), "{everything}");
    // A reads its URL whole, by any of its lookups.
    assert_eq!(a.for_repo(Path::new("/r")).unwrap()[0].object.url, url);
    let found = a.lookup_by_location(url, &o.etag, 1000).unwrap().unwrap();
    assert_eq!(found.url, url);
    assert_eq!(a.queue_unhashed(None).unwrap(), 1);
    // B cannot fetch it: it never takes the job; A does, with the URL whole.
    assert!(
        b.claim(100).unwrap().is_none(),
        "B took a job it cannot fetch"
    );
    let job = a.claim(100).unwrap().expect("A takes its own job");
    assert_eq!(job.object.url, url);
    let oid = crate::pool::Oid::of(b"x");
    assert_eq!(
        a.job_done(&job, &oid, None, None).unwrap(),
        vec![Path::new("/r").to_path_buf()]
    );
    // B learns the content oid under the shared form.
    let seen = b.objects_of_content(&oid).unwrap();
    assert_eq!(seen.len(), 1);
    assert!(!seen[0].url.expose().contains("hunter2"));
    assert_eq!(
        a.job_state(url, &o.etag, 1000).unwrap(),
        Some((JobState::Done, None))
    );
}

#[test]
fn a_nodes_fence_journal_stays_in_its_own_file_and_another_node_neither_reads_nor_writes_it() {
    use crate::registry::{FencePart, FenceStep};
    let (db, dir) = (TestDb::create(), tempfile::tempdir().unwrap());
    let lease = Duration::from_secs(30);
    let a = pg_registry(&db.url, "alice@a", lease, dir.path());
    let b = pg_registry(&db.url, "bob@b", lease, dir.path());
    let oid = crate::pool::Oid::of(b"alice's object");
    let c = "gen3+https://commons.example";
    a.fence_journal()
        .fence_step(
            c,
            oid,
            FenceStep::Uploading,
            Some("did-alice"),
            Some("upload-alice"),
        )
        .unwrap();
    let part = FencePart {
        upload_id: "upload-alice".into(),
        key: "did-alice/x.bam".into(),
        number: 1,
        etag: "etag-of-part-one".into(),
    };
    a.fence_journal().fence_part_sent(c, oid, &part).unwrap();
    // Nothing of it in the database every member reads and writes.
    let everything = every_row(&db);
    for mine in ["did-alice", "upload-alice", "etag-of-part-one"] {
        assert!(!everything.contains(mine), "{mine} in {everything}");
    }
    // Bob's journal is his own: he neither sees Alice's steps nor can
    // write one she would read.
    assert_eq!(b.fence_journal().fence_upload(c, oid).unwrap(), None);
    b.fence_journal()
        .fence_step(c, oid, FenceStep::Done, Some("did-bob"), None)
        .unwrap();
    let hers = a.fence_journal().fence_upload(c, oid).unwrap().unwrap();
    assert_eq!(hers.step, FenceStep::Uploading);
    assert_eq!(hers.did.as_deref(), Some("did-alice"));
    assert_eq!(
        a.fence_journal()
            .fence_parts(c, oid, "upload-alice")
            .unwrap(),
        vec![part]
    );
}
