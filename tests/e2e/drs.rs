//! GA4GH DRS and Gen3 Indexd end to end: add-url of `drs://` ids, push to a
//! repo that records an Indexd, and a fresh clone that finds its objects
//! through Indexd and DRS, with real git, git-lfs and Ceph RGW, and the
//! project's DRS + Indexd server (`drsd_e2e::drs_server`, held to the GA4GH
//! compliance suite) in this process. The daemon reads `DRSD_DRS_SERVERS`
//! from this process's environment (one test per process).

use std::collections::BTreeMap;
use std::path::Path;

use drsd_e2e::drs_server::{AccessSpec, Auth, DrsServer, Endpoint, NewRecord, ObjectSpec, Times};
use drsd_e2e::rt;

use super::add_url::{git, pointer_text, s3, sha256_hex, text, World};
use super::foreign::{
    bare_origin, clone_elsewhere, drs_repo, git_in, in_layout, ok, source_object, staged, wait_for,
};
use super::gen3_remote::{daemon_stop, logging_daemon, no_secret_kept};

/// The host name the hostname-form ids use; mapped to the test server.
const HOST: &str = "drs.example.org";
/// The compact-form prefix; mapped to the same server.
const PREFIX: &str = "dg.TEST";

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// A DRS server that the daemons this process starts resolve both id forms
/// through.
fn server() -> DrsServer {
    let server = DrsServer::start();
    std::env::set_var(
        "DRSD_DRS_SERVERS",
        format!("{PREFIX}={base},{HOST}={base}", base = server.base_url()),
    );
    server
}

