//! `drsctl add-url --manifest FILE [DIR]` end to end: the JSON manifest a
//! Gen3 data portal exports, its objects added as `drs://` ids of the
//! commons (the project's DRS + Indexd server in this process), fetched,
//! checked against the manifest's size and md5, and promoted, with real
//! git, git-lfs and Ceph RGW (the repo's object remote). A manifest drsd
//! cannot add as written adds nothing. The daemon reads `DRSD_DRS_SERVERS`
//! from this process's environment (one test per process).

use std::path::{Path, PathBuf};

use drsd_e2e::drs_server::{DrsServer, ObjectSpec};
use serde_json::json;

use super::add_url::{git, pointer_text, sha256_hex, text, World};
use super::foreign::{drs_repo, git_in, ok, queue, staged, wait_for};

/// The commons' host name, mapped to the test server.
const HOST: &str = "drs.example.org";
const PREFIX: &str = "dg.TEST";

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(<md5::Md5 as md5::Digest>::digest(bytes))
}

/// A DRS server that the daemons this process starts reach as `HOST`.
fn server() -> DrsServer {
    let server = DrsServer::start();
    std::env::set_var("DRSD_DRS_SERVERS", format!("{HOST}={}", server.base_url()));
    server
}

/// A did as a portal lists it: `dg.TEST/<uuid>`.
fn did(n: u8) -> String {
    format!("{PREFIX}/5f0c{n:04x}-2b1d-4e6f-8a9b-0c1d2e3f4a5b")
}

/// An object under `did` whose record names no sha256 (most Gen3 records):
/// its md5 only, or (`with_md5` false) no checksum at all.
fn without_sha256(server: &DrsServer, did: &str, bytes: &[u8], with_md5: bool) {
    let mut spec = ObjectSpec::blob(did, bytes.to_vec());
    spec.checksums.retain(|(kind, _)| with_md5 && kind == "md5");
    server.add_object(spec);
}

fn write_manifest(world: &World, text: &str) -> PathBuf {
    let file = world.dir().join("manifest.json");
    std::fs::write(&file, text).unwrap();
    file
}

/// `drsctl add-url --manifest FILE ARGS...` in `repo`, its outcome.
fn add_manifest(world: &World, repo: &Path, file: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--json", "add-url", "--manifest", file.to_str().unwrap()];
    all.extend_from_slice(args);
    world.drsctl(repo, &all)
}

