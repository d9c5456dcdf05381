//! The folder store against planted names and bytes.

use std::os::unix::fs::PermissionsExt;

use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    pool: Pool,
    dir: DirRemote,
    root: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let pool = Pool::open(&tmp.path().join("pool"), Some(1024)).unwrap();
    let root = tmp.path().join("objects");
    std::fs::create_dir(&root).unwrap();
    let dir = DirRemote::parse(root.to_str().unwrap()).unwrap();
    Fixture {
        _tmp: tmp,
        pool,
        dir,
        root,
    }
}

fn leftovers(root: &Path) -> Vec<PathBuf> {
    fn walk(at: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".drsd-")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out
}

#[test]
fn objects_land_in_the_git_lfs_layout_and_come_back_into_an_empty_pool() {
    let f = fixture();
    for body in [vec![7u8; 5000], b"small".to_vec()] {
        let oid = f.pool.put(&Oid::of(&body), &body).unwrap().oid;
        let size = body.len() as u64;
        assert_eq!(
            f.dir.put_from_pool(&f.pool, &oid).unwrap(),
            DirPut::Written(size)
        );
        let hex = oid.to_hex();
        let at = f.root.join(&hex[..2]).join(&hex[2..4]).join(&hex);
        assert_eq!(f.dir.path_of(&oid), at);
        assert_eq!(std::fs::read(&at).unwrap(), body);
        assert_eq!(
            std::fs::metadata(&at).unwrap().permissions().mode() & 0o222,
            0
        );
        assert_eq!(
            f.dir.put_from_pool(&f.pool, &oid).unwrap(),
            DirPut::Present(size)
        );
        let other = Pool::open(&f._tmp.path().join("other-pool"), Some(1024)).unwrap();
        f.dir.fetch_into(&other, &oid, size).unwrap();
        assert_eq!(other.get(&oid).unwrap().unwrap().to_vec().unwrap(), body);
    }
    assert!(leftovers(&f.root).is_empty());
}

