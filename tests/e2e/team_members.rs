//! A lab member cannot make another member's daemon lose or swap data
//! (issue 39). Two local users in one group, as `team_users.rs` sets them
//! up: A, the victim, is root's daemon; B is the second user, who writes
//! the shared folder and the team database directly, as any member can.
//! Each test makes one of B's moves and checks it is refused: nothing
//! lost, and nothing wrong reaching git on A.
//!
//! Needs root (to make the user and group and to run as them), as the
//! tests are in CI: not root is a failure saying so, never a skip.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use drsd_e2e::bin;
use drsd_e2e::liar::{Liar, Lies};

use super::add_url::{pointer_text, sha256_hex, text};
use super::foreign::{staged, wait_up_to};
use super::team::{body, bytes_served, world, Node, TeamDb, LM};
use super::team_users::{as_bob, give, lab_user, run, shared_file};

/// Two machines of one lab: A (root) and B (the lab's second user), one
/// database, one shared folder that is the lab group's (setgid 2770).
pub(super) struct Lab {
    pub(super) bob: (u32, u32),
    pub(super) db: TeamDb,
    pub(super) top: tempfile::TempDir,
    pub(super) large: PathBuf,
    pub(super) a: Node,
    pub(super) b: Node,
    /// B's HOME.
    pub(super) home: PathBuf,
}

impl Lab {
    /// The lab with `more` settings on A; no daemon started yet.
    pub(super) fn new(more: &[(&'static str, &str)]) -> Lab {
        let bob = lab_user();
        let db = TeamDb::create();
        let (top, large) = world();
        std::fs::set_permissions(top.path(), PermissionsExt::from_mode(0o755)).unwrap();
        give(&large, 0, bob.1);
        std::fs::set_permissions(&large, PermissionsExt::from_mode(0o2770)).unwrap();
        let a = Node::new(top.path(), "root@a", &db, &large, more);
        let b = Node::new(top.path(), "bob@b", &db, &large, &[]);
        let home = b.dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = B\n\temail = b@example.org\n[init]\n\tdefaultBranch = main\n\
             [safe]\n\tdirectory = *\n",
        )
        .unwrap();
        give(&b.dir, bob.0, bob.1);
        Lab {
            bob,
            db,
            top,
            large,
            a,
            b,
            home,
        }
    }

    pub(super) fn top(&self) -> &Path {
        self.top.path()
    }

    /// `program` as B, with B's environment and HOME.
    pub(super) fn as_bob(&self, program: &str) -> Command {
        as_bob(&self.b, &self.home, self.bob, Path::new(program))
    }

    /// A shell command as B, which must succeed.
    pub(super) fn bob_sh(&self, script: &str) -> Output {
        run(self.as_bob("sh").arg("-c").arg(script))
    }

    pub(super) fn start_b(&mut self) {
        let mut cmd = as_bob(&self.b, &self.home, self.bob, &bin("drsd"));
        cmd.args(["serve", "--ready"]).stderr(Stdio::inherit());
        self.b.daemon = Some(drsd_e2e::spawn_ready(&mut cmd));
    }

    /// The file of entry `oid` in the shared folder.
    pub(super) fn entry(&self, oid: &str) -> PathBuf {
        shared_file(&self.large, oid)
    }

    /// A's repo `name`, set up for LFS with a folder object remote, holding
    /// `files` committed and pushed to a bare origin.
    pub(super) fn a_repo(&self, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let repo = self.a.dir.join(name);
        std::fs::create_dir(&repo).unwrap();
        let objects = self.top().join(format!("{name}-objects"));
        std::fs::create_dir(&objects).unwrap();
        self.in_a(&repo, &["init", "-q"]);
        self.a
            .drsctl_ok(&repo, &["init", "--remote", objects.to_str().unwrap()]);
        self.in_a(&repo, &["lfs", "track", "*.bin"]);
        for (file, data) in files {
            std::fs::write(repo.join(file), data).unwrap();
        }
        self.in_a(&repo, &["add", "."]);
        self.in_a(&repo, &["commit", "-qm", "data"]);
        let bare = self.top().join(format!("{name}.git"));
        self.a
            .ok_git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
        self.in_a(&repo, &["remote", "add", "origin", bare.to_str().unwrap()]);
        self.in_a(&repo, &["push", "-q", "origin", "main"]);
        repo
    }

    /// git in `repo` on A, which must succeed.
    pub(super) fn in_a(&self, repo: &Path, args: &[&str]) -> Output {
        let out = self.git_a(repo, args);
        assert!(out.status.success(), "git {args:?} on A: {}", text(&out));
        out
    }

    /// git in `repo` on A.
    pub(super) fn git_a(&self, repo: &Path, args: &[&str]) -> Output {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .envs(self.a.env())
            .env("DRSD_BIN", bin("drsd"))
            .output()
            .unwrap()
    }
}

impl Node {
    fn ok_git(&self, args: &[&str]) {
        let out = Command::new("git")
            .args(args)
            .envs(self.env())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    }
}

/// `repo`'s git-lfs object `oid`.
pub(super) fn lfs_object(repo: &Path, oid: &str) -> PathBuf {
    repo.join(".git/lfs/objects")
        .join(&oid[0..2])
        .join(&oid[2..4])
        .join(oid)
}

/// Calls `then` the moment a process opens the file at `path` (inotify),
/// on a thread of its own; join it to know it ran.
fn on_first_open(path: &Path, then: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC).expect("inotify_init1");
    inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN)
        .unwrap_or_else(|e| panic!("inotify_add_watch {}: {e}", path.display()));
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Blocks until the first event; the descriptor closes when dropped.
        let n = rustix::io::read(&fd, &mut buf).expect("inotify read");
        assert!(n > 0, "inotify read");
        then();
    })
}

