//! A Gen3 commons as a repo's object remote (`drsctl init --gen3 URL
//! --authz /programs/P/projects/Q`), end to end: real git and git-lfs, the
//! daemon, and the project's Gen3 server in this process (Indexd under
//! `/index`, DRS, Fence under `/user` with its signed upload bucket). A push
//! uploads through Fence's signed URLs (one PUT, or a multipart upload above
//! the part size) into blank records it then completes; what the commons
//! holds (by sha256, or by md5 with its bytes shown) is not sent; a push
//! that failed half-way leaves a blank record the next one completes; a
//! fresh clone restores every file through DRS with Fence-signed access.
//! The API key and the signed URLs reach no log line and no file. The
//! daemon reads `DRSD_DRS_SERVERS` and `DRSD_GEN3_CREDENTIALS` from this
//! process's environment (one test per process).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drsd_e2e::drs_server::{Auth, DrsServer, NewRecord};
use drsd_e2e::{bin, spawn_ready};

use super::add_url::{git, sha256_hex, text, World};
use super::foreign::{bare_origin, clone_elsewhere, git_in, ok};

const API_KEY: &str = "gen3-api-key-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
const AUTHZ: &str = "/programs/p/projects/q";

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(43).wrapping_add(seed) ^ (i >> 10) as u8)
        .collect()
}

