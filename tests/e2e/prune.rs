//! `drsctl prune` end to end: real git and git-lfs, a real daemon, Ceph
//! RGW (and a folder) as the object remote. An object only an old commit
//! names is freed here only once its remote copy is proven, and comes back
//! through the agent; whatever is not proven stays, and a kill mid-prune
//! leaves a repo and a pool that still work.

use std::path::{Path, PathBuf};
use std::process::Command;

use drsd::pool::{Oid, Pool};
use drsd::stores::ObjectLayout;
use drsd_e2e::bin;

use super::lfs_transfer::{content, lfs_object, rt, s3, Daemon, World};

/// Three files, two small (the pool's kv tier) and one large (a file the
/// repo links), each committed twice: the first versions are named by the
/// old commit only.
fn versions(seed: u8) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("a.bin", content(seed, 10_000)),
        ("b.bin", content(seed.wrapping_add(1), 12_000)),
        ("c.bin", content(seed.wrapping_add(2), 300 << 10)),
    ]
}

/// Repo `a` with the old versions committed, then the new ones, all
/// pushed to `origin` (and so to the object remote). Returns the repo, the
/// old and the new versions.
fn pushed_history(world: &World, daemon: &Daemon) -> (PathBuf, Files, Files) {
    let (old, new) = (versions(1), versions(100));
    let (a, _bare) = world.source_repo(daemon, &old);
    for (name, data) in &new {
        std::fs::write(a.join(name), data).unwrap();
    }
    daemon.git(&a, &["commit", "-qam", "new versions"]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    (a, old, new)
}

type Files = Vec<(&'static str, Vec<u8>)>;

fn oids(files: &Files) -> Vec<Oid> {
    files.iter().map(|(_, d)| Oid::of(d)).collect()
}

/// Whether `daemon`'s pool holds `oid` (read beside the running daemon).
fn pooled(daemon: &Daemon, oid: &Oid) -> bool {
    let pool = Pool::open(&daemon.dir.join("pool"), None).unwrap();
    pool.has(oid).unwrap()
}

fn here(daemon: &Daemon, repo: &Path, oid: &Oid) -> (bool, bool) {
    (lfs_object(repo, oid).exists(), pooled(daemon, oid))
}

fn key(world: &World, oid: &Oid) -> String {
    ObjectLayout::parse(&world.remote_url).unwrap().key(oid)
}

/// drsctl run in `dir` against `daemon`, which must fail.
fn drsctl_fails(daemon: &Daemon, dir: &Path, args: &[&str]) -> String {
    let out = Command::new(bin("drsctl"))
        .current_dir(dir)
        .args(args)
        .envs(Daemon::env_of(&daemon.dir))
        .output()
        .unwrap();
    assert!(!out.status.success(), "drsctl {args:?} succeeded");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_object_whose_remote_copy_was_deleted_or_replaced_is_kept_and_a_proven_one_is_freed_and_comes_back(
) {
    let world = World::new("prune-proof");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, old, new) = pushed_history(&world, &daemon);
    let [gone, replaced, proven] = oids(&old)[..] else {
        unreachable!()
    };
    // a.bin's old version is deleted from the bucket, b.bin's replaced by
    // other bytes of its size.
    rt().block_on(s3().delete(&world.bucket, &key(&world, &gone)))
        .unwrap();
    let other = vec![0x5a; old[1].1.len()];
    rt().block_on(s3().put(&world.bucket, &key(&world, &replaced), other.into()))
        .unwrap();

    let out = daemon.drsctl(&a, &["prune"]);
    assert!(out.contains(&format!("freed {proven}")), "{out}");
    assert!(out.contains(&format!("kept {gone}")), "{out}");
    assert!(out.contains(&format!("kept {replaced}")), "{out}");
    assert_eq!(here(&daemon, &a, &proven), (false, false), "{out}");
    assert!(lfs_object(&a, &gone).exists());
    assert!(lfs_object(&a, &replaced).exists());
    for oid in oids(&new) {
        assert!(lfs_object(&a, &oid).exists(), "HEAD's object {oid} pruned");
    }

    // The freed object comes back through the agent on checkout.
    daemon.git(&a, &["checkout", "-q", "HEAD~1"]);
    for (name, data) in &old {
        assert_eq!(&std::fs::read(a.join(name)).unwrap(), data, "{name}");
    }
    daemon.git(&a, &["lfs", "fsck"]);
}

#[test]
fn a_freed_object_comes_back_in_a_new_worktree_and_a_second_prune_finds_nothing_to_free() {
    let world = World::new("prune-wt");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, old, new) = pushed_history(&world, &daemon);
    let out = daemon.drsctl(&a, &["prune"]);
    for oid in oids(&old) {
        assert!(out.contains(&format!("freed {oid}")), "{out}");
        assert_eq!(here(&daemon, &a, &oid), (false, false));
    }
    let again = daemon.drsctl(&a, &["prune"]);
    assert!(again.contains("freed 0 object(s)"), "{again}");

    let wt = world.dir("wt");
    daemon.git(
        &a,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "HEAD~1"],
    );
    for (name, data) in &old {
        assert_eq!(&std::fs::read(wt.join(name)).unwrap(), data, "{name}");
    }
    // The worktree's HEAD needs the old versions now: a prune keeps them.
    let kept = daemon.drsctl(&a, &["prune"]);
    assert!(kept.contains("freed 0 object(s)"), "{kept}");
    for oid in oids(&old).iter().chain(&oids(&new)) {
        assert!(lfs_object(&a, oid).exists(), "{oid} pruned: {kept}");
    }
}