/// Attack 1: B renames his own bytes over A's entry the moment A's daemon
/// opens it, so a read-out that hashes one descriptor and then links the
/// name again hands on B's bytes. What reaches A's repo must be the bytes
/// A's daemon hashed.
#[test]
fn bytes_renamed_over_an_entry_while_it_is_read_never_reach_the_repo() {
    let mut lab = Lab::new(&[]);
    lab.a.start();
    // Large enough that hashing it leaves B's rename all the time it needs.
    let data = body(48 << 20);
    let oid = sha256_hex(&data);
    let ra = lab.a_repo("ra", &[("big.bin", &data)]);
    let entry = lab.entry(&oid);
    assert!(
        entry.is_file(),
        "A's push left the entry in the shared pool"
    );
    // B's bytes wait next to the entry, the same length, his file.
    let swap = entry.with_extension("new");
    lab.bob_sh(&format!(
        "head -c {} /dev/zero > {}",
        data.len(),
        swap.display()
    ));
    // A's daemon starts afresh (it remembers no read-out).
    lab.a.kill9();
    lab.a.start();
    // B's move: a process of his, ready to rename on a word.
    let mut mover = lab
        .as_bob("sh")
        .arg("-c")
        .arg(format!(
            "read go && mv -f {} {}",
            swap.display(),
            entry.display()
        ))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut go = mover.stdin.take().unwrap();
    let watcher = on_first_open(&entry, move || {
        let _ = go.write_all(b"go\n");
    });
    // A clones the repo: its objects come from the pool.
    let bare = lab.top().join("ra.git");
    let out = Command::new(bin("drsctl"))
        .current_dir(&lab.a.dir)
        .args(["clone", bare.to_str().unwrap(), "rc"])
        .envs(lab.a.env())
        .env("DRSD_BIN", bin("drsd"))
        .output()
        .unwrap();
    watcher.join().unwrap();
    assert!(mover.wait().unwrap().success(), "B's rename ran");
    // Whatever the clone did, A's new repo holds no byte of B's.
    let rc = lab.a.dir.join("rc");
    let said = text(&out);
    for (what, path) in [
        ("the work tree", rc.join("big.bin")),
        (".git/lfs/objects", lfs_object(&rc, &oid)),
    ] {
        if let Ok(got) = std::fs::read(&path) {
            assert!(got == data, "{what} on A holds B's bytes ({said})");
        }
    }
    assert!(out.status.success(), "the clone failed: {said}");
    // And a read-out now finds B's bytes, moves them aside and fetches the
    // object again from A's object remote: nothing is lost.
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).unwrap();
    std::fs::remove_file(ra.join("big.bin")).unwrap();
    lab.in_a(&ra, &["checkout", "--", "big.bin"]);
    assert!(std::fs::read(ra.join("big.bin")).unwrap() == data);
    assert!(std::fs::read(&entry).unwrap() == data, "the entry mended");
}