/// `~/.netrc` of the world's HOME with the Indexd's Basic login.
fn netrc(world: &World, server: &DrsServer) {
    let (user, password) = server.indexd_login();
    let path = world.dir().join("home/.netrc");
    std::fs::write(
        &path,
        format!("machine 127.0.0.1 login {user} password {password}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn pointer_oid(repo: &Path, path: &str) -> String {
    let text = staged(repo, path);
    let line = text.lines().find(|l| l.starts_with("oid sha256:")).unwrap();
    line["oid sha256:".len()..].to_string()
}

#[test]
fn drs_ids_in_both_forms_become_content_pointers_without_reading_a_byte() {
    let server = server();
    let world = World::new();
    let (a, b) = (content(70_001, 1), content(5_003, 2));
    server.add_object(ObjectSpec::blob("obj-a", a.clone()));
    // The compact form names Indexd's did: `prefix:accession` asks for
    // `prefix/accession`.
    server.add_object(ObjectSpec::blob(&format!("{PREFIX}/obj-b"), b.clone()));
    let repo = world.repo("r");
    let host_form = format!("drs://{HOST}/obj-a");
    let compact = format!("drs://{PREFIX}:obj-b");
    let added = world.drsctl_ok(&repo, &["add-url", &host_form, "a.bam"]);
    assert_eq!(added["added"][0]["provisional"], false, "{added}");
    assert_eq!(added["added"][0]["oid_from"], "drs_checksum", "{added}");
    world.drsctl_ok(&repo, &["add-url", &compact, "b.bam"]);
    assert_eq!(
        staged(&repo, "a.bam"),
        pointer_text(&sha256_hex(&a), a.len() as u64)
    );
    assert_eq!(
        staged(&repo, "b.bam"),
        pointer_text(&sha256_hex(&b), b.len() as u64)
    );
    let counts = server.counts();
    assert_eq!((counts.data_get, counts.data_bytes), (0, 0), "{counts:?}");
    assert_eq!(counts.objects_get + counts.bulk_post, 2, "{counts:?}");
    // The registry's mirror keeps the DRS URI and id, never an access URL.
    let mirror = std::fs::read_to_string(repo.join(".git/lfs/foreign/registry.jsonl")).unwrap();
    assert!(
        mirror.contains(&host_form) && mirror.contains("\"drs_id\":\"obj-a\""),
        "{mirror}"
    );
    assert!(!mirror.contains("/data/"), "{mirror}");
}

#[test]
fn a_thousand_drs_ids_from_a_list_are_read_in_a_few_bulk_requests() {
    let server = server();
    server.set_bulk_limit(Some(200));
    let world = World::new();
    let repo = world.repo("r");
    let mut list = String::new();
    for i in 0..1000 {
        let bytes = format!("object {i}").into_bytes();
        server.add_object(ObjectSpec::blob(&format!("{PREFIX}/id-{i}"), bytes));
        list.push_str(&format!("drs://{PREFIX}:id-{i} d/{i}.txt\n"));
    }
    std::fs::write(world.dir().join("ids.txt"), list).unwrap();
    let ids = world.dir().join("ids.txt");
    let added = world.drsctl_ok(&repo, &["add-url", "--from", ids.to_str().unwrap()]);
    assert_eq!(added["added"].as_array().unwrap().len(), 1000, "{added}");
    let counts = server.counts();
    assert_eq!(counts.objects_get, 0, "{counts:?}");
    assert!(
        (5..=10).contains(&counts.bulk_post),
        "1,000 ids in batches of 200 at most: {counts:?}"
    );
    assert_eq!(
        staged(&repo, "d/7.txt"),
        pointer_text(&sha256_hex(b"object 7"), 8)
    );
}

#[test]
fn a_drs_id_the_server_does_not_know_is_refused_by_name_and_leaves_nothing() {
    let _server = server();
    let world = World::new();
    let repo = world.repo("r");
    let uri = format!("drs://{HOST}/no-such-object");
    let out = world.drsctl(&repo, &["add-url", &uri, "x.bam"]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("no-such-object") && said.contains("no such object"),
        "{said}"
    );
    assert!(!repo.join("x.bam").exists());
}

#[test]
fn a_drs_object_without_sha256_is_prefetched_through_a_signed_url_checked_by_md5_and_promoted() {
    let server = server();
    let world = World::with_prefetch();
    let body = content(300_007, 3);
    let mut spec = ObjectSpec::blob("signed-1", body.clone());
    spec.checksums.retain(|(kind, _)| kind == "md5");
    spec.access = vec![AccessSpec::signed("a1", std::time::Duration::from_secs(30))];
    server.add_object(spec);
    let repo = world.repo("r");
    let added = world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/signed-1"), "s.bam"],
    );
    assert_eq!(added["added"][0]["provisional"], true, "{added}");
    let want = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the promotion of the DRS object", || {
        staged(&repo, "s.bam") == want
    });
    let counts = server.counts();
    assert!(
        counts.access >= 2,
        "add-url and the prefetch each resolve: {counts:?}"
    );
    assert!(counts.data_bytes >= body.len() as u64, "{counts:?}");
}

#[test]
fn a_drs_md5_that_disagrees_with_the_bytes_fails_the_prefetch_and_nothing_is_promoted() {
    let server = server();
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let world = World::with_prefetch();
    let body = content(40_009, 4);
    let mut spec = ObjectSpec::blob("liar-md5", body.clone());
    spec.checksums = vec![("md5".into(), "0123456789abcdef0123456789abcdef".into())];
    server.add_object(spec);
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/liar-md5"), "m.bam"],
    );
    wait_for("the prefetch to give up", || {
        let q = world.drsctl_ok(&repo, &["status"])["queue"].clone();
        q["failed"].as_u64() == Some(1)
    });
    let oid = pointer_oid(&repo, "m.bam");
    assert_ne!(oid, sha256_hex(&body), "never promoted");
    let status = world.drsctl_ok(&repo, &["status"]).to_string();
    assert!(
        status.contains("md5") && status.contains("0123456789abcdef"),
        "{status}"
    );
}

/// A repo with an object remote in a fresh bucket and the test server as
/// its Indexd, committed.
fn indexd_repo(
    world: &World,
    server: &DrsServer,
    name: &str,
) -> (std::path::PathBuf, drsd::stores::ObjectLayout) {
    let (repo, layout) = drs_repo(world, name);
    world.drsctl_ok(
        &repo,
        &[
            "init",
            "--indexd",
            server.base_url(),
            "--authz",
            "/programs/p/projects/q",
        ],
    );
    let attrs = std::fs::read_to_string(repo.join(".gitattributes")).unwrap();
    assert!(
        attrs.contains(&format!("drs-indexd={}", server.base_url())),
        "{attrs}"
    );
    netrc(world, server);
    (repo, layout)
}