#[test]
fn two_copies_asked_with_one_remote_keeps_everything() {
    let world = World::new("prune-two");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, old, _) = pushed_history(&world, &daemon);
    let out = daemon.drsctl(&a, &["prune", "--copies", "2"]);
    assert!(out.contains("freed 0 object(s)"), "{out}");
    for oid in oids(&old) {
        assert!(out.contains(&format!("kept {oid}")), "{out}");
        assert!(out.contains("2 are asked for"), "{out}");
        assert_eq!(here(&daemon, &a, &oid), (true, true));
    }
}

#[test]
fn a_dry_run_frees_nothing_and_lists_each_object_with_where_it_was_proven() {
    let world = World::new("prune-dry");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, old, _) = pushed_history(&world, &daemon);
    let out = daemon.drsctl(&a, &["prune", "--dry-run"]);
    for oid in oids(&old) {
        let line = format!("would free {oid}");
        let line = out.lines().find(|l| l.starts_with(&line));
        let line = line.unwrap_or_else(|| panic!("{oid} not listed: {out}"));
        assert!(
            line.ends_with(&format!("proven in {}", world.remote_url)),
            "{line}"
        );
        assert_eq!(here(&daemon, &a, &oid), (true, true));
    }
    assert!(out.contains("would free 3 object(s)"), "{out}");
    let json = daemon.drsctl(&a, &["--json", "prune", "--dry-run"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["freed"], 3, "{json}");
    assert_eq!(report["places"][0], world.remote_url.as_str(), "{json}");
    assert_eq!(report["objects"].as_array().unwrap().len(), 3, "{json}");
}

#[test]
fn a_push_of_a_new_branch_naming_pruned_objects_sends_nothing() {
    let world = World::new("prune-push");
    let daemon = Daemon::start(&world.dir("d1"));
    let (a, old, _) = pushed_history(&world, &daemon);
    daemon.drsctl(&a, &["prune"]);
    let before: Vec<_> = oids(&old)
        .iter()
        .map(|oid| rt().block_on(s3().head(&world.bucket, &key(&world, oid))))
        .map(|m| m.unwrap().unwrap())
        .collect();
    // A second git remote has none of the history: the push introduces
    // every object, the pruned ones among them.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let other = world.dir("other.git");
    daemon.git(
        world.top.path(),
        &["init", "-q", "--bare", other.to_str().unwrap()],
    );
    daemon.git(&a, &["remote", "add", "other", other.to_str().unwrap()]);
    daemon.git(&a, &["push", "-q", "other", "HEAD~1:refs/heads/old"]);
    for (oid, before) in oids(&old).iter().zip(before) {
        let after = rt().block_on(s3().head(&world.bucket, &key(&world, oid)));
        let after = after.unwrap().unwrap();
        assert_eq!(
            (after.etag, after.last_modified),
            (before.etag, before.last_modified),
            "{oid} was sent again"
        );
        // Proven by the ETag recorded when it was sent: not read back.
        assert_eq!(here(&daemon, &a, oid), (false, false));
    }
}

