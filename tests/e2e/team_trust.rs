//! Team mode's trust (issue 39): the team's database and shared folder
//! are written by every member of the lab, so what they hold is a claim,
//! and nothing in them may hang, redirect or read out a member's daemon.
//! Each test plays one member's move against another's daemon; those that
//! need a second local user run it as `team_users.rs` does (root makes the
//! user and group), the others play the member through the shared
//! database role.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use drsd_e2e::bin;
use drsd_e2e::liar::Liar;

use super::add_url::{pointer_text, sha256_hex, text};
use super::foreign::{staged, wait_up_to};
use super::team::{body, world, Node, TeamDb, LM};
use super::team_users::{as_bob, give, lab_user, run, USER};

/// `cmd`'s output and how long it took; killed past `limit`, which fails
/// the test naming what hung (so old code that hangs fails, not stalls).
fn within(limit: Duration, what: &str, cmd: &mut Command) -> (Output, Duration) {
    let began = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what} hung past {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().unwrap(), began.elapsed())
}

impl Node {
    /// `drsctl ARGS` in `dir` as this machine, as a command to run.
    fn drsctl_cmd(&self, dir: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("drsctl"));
        cmd.current_dir(dir).args(args).envs(self.env());
        cmd
    }
}

#[test]
fn a_ca_file_others_may_write_stops_a_team_daemon_naming_it_and_a_private_one_is_taken() {
    let db = TeamDb::create();
    let (top, large) = world();
    // A real certificate: the tests' nginx's (with-servers.sh names it).
    let theirs = std::env::var("DRSD_CA_FILE")
        .expect("DRSD_CA_FILE is unset: run under tests/with-servers.sh");
    let ca = top.path().join("lab-ca.pem");
    std::fs::copy(theirs, &ca).unwrap();
    std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o664)).unwrap();
    let shown = ca.display().to_string();
    let mut node = Node::new(
        top.path(),
        "alice@a",
        &db,
        &large,
        &[("DRSD_CA_FILE", &shown)],
    );
    let out = Command::new(bin("drsd"))
        .args(["serve", "--ready", "--idle-timeout", "1"])
        .envs(node.env())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(
        !out.status.success(),
        "the daemon ran on a CA file its group may write: {said}"
    );
    assert!(
        said.contains(&shown) && said.contains("chmod go-w") && said.contains("team database"),
        "{said}"
    );
    // Once only its owner may write it, the same file is taken.
    std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o644)).unwrap();
    node.start();
    let status = node.drsctl_ok(top.path(), &["status"]);
    assert_eq!(status["registry_engine"], "postgres", "{status}");
}

#[test]
fn node_names_holding_terminal_controls_are_shown_escaped_by_drsctl_status() {
    let db = TeamDb::create();
    let (top, large) = world();
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &[]);
    a.start();
    // Another member writes a node of their making into the shared table:
    // retitle the window, clear the screen, move the cursor (C0 and C1).
    let name = "bob\u{1b}]0;owned\u{7}\u{1b}[2J";
    let host = "h\u{1b}[1A\u{9b}2K";
    let user = "u\rforged line\u{202e}";
    let mut pg = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    pg.execute(
        "INSERT INTO drsd_team_nodes (name, host, username) VALUES ($1, $2, $3)",
        &[&name, &host, &user],
    )
    .unwrap();
    let out = a.drsctl(top.path(), &["status"]);
    let shown = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let sent: Vec<char> = shown
        .chars()
        .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
        .collect();
    assert!(
        sent.is_empty(),
        "sent to the terminal: {sent:?} in {shown:?}"
    );
    for escaped in [
        "bob\\u{1b}]0;owned\\u{7}\\u{1b}[2J",
        "h\\u{1b}[1A\\u{9b}2K",
        "u\\rforged line\\u{202e}",
    ] {
        assert!(shown.contains(escaped), "{escaped} not shown in {shown}");
    }
    // Scripts read the JSON, where every string is escaped as JSON is.
    let status = a.drsctl_ok(top.path(), &["status"]);
    let names: Vec<&str> = status["team"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert!(names.contains(&name), "{status}");
}