/// The commons, named in `DRSD_DRS_SERVERS` by its host and port, with a
/// Gen3 API key the daemons of this process use; DRS wants a token, and
/// Indexd takes Fence's tokens (Arborist on), as in a commons.
fn commons(keys: &Path) -> DrsServer {
    let server = DrsServer::start();
    server.set_api_key("key-1", API_KEY);
    server.set_auth(Auth::Bearer);
    server.set_arborist(true);
    std::env::set_var(
        "DRSD_DRS_SERVERS",
        format!("127.0.0.1:{}={}", server.port(), server.base_url()),
    );
    let key_file = keys.join("credentials.json");
    std::fs::write(
        &key_file,
        format!(r#"{{"api_key": "{API_KEY}", "key_id": "key-1"}}"#),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::env::set_var("DRSD_GEN3_CREDENTIALS", &key_file);
    server
}

/// A repo whose object remote is the commons, `*.bin` tracked.
fn gen3_repo(world: &World, server: &DrsServer, name: &str) -> PathBuf {
    let repo = world.repo(name);
    world.drsctl_ok(
        &repo,
        &["init", "--gen3", server.base_url(), "--authz", AUTHZ],
    );
    let attrs = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    assert!(
        attrs.contains(&format!("drs-remote=gen3+{}", server.base_url()))
            && attrs.contains(&format!("drs-authz={AUTHZ}")),
        "{attrs}"
    );
    git(&repo, &["lfs", "track", "*.bin"]);
    repo
}

fn commit(world: &World, repo: &Path, files: &[(&str, &[u8])], message: &str) {
    for (name, bytes) in files {
        std::fs::write(repo.join(name), bytes).unwrap();
        git(repo, &["add", name]);
    }
    git(repo, &["add", ".gitattributes"]);
    ok(git_in(world, repo, &["commit", "-qm", message]));
}

/// The commons' Indexd records of `hash` (`sha256:HEX`, `md5:HEX`), as a
/// client asks (under `/index`, where a commons mounts Indexd).
fn records(server: &DrsServer, hash: &str) -> Vec<serde_json::Value> {
    let url = format!("{}/index/index?hash={hash}", server.base_url());
    let answer: serde_json::Value = reqwest::blocking::get(url).unwrap().json().unwrap();
    answer["records"].as_array().unwrap().clone()
}

/// The one complete record of `bytes`: size, sha256, md5 and a location in
/// the commons' upload bucket holding exactly those bytes.
/// The did of `bytes` in the tests' project, as drsd and git-drs derive
/// it (UUIDv5 over `"p-q:<sha256>"`).
fn own_did(bytes: &[u8]) -> String {
    drsd::stores::drs::content_did("p-q", &sha256_hex(bytes))
}

fn completed_record(server: &DrsServer, bytes: &[u8]) -> serde_json::Value {
    let oid = sha256_hex(bytes);
    let found = records(server, &format!("sha256:{oid}"));
    assert_eq!(found.len(), 1, "{found:?}");
    let record = found[0].clone();
    assert_eq!(record["size"], bytes.len() as u64, "{record}");
    let md5 = hex::encode(<md5::Md5 as md5::Digest>::digest(bytes));
    assert_eq!(record["hashes"]["md5"], md5.as_str(), "{record}");
    assert_eq!(record["authz"], serde_json::json!([AUTHZ]), "{record}");
    let url = record["urls"][0].as_str().unwrap();
    let key = url
        .strip_prefix("s3://commons-upload/")
        .unwrap_or_else(|| panic!("not in the upload bucket: {record}"));
    let (held, _etag) = server.bucket_object(key).unwrap();
    assert!(held == bytes, "the bucket holds other bytes at {key}");
    record
}

/// The world's daemon again, its log (standard error) in a file.
pub(super) fn logging_daemon(world: &mut World) -> (Child, PathBuf) {
    world.kill();
    let log = world.dir().join("daemon-stderr.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(bin("drsd"));
    cmd.args(["serve", "--ready"])
        .envs(world.env())
        .env("RUST_LOG", "debug")
        .env("DRSD_LOG", "debug")
        .stderr(file);
    (spawn_ready(&mut cmd), log)
}

/// No file under `dir` holds the API key, an access token or a signature.
pub(super) fn no_secret_kept(dir: &Path) {
    for path in walk(dir) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for secret in [API_KEY, "X-Amz-Signature", "&sig=", "Bearer "] {
            assert!(!text.contains(secret), "{} holds {secret}", path.display());
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&path)),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
    out
}

#[test]
fn a_commons_takes_a_push_through_fence_once_and_a_fresh_clone_restores_every_file() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    // Parts of 5 MiB: the 12 MiB object goes up in three.
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let mut world = World::new();
    let (daemon, log) = logging_daemon(&mut world);
    let repo = gen3_repo(&world, &server, "r");
    let small = content(150_001, 1);
    let large = content(12 << 20, 2);
    commit(
        &world,
        &repo,
        &[("small.bin", &small), ("large.bin", &large)],
        "data",
    );
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let counts = server.counts();
    assert_eq!(
        counts.bucket_put,
        1 + 3,
        "one PUT and three parts: {counts:?}"
    );
    assert_eq!(
        counts.bucket_bytes_in,
        (small.len() + large.len()) as u64,
        "{counts:?}"
    );
    assert_eq!(
        (counts.index_post, counts.index_update),
        (2, 2),
        "two records registered before their bytes went up, each given its location once they were in, none blank: {counts:?}"
    );
    assert!(server.blank_records().is_empty());
    assert_eq!(
        counts.data_bytes, 2,
        "each location read back by its first byte: {counts:?}"
    );
    assert!(counts.token >= 1, "the key was exchanged: {counts:?}");
    let small_record = completed_record(&server, &small);
    assert_eq!(small_record["did"], own_did(&small).as_str());
    assert_eq!(
        completed_record(&server, &large)["did"],
        own_did(&large).as_str()
    );

    // Pushing again (another commit, same objects) sends nothing.
    std::fs::write(repo.join("note.txt"), "x").unwrap();
    git(&repo, &["add", "note.txt"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "note"]));
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.bucket_put, counts.index_update, counts.index_post),
        (0, 0, 0),
        "{counts:?}"
    );
    assert_eq!(
        records(&server, &format!("sha256:{}", sha256_hex(&small)))[0]["did"],
        small_record["did"]
    );

    // Another machine (its own HOME, registry and pool) pushing the same
    // content into another repo sends and registers nothing: it reads the
    // records' bytes through DRS and finds them the objects.
    let other = World::new();
    let elsewhere = gen3_repo(&other, &server, "elsewhere");
    commit(
        &other,
        &elsewhere,
        &[("a.bin", &small), ("b.bin", &large)],
        "same data",
    );
    let (_other_remotes, _other_bare) = bare_origin(&elsewhere);
    server.reset_counts();
    ok(git_in(
        &other,
        &elsewhere,
        &["push", "-q", "origin", "main"],
    ));
    let counts = server.counts();
    assert_eq!(
        (counts.bucket_put, counts.index_post, counts.index_update),
        (0, 0, 0),
        "{counts:?}"
    );
    drop(other);

    // Another user, another machine: both files through DRS, Fence-signed.
    assert_eq!(clone_elsewhere(&bare, "small.bin"), sha256_hex(&small));
    assert_eq!(clone_elsewhere(&bare, "large.bin"), sha256_hex(&large));

    daemon_stop(daemon);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(API_KEY), "the API key is in the log");
    no_secret_kept(world.dir());
}

