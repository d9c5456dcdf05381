//! The commons that issued the user's Gen3 API key needs no naming: with
//! the key file (`DRSD_GEN3_CREDENTIALS`) and `drsctl init --gen3 URL` as
//! the only settings, no `DRSD_DRS_SERVERS`, a push goes through the
//! commons and a fresh clone on another machine (its own HOME) restores
//! every file, though the commons serves plain http on a port of its own:
//! the key's `iss` (`http://127.0.0.1:PORT/user`, as Fence writes its own
//! `BASE_URL`) says where `drs://127.0.0.1:PORT/...` is. The daemons read
//! their settings from this process's environment (one test per process).

use std::path::{Path, PathBuf};
use std::process::Command;

use drsd_e2e::drs_server::{Auth, DrsServer};

use super::add_url::{git, sha256_hex, text, World};
use super::foreign::{bare_origin, file_sha256, git_in, ok};
use super::gen3_remote::{daemon_stop, logging_daemon, no_secret_kept};

const AUTHZ: &str = "/programs/p/projects/q";

/// The tests' commons, wanting a token for DRS and taking Fence's tokens
/// at Indexd (Arborist on), and the path of a key file holding an API key
/// it made, named by `DRSD_GEN3_CREDENTIALS` and nothing else.
fn commons_and_key(keys: &Path) -> (DrsServer, PathBuf, String) {
    let server = DrsServer::start();
    server.set_auth(Auth::Bearer);
    server.set_arborist(true);
    let api_key = server.make_api_key("key-1");
    let key_file = keys.join("credentials.json");
    let text = serde_json::json!({"api_key": api_key, "key_id": "key-1"});
    std::fs::write(&key_file, text.to_string()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::env::remove_var("DRSD_DRS_SERVERS");
    std::env::set_var("DRSD_GEN3_CREDENTIALS", &key_file);
    (server, key_file, api_key)
}

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

#[test]
fn with_only_the_key_file_a_push_goes_to_the_commons_that_issued_it_and_a_fresh_clone_restores_every_file(
) {
    let keys = tempfile::tempdir().unwrap();
    let (server, _key_file, api_key) = commons_and_key(keys.path());
    // Parts of 5 MiB: the 6 MiB object goes up in two.
    std::env::set_var("DRSD_UPLOAD_PART_SIZE", "5M");
    let mut world = World::new();
    let (daemon, log) = logging_daemon(&mut world);
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &["init", "--gen3", server.base_url(), "--authz", AUTHZ],
    );
    git(&repo, &["lfs", "track", "*.bin"]);
    let files = [
        ("small.bin", content(90_001, 3)),
        ("large.bin", content(6 << 20, 4)),
    ];
    for (name, bytes) in &files {
        std::fs::write(repo.join(name), bytes).unwrap();
        git(&repo, &["add", name]);
    }
    git(&repo, &["add", ".gitattributes"]);
    ok(git_in(&world, &repo, &["commit", "-qm", "data"]));
    let (_remotes, bare) = bare_origin(&repo);
    let out = git_in(&world, &repo, &["push", "-q", "origin", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let counts = server.counts();
    assert!(counts.token >= 1, "the key was exchanged: {counts:?}");
    for (name, bytes) in &files {
        let url = format!(
            "{}/index/index?hash=sha256:{}",
            server.base_url(),
            sha256_hex(bytes)
        );
        let found: serde_json::Value = reqwest::blocking::get(url).unwrap().json().unwrap();
        assert_eq!(
            found["records"].as_array().map(Vec::len),
            Some(1),
            "{name}: {found}"
        );
    }

    // Another machine: its own HOME, the same key file, nothing else.
    let other = World::with_prefetch();
    let out = Command::new(drsd_e2e::bin("drsctl"))
        .current_dir(other.dir())
        .args(["clone", bare.to_str().unwrap(), "b"])
        .envs(other.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    for (name, bytes) in &files {
        let restored = file_sha256(&other.dir().join("b").join(name));
        assert_eq!(restored, sha256_hex(bytes), "{name}");
    }
    drop(other);

    daemon_stop(daemon);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(&api_key), "the API key is in the log");
    assert!(
        logged.contains(&format!(
            "was issued by the commons at {}",
            server.base_url()
        )),
        "the daemon says where the key goes"
    );
    no_secret_kept(world.dir());
}