/// Attack 2: a pool file B owns (his daemon stored it) is made writable by
/// the group, his right as its owner; A's repo gets the object from the
/// pool; later B writes through the file. A hard link would carry his
/// write into A's `.git/lfs/objects` and every checkout after: A's repo
/// must hold a copy of its own.
#[test]
fn a_pool_file_another_member_can_write_reaches_a_repo_as_a_copy_of_its_own() {
    let mut lab = Lab::new(&[]);
    let data = body(3 << 20);
    let oid = sha256_hex(&data);
    let entry = lab.entry(&oid);
    // B's file at the entry's name, right bytes, writable by the group (and
    // by him: it is his).
    let source = lab.b.dir.join("big.bin");
    std::fs::write(&source, &data).unwrap();
    give(&source, lab.bob.0, lab.bob.1);
    lab.bob_sh(&format!(
        "mkdir -p {dir} && cp {src} {entry} && chmod 0660 {entry}",
        dir = entry.parent().unwrap().display(),
        src = source.display(),
        entry = entry.display()
    ));
    lab.a.start();
    let ra = lab.a_repo("ra", &[("big.bin", &data)]);
    // A's repo gets the object from the pool: B's file.
    std::fs::remove_dir_all(ra.join(".git/lfs/objects")).unwrap();
    std::fs::remove_file(ra.join("big.bin")).unwrap();
    lab.in_a(&ra, &["checkout", "--", "big.bin"]);
    assert!(std::fs::read(ra.join("big.bin")).unwrap() == data);
    // B writes other bytes through his file's inode.
    lab.bob_sh(&format!(
        "head -c {} /dev/zero | dd of={} conv=notrunc status=none",
        data.len(),
        entry.display()
    ));
    assert!(std::fs::read(&entry).unwrap() == vec![0u8; data.len()]);
    // A's object, and a new worktree checked out from it, hold A's bytes.
    assert!(
        std::fs::read(lfs_object(&ra, &oid)).unwrap() == data,
        "B's write reached A's .git/lfs/objects"
    );
    let wt = lab.top().join("wt");
    lab.in_a(&ra, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(
        std::fs::read(wt.join("big.bin")).unwrap() == data,
        "B's write reached a new worktree of A's"
    );
}

/// Attack 7: B plants zeros under a public object's sha256 before A adds
/// it by URL, in shard folders of his that the group cannot write (so the
/// planted file cannot be moved aside). A's fresh, correctly hashed bytes
/// must win: the planted entry checked and replaced, the folders that are
/// not the group's refused (moved aside whole), the pointer promoted and
/// the object in the pool, downloaded once.
#[test]
fn fresh_bytes_replace_an_entry_planted_in_folders_the_group_cannot_write() {
    let mut lab = Lab::new(&[]);
    let size = 1 << 20;
    let data = body(size);
    let oid = sha256_hex(&data);
    let liar = Liar::start(data.clone(), "public-etag-7", LM);
    lab.a.start();
    let entry = lab.entry(&oid);
    let shard = entry.parent().unwrap().parent().unwrap().to_path_buf();
    // B's folders, made with his usual umask: readable, not group-writable.
    lab.bob_sh(&format!(
        "umask 022 && mkdir -p {dir} && head -c {size} /dev/zero > {entry} && chmod 0444 {entry}",
        dir = entry.parent().unwrap().display(),
        entry = entry.display()
    ));
    let ra = lab.a.repo("ra");
    lab.a
        .drsctl_ok(&ra, &["add-url", &liar.url("pub/data.bin"), "data.bin"]);
    let promoted = pointer_text(&oid, size as u64);
    wait_up_to(Duration::from_secs(60), "A's promotion", || {
        staged(&ra, "data.bin") == promoted
    });
    assert!(
        std::fs::read(&entry).unwrap() == data,
        "the pool's entry holds A's bytes"
    );
    assert!(
        std::fs::read(lfs_object(&ra, &oid)).unwrap() == data,
        "A's repo holds its bytes"
    );
    let meta = std::fs::metadata(&shard).unwrap();
    assert_eq!(
        meta.permissions().mode() & 0o2070,
        0o2070,
        "the shard folder is the group's again"
    );
    assert_eq!(
        bytes_served(&liar, size as u64),
        size as u64,
        "fetched once"
    );
}

/// Attack 4: B tries to delete what A just added by URL, before A's node
/// publishes its roots again: his gc with no grace, his gc again after
/// deleting A's published roots, and `team forget` of A's live node. A's
/// object stays, and once its source is gone A's push still succeeds.
#[test]
fn another_members_gc_and_forget_never_delete_what_a_live_node_just_added() {
    let mut lab = Lab::new(&[]);
    let size = 1 << 20;
    let data = body(size);
    let oid = sha256_hex(&data);
    let liar = Liar::start(data.clone(), "public-etag-4", LM);
    lab.a.start();
    lab.start_b();
    let drsctl = bin("drsctl");
    let drsctl = drsctl.to_str().unwrap();
    // B has a repo of his own registered (a gc wants one).
    let rb = lab.b.dir.join("rb");
    lab.bob_sh(&format!("git init -q {}", rb.display()));
    run(lab
        .as_bob(drsctl)
        .current_dir(&rb)
        .args(["repos", "add", "."]));
    // A adds an object by URL to a repo with a folder remote.
    let ra = lab.a.dir.join("ra");
    std::fs::create_dir(&ra).unwrap();
    let objects = lab.top().join("ra-objects");
    std::fs::create_dir(&objects).unwrap();
    lab.in_a(&ra, &["init", "-q"]);
    lab.a
        .drsctl_ok(&ra, &["init", "--remote", objects.to_str().unwrap()]);
    lab.a
        .drsctl_ok(&ra, &["add-url", &liar.url("pub/added.bin"), "added.bin"]);
    let promoted = pointer_text(&oid, size as u64);
    wait_up_to(Duration::from_secs(60), "A's promotion", || {
        staged(&ra, "added.bin") == promoted
    });
    let entry = lab.entry(&oid);
    let held = || std::fs::read(&entry).is_ok_and(|b| b == data);
    assert!(held(), "the object is in the shared pool");
    // B's moves.
    let b_gc = |lab: &Lab| {
        let out = run(lab
            .as_bob(drsctl)
            .current_dir(&rb)
            .args(["--json", "gc", "--grace", "0"]));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let report = b_gc(&lab);
    assert!(held(), "B's gc removed A's new object: {report}");
    let mut pg = postgres::Client::connect(&lab.db.url, postgres::NoTls).unwrap();
    pg.batch_execute(
        "DELETE FROM team_roots WHERE node = 'root@a'; \
         DELETE FROM team_root_sets WHERE node = 'root@a';",
    )
    .unwrap();
    let report = b_gc(&lab);
    assert!(
        held(),
        "B's gc removed A's object once A's roots were deleted: {report}"
    );
    let forgot = lab
        .as_bob(drsctl)
        .current_dir(&rb)
        .args(["team", "forget", "root@a"])
        .output()
        .unwrap();
    assert!(
        !forgot.status.success(),
        "A's live node was forgotten: {}",
        text(&forgot)
    );
    assert!(text(&forgot).contains("root@a"), "{}", text(&forgot));
    let report = b_gc(&lab);
    assert!(
        held(),
        "B's gc after the forget removed A's object: {report}"
    );
    // The source is gone (it serves other bytes now); A commits and pushes.
    liar.lies(Lies {
        other_version: Some(("other-etag".into(), vec![9u8; size])),
        ..Lies::default()
    });
    lab.in_a(&ra, &["commit", "-qm", "added"]);
    let bare = lab.top().join("ra.git");
    lab.a
        .ok_git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    lab.in_a(&ra, &["remote", "add", "origin", bare.to_str().unwrap()]);
    lab.in_a(&ra, &["push", "-q", "origin", "main"]);
    assert!(held(), "the object is still in the shared pool");
}

/// Attack 3: A adds an object by URL (not fetched yet); B, who can write
/// every row, sets the content oid of A's provisional row to bytes of his
/// own that he put in the pool, correctly hashed. The source's ETag is the
/// MD5 of its content, so A's own pointer says what the bytes must be: A's
/// daemon must not promote to B's bytes, on its own or when asked.
#[test]
fn a_content_oid_another_member_writes_on_my_row_never_promotes_my_pointer_to_his_bytes() {
    use md5::{Digest, Md5};
    let mut lab = Lab::new(&[]);
    let size = 1 << 20;
    let data = body(size);
    let etag = hex::encode(Md5::digest(&data));
    let liar = Liar::start(data.clone(), &etag, LM);
    lab.a.start();
    let ra = lab.a.repo("ra");
    lab.a.drsctl_ok(
        &ra,
        &["add-url", "--no-fetch", &liar.url("pub/d.bin"), "d.bin"],
    );
    let provisional = staged(&ra, "d.bin");
    // B's bytes, in the pool as a good entry of their own oid.
    let his: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
    let his_oid = sha256_hex(&his);
    let entry = lab.entry(&his_oid);
    let source = lab.b.dir.join("his.bin");
    std::fs::write(&source, &his).unwrap();
    give(&source, lab.bob.0, lab.bob.1);
    lab.bob_sh(&format!(
        "mkdir -p {dir} && cp {src} {entry} && chmod 0440 {entry}",
        dir = entry.parent().unwrap().display(),
        src = source.display(),
        entry = entry.display()
    ));
    // B's word on A's row.
    let mut pg = postgres::Client::connect(&lab.db.url, postgres::NoTls).unwrap();
    let changed = pg
        .execute(
            "UPDATE drsd_reg_objects SET content_oid = $1, content_read = true WHERE etag = $2",
            &[&his_oid, &etag],
        )
        .unwrap();
    assert_eq!(changed, 1, "A's row");
    // A's daemon looks for objects hashed elsewhere every 2 s.
    std::thread::sleep(Duration::from_secs(8));
    let his_pointer = pointer_text(&his_oid, size as u64);
    assert_ne!(
        staged(&ra, "d.bin"),
        his_pointer,
        "A's pointer was promoted to B's bytes"
    );
    let asked = lab.a.drsctl(&ra, &["promote", "d.bin"]);
    assert_ne!(
        staged(&ra, "d.bin"),
        his_pointer,
        "drsctl promote took B's bytes: {}",
        text(&asked)
    );
    assert_eq!(
        staged(&ra, "d.bin"),
        provisional,
        "A's pointer is as it was"
    );
    assert!(
        !lfs_object(&ra, &his_oid).exists(),
        "B's bytes were linked into A's repo"
    );
}

/// Attack 3 where the source proves nothing: nginx's ETag is its file's
/// mtime and size, so A's pointer says no more than the size. B plants
/// bytes of his own, of that size, and writes their oid on A's row. A
/// node set with `team_trust_members = false` takes no member's hash for
/// such a source: it fetches and hashes the object itself and promotes to
/// what it hashed, never to B's bytes.
#[test]
fn a_node_that_takes_no_members_word_hashes_an_mtime_etag_object_itself_not_promoting_to_his_bytes()
{
    let mut lab = Lab::new(&[("DRSD_TEAM_TRUST_MEMBERS", "false")]);
    let size = 1 << 20;
    let data = body(size);
    let oid = sha256_hex(&data);
    // As nginx makes it: hex mtime, hex size.
    let etag = format!("{:x}-{:x}", 1_700_000_000u64, size);
    let liar = Liar::start(data.clone(), &etag, LM);
    lab.a.start();
    let ra = lab.a.repo("ra");
    lab.a.drsctl_ok(
        &ra,
        &["add-url", "--no-fetch", &liar.url("pub/n.bin"), "n.bin"],
    );
    assert_eq!(bytes_served(&liar, size as u64), 0, "--no-fetch read it");
    // B's bytes, of the same size, in the pool as a good entry of their oid.
    let his: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
    let his_oid = sha256_hex(&his);
    let entry = lab.entry(&his_oid);
    let source = lab.b.dir.join("his.bin");
    std::fs::write(&source, &his).unwrap();
    give(&source, lab.bob.0, lab.bob.1);
    lab.bob_sh(&format!(
        "mkdir -p {dir} && cp {src} {entry} && chmod 0440 {entry}",
        dir = entry.parent().unwrap().display(),
        src = source.display(),
        entry = entry.display()
    ));
    // B's word on A's row, as his daemon would write it had it hashed his.
    let mut pg = postgres::Client::connect(&lab.db.url, postgres::NoTls).unwrap();
    let changed = pg
        .execute(
            "UPDATE drsd_reg_objects SET content_oid = $1, content_read = true WHERE etag = $2",
            &[&his_oid, &etag],
        )
        .unwrap();
    assert_eq!(changed, 1, "A's row");
    // A's daemon finds it hashed elsewhere (it looks every 2 s), fetches
    // it itself and promotes to its own hash.
    let ours = pointer_text(&oid, size as u64);
    let his_pointer = pointer_text(&his_oid, size as u64);
    wait_up_to(Duration::from_secs(30), "A's own hash promoted", || {
        let now = staged(&ra, "n.bin");
        assert_ne!(now, his_pointer, "A's pointer was promoted to B's bytes");
        now == ours
    });
    assert!(
        bytes_served(&liar, size as u64) >= size as u64,
        "A read the source itself"
    );
    assert!(lfs_object(&ra, &oid).is_file(), "A's repo holds the bytes");
    assert!(
        !lfs_object(&ra, &his_oid).exists(),
        "B's bytes were linked into A's repo"
    );
    // Asked, A takes its own hash still.
    lab.a.drsctl_ok(&ra, &["promote", "n.bin"]);
    assert_eq!(staged(&ra, "n.bin"), ours);
}

/// Attack 6 during a download: A's daemon is writing a prefetch in its
/// `partial-NODE` folder when B renames the folder away and leaves a link
/// in its place, to a folder of A's holding files of A's under the very
/// names the download uses. The download goes on through the folder it
/// checked: nothing lands in A's folder, nothing of A's is removed from it
/// or taken into the pool, and the object reaches the pool whole.
#[test]
fn a_partial_folder_swapped_for_a_link_mid_download_redirects_no_write_and_no_delete() {
    let signals = tempfile::tempdir().unwrap();
    let held = signals.path().display().to_string();
    let mut lab = Lab::new(&[
        ("DRSD_FAILPOINT_PAUSE", "download-writing"),
        ("DRSD_FAILPOINT_DIR", &held),
    ]);
    let size = 4 << 20;
    let data = body(size);
    let oid = sha256_hex(&data);
    let liar = Liar::start(data.clone(), "swap-etag", LM);
    lab.a.start();
    let ra = lab.a.repo("ra");
    lab.a
        .drsctl_ok(&ra, &["add-url", &liar.url("pub/s.bin"), "s.bin"]);
    // A's worker has written the first bytes in its folder, and is held.
    let reached = signals.path().join("download-writing.reached");
    wait_up_to(
        Duration::from_secs(30),
        "the download's first write",
        || reached.exists(),
    );
    let partial = lab.large.join("partial-root@a");
    let names: Vec<String> = std::fs::read_dir(&partial)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".part")), "{names:?}");
    // A folder of A's, with files of A's named as the download's are.
    let precious = lab.a.dir.join("Downloads");
    std::fs::create_dir_all(&precious).unwrap();
    let hers = |n: &str| format!("A's own {n}").into_bytes();
    for n in &names {
        std::fs::write(precious.join(n), hers(n)).unwrap();
    }
    lab.bob_sh(&format!(
        "mv {p} {moved} && ln -s {precious} {p}",
        p = partial.display(),
        moved = lab.large.join("moved-away").display(),
        precious = precious.display()
    ));
    std::fs::write(signals.path().join("download-writing.go"), b"").unwrap();
    let mut want = names.clone();
    want.sort();
    let untouched = || {
        let mut left: Vec<String> = std::fs::read_dir(&precious)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, want, "files were added to or removed from A's folder");
        for n in &names {
            assert_eq!(std::fs::read(precious.join(n)).unwrap(), hers(n), "{n}");
        }
    };
    let ours = pointer_text(&oid, size as u64);
    wait_up_to(Duration::from_secs(60), "the prefetch's promotion", || {
        untouched();
        staged(&ra, "s.bin") == ours
    });
    untouched();
    assert_eq!(
        std::fs::read(lab.entry(&oid)).unwrap(),
        data,
        "the pool's entry is the object"
    );
}