#[test]
fn a_lock_held_on_the_team_tables_fails_add_url_in_bounded_time_and_status_answers_at_once() {
    let db = TeamDb::create();
    let (top, large) = world();
    let bytes = body(300 << 10);
    let liar = Liar::start(bytes.clone(), "lock-etag", LM);
    let url = liar.url("d/held.bin");
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &[]);
    a.start();
    let ra = a.repo("ra");
    // Another member, through the shared role, locks the tables and sits.
    let mut member = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    member
        .batch_execute(
            "BEGIN; LOCK TABLE drsd_team_nodes, drsd_reg_jobs, drsd_reg_objects, \
             drsd_reg_repo_refs IN ACCESS EXCLUSIVE MODE",
        )
        .unwrap();
    let (out, took) = within(
        Duration::from_secs(30),
        "drsctl status",
        &mut a.drsctl_cmd(&ra, &["status"]),
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(took < Duration::from_secs(8), "status took {took:?}");
    assert!(
        said.contains("unreachable"),
        "the team is not shown unreachable: {said}"
    );
    let (out, took) = within(
        Duration::from_secs(90),
        "drsctl add-url",
        &mut a.drsctl_cmd(&ra, &["add-url", &url, "held.bin"]),
    );
    let said = text(&out);
    assert!(
        !out.status.success(),
        "add-url went through a held lock: {said}"
    );
    assert!(took < Duration::from_secs(60), "add-url took {took:?}");
    assert!(
        said.contains("lock"),
        "the error does not say what held it: {said}"
    );
    // The lock is let go: the same add-url goes through, nothing lost.
    member.batch_execute("ROLLBACK").unwrap();
    a.drsctl_ok(&ra, &["add-url", &url, "held.bin"]);
    let promoted = pointer_text(&sha256_hex(&bytes), bytes.len() as u64);
    wait_up_to(Duration::from_secs(60), "the promotion", || {
        staged(&ra, "held.bin") == promoted
    });
    let status = a.drsctl_ok(&ra, &["status"]);
    assert!(status["team"].get("unreachable").is_none(), "{status}");
}

#[test]
fn a_job_leased_for_ever_to_a_ghost_node_is_taken_over_and_promote_wait_ends() {
    let db = TeamDb::create();
    let (top, large) = world();
    let size = 4 << 20;
    let bytes = body(size);
    let liar = Liar::start(bytes.clone(), "ghost-etag", LM);
    let url = liar.url("d/ghost.bin");
    // A crawls, so that its claim is caught running.
    let slow = [("DRSD_PREFETCH_BANDWIDTH", "128K")];
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &slow);
    a.start();
    let ra = a.repo("ra");
    a.drsctl_ok(&ra, &["add-url", &url, "ghost.bin"]);
    wait_up_to(Duration::from_secs(60), "A's claim", || {
        let status = a.drsctl_ok(&ra, &["status"]);
        status["queue"]["running"] == 1
    });
    a.kill9();
    // A member hands the job to a node that does not exist, for ever.
    let mut member = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let n = member
        .execute(
            "UPDATE drsd_reg_jobs SET claimed_by = 'ghost@nowhere', lease_until = 'infinity'",
            &[],
        )
        .unwrap();
    assert_eq!(n, 1);
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &[]);
    a.start();
    let (out, _) = within(
        Duration::from_secs(120),
        "drsctl promote --all --wait",
        &mut a.drsctl_cmd(&ra, &["promote", "--all", "--wait"]),
    );
    assert!(out.status.success(), "{}", text(&out));
    let promoted = pointer_text(&sha256_hex(&bytes), size as u64);
    assert_eq!(staged(&ra, "ghost.bin"), promoted);
}

/// Two users of one lab, as `team_users.rs` sets them up: machine A's
/// daemon runs as root, machine B's as the second user (bob), in the lab's
/// group, on one database and one shared folder (the group's, setgid).
struct Lab {
    db: TeamDb,
    _top: tempfile::TempDir,
    large: std::path::PathBuf,
    bob: (u32, u32),
    a: Node,
    b: Node,
    home: std::path::PathBuf,
}

fn lab() -> Lab {
    let bob = lab_user();
    let db = TeamDb::create();
    let (top, large) = world();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    give(&large, 0, bob.1);
    std::fs::set_permissions(&large, std::fs::Permissions::from_mode(0o2770)).unwrap();
    let a = Node::new(top.path(), "root@a", &db, &large, &[]);
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
        db,
        _top: top,
        large,
        bob,
        a,
        b,
        home,
    }
}

impl Lab {
    /// `program` run as bob, with B's environment.
    fn bob(&self, program: &str) -> Command {
        as_bob(&self.b, &self.home, self.bob, std::path::Path::new(program))
    }

    fn start_b(&mut self) {
        let mut cmd = as_bob(&self.b, &self.home, self.bob, &bin("drsd"));
        cmd.args(["serve", "--ready"]).stderr(Stdio::inherit());
        self.b.daemon = Some(drsd_e2e::spawn_ready(&mut cmd));
    }
}

