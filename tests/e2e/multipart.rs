//! Multipart `-N` ETags checked without any setting: objects written to
//! Ceph RGW by the real AWS CLI (8 MiB parts) and rclone (5 MiB) are
//! verified and promoted by one daemon with no `DRSD_MULTIPART_PART_SIZE`;
//! bytes that do not give their ETag are refused; an ETag whose parts count
//! no part size fits is downloaded once, trusted as read and named by
//! `drsctl status`, never fetched again and again.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use drsd::ops::workers::prefetch::prefetch;
use drsd::pool::{Oid, Pool};
use drsd::registry::ForeignObject;
use drsd::remote::{FetchOptions, Remote};
use drsd_e2e::liar::Liar;
use drsd_e2e::rt;
use md5::{Digest, Md5};

use super::add_url::{pointer_text, s3, sha256_hex, text, World};
use super::foreign::{drs_repo, queue, staged, wait_up_to};

const MIB: usize = 1 << 20;
const LM: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// S3's multipart ETag of `body` cut in `part`-byte parts.
fn multipart_etag(body: &[u8], part: usize) -> String {
    let mut digests = Vec::new();
    for chunk in body.chunks(part) {
        digests.extend_from_slice(&Md5::digest(chunk));
    }
    let n = body.len().div_ceil(part);
    format!("{}-{n}", hex::encode(Md5::digest(&digests)))
}

/// Runs a peer tool, which must be installed (tests/ci/install-system-deps.sh).
fn tool(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (tests/ci/install-system-deps.sh installs it)"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
}

/// `aws s3 cp` (the AWS CLI's default 8 MiB parts past 8 MiB).
fn aws_cp(file: &Path, url: &str) {
    tool(
        Command::new("aws")
            .args(["s3", "cp", "--quiet"])
            .arg(file)
            .arg(url),
    );
}

/// `rclone copyto` through a remote set up by environment, multipart from
/// 5 MiB in its default 5 MiB chunks.
fn rclone_copy(file: &Path, bucket: &str, key: &str) {
    let var = |n: &str| std::env::var(n).unwrap();
    tool(
        Command::new("rclone")
            .args(["copyto", "--s3-upload-cutoff", "5M"])
            .arg(file)
            .arg(format!("rgw:{bucket}/{key}"))
            // rclone's AWS SDK cannot load a CA bundle into its own HTTP
            // transport and fails outright; RGW is plain http here anyway.
            .env_remove("AWS_CA_BUNDLE")
            .env("RCLONE_CONFIG_RGW_TYPE", "s3")
            .env("RCLONE_CONFIG_RGW_PROVIDER", "Ceph")
            .env("RCLONE_CONFIG_RGW_ENV_AUTH", "false")
            .env("RCLONE_CONFIG_RGW_ENDPOINT", var("AWS_ENDPOINT_URL"))
            .env("RCLONE_CONFIG_RGW_ACCESS_KEY_ID", var("AWS_ACCESS_KEY_ID"))
            .env(
                "RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY",
                var("AWS_SECRET_ACCESS_KEY"),
            ),
    );
}

#[test]
fn objects_written_by_the_aws_cli_and_rclone_are_verified_by_their_etags_and_promoted() {
    std::env::remove_var("DRSD_MULTIPART_PART_SIZE");
    let world = World::with_prefetch();
    let (repo, _) = drs_repo(&world, "mp");
    let bucket = format!("src-mp-{}", std::process::id());
    rt().block_on(s3().create_bucket(&bucket)).unwrap();
    // 3 parts each way: 8 + 8 + 4 MiB, and 5 + 5 + 2 MiB and a byte.
    let by_aws = content(20 * MIB + 7, 1);
    let by_rclone = content(12 * MIB + 1, 2);
    let spool = tempfile::tempdir().unwrap();
    let (a, r) = (spool.path().join("a.bam"), spool.path().join("r.bam"));
    std::fs::write(&a, &by_aws).unwrap();
    std::fs::write(&r, &by_rclone).unwrap();
    aws_cp(&a, &format!("s3://{bucket}/aws.bam"));
    rclone_copy(&r, &bucket, "rclone.bam");
    for (key, body, part) in [
        ("aws.bam", &by_aws, 8 * MIB),
        ("rclone.bam", &by_rclone, 5 * MIB),
    ] {
        let meta = rt().block_on(s3().head(&bucket, key)).unwrap().unwrap();
        assert_eq!(meta.etag, Some(multipart_etag(body, part)), "{key}");
        let url = format!("s3://{bucket}/{key}");
        world.drsctl_ok(&repo, &["add-url", &url]);
    }
    for (key, body) in [("aws.bam", &by_aws), ("rclone.bam", &by_rclone)] {
        let promoted = pointer_text(&sha256_hex(body), body.len() as u64);
        wait_up_to(Duration::from_secs(120), key, || {
            staged(&repo, key) == promoted
        });
    }
    let q = queue(&world, &repo);
    assert_eq!(
        (q["done"].as_u64(), q["failed"].as_u64()),
        (Some(2), Some(0)),
        "{q}"
    );
    // No done job carries a note: both ETags were checked against the bytes.
    assert_eq!(q["open"].as_array().map(Vec::len), Some(0), "{q}");
}

