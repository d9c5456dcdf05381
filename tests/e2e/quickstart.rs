//! README's first command, `examples/quickstart.sh`, run as a new user
//! would (with the suite's binaries instead of a release build): it must
//! end well and show each step of the product, or the README lies.

use std::path::Path;
use std::process::Command;

use drsd_e2e::bin;

#[test]
fn the_quickstart_pushes_prefetches_promotes_and_clones_on_a_folder_remote() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(root.join("examples/quickstart.sh"))
        .env("DRSD_BIN_DIR", bin("drsd").parent().unwrap())
        .env("SIZE_MIB", "4")
        .env("TMPDIR", tmp.path())
        // The suite's own daemon settings must not leak into the sandbox.
        .env_remove("DRSD_SOCKET")
        .env_remove("DRSD_POOL")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The script itself fails unless the promoted pointer carries the
    // content's sha256 and the clone's bytes equal the originals (whether
    // promote --wait saw the object waiting depends on how fast it came).
    assert!(out.status.success(), "the quickstart failed:\n{text}");
    for shown in [
        "drs-remote=file://",
        "provisional oid, from the ETag",
        "2 objects, 2 from the pool, 0 downloaded",
        "== what it took",
    ] {
        assert!(text.contains(shown), "no {shown:?} in:\n{text}");
    }
    // It cleans up after itself: the daemon is stopped, the sandbox gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