#[test]
fn a_urls_password_and_signature_never_reach_the_team_and_its_add_url_still_promotes() {
    let mut lab = lab();
    let bytes = body(300 << 10);
    let liar = Liar::start(bytes.clone(), "secret-etag", LM);
    let plain = liar.url("d/signed.bin");
    let url = format!(
        "{}?versionId=3&X-Amz-Credential=AKIASECRETCRED%2F20261207&X-Amz-Signature=5ec7e75160a7",
        plain.replacen("http://", "http://alice:PASSW0RD@", 1)
    );
    let secrets = ["PASSW0RD", "AKIASECRETCRED", "5ec7e75160a7"];
    lab.a.start();
    lab.start_b();
    let ra = lab.a.repo("ra");
    lab.a.drsctl_ok(&ra, &["add-url", &url, "signed.bin"]);
    let promoted = pointer_text(&sha256_hex(&bytes), bytes.len() as u64);
    wait_up_to(Duration::from_secs(60), "A's promotion", || {
        staged(&ra, "signed.bin") == promoted
    });
    // Bob dumps everything the team's database holds, as the lab's role.
    let dump = run(lab
        .bob("pg_dump")
        .args(["--data-only", "--no-owner", &lab.db.url]));
    let dump = text(&dump);
    assert!(
        dump.contains("d/signed.bin"),
        "the object is not in the dump: {dump}"
    );
    assert!(
        dump.contains("versionId=3"),
        "what tells objects apart went: {dump}"
    );
    for secret in secrets {
        assert!(
            !dump.contains(secret),
            "{secret} is in the team's database: {dump}"
        );
    }
    // And every file of the shared folder the group may read.
    let grep = lab
        .bob("grep")
        .args(["-rlF", "-e", secrets[0], "-e", secrets[1], "-e", secrets[2]])
        .arg(&lab.large)
        .output()
        .unwrap();
    assert!(
        grep.stdout.is_empty(),
        "in the shared folder: {}",
        text(&grep)
    );
    // The whole URL stays in A's own state, which bob cannot read.
    let private = lab.a.dir.join("state/team-urls.sqlite");
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", private.display());
    let read = lab.bob("cat").arg(&private).output().unwrap();
    assert!(!read.status.success(), "bob read A's private URLs");
    // A's own URL works on: its record reads it whole, and a second repo
    // of A's adding it again finds the object hashed.
    let rb = lab.a.repo("rb");
    lab.a.drsctl_ok(&rb, &["add-url", &url, "again.bin"]);
    wait_up_to(Duration::from_secs(60), "A's second promotion", || {
        staged(&rb, "again.bin") == promoted
    });
}

#[test]
fn a_partial_folder_another_member_made_or_linked_is_refused_naming_its_owner() {
    let mut lab = lab();
    let partial = lab.large.join("partial-root@a");
    // Bob makes A's per-node folder first, as his own.
    run(lab.bob("mkdir").arg(&partial));
    let out = Command::new(bin("drsd"))
        .args(["serve", "--ready", "--idle-timeout", "1"])
        .envs(lab.a.env())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "A ran on bob's folder: {said}");
    assert!(
        said.contains(&partial.display().to_string()) && said.contains(USER),
        "the refusal names neither the folder nor its owner: {said}"
    );
    run(lab.bob("rmdir").arg(&partial));
    // Bob leaves a link there to a folder of A's own.
    let precious = lab.a.dir.join("Downloads");
    std::fs::create_dir_all(&precious).unwrap();
    run(lab.bob("ln").arg("-s").arg(&precious).arg(&partial));
    let out = Command::new(bin("drsd"))
        .args(["serve", "--ready", "--idle-timeout", "1"])
        .envs(lab.a.env())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "A ran through bob's link: {said}");
    assert!(
        said.contains("symbolic link") && said.contains(USER),
        "the refusal does not say what it is and whose: {said}"
    );
    run(lab.bob("rm").arg(&partial));
    // A starts with its own folder; later bob renames it away and leaves a
    // link in its place: A's gc removes nothing behind it.
    lab.a.start();
    let mode = std::fs::symlink_metadata(&partial)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    let ra = lab.a.repo("ra");
    lab.a
        .drsctl_ok(&ra, &["repos", "add", ra.to_str().unwrap()]);
    let kept = precious.join("thesis.part");
    std::fs::write(&kept, b"two years of work").unwrap();
    run(Command::new("touch").args(["-d", "2 hours ago"]).arg(&kept));
    run(lab
        .bob("mv")
        .arg(&partial)
        .arg(lab.large.join("moved-away")));
    run(lab.bob("ln").arg("-s").arg(&precious).arg(&partial));
    let out = lab.a.drsctl(&ra, &["gc"]);
    let said = text(&out);
    assert!(
        kept.exists(),
        "gc followed the link and removed {}: {said}",
        kept.display()
    );
    assert!(
        said.contains("symbolic link") && said.contains(&partial.display().to_string()),
        "gc does not say why it left the folder: {said}"
    );
}

