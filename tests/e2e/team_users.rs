//! Several users on one team (issue 31, item 5): machine B's daemon runs
//! as a second local user, in the lab's group, on the same team database
//! and shared folder as machine A's (root's). B reads what A's pool holds;
//! B, writing the shared folder (or the database) directly, cannot make
//! git on A or B get bytes it planted: the verified read-out refuses them,
//! moves the entry aside and names the object.
//!
//! Needs root (to make the user and group and to run as them), as the
//! tests are in CI: not root is a failure saying so, never a skip.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use drsd_e2e::bin;

use super::add_url::{sha256_hex, text};
use super::team::{body, world, Node, TeamDb};

pub(super) const GROUP: &str = "drsd-test-lab";
pub(super) const USER: &str = "drsd-test-bob";

pub(super) fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    out
}

/// The lab's group and its second user (made once; kept for the next run).
pub(super) fn lab_user() -> (u32, u32) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes a user and a group and runs a daemon as them: run it as root \
         (CI does); it is not skipped"
    );
    let id = |args: &[&str]| Command::new("id").args(args).arg(USER).output().unwrap();
    if Command::new("getent")
        .args(["group", GROUP])
        .output()
        .unwrap()
        .stdout
        .is_empty()
    {
        run(Command::new("groupadd").arg(GROUP));
    }
    if !id(&["-u"]).status.success() {
        run(Command::new("useradd")
            .args(["--no-create-home", "--gid", GROUP, "--shell", "/bin/false"])
            .arg(USER));
    }
    let number = |out: Output| text(&out).trim().parse::<u32>().unwrap();
    (number(id(&["-u"])), number(id(&["-g"])))
}

/// Gives `path` (and what is in it) to `uid:gid`.
pub(super) fn give(path: &Path, uid: u32, gid: u32) {
    run(Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(path));
}