pub(super) fn daemon_stop(mut daemon: Child) -> std::process::ExitStatus {
    let _ = daemon.kill();
    daemon.wait().unwrap()
}

/// Most Gen3 records carry md5 only: one of our object's md5 and size,
/// whose bytes (read through DRS, Fence-signed) are ours, is the object.
/// Nothing is uploaded, no second record is made, and one version naming
/// the sha256 is added, which the next push finds.
#[test]
fn an_object_the_commons_holds_under_its_md5_only_is_not_sent() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let world = World::new();
    let repo = gen3_repo(&world, &server, "md5");
    let ours = content(70_007, 9);
    let location = server.put_in_bucket("legacy/ours.bin", ours.clone());
    let mut hashes = BTreeMap::new();
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(&ours)),
    );
    let did = server
        .add_record(NewRecord {
            form: "object".into(),
            size: ours.len() as u64,
            hashes,
            urls: vec![location],
            file_name: Some("ours.bin".into()),
            authz: vec![AUTHZ.into()],
            acl: Vec::new(),
            did: None,
        })
        .unwrap();
    commit(&world, &repo, &[("ours.bin", &ours)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let counts = server.counts();
    assert_eq!(counts.bucket_put, 0, "nothing uploaded: {counts:?}");
    assert_eq!(counts.index_version, 1, "{counts:?}");
    let versions = records(&server, &format!("sha256:{}", sha256_hex(&ours)));
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_ne!(versions[0]["did"], did.as_str());

    std::fs::write(repo.join("note.txt"), "x").unwrap();
    git(&repo, &["add", "note.txt"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "note"]));
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.bucket_put, counts.index_version),
        (0, 1),
        "{counts:?}"
    );
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), sha256_hex(&ours));
}

/// The md5 of an object is computed before its upload only when the
/// commons has a record of its size that names an md5 and no sha256 (one
/// that may hold it under its md5 only): records of its size naming other
/// sha256s, many pages of them, cost no pass over the bytes. One md5-only
/// record of that size on the last page is found, asked by md5, and,
/// being other content, does not stop the upload.
#[test]
fn only_a_record_of_its_size_without_a_sha256_has_the_md5_of_an_object_computed_before_its_upload()
{
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let world = World::new();
    let repo = gen3_repo(&world, &server, "sized");
    let len = 70_001;
    let record = |hashes: BTreeMap<String, String>, did: Option<String>| NewRecord {
        form: "object".into(),
        size: len as u64,
        hashes,
        urls: vec!["s3://elsewhere/other.bin".into()],
        file_name: Some("other.bin".into()),
        authz: vec![AUTHZ.into()],
        acl: Vec::new(),
        did,
    };
    // More than one page (Indexd answers 1024 at most) of records of the
    // size, each of other content and naming its sha256.
    for i in 0..1100u32 {
        let mut hashes = BTreeMap::new();
        hashes.insert("sha256".to_string(), format!("{i:064x}"));
        hashes.insert("md5".to_string(), format!("{i:032x}"));
        server.add_record(record(hashes, None)).unwrap();
    }
    let first = content(len, 21);
    commit(&world, &repo, &[("first.bin", &first)], "first");
    let (_remotes, _bare) = bare_origin(&repo);
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.index_by_md5, counts.bucket_put),
        (0, 1),
        "no md5 asked, the object sent: {counts:?}"
    );

    // An md5-only record of the size, sorting after every other did: on
    // the second page.
    let mut hashes = BTreeMap::new();
    hashes.insert("md5".to_string(), "ab".repeat(16));
    let last = "dg.TEST/ffffffff-ffff-4fff-bfff-ffffffffffff".to_string();
    server.add_record(record(hashes, Some(last))).unwrap();
    let second = content(len, 22);
    commit(&world, &repo, &[("second.bin", &second)], "second");
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.index_by_md5, counts.bucket_put),
        (1, 1),
        "asked by md5 once, and sent (the record is other content): {counts:?}"
    );
    completed_record(&server, &second);
}

