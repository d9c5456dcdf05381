//! Helpers shared by the end-to-end tests: paths of the built binaries and
//! the servers the tests run in their own process (`liar`, `drs_server`).

use std::path::PathBuf;

pub mod drs_server;
pub mod liar;

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
        drsd_proto::READY_LINE,
        "drsd did not get ready"
    );
    child
}

/// A current-thread tokio runtime for a test's async calls.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// Makes `dir/home` the HOME of this test process (git and git-lfs read the
/// user's config there), with a git identity and `main` as the first branch.
/// One test per process (nextest), so setting the variable is safe.
pub fn fresh_home(dir: &std::path::Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("create the test HOME");
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n",
    )
    .expect("write the test .gitconfig");
    std::env::set_var("HOME", &home);
    home
}

/// Whether `pid` runs; an exited, not yet reaped daemon (a zombie) does not.
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .map(str::trim_start)
        .and_then(|s| s.chars().next());
    state.is_some_and(|s| s != 'Z' && s != 'X')
}