/// A command as the second user, with B's environment and HOME.
pub(super) fn as_bob(b: &Node, home: &Path, (uid, gid): (u32, u32), program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.envs(b.env())
        .env("HOME", home)
        .env("DRSD_BIN", bin("drsd"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .uid(uid)
        .gid(gid);
    cmd
}

/// The file of entry `oid` in the shared folder's large tier.
pub(super) fn shared_file(large: &Path, oid: &str) -> PathBuf {
    large
        .join("large")
        .join(&oid[0..2])
        .join(&oid[2..4])
        .join(oid)
}

#[test]
fn a_second_user_reads_the_team_pool_and_cannot_plant_bytes_git_would_get() {
    let bob = lab_user();
    let db = TeamDb::create();
    let (top, large) = world();
    let top = top.path();
    // The second user walks to its own folders; the shared folder is the
    // lab group's (A's daemon makes it setgid 2770 to that group).
    std::fs::set_permissions(top, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // As README's "For a lab" sets it up: the group's, setgid.
    give(&large, 0, bob.1);
    std::fs::set_permissions(&large, std::os::unix::fs::PermissionsExt::from_mode(0o2770)).unwrap();
    let folder = top.join("objects");
    std::fs::create_dir(&folder).unwrap();
    let mut a = Node::new(top, "root@a", &db, &large, &[]);
    let mut b = Node::new(top, "bob@b", &db, &large, &[]);
    a.start();
    let files = [("big.bin", body(2 << 20)), ("small.bin", body(900))];
    let ra = a.dir.join("ra");
    std::fs::create_dir(&ra).unwrap();
    let in_ra = |args: &[&str]| a.ok(Command::new("git").arg("-C").arg(&ra).args(args));
    in_ra(&["init", "-q"]);
    a.drsctl_ok(&ra, &["init", "--remote", folder.to_str().unwrap()]);
    in_ra(&["lfs", "track", "*.bin"]);
    for (name, data) in &files {
        std::fs::write(ra.join(name), data).unwrap();
    }
    in_ra(&["add", "."]);
    in_ra(&["commit", "-qm", "data"]);
    let bare = top.join("origin.git");
    a.ok(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare));
    in_ra(&["remote", "add", "origin", bare.to_str().unwrap()]);
    in_ra(&["push", "-q", "origin", "main"]);
    // The object remote is gone: the team's pool is the only copy.
    std::fs::remove_dir_all(&folder).unwrap();
    // B: its own HOME and folders, as the second user.
    let home = b.dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = B\n\temail = b@example.org\n[init]\n\tdefaultBranch = main\n\
         [safe]\n\tdirectory = *\n",
    )
    .unwrap();
    give(&b.dir, bob.0, bob.1);
    run(as_bob(&b, &home, bob, Path::new("git")).args(["lfs", "install", "--skip-repo"]));
    let start_b = |b: &mut Node| {
        let mut cmd = as_bob(b, &home, bob, &bin("drsd"));
        cmd.args(["serve", "--ready"])
            .stderr(std::process::Stdio::inherit());
        b.daemon = Some(drsd_e2e::spawn_ready(&mut cmd));
    };
    start_b(&mut b);
    run(as_bob(&b, &home, bob, &bin("drsctl"))
        .current_dir(&b.dir)
        .args(["clone", bare.to_str().unwrap(), "rb"]));
    let rb = b.dir.join("rb");
    for (name, data) in &files {
        assert!(
            std::fs::read(rb.join(name)).unwrap() == *data,
            "{name} on B"
        );
    }
    // B's daemon stops (else it would put the real bytes back from its
    // repo's objects the moment one is moved aside, as it should).
    b.kill9();
    // B replaces the large entry's bytes in the shared folder: its file is
    // read-only, but the folder is the group's to write.
    let big = sha256_hex(&files[0].1);
    let planted = shared_file(&large, &big);
    let plant = || {
        let mut plant = as_bob(&b, &home, bob, Path::new("sh"));
        plant.arg("-c").arg(format!(
            "mkdir -p {1} && head -c 2097152 /dev/zero > {0}.new && mv -f {0}.new {0}",
            planted.display(),
            planted.parent().unwrap().display()
        ));
        run(&mut plant);
        assert_eq!(std::fs::read(&planted).unwrap(), vec![0u8; 2 << 20]);
    };
    plant();
    // And the small entry's bytes in the database (the role is shared).
    let small = sha256_hex(&files[1].1);
    let mut pg = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let key = hex::decode(&small).unwrap();
    let changed = pg
        .execute(
            "UPDATE drsd_kv SET value = $2 WHERE key = $1",
            &[&key, &vec![7u8; 900]],
        )
        .unwrap();
    assert_eq!(changed, 1);
    // git on A asks for both again: refused, named, never the planted bytes.
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).unwrap();
    for (name, _) in &files {
        std::fs::remove_file(ra.join(name)).unwrap();
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(&ra)
        .args(["checkout", "--", "."])
        .envs(a.env())
        .env("DRSD_BIN", bin("drsd"))
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "the checkout got bytes: {said}");
    assert!(
        said.contains(&big) || said.contains(&small),
        "no object named: {said}"
    );
    for (name, data) in &files {
        if let Ok(got) = std::fs::read(ra.join(name)) {
            assert!(got == *data, "{name} on A holds planted bytes");
        }
    }
    // Both entries were moved aside, out of every lookup.
    assert!(
        !planted.exists(),
        "the planted file is still served from its place"
    );
    let aside = std::fs::read_dir(large.join("large/quarantine"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&big))
        .count();
    assert_eq!(aside, 1, "the planted file in quarantine/");
    let moved: i64 = pg
        .query_one(
            "SELECT count(*) FROM drsd_kv_quarantine WHERE key = $1",
            &[&key],
        )
        .unwrap()
        .get(0);
    assert_eq!(moved, 1, "the changed row moved to drsd_kv_quarantine");
    // git on B: B plants the large entry again, then asks for it.
    plant();
    std::fs::remove_dir_all(rb.join(".git/lfs/objects")).unwrap();
    std::fs::remove_file(rb.join("big.bin")).unwrap();
    start_b(&mut b);
    let out = as_bob(&b, &home, bob, Path::new("git"))
        .arg("-C")
        .arg(&rb)
        .args(["checkout", "--", "big.bin"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "B's checkout got bytes: {}",
        text(&out)
    );
    assert!(
        text(&out).contains(&big),
        "the object is not named: {}",
        text(&out)
    );
    if let Ok(got) = std::fs::read(rb.join("big.bin")) {
        assert!(got == files[0].1, "big.bin on B holds planted bytes");
    }
    assert!(!planted.exists(), "B's planted file is still in its place");
    a.kill9();
    b.kill9();
}
