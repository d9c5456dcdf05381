//! How a commons serves bytes: an Indexd access method lists both an
//! `access_id` (signed on request by Fence on the same host) and the raw
//! `s3://commons-bucket/…` URL, which the user's keys rarely read. With a
//! bearer credential for the server drsd asks for the signed URL first;
//! without one it reads the raw URL first; either falls back to the other.
//! Through `drsctl add-url drs://…`, real git, git-lfs and Ceph RGW, the
//! project's DRS server in this process (one test per process).

use std::path::Path;
use std::time::Duration;

use drsd_e2e::drs_server::{AccessSpec, Auth, DrsServer, ObjectSpec};

use super::add_url::{pointer_text, sha256_hex, text, World};
use super::foreign::{source_object, staged, wait_for};

const HOST: &str = "commons.example.org";

fn server() -> DrsServer {
    let server = DrsServer::start();
    std::env::set_var("DRSD_DRS_SERVERS", format!("{HOST}={}", server.base_url()));
    server
}

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// A raw URL in a bucket that does not exist: what a commons bucket is to
/// keys that cannot read it.
fn unreadable(key: &str) -> String {
    format!("s3://no-such-commons-bucket-{}/{key}", std::process::id())
}

/// An object whose one method has both the access id `s3` (served signed
/// here) and the raw URL `raw`, with an md5 only, as most Gen3 records:
/// its pointer is provisional until the bytes are read and hashed.
fn commons_object(server: &DrsServer, id: &str, bytes: &[u8], raw: &str) {
    let mut spec = ObjectSpec::blob(id, bytes.to_vec());
    spec.checksums.retain(|(kind, _)| kind == "md5");
    spec.access = vec![AccessSpec::signed_over("s3", Duration::from_secs(30), raw)];
    server.add_object(spec);
}

/// Every file under `dir` (registry, logs, pool, repo) is free of the
/// signature the server put in its signed URLs.
fn no_signed_url_kept(dir: &Path) {
    for entry in walk(dir) {
        let Ok(bytes) = std::fs::read(&entry) else {
            continue;
        };
        assert!(
            !bytes.windows(5).any(|w| w == b"&sig="),
            "{} keeps a signed URL",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
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
fn with_a_gen3_key_a_commons_object_is_read_by_its_signed_access_id_not_its_unreadable_bucket() {
    let server = server();
    server.set_auth(Auth::Bearer);
    server.set_api_key("key-1", "the-api-key");
    let secrets = tempfile::tempdir().unwrap();
    let key_file = secrets.path().join("credentials.json");
    std::fs::write(
        &key_file,
        r#"{"api_key": "the-api-key", "key_id": "key-1"}"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::env::set_var("DRSD_GEN3_CREDENTIALS", &key_file);

    let body = content(200_003, 7);
    commons_object(&server, "commons-1", &body, &unreadable("runs/c1.bam"));
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let added = world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/commons-1"), "c1.bam"],
    );
    assert_eq!(added["added"][0]["provisional"], true, "{added}");
    let want = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the promotion of the commons object", || {
        staged(&repo, "c1.bam") == want
    });
    let counts = server.counts();
    assert!(counts.token >= 1, "the Gen3 key was exchanged: {counts:?}");
    assert!(counts.access >= 1, "the access id was asked: {counts:?}");
    assert!(counts.data_bytes >= body.len() as u64, "{counts:?}");
    no_signed_url_kept(world.dir());
}

#[test]
fn without_a_credential_the_raw_url_is_read_first_and_an_unreadable_one_falls_back_to_the_access_id(
) {
    let server = server();
    std::env::remove_var("DRSD_GEN3_CREDENTIALS");
    std::env::remove_var("DRSD_DRS_TOKEN_FILE");
    let readable = content(150_001, 3);
    let raw = source_object("commons", "runs/open.bam", &readable);
    commons_object(&server, "open-1", &readable, &raw);
    let hidden = content(120_007, 9);
    commons_object(&server, "hidden-1", &hidden, &unreadable("runs/h1.bam"));

    let world = World::with_prefetch();
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/open-1"), "open.bam"],
    );
    let want = pointer_text(&sha256_hex(&readable), readable.len() as u64);
    wait_for("the promotion of the object read by its raw URL", || {
        staged(&repo, "open.bam") == want
    });
    let counts = server.counts();
    assert_eq!(counts.access, 0, "the raw URL was enough: {counts:?}");
    assert_eq!(counts.data_bytes, 0, "{counts:?}");

    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/hidden-1"), "hidden.bam"],
    );
    let want = pointer_text(&sha256_hex(&hidden), hidden.len() as u64);
    wait_for("the promotion of the object read by its access id", || {
        staged(&repo, "hidden.bam") == want
    });
    let counts = server.counts();
    assert!(counts.access >= 1, "fell back to the access id: {counts:?}");
    assert!(counts.data_bytes >= hidden.len() as u64, "{counts:?}");
    no_signed_url_kept(world.dir());
}

#[test]
fn when_no_way_to_the_bytes_works_the_error_names_each_try() {
    let server = server();
    std::env::remove_var("DRSD_GEN3_CREDENTIALS");
    std::env::remove_var("DRSD_DRS_TOKEN_FILE");
    let mut spec = ObjectSpec::blob("lost-1", content(1_000, 5));
    spec.checksums.retain(|(kind, _)| kind == "md5");
    spec.access = vec![
        AccessSpec::s3(&format!("no-such-a-{}", std::process::id()), "k1"),
        AccessSpec::s3(&format!("no-such-b-{}", std::process::id()), "k2"),
    ];
    server.add_object(spec);
    let world = World::new();
    let repo = world.repo("r");
    let out = world.drsctl(
        &repo,
        &["add-url", &format!("drs://{HOST}/lost-1"), "l.bam"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("no-such-a-") && said.contains("no-such-b-") && said.contains("404"),
        "{said}"
    );
    assert!(said.contains("DRSD_GEN3_CREDENTIALS"), "{said}");
    assert!(!repo.join("l.bam").exists());
}