#[test]
fn a_prune_killed_after_freeing_repo_copies_leaves_a_repo_and_pool_that_work() {
    let world = World::new("prune-kill");
    let dir = world.dir("d1");
    let daemon = Daemon::start_with(&dir, &[("DRSD_FAILPOINT", "prune-after-repo-copies")]);
    let (a, old, new) = pushed_history(&world, &daemon);
    drsctl_fails(&daemon, &a, &["prune"]);
    drop(daemon);

    let daemon = Daemon::start(&dir);
    // The repo's copies went, the pool's entries stayed: both consistent.
    for oid in oids(&old) {
        assert_eq!(here(&daemon, &a, &oid), (false, true));
    }
    daemon.git(&a, &["lfs", "fsck"]);
    let verify = daemon.drsctl(&a, &["pool", "verify"]);
    assert!(!verify.contains("bad"), "{verify}");
    daemon.git(&a, &["checkout", "-q", "HEAD~1"]);
    for (name, data) in &old {
        assert_eq!(&std::fs::read(a.join(name)).unwrap(), data, "{name}");
    }
    daemon.git(&a, &["checkout", "-q", "main"]);
    // A second prune finishes what the first began.
    daemon.drsctl(&a, &["prune"]);
    for oid in oids(&old) {
        assert_eq!(here(&daemon, &a, &oid), (false, false));
    }
    for (name, data) in &new {
        assert_eq!(&std::fs::read(a.join(name)).unwrap(), data, "{name}");
    }
}

#[test]
fn a_folder_remote_copy_is_proven_by_hashing_it_and_a_changed_one_is_kept() {
    let world = World::new("prune-dir");
    let daemon = Daemon::start(&world.dir("d1"));
    let folder = world.dir("objects");
    std::fs::create_dir(&folder).unwrap();
    let a = world.dir("a");
    std::fs::create_dir(&a).unwrap();
    daemon.git(&a, &["init", "-q"]);
    daemon.drsctl(&a, &["init", "--remote", folder.to_str().unwrap()]);
    daemon.git(&a, &["lfs", "track", "*.bin"]);
    let (old, new) = (versions(7), versions(70));
    for files in [&old, &new] {
        for (name, data) in files.iter() {
            std::fs::write(a.join(name), data).unwrap();
        }
        daemon.git(&a, &["add", "."]);
        daemon.git(&a, &["commit", "-qm", "version"]);
    }
    let bare = world.dir("remote.git");
    daemon.git(
        world.top.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    daemon.git(&a, &["remote", "add", "origin", bare.to_str().unwrap()]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);
    let [changed, _, _] = oids(&old)[..] else {
        unreachable!()
    };
    let hex = changed.to_hex();
    let file = folder.join(&hex[..2]).join(&hex[2..4]).join(&hex);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&file, vec![0x5a; old[0].1.len()]).unwrap();

    let out = daemon.drsctl(&a, &["prune"]);
    assert!(out.contains(&format!("kept {changed}")), "{out}");
    assert!(out.contains("freed 2 object(s)"), "{out}");
    assert_eq!(here(&daemon, &a, &changed), (true, true));
    daemon.git(&a, &["checkout", "-q", "HEAD~1"]);
    for (name, data) in &old {
        assert_eq!(&std::fs::read(a.join(name)).unwrap(), data, "{name}");
    }
}
