//! A write through a repo's hard link into the pool's file that sets the
//! modification time back (`rsync --inplace -t`, `touch -r`) is caught:
//! the pool's verified-read record keys on the ctime too, which no such
//! write can keep. Real git, git-lfs, daemon and Ceph RGW.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use drsd::pool::Oid;

use super::lfs_transfer::{content, lfs_object, Daemon, World};

/// Other bytes of the same length written over `path` in place, its
/// modification time and mode then set back to what they were.
fn rewrite_keeping_length_and_mtime(path: &Path) {
    let before = std::fs::metadata(path).unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    for b in bytes.iter_mut().take(4096) {
        *b ^= 0x5a;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut &file, &bytes).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    std::fs::set_permissions(path, before.permissions()).unwrap();
    let after = std::fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap(), after.ino()),
        (before.len(), before.modified().unwrap(), before.ino()),
        "same file, same length, same mtime"
    );
    assert_ne!(
        (after.ctime(), after.ctime_nsec()),
        (before.ctime(), before.ctime_nsec())
    );
}

#[test]
fn a_write_through_a_clones_link_that_sets_the_mtime_back_does_not_reach_the_next_clone() {
    let world = World::new("mtimeback");
    let d1 = world.dir("d1");
    let daemon = Daemon::start(&d1);
    let data = content(41, 2 << 20);
    let oid = Oid::of(&data);
    let (a, bare) = world.source_repo(&daemon, &[("data.bin", data.clone())]);
    daemon.git(&a, &["push", "-q", "origin", "main"]);

    // A clone on this machine: its git-lfs object is the pool's file,
    // checked by this daemon on the way out.
    daemon.drsctl(world.top.path(), &["clone", bare.to_str().unwrap(), "b"]);
    let b = world.dir("b");
    let hex = oid.to_hex();
    let pooled = d1
        .join("pool/large")
        .join(&hex[..2])
        .join(&hex[2..4])
        .join(&hex);
    let linked = lfs_object(&b, &oid);
    assert_eq!(
        std::fs::metadata(&linked).unwrap().ino(),
        std::fs::metadata(&pooled).unwrap().ino(),
        "the clone's object is the pool's file"
    );

    rewrite_keeping_length_and_mtime(&linked);

    // The next clone gets the object's bytes: the pool's file no longer
    // hashes to its oid, is moved aside, and the object comes from RGW.
    let cloned: serde_json::Value = serde_json::from_str(&daemon.drsctl(
        world.top.path(),
        &["--json", "clone", bare.to_str().unwrap(), "c"],
    ))
    .unwrap();
    let c = world.dir("c");
    assert!(
        std::fs::read(c.join("data.bin")).unwrap() == data,
        "the changed bytes reached the clone: {cloned}"
    );
    assert_eq!(
        cloned["hydrate"]["downloaded"].as_u64(),
        Some(1),
        "{cloned}"
    );
    assert_eq!(std::fs::read(lfs_object(&c, &oid)).unwrap(), data);
    daemon.git(&c, &["lfs", "fsck", "--objects"]);
}