/// A record naming our sha256, size and md5 is a claim (whoever may write
/// the project's records chose them): one whose location holds other bytes
/// is not taken as held. The object goes up into a record of its own, and
/// a fresh clone, offered both records, gets our bytes.
#[test]
fn a_record_naming_our_sha256_over_other_bytes_is_not_taken_as_held_and_the_object_is_sent() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let world = World::new();
    let repo = gen3_repo(&world, &server, "liar");
    let ours = content(80_021, 5);
    let planted = content(80_021, 6);
    let location = server.put_in_bucket("planted/ours.bin", planted);
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), sha256_hex(&ours));
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(&ours)),
    );
    let liar = server
        .add_record(NewRecord {
            form: "object".into(),
            size: ours.len() as u64,
            hashes,
            urls: vec![location],
            file_name: Some("ours.bin".into()),
            authz: vec![AUTHZ.into()],
            acl: Vec::new(),
            did: None,
        })
        .unwrap();
    commit(&world, &repo, &[("ours.bin", &ours)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(server.counts().bucket_put, 1, "{:?}", server.counts());
    let found = records(&server, &format!("sha256:{}", sha256_hex(&ours)));
    assert_eq!(found.len(), 2, "{found:?}");
    let sent = found.iter().find(|r| r["did"] != liar.as_str()).unwrap();
    let key = sent["urls"][0].as_str().unwrap();
    let key = key.strip_prefix("s3://commons-upload/").unwrap();
    assert!(server.bucket_object(key).unwrap().0 == ours);
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), sha256_hex(&ours));
}