#[test]
fn a_planted_file_of_other_bytes_is_refused_by_oid_and_path_and_replaced_on_push() {
    let f = fixture();
    let body = vec![1u8; 3000];
    let oid = f.pool.put(&Oid::of(&body), &body).unwrap().oid;
    let at = f.dir.path_of(&oid);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(&at, vec![2u8; 3000]).unwrap();
    let other = Pool::open(&f._tmp.path().join("other-pool"), Some(1024)).unwrap();
    let err = f.dir.fetch_into(&other, &oid, 3000).unwrap_err();
    assert!(matches!(err, DirError::NotTheObject { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&oid.to_hex()) && text.contains(&at.display().to_string()),
        "{text}"
    );
    assert!(
        !other.has(&oid).unwrap(),
        "the planted bytes reached the pool"
    );
    assert!(!f.dir.holds(&oid, 3000).unwrap());
    // A push puts the right bytes in its place (by rename, not by writing
    // into the planted file).
    assert_eq!(
        f.dir.put_from_pool(&f.pool, &oid).unwrap(),
        DirPut::Written(3000)
    );
    assert_eq!(std::fs::read(&at).unwrap(), body);
}

#[test]
fn a_planted_shard_symlink_is_refused_by_name_for_reads_and_writes() {
    let f = fixture();
    let body = vec![3u8; 2000];
    let oid = f.pool.put(&Oid::of(&body), &body).unwrap().oid;
    let hex = oid.to_hex();
    let elsewhere = f._tmp.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join(&hex[2..4])).unwrap();
    std::fs::write(elsewhere.join(&hex[2..4]).join(&hex), &body).unwrap();
    let link = f.root.join(&hex[..2]);
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let err = f.dir.put_from_pool(&f.pool, &oid).unwrap_err();
    assert!(
        matches!(&err, DirError::Symlink { path } if *path == link),
        "{err}"
    );
    let err = f.dir.fetch_into(&f.pool, &oid, 2000).unwrap_err();
    assert!(
        matches!(&err, DirError::Symlink { path } if *path == link),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(elsewhere.join(&hex[2..4]))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn a_planted_object_symlink_is_refused_and_not_followed() {
    let f = fixture();
    let body = vec![4u8; 2000];
    let oid = f.pool.put(&Oid::of(&body), &body).unwrap().oid;
    let at = f.dir.path_of(&oid);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let target = f._tmp.path().join("target");
    std::fs::write(&target, &body).unwrap();
    std::os::unix::fs::symlink(&target, &at).unwrap();
    let other = Pool::open(&f._tmp.path().join("other-pool"), Some(1024)).unwrap();
    let err = f.dir.fetch_into(&other, &oid, 2000).unwrap_err();
    assert!(
        matches!(&err, DirError::Symlink { path } if *path == at),
        "{err}"
    );
}

#[test]
fn a_file_of_other_bytes_is_not_written_and_its_temp_file_is_removed() {
    let f = fixture();
    let src = f._tmp.path().join("src");
    std::fs::write(&src, b"not the object").unwrap();
    let oid = Oid::of(b"the object");
    let err = f.dir.put_from_file(&src, &oid).unwrap_err();
    assert!(matches!(err, DirError::NotTheObject { .. }), "{err}");
    assert!(!f.dir.path_of(&oid).exists());
    assert!(leftovers(&f.root).is_empty(), "{:?}", leftovers(&f.root));
    let good = f._tmp.path().join("good");
    std::fs::write(&good, b"the object").unwrap();
    assert_eq!(
        f.dir.put_from_file(&good, &oid).unwrap(),
        DirPut::Written(10)
    );
}

#[test]
fn temp_files_are_created_exclusively_and_never_through_a_planted_name() {
    let f = fixture();
    let root = f.dir.open_root().unwrap();
    let (mut tmp, path) = temp_in(&root, &f.root).unwrap();
    // The name is taken now: a second exclusive create of it fails.
    let again = rustix::fs::openat(
        &root,
        path.file_name().unwrap(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(0o644),
    );
    assert_eq!(again.unwrap_err(), Errno::EXIST);
    tmp.write_all(b"x").unwrap();
    drop(tmp);
    assert!(!path.exists(), "the temp file was left");
}

#[test]
fn a_folder_that_is_missing_or_not_writable_fails_the_check() {
    let f = fixture();
    f.dir.check_writable().unwrap();
    assert!(leftovers(&f.root).is_empty());
    let missing = DirRemote::parse(f.root.join("nope").to_str().unwrap()).unwrap();
    assert!(missing.check_writable().is_err());
    // Root ignores permission bits: only a real user sees 0555 refuse.
    if std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&f.root).unwrap()) != 0 {
        std::fs::set_permissions(&f.root, std::fs::Permissions::from_mode(0o555)).unwrap();
        assert!(f.dir.check_writable().is_err());
    }
}

#[test]
fn an_object_fetched_around_the_pool_is_handed_on_only_when_it_is_the_object() {
    let f = fixture();
    let body = vec![3u8; 4000];
    let oid = f.pool.put(&Oid::of(&body), &body).unwrap().oid;
    f.dir.put_from_pool(&f.pool, &oid).unwrap();
    let into = f._tmp.path().join("repo-tmp");
    std::fs::create_dir(&into).unwrap();
    let got = f.dir.fetch_into_file(&oid, 4000, &into).unwrap();
    assert_eq!(std::fs::read(&got).unwrap(), body);
    drop(got);
    // Other bytes under its name: refused, naming the file, nothing left.
    let at = f.dir.path_of(&oid);
    std::fs::remove_file(&at).unwrap();
    std::fs::write(&at, vec![4u8; 4000]).unwrap();
    let err = f.dir.fetch_into_file(&oid, 4000, &into).unwrap_err();
    assert!(matches!(err, DirError::NotTheObject { .. }), "{err}");
    assert!(err.to_string().contains(&at.display().to_string()), "{err}");
    assert_eq!(std::fs::read_dir(&into).unwrap().count(), 0);
}
