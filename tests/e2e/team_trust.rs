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