/// Registers `bytes`, stored in RGW at `s3://bucket/key`, with the server's
/// Indexd, as a DRS object too; returns its did.
fn registered_in_indexd(server: &DrsServer, tag: &str, bytes: &[u8]) -> String {
    let url = source_object(tag, "held/reads.bam", bytes);
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), sha256_hex(bytes));
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(bytes)),
    );
    server
        .add_record(NewRecord {
            form: "object".into(),
            size: bytes.len() as u64,
            hashes,
            urls: vec![url],
            file_name: Some("reads.bam".into()),
            authz: vec!["/programs/p/projects/q".into()],
            acl: Vec::new(),
            did: None,
        })
        .unwrap()
}

#[test]
fn push_with_indexd_registers_a_new_object_once_and_sends_nothing_indexd_holds() {
    let server = server();
    let world = World::new();
    let (repo, layout) = indexd_repo(&world, &server, "r");
    // One object Indexd holds (in another bucket), added by its did.
    let held = content(90_001, 5);
    let did = registered_in_indexd(&server, "held", &held);
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/{did}"), "held.bam"],
    );
    // One new local object.
    let fresh = content(20_011, 6);
    std::fs::write(repo.join("new.bin"), &fresh).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "new.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("1 object(s) held there already (not sent), 1 registered"),
        "{said}"
    );
    let counts = server.counts();
    assert_eq!(counts.index_post, 1, "{counts:?}");
    assert_eq!(counts.data_get, 0, "{counts:?}");
    // The held object is not in the object remote: nothing was sent or copied.
    let held_key = layout.key(&sha256_hex(&held).parse().unwrap());
    assert!(rt()
        .block_on(s3().head(&layout.bucket, &held_key))
        .unwrap()
        .is_none());
    // The new one is, and its record names it.
    let fresh_oid = sha256_hex(&fresh);
    let fresh_key = layout.key(&fresh_oid.parse().unwrap());
    assert!(rt()
        .block_on(s3().head(&layout.bucket, &fresh_key))
        .unwrap()
        .is_some());

    // Pushing again (another commit, same objects) adds no record.
    std::fs::write(repo.join("note.txt"), "x").unwrap();
    git(&repo, &["add", "note.txt"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "note"]));
    ok(git_in(
        &world,
        &repo,
        &["push", "-q", "origin", "main", "--force"],
    ));
    git(&repo, &["branch", "other"]);
    ok(git_in(&world, &repo, &["push", "-q", "origin", "other"]));
    assert_eq!(server.counts().index_post, 1, "{:?}", server.counts());

    // Another user, another machine: the held object comes through Indexd.
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "held.bam"), sha256_hex(&held));
}

#[test]
fn an_indexd_that_is_down_refuses_the_push_and_registers_nothing() {
    let server = server();
    let world = World::new();
    let (repo, layout) = indexd_repo(&world, &server, "r");
    let body = content(10_007, 7);
    std::fs::write(repo.join("x.bin"), &body).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "x.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "x"]));
    let (_remotes, bare) = bare_origin(&repo);
    server.set_indexd_down(true);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("Indexd") && said.contains("nothing was sent"),
        "{said}"
    );
    let key = layout.key(&sha256_hex(&body).parse().unwrap());
    assert!(rt()
        .block_on(s3().head(&layout.bucket, &key))
        .unwrap()
        .is_none());
    assert!(
        git(&bare, &["for-each-ref"]).is_empty(),
        "no ref was pushed"
    );
    assert_eq!(server.counts().index_post, 0);

    // Back up: the push goes through and registers once.
    server.set_indexd_down(false);
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    assert_eq!(server.counts().index_post, 1);
}