#[test]
fn a_gen3_manifest_adds_its_objects_under_a_folder_and_they_become_their_content() {
    let server = server();
    let world = World::with_prefetch();
    let (repo, _layout) = drs_repo(&world, "r");
    let (a, b) = (content(70_003, 1), content(9_001, 2));
    // One record names the md5; the other no checksum: the manifest's md5
    // is then what its bytes are checked against.
    without_sha256(&server, &did(1), &a, true);
    without_sha256(&server, &did(2), &b, false);
    let manifest = json!([
        {"md5sum": md5_hex(&a), "file_name": "a.sav", "file_size": a.len(),
         "object_id": did(1), "subject_submitter_id": "s-1", "study": {"id": 7}},
        {"md5sum": md5_hex(&b), "file_name": "b c.sav", "file_size": b.len(),
         "object_id": did(2), "acl": ["open"]},
    ]);
    let file = write_manifest(&world, &manifest.to_string());
    let out = add_manifest(
        &world,
        &repo,
        &file,
        &["data", "--commons", "https://drs.example.org"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let added = report["added"].as_array().unwrap();
    let paths: Vec<&str> = added.iter().map(|a| a["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["data/a.sav", "data/b c.sav"], "{report}");
    assert!(
        added[0]["url"]
            .as_str()
            .unwrap()
            .starts_with("drs://drs.example.org/dg.TEST%2F5f0c0001"),
        "{report}"
    );

    for (path, bytes) in [("data/a.sav", &a), ("data/b c.sav", &b)] {
        let want = pointer_text(&sha256_hex(bytes), bytes.len() as u64);
        wait_for("the promotion of the manifest's objects", || {
            staged(&repo, path) == want
        });
    }
    // The work tree's pointers become the files, smudged by git-lfs from
    // what the daemon fetched.
    std::fs::remove_dir_all(repo.join("data")).unwrap();
    ok(git_in(&world, &repo, &["checkout", "--", "data"]));
    assert!(std::fs::read(repo.join("data/a.sav")).unwrap() == a);
    assert!(std::fs::read(repo.join("data/b c.sav")).unwrap() == b);
    let q = queue(&world, &repo);
    assert_eq!(q["failed"].as_u64(), Some(0), "{q}");
}

#[test]
fn a_manifest_drsd_cannot_add_as_written_adds_nothing_and_names_file_and_entry() {
    let server = server();
    let world = World::new();
    let repo = world.repo("r");
    let bytes = content(1_000, 3);
    server.add_object(ObjectSpec::blob(&did(1), bytes.clone()));
    let good = json!({"object_id": did(1), "file_name": "ok.bin", "file_size": bytes.len()});
    let cases = [
        ("object_id,file_name\n".to_string(), "is not JSON"),
        (
            json!({"files": [good]}).to_string(),
            "is an object, not a JSON list",
        ),
        (
            json!([good, {"object_id": did(2)}]).to_string(),
            "entry 2 (object_id \"dg.TEST/5f0c0002",
        ),
        (
            json!([good, {"object_id": did(2), "file_name": "x", "file_size": "12"}]).to_string(),
            "entry 2 (object_id",
        ),
        (
            json!([good, {"object_id": did(2), "file_name": "../../escape"}]).to_string(),
            "holds a `/`",
        ),
        (
            json!([good, {"object_id": did(2), "file_name": "ok.bin"}]).to_string(),
            "is the file_name of entry 1 too",
        ),
    ];
    for (manifest, says) in cases {
        let file = write_manifest(&world, &manifest);
        // Without --json: the message as a person reads it.
        let args = ["add-url", "--manifest", file.to_str().unwrap(), "data"];
        let out = world.drsctl(&repo, &[&args[..], &["--commons", HOST]].concat());
        let said = text(&out);
        assert!(!out.status.success(), "{manifest}: {said}");
        assert!(
            said.contains(file.to_str().unwrap()) && said.contains(says),
            "{manifest}: {said}"
        );
        assert!(said.contains("nothing was added"), "{said}");
    }
    assert!(!repo.join("data").exists());
    assert!(!repo.join(".gitattributes").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    let counts = server.counts();
    assert_eq!(counts.objects_get + counts.bulk_post, 0, "{counts:?}");
}

#[test]
fn an_entry_whose_size_is_not_the_records_is_refused_by_number_and_the_rest_added() {
    let server = server();
    let world = World::new();
    let repo = world.repo("r");
    let (a, b) = (content(2_000, 4), content(3_000, 5));
    server.add_object(ObjectSpec::blob(&did(1), a.clone()));
    server.add_object(ObjectSpec::blob(&did(2), b.clone()));
    let manifest = json!([
        {"object_id": did(1), "file_name": "a.bin", "file_size": a.len(), "md5sum": md5_hex(&a)},
        {"object_id": did(2), "file_name": "b.bin", "file_size": b.len() + 1},
        {"object_id": did(2), "file_name": "c.bin", "md5": md5_hex(&a)},
    ]);
    let file = write_manifest(&world, &manifest.to_string());
    let out = add_manifest(&world, &repo, &file, &["--commons", HOST]);
    assert!(!out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["added"].as_array().unwrap().len(), 1, "{report}");
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{report}");
    assert_eq!(failed[0]["line"], 2, "{report}");
    let why = failed[0]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!(
            "holds {} bytes, {} were expected",
            b.len(),
            b.len() + 1
        )),
        "{why}"
    );
    assert_eq!(failed[1]["line"], 3, "{report}");
    let why = failed[1]["message"].as_str().unwrap();
    assert!(
        why.contains(&md5_hex(&a)) && why.contains(&md5_hex(&b)),
        "{why}"
    );
    assert_eq!(
        staged(&repo, "a.bin"),
        pointer_text(&sha256_hex(&a), a.len() as u64)
    );
    assert!(!repo.join("b.bin").exists() && !repo.join("c.bin").exists());
}

#[test]
fn bytes_without_the_manifests_md5_are_never_promoted() {
    let server = server();
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let bytes = content(40_001, 6);
    without_sha256(&server, &did(1), &bytes, false);
    let wrong = "0123456789abcdef0123456789abcdef";
    let manifest = json!([{"object_id": did(1), "file_name": "m.bin", "md5sum": wrong}]);
    let file = write_manifest(&world, &manifest.to_string());
    let out = add_manifest(&world, &repo, &file, &["--commons", HOST]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for("the prefetch to give up", || {
        queue(&world, &repo)["failed"].as_u64() == Some(1)
    });
    assert_ne!(
        staged(&repo, "m.bin"),
        pointer_text(&sha256_hex(&bytes), bytes.len() as u64),
        "never promoted"
    );
    let status = world.drsctl_ok(&repo, &["status"]).to_string();
    assert!(
        status.contains(wrong) && status.contains(&md5_hex(&bytes)),
        "{status}"
    );
}

#[test]
fn without_commons_the_repos_gen3_object_remote_is_the_commons() {
    let server = DrsServer::start();
    std::env::set_var(
        "DRSD_DRS_SERVERS",
        format!("127.0.0.1:{}={}", server.port(), server.base_url()),
    );
    let world = World::new();
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &[
            "init",
            "--gen3",
            server.base_url(),
            "--authz",
            "/programs/p/projects/q",
        ],
    );
    let bytes = content(5_000, 7);
    server.add_object(ObjectSpec::blob(&did(1), bytes.clone()));
    let manifest = json!([{"object_id": did(1), "file_name": "x.bin", "file_size": bytes.len()}]);
    let file = write_manifest(&world, &manifest.to_string());
    std::fs::create_dir(repo.join("sub")).unwrap();
    let out = add_manifest(&world, &repo.join("sub"), &file, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let url = report["added"][0]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("drs://127.0.0.1:{}/dg.TEST%2F", server.port())),
        "{report}"
    );
    assert_eq!(
        staged(&repo, "sub/x.bin"),
        pointer_text(&sha256_hex(&bytes), bytes.len() as u64)
    );
}
