//! Helpers shared by the end-to-end tests: paths of the built binaries.

use std::path::PathBuf;

/// The workspace's target folder holding the binaries the tests drive.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    dir.join(name)
}

/// Spawns `cmd` (a `drsd serve --ready`, possibly wrapped) and returns it
/// once it has printed the ready line, i.e. accepts connections.
pub fn spawn_ready(cmd: &mut std::process::Command) -> std::process::Child {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("drsd starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("read drsd's first line");
    assert_eq!(
        line.trim_end(),
        drsd::ipc::READY_LINE,
        "drsd did not get ready"
    );
    child
}