#[test]
fn a_drs_record_whose_sha256_is_not_the_bytes_never_reaches_git() {
    let server = server();
    let world = World::new();
    let body = content(30_001, 8);
    let claimed = sha256_hex(b"other bytes entirely");
    let mut spec = ObjectSpec::blob("liar-sha", body.clone());
    spec.checksums = vec![("sha-256".into(), claimed.clone())];
    server.add_object(spec);
    let (repo, _layout) = drs_repo(&world, "r");
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/liar-sha"), "l.bam"],
    );
    assert_eq!(pointer_oid(&repo, "l.bam"), claimed);
    ok(git_in(&world, &repo, &["commit", "-qm", "l"]));
    let (_remotes, _bare) = bare_origin(&repo);
    // The push must read the bytes (no Indexd holds them): they are not
    // the oid, so they are refused and nothing is sent.
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("l.bam") && said.contains(&claimed[..12]),
        "{said}"
    );
    let lfs = repo
        .join(".git/lfs/objects")
        .join(&claimed[0..2])
        .join(&claimed[2..4])
        .join(&claimed);
    assert!(!lfs.exists());
}

#[test]
fn a_drs_record_with_only_checksums_drsd_does_not_know_is_refused_by_name() {
    let server = server();
    let world = World::new();
    let mut spec = ObjectSpec::blob("crc-only", content(1_000, 9));
    spec.checksums = vec![("crc32c".into(), "0badf00d".into())];
    server.add_object(spec);
    let repo = world.repo("r");
    let out = world.drsctl(
        &repo,
        &["add-url", &format!("drs://{HOST}/crc-only"), "c.bam"],
    );
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("crc-only") && said.contains("crc32c"),
        "{said}"
    );
    assert!(!repo.join("c.bam").exists());
}

#[test]
fn an_indexd_the_user_did_not_name_is_neither_asked_nor_registered_with() {
    let _trusted = server();
    // The repo's Indexd is another server: not in DRSD_DRS_SERVERS.
    let stranger = DrsServer::start();
    let world = World::new();
    let (repo, _layout) = indexd_repo(&world, &stranger, "r");
    std::fs::write(repo.join("x.bin"), content(5_001, 10)).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "x.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "x"]));
    let (_remotes, bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("DRSD_DRS_SERVERS") && said.contains(stranger.base_url()),
        "{said}"
    );
    let counts = stranger.counts();
    assert_eq!(
        (counts.index_by_hash, counts.index_post),
        (0, 0),
        "{counts:?}"
    );
    assert!(
        git(&bare, &["for-each-ref"]).is_empty(),
        "no ref was pushed"
    );
}

#[test]
fn a_server_that_answers_202_forever_is_given_up_on_in_bounded_time_by_name() {
    let server = server();
    std::env::set_var("DRSD_DRS_WAIT_SECS", "3");
    server.add_object(ObjectSpec::blob("slow", content(1_000, 11)));
    server.defer(Endpoint::Object, "slow", Times::Forever, 1);
    server.defer(Endpoint::Bulk, "slow", Times::Forever, 1);
    let world = World::new();
    let repo = world.repo("r");
    let started = std::time::Instant::now();
    let out = world.drsctl(&repo, &["add-url", &format!("drs://{HOST}/slow"), "s.bam"]);
    let took = started.elapsed();
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("slow") && said.contains("202"), "{said}");
    assert!(
        took < std::time::Duration::from_secs(30),
        "bounded: {took:?}"
    );
    assert!(!repo.join("s.bam").exists());
}

#[test]
fn an_expired_bearer_token_is_a_clear_error_naming_the_server_and_the_token_file() {
    let server = server();
    server.set_auth(Auth::Bearer);
    server.add_token("t0ken-that-expires");
    server.add_object(ObjectSpec::blob("guarded", content(2_000, 12)));
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, "t0ken-that-expires\n").unwrap();
    std::env::set_var("DRSD_DRS_TOKEN_FILE", &token_file);
    let world = World::new();
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/guarded"), "g1.bam"],
    );
    server.expire_tokens();
    let out = world.drsctl(
        &repo,
        &["add-url", &format!("drs://{HOST}/guarded"), "g2.bam"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("401") && said.contains(server.base_url()) && said.contains("token"),
        "{said}"
    );
    assert!(
        !said.contains("t0ken-that-expires"),
        "the token never shows: {said}"
    );
    assert!(!repo.join("g2.bam").exists());
}