/// The liar's object as add-url records it: a multipart ETag.
fn recorded(liar: &Liar, etag: &str, size: usize) -> ForeignObject {
    ForeignObject {
        url: liar.url("runs/reads.bam").into(),
        bucket: None,
        key: None,
        version_id: None,
        etag: etag.into(),
        size: size as u64,
        provisional_oid: drsd::registry::provisional_oid("", etag),
        content_oid: None,
        drs_id: None,
        last_modified: Some(LM.into()),
        recorded_at: 0,
        md5: None,
        content_read: false,
    }
}

#[test]
fn bytes_that_do_not_give_their_multipart_etag_are_refused_with_no_setting() {
    let good = content(20 * MIB + 7, 3);
    let etag = multipart_etag(&good, 8 * MIB);
    let mut bad = good.clone();
    bad[9 * MIB] ^= 1;
    let liar = Liar::start(bad.clone(), &etag, LM);
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(Pool::open(&dir.path().join("pool"), Some(64 << 10)).unwrap());
    let settings = drsd::settings::Settings::from_env().expect("the test environment's settings");
    let remote = Remote::new(None, Arc::new(settings));
    let object = recorded(&liar, &etag, bad.len());
    let got = rt().block_on(prefetch(
        pool.clone(),
        &remote,
        &object,
        FetchOptions::default(),
        None,
        &|_| {},
    ));
    let err = got.expect_err("the flipped byte is caught").to_string();
    assert!(err.contains("multipart md5 (the ETag)"), "{err}");
    assert!(!pool.has(&Oid::of(&bad)).unwrap());
}

#[test]
fn an_etag_whose_parts_count_rules_every_size_out_is_downloaded_once_and_named_in_status() {
    // A setting the count also rules out: once, it made every try fail.
    std::env::set_var("DRSD_MULTIPART_PART_SIZE", "8M");
    std::env::set_var("DRSD_RETRY_SECS", "1");
    let body = content(20 * MIB, 4);
    // 15 parts of 20 MiB: parts of about 1.4 MiB, no tool's size.
    let etag = format!("{}-15", hex::encode(Md5::digest(b"no such upload")));
    let liar = Liar::start(body.clone(), &etag, LM);
    let world = World::with_prefetch();
    let (repo, _) = drs_repo(&world, "unv");
    let url = liar.url("runs/reads.bam");
    world.drsctl_ok(&repo, &["add-url", &url, "reads.bam"]);
    let promoted = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_up_to(Duration::from_secs(60), "promotion", || {
        staged(&repo, "reads.bam") == promoted
    });
    let gets = || {
        liar.requests()
            .iter()
            .filter(|r| r.starts_with("GET"))
            .count()
    };
    let once = gets();
    std::thread::sleep(Duration::from_secs(4)); // retries would be due by now
    assert_eq!(gets(), once, "{:?}", liar.requests());
    assert!(
        once <= 1,
        "one download in 64 MiB ranges: {:?}",
        liar.requests()
    );
    let out = world.drsctl(&repo, &["status"]);
    let said = text(&out);
    assert!(
        said.contains("done, unverified")
            && said.contains("multipart ETag not verifiable: 15 parts")
            && said.contains("DRSD_MULTIPART_PART_SIZE"),
        "{said}"
    );
}