/// kill -9 of the daemon while its multipart upload through Fence is
/// under way (under the content's did) leaves the record registered first,
/// without a location, and the
/// registry's note of the upload (`drsctl status` names it after the
/// restart); the next push, by a new daemon, finishes that very upload,
/// sending only the parts the store did not take, and registers the
/// record: one complete record holding the bytes, no blank one, no
/// second record, no upload left open.
#[test]
fn a_daemon_killed_mid_upload_leaves_no_record_and_the_next_push_finishes_that_upload() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let mut world = World::new();
    let repo = gen3_repo(&world, &server, "killed");
    let bytes = content(40 << 20, 7);
    commit(&world, &repo, &[("big.bin", &bytes)], "data");
    let (_remotes, _bare) = bare_origin(&repo);
    server.set_latency(Duration::from_millis(300));
    let mut push = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["push", "-q", "origin", "main"])
        .envs(world.env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    // Three parts are on the wire at once: a fifth begun means two were
    // answered, and recorded.
    while server.counts().bucket_put < 5 {
        assert!(
            Instant::now() < until,
            "no part went up: {:?}",
            server.counts()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    world.kill(); // SIGKILL, parts in the bucket, no record yet
    assert!(!push.wait().unwrap().success());
    server.set_latency(Duration::ZERO);
    let parts = 8; // 40 MiB in 5 MiB parts
    let open = server.open_uploads();
    assert_eq!(open.len(), 1, "one upload open: {open:?}");
    let taken = open[0];
    assert!((1..parts).contains(&taken), "{taken} parts in the store");
    assert_eq!(server.blank_records(), Vec::<String>::new());
    let did = own_did(&bytes);
    // The claim registered first, with no location: nothing reads it as
    // the object.
    let claimed = records(&server, &format!("sha256:{}", sha256_hex(&bytes)));
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0]["did"], did.as_str(), "{claimed:?}");
    assert_eq!(claimed[0]["urls"], serde_json::json!([]), "{claimed:?}");
    let recorded = spoil_first_recorded_part(&world);
    assert!(recorded >= 2, "{recorded} parts recorded");

    world.start();
    let status = world.drsctl_ok(&repo, &["status"]);
    let open = status["commons_uploads"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{status}");
    assert_eq!(open[0]["did"], did.as_str(), "{status}");
    assert_eq!(open[0]["step"], "uploading", "{status}");

    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let record = completed_record(&server, &bytes);
    assert_eq!(record["did"], did.as_str(), "{record}");
    assert!(server.blank_records().is_empty());
    // Each part recorded is kept but the spoilt one; those the store took
    // unrecorded (the kill came before their answer) are sent again.
    let resent = server.counts().bucket_put as usize;
    assert_eq!(
        resent,
        parts - recorded + 1,
        "the resumed push sent {resent} of {parts} parts; the store held {taken}, {recorded} recorded"
    );
    assert!(
        server.open_uploads().is_empty(),
        "an upload was left open: {:?}",
        server.open_uploads()
    );
    let status = world.drsctl_ok(&repo, &["status"]);
    assert_eq!(status["commons_uploads"], serde_json::json!([]), "{status}");
}

/// The parts of the one open upload through Fence recorded in `world`'s
/// registry (its daemon stopped), the first of them now with an ETag that
/// is not its md5, as a journal spoilt on disk could say: the resumed
/// push must send that part again rather than take the record's word.
fn spoil_first_recorded_part(world: &World) -> usize {
    let registry =
        drsd::registry::Registry::open(&world.dir().join("state/registry.sqlite")).unwrap();
    let registry = registry.fence_journal();
    let open = registry.fence_unfinished().unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    let (commons, upload) = &open[0];
    let upload_id = upload.upload_id.as_deref().expect("an upload id recorded");
    let parts = registry
        .fence_parts(commons, upload.oid, upload_id)
        .unwrap();
    if let Some(first) = parts.first() {
        let mut spoilt = first.clone();
        spoilt.etag = "0".repeat(32);
        registry
            .fence_part_sent(commons, upload.oid, &spoilt)
            .unwrap();
    }
    parts.len()
}

/// With a Fence that makes a blank record for every upload, whatever guid
/// it is given (as Fence did before it took one), a push whose last step
/// (the record's completion) Indexd refuses leaves one blank record and
/// says why in Indexd's words; the next push finishes that very record
/// instead of making a second.
#[test]
fn a_blank_record_a_failed_push_left_is_completed_by_the_next_push() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    server.set_fence_before_10_2(true);
    let world = World::new();
    let repo = gen3_repo(&world, &server, "blank");
    let bytes = content(99_991, 4);
    commit(&world, &repo, &[("one.bin", &bytes)], "data");
    let (_remotes, _bare) = bare_origin(&repo);
    // Indexd without Arborist: Fence takes the upload, Indexd refuses to
    // complete the record.
    server.set_arborist(false);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("Arborist is not configured"), "{said}");
    assert!(!said.contains(API_KEY), "{said}");
    assert!(records(&server, &format!("sha256:{}", sha256_hex(&bytes))).is_empty());
    let first = server.counts();
    assert_eq!(first.bucket_put, 1, "{first:?}");

    server.set_arborist(true);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let record = completed_record(&server, &bytes);
    let guid = record["did"].as_str().unwrap();
    // The key Fence signed names the record: the one the first push began.
    assert!(
        record["urls"][0].as_str().unwrap().contains(guid),
        "{record}"
    );
    let counts = server.counts();
    assert_eq!(counts.index_update, 1, "{counts:?}");
}