/// An Indexd record is a claim: one that names this object's sha256 and
/// size at a location holding other bytes (of the same size, so a HEAD
/// agrees) must not let the push skip the upload. The push sends the
/// object, registers it, and a fresh clone gets the right bytes.
#[test]
fn an_indexd_record_whose_location_holds_other_bytes_is_not_taken_as_held() {
    let server = server();
    let world = World::new();
    let (repo, layout) = indexd_repo(&world, &server, "liar");
    let ours = content(70_001, 21);
    let other = content(70_001, 22);
    let oid = sha256_hex(&ours);
    let url = source_object("liar", "claimed/reads.bam", &other);
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), oid.clone());
    server
        .add_record(NewRecord {
            form: "object".into(),
            size: ours.len() as u64,
            hashes,
            urls: vec![url],
            file_name: Some("reads.bam".into()),
            authz: vec!["/programs/p/projects/q".into()],
            acl: Vec::new(),
            did: None,
        })
        .unwrap();
    std::fs::write(repo.join("ours.bin"), &ours).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "ours.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
    let (_remotes, bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("0 object(s) held there already (not sent), 1 registered"),
        "{said}"
    );
    let key = layout.key(&oid.parse().unwrap());
    let there = rt()
        .block_on(s3().get_bytes(&layout.bucket, &key, None))
        .unwrap();
    assert!(there == ours, "the object was not sent");
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), oid);
}
/// Registers, as most Gen3 records are, `bytes` under their md5 and size
/// only (no sha256) at the RGW location `url`; returns its did.
fn md5_only_record(server: &DrsServer, url: String, size: u64, bytes_md5: &[u8]) -> String {
    let mut hashes = BTreeMap::new();
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(bytes_md5)),
    );
    server
        .add_record(NewRecord {
            form: "object".into(),
            size,
            hashes,
            urls: vec![url],
            file_name: Some("reads.bam".into()),
            authz: vec!["/programs/p/projects/q".into()],
            acl: Vec::new(),
            did: None,
        })
        .unwrap()
}

/// The records Indexd answers for `hash=kind:hex`, as a client asks.
fn indexd_records(server: &DrsServer, hash: &str) -> Vec<serde_json::Value> {
    let url = format!("{}/index?hash={hash}", server.base_url());
    let answer: serde_json::Value = reqwest::blocking::get(url).unwrap().json().unwrap();
    answer["records"].as_array().unwrap().clone()
}

/// Issue 30: a commons holding the object under an md5-only record (most
/// Gen3 records) at a location whose bytes are shown to be ours (RGW's MD5
/// ETag equals the md5 of the bytes here) holds it: the push uploads
/// nothing, registers no second record at a second location, and adds one
/// version of that record carrying the sha256 (same `baseid`), which the
/// next push finds (no further version) and a fresh clone restores the
/// file through.
#[test]
fn an_md5_only_indexd_record_at_a_location_holding_our_bytes_gets_a_sha256_version_and_nothing_is_sent(
) {
    let server = server();
    let world = World::new();
    let (repo, layout) = indexd_repo(&world, &server, "md5only");
    let ours = content(80_003, 31);
    let oid = sha256_hex(&ours);
    let url = source_object("md5only", "legacy/reads.bam", &ours);
    let did = md5_only_record(&server, url.clone(), ours.len() as u64, &ours);
    std::fs::write(repo.join("ours.bin"), &ours).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "ours.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("1 object(s) held there already (not sent), 0 registered"),
        "{said}"
    );
    let counts = server.counts();
    assert_eq!(counts.index_post, 0, "no second record: {counts:?}");
    assert_eq!(counts.index_version, 1, "{counts:?}");
    let key = layout.key(&oid.parse().unwrap());
    assert!(
        rt().block_on(s3().head(&layout.bucket, &key))
            .unwrap()
            .is_none(),
        "the object was uploaded to the object remote"
    );
    // The version names the sha256, the same location, the same lineage.
    let old = &indexd_records(
        &server,
        &format!(
            "md5:{}",
            hex::encode(<md5::Md5 as md5::Digest>::digest(&ours))
        ),
    );
    let versions = indexd_records(&server, &format!("sha256:{oid}"));
    assert_eq!(versions.len(), 1, "{versions:?}");
    let version = &versions[0];
    assert_ne!(version["did"], did.as_str());
    assert_eq!(version["urls"], serde_json::json!([url]));
    assert_eq!(version["size"], ours.len() as u64);
    let base = old.iter().find(|r| r["did"] == did.as_str()).unwrap();
    assert_eq!(version["baseid"], base["baseid"], "{version} {base}");

    // Pushing again finds the version by its sha256: no further version.
    std::fs::write(repo.join("note.txt"), "x").unwrap();
    git(&repo, &["add", "note.txt"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "note"]));
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    assert_eq!(
        (counts.index_post, counts.index_version),
        (0, 1),
        "{counts:?}"
    );

    // Another user, another machine: the file comes through Indexd.
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), oid);
}