/// Item 4 for rows written before redaction existed: an older drsd put
/// URLs whole in the team's database (user-info, a signature), and a job
/// error quoting one. At the node's next start they are redacted: its own
/// row's URL kept whole in its private store (its object still fetches), a
/// row no node points at redacted too; nothing a member can dump holds a
/// secret.
#[test]
fn urls_an_older_node_wrote_whole_are_redacted_at_start_and_its_own_kept_private() {
    let db = TeamDb::create();
    let (top, large) = world();
    let bytes = body(300 << 10);
    let liar = Liar::start(bytes.clone(), "old-etag", LM);
    let plain = liar.url("d/old.bin");
    let url = format!(
        "{}?versionId=7&X-Amz-Credential=AKIAOLDCRED%2F20261207&X-Amz-Signature=0ldf00d5",
        plain.replacen("http://", "http://alice:0LDPASS@", 1)
    );
    let orphan = "https://bob:B0BPASS@store.example/x.bin?token=B0BT0KEN";
    let secrets = ["0LDPASS", "AKIAOLDCRED", "0ldf00d5", "B0BPASS", "B0BT0KEN"];
    let mut a = Node::new(top.path(), "alice@a", &db, &large, &[]);
    a.start();
    let ra = a.repo("ra");
    a.drsctl_ok(&ra, &["add-url", "--no-fetch", &url, "old.bin"]);
    a.kill9();
    // What an older drsd left: A's row whole, no holders, no private copy;
    // an orphan row whole, and its job's error quoting it.
    let mut pg = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let changed = pg
        .execute(
            "UPDATE drsd_reg_objects SET url = $1 WHERE url LIKE '%d/old.bin%'",
            &[&url],
        )
        .unwrap();
    assert_eq!(changed, 1);
    pg.batch_execute("DELETE FROM drsd_reg_url_holders")
        .unwrap();
    let row = pg
        .query_one(
            "INSERT INTO drsd_reg_objects (url, etag, size, provisional_oid, recorded_at, updated_at)
             VALUES ($1, 'e1', 5, $2, 0, 0) RETURNING id",
            &[&orphan, &"ab".repeat(32)],
        )
        .unwrap();
    let id: i64 = row.get(0);
    pg.execute(
        "INSERT INTO drsd_reg_jobs (object_id, state, error, updated_at)
         VALUES ($1, 'failed', $2, 0)",
        &[&id, &format!("GET {orphan}: 403 Forbidden")],
    )
    .unwrap();
    let state = a.dir.join("state");
    for file in [
        "team-urls.sqlite",
        "team-urls.sqlite-wal",
        "team-urls.sqlite-shm",
    ] {
        let _ = std::fs::remove_file(state.join(file));
    }
    a.start();
    let dump = run(Command::new("pg_dump").args(["--data-only", "--no-owner", &db.url]));
    let dump = text(&dump);
    assert!(
        dump.contains("d/old.bin") && dump.contains("x.bin"),
        "{dump}"
    );
    assert!(
        dump.contains("versionId=7"),
        "what tells objects apart went: {dump}"
    );
    for secret in secrets {
        assert!(
            !dump.contains(secret),
            "{secret} is in the team's database: {dump}"
        );
    }
    // A's own URL, whole, in A's private store; bob's in no store of A's.
    let private: Vec<u8> = ["team-urls.sqlite", "team-urls.sqlite-wal"]
        .iter()
        .flat_map(|f| std::fs::read(state.join(f)).unwrap_or_default())
        .collect();
    let kept = String::from_utf8_lossy(&private);
    assert!(kept.contains("0ldf00d5") && kept.contains("0LDPASS"));
    assert!(!kept.contains("B0BPASS"), "another's URL kept as A's");
    // A's object still fetches: A holds its URL, so A takes its job.
    a.drsctl_ok(&ra, &["fetch", "old.bin"]);
    let promoted = pointer_text(&sha256_hex(&bytes), bytes.len() as u64);
    wait_up_to(Duration::from_secs(60), "A's promotion", || {
        staged(&ra, "old.bin") == promoted
    });
}
