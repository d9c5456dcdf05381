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