/// A commons that will not let the user register a record under a chosen
/// did (Arborist gives no `create`, so `POST /index/` is 403) gets the
/// object in a blank record of Fence's, filled and proven: the push goes
/// through, one record, and a clone reads it.
#[test]
fn a_commons_that_refuses_the_contents_did_gets_a_completed_blank_record() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    server.set_create_denied(true);
    let world = World::new();
    let repo = gen3_repo(&world, &server, "refused");
    let bytes = content(99_989, 8);
    commit(&world, &repo, &[("one.bin", &bytes)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let record = completed_record(&server, &bytes);
    assert_ne!(record["did"], own_did(&bytes).as_str(), "{record}");
    let counts = server.counts();
    assert_eq!(
        (counts.index_post, counts.bucket_put, counts.index_update),
        (1, 1, 1),
        "one refused registration, one PUT into a blank record, filled: {counts:?}"
    );
    assert!(server.blank_records().is_empty());
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "one.bin"), sha256_hex(&bytes));
}

/// A record under the content's did that claims its sha256 and size with
/// no location (an upload another machine, or git-drs, began by
/// registering first and did not finish) is where the bytes go: no second
/// record, no blank one, and the claim gets its location.
#[test]
fn a_claim_of_the_content_without_a_location_is_uploaded_into_not_doubled() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let world = World::new();
    let repo = gen3_repo(&world, &server, "claimed");
    let bytes = content(70_001, 21);
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), sha256_hex(&bytes));
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(&bytes)),
    );
    let claim = server
        .add_record(NewRecord {
            form: "object".into(),
            size: bytes.len() as u64,
            hashes,
            urls: Vec::new(),
            file_name: Some("one.bin".into()),
            authz: vec![AUTHZ.into()],
            acl: Vec::new(),
            did: Some(own_did(&bytes)),
        })
        .unwrap();
    commit(&world, &repo, &[("one.bin", &bytes)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.index_post, counts.bucket_put, counts.index_update),
        (0, 1, 1),
        "no registration, one PUT into the claim, its location set: {counts:?}"
    );
    let record = completed_record(&server, &bytes);
    assert_eq!(record["did"], claim.as_str(), "{record}");
    assert!(server.blank_records().is_empty());
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "one.bin"), sha256_hex(&bytes));
}

/// A store that loses a part while Fence's multipart complete answers OK:
/// the read-back finds the size short, the record's location is taken out
/// again and the push fails naming the record; no ref went out. The next
/// push, with the store mended, sends the object again and succeeds.
#[test]
fn a_multipart_complete_that_lost_a_part_fails_the_push_and_the_next_sends_it_again() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let world = World::new();
    let repo = gen3_repo(&world, &server, "lied");
    let bytes = content(12 << 20, 31);
    commit(&world, &repo, &[("big.bin", &bytes)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.set_complete_drops_last_part(true);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    let did = own_did(&bytes);
    assert!(said.contains(&did), "the record is named: {said}");
    assert!(
        said.contains(&format!("not the object's {}", bytes.len())),
        "{said}"
    );
    let claimed = records(&server, &format!("sha256:{}", sha256_hex(&bytes)));
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(
        claimed[0]["urls"],
        serde_json::json!([]),
        "the location was taken out: {claimed:?}"
    );
    let refs = git(&bare, &["for-each-ref"]);
    assert!(refs.trim().is_empty(), "a ref went out: {refs}");

    server.set_complete_drops_last_part(false);
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    assert_eq!(server.counts().bucket_put, 3, "{:?}", server.counts());
    let record = completed_record(&server, &bytes);
    assert_eq!(record["did"], did.as_str(), "{record}");
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "big.bin"), sha256_hex(&bytes));
}

/// Completing a multipart upload takes as long as the store takes to
/// assemble the object, which grows with its parts: the call is given the
/// metadata calls' time and two seconds a part, so a commons slower to
/// complete than one metadata call may take still takes the push.
#[test]
fn a_multipart_complete_slower_than_a_metadata_call_still_completes_the_push() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    std::env::set_var("DRSD_METADATA_TIMEOUT", "3");
    let world = World::new();
    let repo = gen3_repo(&world, &server, "slow");
    let bytes = content(12 << 20, 35);
    commit(&world, &repo, &[("slow.bin", &bytes)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.set_complete_takes(Duration::from_secs(5));
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    completed_record(&server, &bytes);
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "slow.bin"), sha256_hex(&bytes));
}

