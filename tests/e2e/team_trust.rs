//! Team mode's trust (issue 39): the team's database and shared folder
//! are written by every member of the lab, so what they hold is a claim,
//! and nothing in them may hang, redirect or read out a member's daemon.
//! Each test plays one member's move against another's daemon; those that
//! need a second local user run it as `team_users.rs` does (root makes the
//! user and group), the others play the member through the shared
//! database role.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use drsd_e2e::bin;

use super::add_url::text;
use super::team::{world, Node, TeamDb};

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
