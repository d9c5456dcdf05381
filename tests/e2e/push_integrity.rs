//! What the pre-push check lets through: only objects it can show to be in
//! the object remote. git-lfs lets missing objects through
//! (`lfs.allowincompletepush`, set by `drsctl init` for foreign objects), so
//! the daemon's check is all that stands between a pointer nobody can fetch
//! and a published history. Real git, git-lfs, Ceph RGW.

use std::path::{Path, PathBuf};
use std::process::Command;

use drsd::pool::Oid;

use super::lfs_transfer::{content, git_fails, rt, s3, Daemon, World};

/// Commits at `path` in `repo` a pointer to an object no one has.
fn commit_ghost(daemon: &Daemon, repo: &Path, path: &str) -> Oid {
    let oid = Oid::of(format!("an object nobody has, at {path}").as_bytes());
    let pointer = format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 123456\n",
        oid.to_hex()
    );
    std::fs::write(repo.join(path), pointer).unwrap();
    daemon.git(repo, &["add", path]);
    daemon.git(repo, &["commit", "-qm", "a pointer to nothing"]);
    oid
}

fn branch_head(daemon: &Daemon, bare: &Path) -> String {
    daemon.git(bare, &["rev-parse", "main"]).trim().to_string()
}

/// Repo `a` with one real object, pushed: `(a, bare, bare's main)`.
fn pushed_source(world: &World, daemon: &Daemon) -> (PathBuf, PathBuf, String) {
    let (a, bare) = world.source_repo(daemon, &[("real.bin", content(1, 200_000))]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    let head = branch_head(daemon, &bare);
    (a, bare, head)
}

#[test]
fn a_pointer_to_an_object_nobody_has_refuses_the_push_naming_path_oid_and_remedy() {
    let world = World::new("ghost");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, bare, before) = pushed_source(&world, &daemon);
    let incomplete = daemon.git(&a, &["config", "lfs.allowincompletepush"]);
    assert_eq!(incomplete.trim(), "true", "git-lfs itself lets it through");

    let oid = commit_ghost(&daemon, &a, "ghost.bin");
    let text = git_fails(&daemon, &a, &["push", "origin", "main"]);
    let hex = oid.to_hex();
    for needed in [
        "ghost.bin",
        hex.as_str(),
        "git lfs fetch",
        &format!("git lfs push --object-id origin {hex}"),
        "remove the commit",
    ] {
        assert!(text.contains(needed), "no {needed:?} in: {text}");
    }
    assert_eq!(
        branch_head(&daemon, &bare),
        before,
        "the remote's branch did not move"
    );
}

#[test]
fn a_missing_object_the_store_cannot_be_asked_about_fails_the_push() {
    let world = World::new("ghostdown");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, bare, before) = pushed_source(&world, &daemon);
    drop(daemon);
    // The same daemon's state, its store unreachable: the object cannot be
    // shown to be there, so it is not published.
    let down = Daemon::start_with(
        &world.dir("d1"),
        &[("AWS_ENDPOINT_URL", "http://127.0.0.1:9")],
    );
    let oid = commit_ghost(&down, &a, "ghost.bin");
    let text = git_fails(&down, &a, &["push", "origin", "main"]);
    assert!(
        text.contains("ghost.bin") && text.contains(&oid.to_hex()),
        "names the path and oid: {text}"
    );
    assert!(text.contains("could not be checked"), "says why: {text}");
    assert_eq!(branch_head(&down, &bare), before);
}