/// The liar's case of the above: an md5-only record of the same size
/// whose location holds other bytes (its md5 is a claim) is not the
/// object: no version is added to it, and the push uploads and registers
/// the object.
#[test]
fn an_md5_only_indexd_record_whose_location_holds_other_bytes_gets_no_version_and_the_object_is_sent(
) {
    let server = server();
    let world = World::new();
    let (repo, layout) = indexd_repo(&world, &server, "md5liar");
    let ours = content(80_003, 33);
    let other = content(80_003, 34);
    let oid = sha256_hex(&ours);
    let url = source_object("md5liar", "legacy/reads.bam", &other);
    md5_only_record(&server, url, ours.len() as u64, &ours);
    std::fs::write(repo.join("ours.bin"), &ours).unwrap();
    git(&repo, &["lfs", "track", "*.bin"]);
    git(&repo, &["add", ".gitattributes", "ours.bin"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
    let (_remotes, bare) = bare_origin(&repo);
    server.reset_counts();
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("0 object(s) held there already (not sent), 1 registered"),
        "{said}"
    );
    let counts = server.counts();
    assert_eq!(
        (counts.index_post, counts.index_version),
        (1, 0),
        "{counts:?}"
    );
    // The push met the liar: it asked by sha256 (nothing), for records of
    // its size naming an md5 only (there is one: its own md5 is then worth
    // a pass over the bytes), then by md5 (the record, whose location
    // failed its proof).
    assert_eq!(
        (counts.index_by_hash, counts.index_by_md5),
        (3, 1),
        "{counts:?}"
    );
    let key = layout.key(&oid.parse().unwrap());
    let there = rt()
        .block_on(s3().get_bytes(&layout.bucket, &key, None))
        .unwrap();
    assert!(there == ours, "the object was not sent");
    drop(world);
    assert_eq!(clone_elsewhere(&bare, "ours.bin"), oid);
}

/// Registers `bytes` (metadata only: nothing fetches them) under `did`, as
/// Indexd holds a record: sha256 and md5, an `s3://` URL.
fn record_under(server: &DrsServer, did: &str, bytes: &[u8], name: &str) -> String {
    let mut hashes = BTreeMap::new();
    hashes.insert("sha256".to_string(), sha256_hex(bytes));
    hashes.insert(
        "md5".to_string(),
        hex::encode(<md5::Md5 as md5::Digest>::digest(bytes)),
    );
    server
        .add_record(NewRecord {
            form: "object".into(),
            size: bytes.len() as u64,
            hashes,
            urls: vec![format!("s3://commons-bucket/{name}")],
            file_name: Some(name.into()),
            authz: Vec::new(),
            acl: Vec::new(),
            did: Some(did.into()),
        })
        .unwrap()
}

/// Gen3's single lookup takes a did without its prefix; its bulk lookup
/// does not. `drs://HOST/<uuid>` for the record `dg.TEST/<uuid>` resolves:
/// the id the bulk answer leaves unresolved is asked once more alone.
#[test]
fn a_bare_uuid_under_a_host_resolves_to_its_prefixed_indexd_record() {
    let server = server();
    let world = World::new();
    let repo = world.repo("r");
    let uuid = "7d3c1a2b-5e6f-4a8b-9c0d-1e2f3a4b5c6d";
    let bytes = content(4_321, 31);
    record_under(&server, &format!("{PREFIX}/{uuid}"), &bytes, "bare.bam");
    let added = world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/{uuid}"), "bare.bam"],
    );
    assert_eq!(added["added"][0]["oid_from"], "drs_checksum", "{added}");
    assert_eq!(
        staged(&repo, "bare.bam"),
        pointer_text(&sha256_hex(&bytes), bytes.len() as u64)
    );
    let counts = server.counts();
    assert_eq!((counts.bulk_post, counts.objects_get), (1, 1), "{counts:?}");
}

