//! Joining a team and leaving it (issue 31, item 7): `drsctl team join`
//! copies a machine's own pool and registry into the team's, verified,
//! idempotent and resumable; `drsctl team leave` copies back what its
//! repos need, so they check out with the team database dropped. The two
//! machines and the team database are `team.rs`'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use drsd::registry::engine::ForeignObjects;
use drsd_e2e::bin;
use drsd_e2e::liar::{Liar, Lies};

use super::add_url::{pointer_text, sha256_hex, text};
use super::foreign::staged;
use super::team::{body, world, Node, TeamDb, LM};

/// GETs a liar answered so far.
fn gets(liar: &Liar) -> usize {
    liar.requests()
        .iter()
        .filter(|r| r.starts_with("GET"))
        .count()
}

/// A's repo `ra`: two files through git-lfs (one per tier) and one object
/// added by URL and promoted, committed and pushed to `origin.git`
/// through the folder remote `objects`. Returns the repo, the bare
/// origin, and the files with their bytes.
fn repo_with_objects(
    a: &Node,
    top: &Path,
    url: &str,
) -> (PathBuf, PathBuf, Vec<(String, Vec<u8>)>) {
    let folder = top.join("objects");
    std::fs::create_dir_all(&folder).unwrap();
    let ra = a.dir.join("ra");
    std::fs::create_dir(&ra).unwrap();
    let in_ra = |args: &[&str]| a.ok(Command::new("git").arg("-C").arg(&ra).args(args));
    in_ra(&["init", "-q"]);
    a.drsctl_ok(&ra, &["init", "--remote", folder.to_str().unwrap()]);
    in_ra(&["lfs", "track", "*.bin"]);
    let mut files = vec![
        ("big.bin".to_string(), body(3 << 20)),
        ("small.bin".to_string(), body(700)),
    ];
    for (name, data) in &files {
        std::fs::write(ra.join(name), data).unwrap();
    }
    a.drsctl_ok(&ra, &["add-url", url, "url.bin"]);
    a.drsctl_ok(&ra, &["promote", "--all", "--wait"]);
    files.push(("url.bin".to_string(), body(300 << 10)));
    in_ra(&["add", "."]);
    in_ra(&["commit", "-qm", "data"]);
    let bare = top.join("origin.git");
    a.ok(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare));
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["remote", "add", "origin"])
        .arg(&bare));
    in_ra(&["push", "-q", "origin", "main"]);
    (ra, bare, files)
}

fn counts(report: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| {
        report[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {report}"))
    };
    (n("copied"), n("present"), n("records"))
}

#[test]
fn a_machine_joins_with_its_pool_and_registry_another_clones_from_the_team_and_leaving_keeps_its_repos_working(
) {
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    let liar = Liar::start(body(300 << 10), "mig-etag-1", LM);
    let mut a = Node::new(top, "alice@a", &db, &large, &[]);
    let team = std::mem::take(&mut a.team);
    // A works on its own first.
    a.start();
    let (ra, bare, mut files) = repo_with_objects(&a, top, &liar.url("d/url.bin"));
    a.kill9();
    // Only the own pool has the bytes now: not the repo (the team's daemon
    // would adopt them from there), not the URL (it serves other bytes).
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).unwrap();
    liar.lies(Lies {
        other_version: Some(("mig-etag-other".into(), body(1000))),
        ..Lies::default()
    });
    a.team = team.clone();
    a.start();
    let first = a.drsctl_ok(&ra, &["team", "join"]);
    let (copied, present, records) = counts(&first);
    assert_eq!(first["refused"], serde_json::json!([]), "{first}");
    assert_eq!(
        (copied, present),
        (3, 0),
        "big, small and the URL's object: {first}"
    );
    assert_eq!(first["bytes"], (3 << 20) + 700 + (300 << 10), "{first}");
    // The team knew url.bin from ra's mirror (restored at start), as a
    // claim: the join's record says its bytes were read.
    assert_eq!(records, 1, "url.bin's record: {first}");
    // Again: nothing left to copy.
    let again = a.drsctl_ok(&ra, &["team", "join"]);
    assert_eq!(counts(&again), (0, copied + present, 0), "{again}");
    // B clones with the folder remote gone and without asking the URL.
    std::fs::remove_dir_all(top.join("objects")).unwrap();
    let url_gets = gets(&liar);
    let mut b = Node::new(top, "alice@b", &db, &large, &[]);
    b.start();
    b.ok(Command::new(bin("drsctl")).current_dir(top).args([
        "clone",
        bare.to_str().unwrap(),
        "rb",
    ]));
    for (name, data) in &files {
        let got = std::fs::read(top.join("rb").join(name)).unwrap();
        assert!(got == *data, "{name} on B is not A's bytes");
    }
    assert_eq!(
        gets(&liar),
        url_gets,
        "B fetched from the URL: {:?}",
        liar.requests()
    );
    // In the team, A adds one more object by URL: in the team's pool and
    // registry only.
    let liar2 = Liar::start(
        body(200 << 10).into_iter().rev().collect(),
        "mig-etag-2",
        LM,
    );
    a.drsctl_ok(&ra, &["add-url", &liar2.url("e/late.bin"), "late.bin"]);
    a.drsctl_ok(&ra, &["promote", "--all", "--wait"]);
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["commit", "-qm", "late"]));
    files.push((
        "late.bin".into(),
        body(200 << 10).into_iter().rev().collect(),
    ));
    // A's own stores are lost meanwhile: leave must bring back all its repo needs.
    a.kill9();
    std::fs::remove_dir_all(a.dir.join("pool")).unwrap();
    for end in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(a.dir.join(format!("state/registry.sqlite{end}")));
    }
    a.start();
    let left = a.drsctl_ok(&ra, &["team", "leave"]);
    let (copied, _, records) = counts(&left);
    assert_eq!(left["refused"], serde_json::json!([]), "{left}");
    assert_eq!(copied, 4, "every object ra names: {left}");
    assert_eq!(records, 2, "url.bin and late.bin: {left}");
    // The team is gone: its database dropped, team_db removed.
    a.kill9();
    b.kill9();
    drop(db);
    a.team.clear();
    a.start();
    let gets_before = (gets(&liar), gets(&liar2));
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).unwrap();
    for (name, _) in &files {
        std::fs::remove_file(ra.join(name)).unwrap();
    }
    a.ok(Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["checkout", "--", "."]));
    for (name, data) in &files {
        let got = std::fs::read(ra.join(name)).unwrap();
        assert!(got == *data, "{name} on A after leaving is not its bytes");
    }
    assert_eq!(
        (gets(&liar), gets(&liar2)),
        gets_before,
        "read from the URLs"
    );
    let status = a.drsctl_ok(&ra, &["status"]);
    assert_eq!(status["registry_engine"], "sqlite", "{status}");
    // The own registry knows the object added in the team.
    let own = drsd::registry::SqliteRegistry::open_read_only(&a.dir.join("state/registry.sqlite"))
        .unwrap()
        .unwrap();
    let late = pointer_text(&sha256_hex(&files[3].1), 200 << 10);
    assert_eq!(staged(&ra, "late.bin"), late);
    let entries = own.for_repo(&ra.canonicalize().unwrap()).unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e.path == "late.bin" && e.object.content_oid.is_some()),
        "{entries:?}"
    );
}

