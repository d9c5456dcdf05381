//! Servers that ignore what a request asks, or lie about the object: the
//! prefetch checks every answer against its request and keeps nothing of
//! a download that does not fit. The lying server (`tests/liar.rs`) runs in
//! this process; the prefetch is the daemon's own (`drsd::ops::workers::prefetch`),
//! into a pool of the test's own, and the daemon runs for add-url.

use std::path::Path;
use std::sync::Arc;

use drsd::ops::workers::prefetch::{prefetch, Hashed, PrefetchError};
use drsd::pool::{Oid, Pool};
use drsd::registry::ForeignObject;
use drsd::remote::{FetchOptions, Remote};
use drsd_e2e::liar::{Liar, Lies};
use drsd_e2e::rt;

use super::add_url::{git, text, World};

const LM: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

/// 3 MiB and a bit: four ranges of 1 MiB, so ranges past the first exist.
fn body(seed: u8) -> Vec<u8> {
    (0..(3 << 20) + 4321)
        .map(|i: usize| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 13) as u8)
        .collect()
}

/// A pool whose large tier (with its partial downloads) takes these objects.
fn pool(dir: &Path) -> Arc<Pool> {
    Arc::new(Pool::open(&dir.join("pool"), Some(64 << 10)).unwrap())
}

/// The registry's record of the liar's object as add-url would make it:
/// a non-MD5 ETag (as nginx's), pinned with its Last-Modified.
fn recorded(liar: &Liar, size: usize) -> ForeignObject {
    ForeignObject {
        url: liar.url("data/reads.bam").into(),
        bucket: None,
        key: None,
        version_id: None,
        etag: "5f0-1a".into(),
        size: size as u64,
        provisional_oid: "0".repeat(64).parse().unwrap(),
        content_oid: None,
        drs_id: None,
        last_modified: Some(LM.into()),
        recorded_at: 0,
        md5: None,
        content_read: false,
    }
}

fn fetch(pool: &Arc<Pool>, object: &ForeignObject) -> Result<Hashed, PrefetchError> {
    let opts = FetchOptions {
        chunk: 1 << 20,
        parallel: 2,
        bandwidth: None,
        read_soon: false,
    };
    let settings = drsd::settings::Settings::from_env().expect("the test environment's settings");
    let remote = Remote::new(None, Arc::new(settings));
    rt().block_on(prefetch(pool.clone(), &remote, object, opts, None, &|_| {}))
}

/// The files in the pool's folder of partial downloads.
fn partials(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("pool/partial"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The download failed naming all of `words`, and nothing of it is kept.
fn refused_keeping_nothing(
    dir: &Path,
    pool: &Pool,
    got: Result<Hashed, PrefetchError>,
    bodies: &[&[u8]],
    words: &[&str],
) {
    let err = got.expect_err("the lie is caught").to_string();
    for word in words {
        assert!(err.contains(word), "{word:?} not in: {err}");
    }
    assert_eq!(partials(dir), Vec::<std::path::PathBuf>::new(), "{err}");
    for b in bodies {
        assert!(!pool.has(&Oid::of(b)).unwrap(), "pooled after: {err}");
    }
}

#[test]
fn a_200_to_a_ranged_get_falls_back_to_one_stream_from_byte_0() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = body(1);
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    liar.lies(Lies {
        ignore_range: true,
        ..Lies::default()
    });
    let pool = pool(dir.path());
    let hashed = fetch(&pool, &recorded(&liar, bytes.len())).expect("fetched whole");
    assert_eq!(hashed.oid, Oid::of(&bytes));
    assert!(pool.has(&Oid::of(&bytes)).unwrap());
    let asked = liar.requests();
    assert!(asked.contains(&"GET -".to_string()), "{asked:?}");
    assert_eq!(partials(dir.path()), Vec::<std::path::PathBuf>::new());
}

#[test]
fn a_partial_file_without_a_record_of_checked_bytes_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = body(2);
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    let object = recorded(&liar, bytes.len());
    let pool = pool(dir.path());
    // A partial file of the object's download without its record of
    // checked bytes: what an older drsd left after a server that ignored
    // Range, or what was planted. Planted here at the download's own name,
    // so the test does not hang on how far a broken-off try got.
    let partial_dir = pool.partial_dir().expect("the pool has a partial folder");
    std::fs::create_dir_all(partial_dir).unwrap();
    let name = drsd::remote::partials::name_of(&object).expect("a partial name");
    std::fs::write(partial_dir.join(name), vec![0xee; 2 << 20]).unwrap();
    liar.lies(Lies::default());
    let hashed = fetch(&pool, &object).expect("fetched");
    assert_eq!(
        hashed.oid,
        Oid::of(&bytes),
        "the planted bytes were resumed"
    );
}

#[test]
fn an_etag_changed_in_a_200_or_206_fails_naming_both_and_keeps_nothing() {
    let bytes = body(3);
    let other = body(4);
    for ignore_range in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
        liar.lies(Lies {
            ignore_range,
            other_version: Some(("5f1-1a".into(), other.clone())),
            ..Lies::default()
        });
        let pool = pool(dir.path());
        let got = fetch(&pool, &recorded(&liar, bytes.len()));
        refused_keeping_nothing(
            dir.path(),
            &pool,
            got,
            &[&bytes, &other],
            &["reads.bam", "5f0-1a", "5f1-1a"],
        );
    }
}