/// Two machines (two users' daemons, registries and pools) pushing the
/// same new content into the same project at once make one record, under
/// the content's did: the second registration is 409, and that machine
/// counts the first's record once its bytes are shown to be the object.
/// Both pushes succeed and a fresh clone of either gets the file.
#[test]
fn two_machines_pushing_the_same_content_at_once_make_one_record_under_its_did() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let bytes = content(3 << 20, 11);
    let machines: Vec<World> = (0..2).map(|_| World::new()).collect();
    let mut pushes = Vec::new();
    let mut bares = Vec::new();
    for (i, world) in machines.iter().enumerate() {
        let repo = gen3_repo(world, &server, &format!("m{i}"));
        commit(world, &repo, &[("same.bin", &bytes)], "data");
        let (remotes, bare) = bare_origin(&repo);
        bares.push((remotes, bare));
        pushes.push((world, repo));
    }
    // Neither registration is served before both are asked: both
    // machines found the did free and uploaded.
    server.gather_registrations(2);
    let handles: Vec<_> = pushes
        .iter()
        .map(|(world, repo)| {
            Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["push", "-q", "origin", "main"])
                .envs(world.env())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in handles {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    server.gather_registrations(0);
    let record = completed_record(&server, &bytes);
    assert_eq!(record["did"], own_did(&bytes).as_str(), "{record}");
    assert!(server.blank_records().is_empty());
    let counts = server.counts();
    assert_eq!(counts.index_post, 2, "both tried, one made it: {counts:?}");
    drop(machines);
    for (_remotes, bare) in &bares {
        assert_eq!(clone_elsewhere(bare, "same.bin"), sha256_hex(&bytes));
    }
}

/// The content's did taken by a record of other content (a lab member's
/// mistake, or a hostile writer): the object is not counted as held under
/// it, and goes into a blank record of Fence's (one PUT), completed.
#[test]
fn a_contents_did_taken_by_other_content_sends_the_object_into_a_record_of_fences() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    let world = World::new();
    let repo = gen3_repo(&world, &server, "squatted");
    let ours = content(60_013, 12);
    let other = content(60_013, 13);
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), sha256_hex(&other));
    let squatter = server
        .add_record(NewRecord {
            form: "object".into(),
            size: other.len() as u64,
            hashes,
            urls: vec![server.put_in_bucket("squat/other.bin", other)],
            file_name: Some("other.bin".into()),
            authz: vec![AUTHZ.into()],
            acl: Vec::new(),
            did: Some(own_did(&ours)),
        })
        .unwrap();
    commit(&world, &repo, &[("ours.bin", &ours)], "data");
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.bucket_put, counts.index_update, counts.index_post),
        (1, 1, 0),
        "one PUT into a blank record, then completed: {counts:?}"
    );
    let record = completed_record(&server, &ours);
    assert_ne!(record["did"], squatter.as_str(), "{record}");
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), sha256_hex(&ours));
}

/// A commit in a repo whose object remote is a commons has its large
/// objects' md5s hashed in the background (the record registered before
/// the upload needs it): the push finds it known, and the bytes are passed
/// over for it once, not again at the push.
#[test]
fn a_large_objects_md5_is_hashed_once_after_the_commit_not_again_at_the_push() {
    let keys = tempfile::tempdir().unwrap();
    let server = commons(keys.path());
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let mut world = World::new();
    let (daemon, log) = logging_daemon(&mut world);
    let repo = gen3_repo(&world, &server, "ahead");
    let bytes = content(11 << 20, 41);
    let oid = sha256_hex(&bytes);
    commit(&world, &repo, &[("big.bin", &bytes)], "data");
    let passes = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches(&format!("object {oid}: an md5 pass"))
            .count()
    };
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains(&format!("object {oid}: md5 hashed ahead of its push"))
    {
        assert!(
            Instant::now() < until,
            "not hashed ahead: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(passes(), 1);
    let (_remotes, bare) = bare_origin(&repo);
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    assert_eq!(passes(), 1, "the push hashed the md5 again");
    let record = completed_record(&server, &bytes);
    assert_eq!(record["did"], own_did(&bytes).as_str(), "{record}");
    daemon_stop(daemon);
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "big.bin"), oid);
}