/// Files in the shared folder's large tier (its `xx/yy/hex` shards).
fn shared_entries(large: &Path) -> usize {
    let Ok(top) = std::fs::read_dir(large.join("large")) else {
        return 0;
    };
    top.flatten()
        .filter(|a| a.file_name().len() == 2)
        .flat_map(|a| std::fs::read_dir(a.path()).into_iter().flatten().flatten())
        .flat_map(|b| std::fs::read_dir(b.path()).into_iter().flatten().flatten())
        .count()
}

/// Writes `data` into a pool folder's large tier as the entry `name`
/// (normally its sha256), as the local engine lays it out.
fn plant(pool: &Path, name: &str, data: &[u8]) {
    let dir = pool.join("large").join(&name[0..2]).join(&name[2..4]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

#[test]
fn a_join_killed_midway_finishes_on_the_rerun_with_whole_entries_and_refuses_a_bad_one_by_name() {
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    let mut a = Node::new(top, "alice@a", &db, &large, &[]);
    // This machine's own pool: 60 large entries, and one whose bytes do
    // not match its name.
    let pool = a.dir.join("pool");
    let n = 60;
    for i in 0..n {
        let mut data = body(4 << 20);
        data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        plant(&pool, &sha256_hex(&data), &data);
    }
    let bad = sha256_hex(b"what the name says");
    plant(&pool, &bad, &body(200 << 10));
    let repo = a.repo("ra");
    a.start();
    let join = Command::new(bin("drsctl"))
        .current_dir(&repo)
        .args(["--json", "team", "join"])
        .envs(a.env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared_entries(&large) < 3 {
        assert!(Instant::now() < deadline, "the join never started copying");
        std::thread::sleep(Duration::from_millis(5));
    }
    a.kill9();
    let at_kill = shared_entries(&large);
    let out = join.wait_with_output().unwrap();
    assert!(
        at_kill < n,
        "the join finished before the kill: {}",
        text(&out)
    );
    assert!(!out.status.success(), "{}", text(&out));
    a.start();
    let out = a.drsctl(&repo, &["--json", "team", "join"]);
    assert!(
        !out.status.success(),
        "a refused entry fails the join: {}",
        text(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (copied, present, _) = counts(&report);
    assert_eq!(copied + present, n as u64, "{report}");
    assert!(present >= at_kill as u64, "{report}");
    let refused = report["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{report}");
    assert_eq!(refused[0]["key"], bad.as_str(), "{report}");
    assert!(
        refused[0]["why"].as_str().unwrap().contains("hashes to"),
        "{report}"
    );
    assert!(
        text(&out).contains("not copied") || text(&out).contains(&bad),
        "{}",
        text(&out)
    );
    // Every entry in the team's pool is whole: verify finds nothing bad.
    assert_eq!(shared_entries(&large), n);
    let verify = a.drsctl_ok(&repo, &["pool", "verify"]);
    assert_eq!(verify["bad"], serde_json::json!([]), "{verify}");
    // The own pool is as it was: the bad entry still there, untouched.
    assert!(pool
        .join("large")
        .join(&bad[0..2])
        .join(&bad[2..4])
        .join(&bad)
        .exists());
}