#[test]
fn a_content_range_other_than_the_one_asked_fails_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = body(5);
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    liar.lies(Lies {
        shift_range: 4096,
        ..Lies::default()
    });
    let pool = pool(dir.path());
    let got = fetch(&pool, &recorded(&liar, bytes.len()));
    refused_keeping_nothing(
        dir.path(),
        &pool,
        got,
        &[&bytes],
        &["reads.bam", "Content-Range", "asked"],
    );
}

#[test]
fn a_content_range_total_other_than_the_size_fails_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = body(6);
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    let claimed = bytes.len() as u64 + 1;
    liar.lies(Lies {
        total: Some(claimed),
        ..Lies::default()
    });
    let pool = pool(dir.path());
    let got = fetch(&pool, &recorded(&liar, bytes.len()));
    refused_keeping_nothing(
        dir.path(),
        &pool,
        got,
        &[&bytes],
        &["reads.bam", &format!("/{claimed}")],
    );
}

#[test]
fn a_changed_last_modified_at_the_final_head_fails_a_download_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = body(7);
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    // Same ETag, same size: another version only its date tells.
    let later = "Tue, 02 Jan 2024 00:00:00 GMT";
    liar.lies(Lies {
        head_last_modified: Some(later.into()),
        ..Lies::default()
    });
    let pool = pool(dir.path());
    let got = fetch(&pool, &recorded(&liar, bytes.len()));
    let ranged = liar
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET bytes="))
        .count();
    assert!(ranged > 1, "{:?}", liar.requests());
    refused_keeping_nothing(
        dir.path(),
        &pool,
        got,
        &[&bytes],
        &["reads.bam", "Last-Modified", later],
    );
}

#[test]
fn a_content_length_past_i64_max_is_refused_by_add_url_naming_the_url() {
    let world = World::new();
    let repo = world.repo("r");
    let liar = Liar::start(b"tiny".to_vec(), "5f0-1a", LM);
    // Just past what SQLite stores, and the largest a header can say.
    for length in [i64::MAX as u64 + 1, u64::MAX] {
        liar.lies(Lies {
            head_length: Some(length.to_string()),
            ..Lies::default()
        });
        let url = liar.url("huge.bam");
        let out = world.drsctl(&repo, &["add-url", &url]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&url)
                && said.contains("Content-Length")
                && said.contains(&length.to_string()),
            "{said}"
        );
        // Nothing recorded: no pointer, no attributes, no mirror, nothing staged.
        assert!(!repo.join("huge.bam").exists() && !repo.join(".gitattributes").exists());
        assert!(!repo.join(".git/lfs/foreign/registry.jsonl").exists());
        assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    }
}

/// A small object is read during add-url itself (one GET, through the
/// prefetch's checks), so its pointer carries its content's sha256 at
/// once; `--no-fetch` reads nothing.
#[test]
fn a_small_object_is_read_at_add_url_and_named_by_its_sha256_but_not_with_no_fetch() {
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let bytes = b"sidecar v1".to_vec();
    let liar = Liar::start(bytes.clone(), "5f0-1a", LM);
    let report = world.drsctl_ok(&repo, &["add-url", "--no-fetch", &liar.url("a.bai")]);
    assert_eq!(report["added"][0]["oid_from"], "etag", "{report}");
    let asked = liar.requests();
    assert!(asked.iter().all(|r| r.starts_with("HEAD")), "{asked:?}");

    let report = world.drsctl_ok(&repo, &["add-url", &liar.url("b.bai")]);
    let added = &report["added"][0];
    assert_eq!(added["oid_from"], "hashed", "{report}");
    assert_eq!(added["provisional"], false, "{report}");
    let oid = Oid::of(&bytes).to_hex();
    assert_eq!(added["oid"], oid.as_str(), "{report}");
    let pointer = std::fs::read_to_string(repo.join("b.bai")).unwrap();
    assert!(pointer.contains(&oid), "{pointer}");
    assert!(git(&repo, &["diff", "--cached", "--", "b.bai"]).contains(&oid));
}

/// A small object served by its GET as another version (other bytes,
/// another ETag) than its HEAD named is not named by those bytes: its
/// pointer keeps the provisional oid and the prefetch is left to try.
#[test]
fn a_small_object_served_as_another_version_at_add_url_keeps_its_provisional_oid() {
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let (v1, v2) = (b"sidecar v1".to_vec(), b"sidecar v2".to_vec());
    let liar = Liar::start(v1.clone(), "5f0-1a", LM);
    liar.lies(Lies {
        other_version: Some(("5f0-2b".into(), v2.clone())),
        ..Lies::default()
    });
    let report = world.drsctl_ok(&repo, &["add-url", &liar.url("c.bai")]);
    let added = &report["added"][0];
    assert_eq!(added["oid_from"], "etag", "{report}");
    assert_eq!(added["provisional"], true, "{report}");
    let asked = liar.requests();
    assert!(asked.iter().any(|r| r.starts_with("GET")), "{asked:?}");
    let pointer = std::fs::read_to_string(repo.join("c.bai")).unwrap();
    for bytes in [&v1, &v2] {
        assert!(!pointer.contains(&Oid::of(bytes).to_hex()), "{pointer}");
    }
}