#[test]
fn an_object_only_the_object_remote_has_lets_the_push_go_on() {
    let world = World::new("remoteonly");
    let daemon = Daemon::start(&world.dir("d1"));
    let (_, bare, _) = pushed_source(&world, &daemon);
    drop(daemon);

    // Another machine (an empty pool), a clone without the objects: pushing
    // its history to a new remote introduces the object, which only the
    // object remote holds.
    let other = Daemon::start(&world.dir("d2"));
    let b = world.dir("b");
    let out = Command::new("git")
        .args(["clone", "-q", bare.to_str().unwrap(), b.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    other.drsctl(&b, &["init"]);
    let bare2 = world.dir("second.git");
    other.git(
        world.top.path(),
        &["init", "-q", "--bare", bare2.to_str().unwrap()],
    );
    other.git(&b, &["remote", "add", "second", bare2.to_str().unwrap()]);
    other.git(&b, &["push", "-q", "second", "main"]);
    assert_eq!(branch_head(&other, &bare2), branch_head(&other, &bare));
}

/// Writes `len` bytes that are not object `oid` under its key in the
/// world's object remote, tagged with its sha256 as drsd's uploads are:
/// what a lab member who can write the bucket plants.
fn plant(world: &World, oid: &Oid, len: usize) -> String {
    let layout = drsd::stores::ObjectLayout::parse(&world.remote_url).unwrap();
    let key = layout.key(oid);
    let planted = vec![b'!'; len];
    rt().block_on(s3().put_with(
        &world.bucket,
        &key,
        planted.into(),
        &[(drsd::stores::SHA256_META, &oid.to_hex())],
    ))
    .unwrap();
    key
}

fn held_bytes(world: &World, key: &str) -> Vec<u8> {
    rt().block_on(s3().get_bytes(&world.bucket, key, None))
        .unwrap()
        .to_vec()
}

#[test]
fn an_object_planted_under_its_key_with_its_sha256_tag_is_replaced_by_the_push() {
    let world = World::new("planted");
    let daemon = Daemon::start(&world.dir("d1"));
    // One below the size sent with If-None-Match first (its 412 is no
    // proof), one above it (HEAD first).
    let files = [
        ("small.bin", content(11, 200_000)),
        ("mid.bin", content(12, 2 << 20)),
    ];
    let (a, _bare) = world.source_repo(&daemon, &files);
    let keys: Vec<String> = files
        .iter()
        .map(|(_, data)| plant(&world, &Oid::of(data), data.len()))
        .collect();

    daemon.git(&a, &["push", "-q", "origin", "main"]);
    for ((name, data), key) in files.iter().zip(&keys) {
        assert!(
            held_bytes(&world, key) == *data,
            "{name}: the planted bytes at {key} were taken for the object"
        );
    }
}

#[test]
fn a_planted_object_nobody_here_can_send_refuses_the_push_naming_its_key() {
    let world = World::new("plantghost");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, bare, before) = pushed_source(&world, &daemon);
    // A pointer to an object no one has, and other bytes of its size under
    // its key, tagged with its sha256: a HEAD would call it present.
    let oid = commit_ghost(&daemon, &a, "ghost.bin");
    let key = plant(&world, &oid, 123_456);
    let text = git_fails(&daemon, &a, &["push", "origin", "main"]);
    assert!(text.contains("ghost.bin"), "{text}");
    assert!(text.contains(&key), "the key is not named: {text}");
    assert!(text.contains("other bytes"), "{text}");
    assert_eq!(
        branch_head(&daemon, &bare),
        before,
        "the branch did not move"
    );
}

/// The one exception to the rule: an object remote the user names in
/// `trust_claims` is taken at its word (size and `x-amz-meta-sha256`),
/// and both `drsctl status` and the push say so.
#[test]
fn an_object_remote_trusted_at_its_word_is_believed_and_the_push_and_status_say_so() {
    let world = World::new("trusted");
    let daemon = Daemon::start_with(
        &world.dir("d1"),
        &[("DRSD_TRUST_CLAIMS", world.remote_url.as_str())],
    );
    let (a, _bare, _) = pushed_source(&world, &daemon);
    let status = daemon.drsctl(&a, &["status"]);
    assert!(
        status.contains("at their word (trust_claims)") && status.contains(&world.remote_url),
        "{status}"
    );
    let oid = commit_ghost(&daemon, &a, "ghost.bin");
    plant(&world, &oid, 123_456);
    let said = daemon.git(&a, &["push", "origin", "main"]);
    assert!(
        said.contains("1 object(s) taken as present on the word of")
            && said.contains(&world.remote_url),
        "{said}"
    );
}