/// An older commons' record whose did has no prefix: Indexd's own
/// `self_uri` for it, `drs://dg.TEST:<uuid>`, asks for `dg.TEST/<uuid>`,
/// which only the single lookup finds.
#[test]
fn indexds_own_self_uri_of_a_did_without_prefix_resolves() {
    let server = server();
    let world = World::new();
    let repo = world.repo("r");
    let uuid = "221c9b3f-0a1b-4c2d-8e3f-405162738495";
    let bytes = content(3_210, 32);
    let did = record_under(&server, uuid, &bytes, "old.bam");
    assert_eq!(did, uuid);
    let self_uri = format!("drs://{PREFIX}:{uuid}");
    world.drsctl_ok(&repo, &["add-url", &self_uri, "old.bam"]);
    assert_eq!(
        staged(&repo, "old.bam"),
        pointer_text(&sha256_hex(&bytes), bytes.len() as u64)
    );
    // The registry keeps the did the server answered with.
    let mirror = std::fs::read_to_string(repo.join(".git/lfs/foreign/registry.jsonl")).unwrap();
    assert!(
        mirror.contains(&format!("\"drs_id\":\"{uuid}\"")),
        "{mirror}"
    );
}

/// A blank record (an upload begun through Fence, not finished) in a batch
/// is refused by name; the two good ids of the same bulk answer go in.
#[test]
fn a_blank_record_in_a_batch_of_three_is_refused_by_name_and_the_other_two_are_added() {
    let server = server();
    let world = World::new();
    let repo = world.repo("r");
    let (a, c) = (content(1_111, 33), content(2_222, 34));
    let did_a = record_under(
        &server,
        &format!("{PREFIX}/0a0a0a0a-1b1b-4c2c-8d3d-4e4e4e4e4e4e"),
        &a,
        "a.bam",
    );
    let blank = server.add_blank_record("pending.bam");
    let did_c = record_under(
        &server,
        &format!("{PREFIX}/0c0c0c0c-1b1b-4c2c-8d3d-4e4e4e4e4e4e"),
        &c,
        "c.bam",
    );
    let accession = |did: &str| did.strip_prefix(&format!("{PREFIX}/")).unwrap().to_string();
    let list = format!(
        "drs://{PREFIX}:{} a.bam\ndrs://{PREFIX}:{} b.bam\ndrs://{PREFIX}:{} c.bam\n",
        accession(&did_a),
        accession(&blank),
        accession(&did_c)
    );
    let ids = world.dir().join("ids.txt");
    std::fs::write(&ids, list).unwrap();
    let out = world.drsctl(
        &repo,
        &["--json", "add-url", "--from", ids.to_str().unwrap()],
    );
    let said = text(&out);
    assert!(!out.status.success(), "one line failed: {said}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["added"].as_array().unwrap().len(), 2, "{report}");
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{report}");
    let why = failed[0].to_string();
    assert!(
        why.contains(&accession(&blank)) && why.contains("upload is not finished"),
        "{why}"
    );
    assert_eq!(
        staged(&repo, "a.bam"),
        pointer_text(&sha256_hex(&a), a.len() as u64)
    );
    assert_eq!(
        staged(&repo, "c.bam"),
        pointer_text(&sha256_hex(&c), c.len() as u64)
    );
    assert!(!repo.join("b.bam").exists());
    assert_eq!(
        server.counts().bulk_post,
        1,
        "one batch: {:?}",
        server.counts()
    );
}

/// The server's own words for a refusal (Indexd's "username / password
/// mismatch") are quoted; the password sent never shows.
#[test]
fn a_refusal_quotes_the_servers_error_body_and_never_the_password() {
    let server = server();
    server.set_auth(Auth::Basic {
        user: "reader".into(),
        password: "the-right-one".into(),
    });
    server.add_object(ObjectSpec::blob("guarded-basic", content(900, 35)));
    let world = World::new();
    let path = world.dir().join("home/.netrc");
    std::fs::write(
        &path,
        "machine 127.0.0.1 login reader password wr0ng-s3cret\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let repo = world.repo("r");
    let out = world.drsctl(
        &repo,
        &["add-url", &format!("drs://{HOST}/guarded-basic"), "g.bam"],
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("HTTP 403") && said.contains("\"username / password mismatch\""),
        "{said}"
    );
    assert!(!said.contains("wr0ng-s3cret"), "{said}");
    assert!(!repo.join("g.bam").exists());
}

/// `n` objects with a sha-256 and only a signed access id, added by their
/// ids (content pointers: nothing read), committed; then pushed to a
/// fresh object remote, which reads each through the pool. Returns the
/// server's counts of the push, the log's text having been checked for
/// signed URLs.
fn push_signed_drs_objects(server: &DrsServer, n: usize) -> drsd_e2e::drs_server::Counts {
    let mut world = World::new();
    // No prefetch: the objects must reach the push unread.
    std::env::set_var("DRSD_PREFETCH_MAX_SIZE", "0");
    let (daemon, log) = logging_daemon(&mut world);
    let (repo, layout) = drs_repo(&world, "r");
    let mut list = String::new();
    let mut bodies = Vec::new();
    for i in 0..n {
        let body = content(10_000 + i, i as u8);
        let mut spec = ObjectSpec::blob(&format!("signed-{i}"), body.clone());
        spec.access = vec![AccessSpec::signed("s3", std::time::Duration::from_secs(30))];
        server.add_object(spec);
        list.push_str(&format!("drs://{HOST}/signed-{i} d/{i}.bin\n"));
        bodies.push(body);
    }
    let ids = world.dir().join("ids.txt");
    std::fs::write(&ids, list).unwrap();
    world.drsctl_ok(&repo, &["add-url", "--from", ids.to_str().unwrap()]);
    ok(git_in(&world, &repo, &["commit", "-qm", "signed objects"]));
    let (_remotes, _bare) = bare_origin(&repo);
    server.reset_counts();
    ok(git_in(&world, &repo, &["push", "-q", "origin", "main"]));
    let counts = server.counts();
    for body in &bodies {
        in_layout(&layout, &sha256_hex(body), body.len() as u64);
    }
    daemon_stop(daemon);
    assert!(std::fs::metadata(&log).unwrap().len() > 0);
    no_secret_kept(world.dir());
    counts
}

#[test]
fn a_push_reading_many_drs_objects_of_one_server_asks_their_signed_urls_in_one_bulk_request() {
    let server = server();
    let counts = push_signed_drs_objects(&server, 6);
    assert_eq!(counts.bulk_access, 1, "{counts:?}");
    assert_eq!(
        counts.access, 0,
        "no URL asked object by object: {counts:?}"
    );
    assert_eq!(
        counts.objects_get, 0,
        "the records came in bulk: {counts:?}"
    );
    assert!(counts.data_get >= 6, "{counts:?}");
}

#[test]
fn a_server_without_bulk_access_urls_is_asked_once_then_each_objects_url_on_its_own() {
    let server = server();
    server.set_bulk_access(false);
    let counts = push_signed_drs_objects(&server, 6);
    assert_eq!(
        counts.bulk_access, 1,
        "asked once, then remembered: {counts:?}"
    );
    assert_eq!(counts.access, 6, "{counts:?}");
    assert!(counts.data_get >= 6, "{counts:?}");
}
