//! The S3 client against the real Ceph RGW that tests/run.sh starts.

use std::time::Duration;

use bytes::Bytes;
use drsd::stores::{CopySource, RemoteError, Retry, S3Client, S3Config, S3Credentials};
use md5::{Digest, Md5};

/// The RGW of tests/run.sh; these tests fail (never skip) without it.
fn rgw() -> S3Config {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with tests/run.sh, which starts Ceph RGW"
    );
    S3Config::from_env().unwrap()
}

fn client() -> S3Client {
    S3Client::new(rgw(), S3Credentials::from_env().unwrap()).unwrap()
}

async fn fresh_bucket(c: &S3Client, tag: &str) -> String {
    let name = format!("t-{tag}-{}", std::process::id());
    c.create_bucket(&name).await.unwrap();
    name
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn put_head_get_and_ranges() {
    rt().block_on(async {
        let c = client();
        let b = fresh_bucket(&c, "basic").await;
        let etag = c
            .put(&b, "dir/hello.txt", Bytes::from_static(b"hello world"))
            .await
            .unwrap();
        let md5 = hex::encode(Md5::digest(b"hello world"));
        assert_eq!(etag.as_deref(), Some(md5.as_str()));
        let meta = c.head(&b, "dir/hello.txt").await.unwrap().unwrap();
        assert_eq!((meta.size, meta.etag.as_deref()), (11, Some(md5.as_str())));
        assert!(meta.last_modified.is_some());
        assert_eq!(
            c.get_bytes(&b, "dir/hello.txt", Some(6..11)).await.unwrap(),
            b"world"
        );
        assert_eq!(
            c.get_bytes(&b, "dir/hello.txt", None).await.unwrap(),
            b"hello world"
        );
        assert_eq!(c.head(&b, "absent").await.unwrap(), None);
        c.delete(&b, "dir/hello.txt").await.unwrap();
        assert_eq!(c.head(&b, "dir/hello.txt").await.unwrap(), None);
    });
}

/// A file that would need more parts than S3 takes is refused by name
/// before a part is sent, not after 10,000 of them.
#[test]
fn a_file_of_more_parts_than_s3_takes_is_refused_before_a_part_is_sent() {
    rt().block_on(async {
        let c = client();
        let b = fresh_bucket(&c, "toomany").await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, vec![1u8; 10_001]).unwrap();
        let err = c
            .put_multipart(&b, "x.bin", &path, 1, &[])
            .await
            .unwrap_err();
        let said = err.to_string();
        assert!(
            said.contains("10001 parts") && said.contains("x.bin"),
            "{said}"
        );
        assert_eq!(c.head(&b, "x.bin").await.unwrap(), None);
    });
}

#[test]
fn multipart_etags_are_reproducible_and_headed_after_completion() {
    rt().block_on(async {
        let c = client();
        let b = fresh_bucket(&c, "multi").await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reads.bam");
        let data: Vec<u8> = (0..11 * 1024 * 1024u32)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let part = 5 * 1024 * 1024;
        let one = c
            .put_multipart(&b, "a/reads.bam", &path, part, &[])
            .await
            .unwrap();
        let two = c
            .put_multipart(&b, "b/reads.bam", &path, part, &[])
            .await
            .unwrap();
        assert_eq!(one.size, data.len() as u64);
        let etag = one
            .etag
            .clone()
            .expect("a HEAD after completion has the real ETag");
        assert!(etag.ends_with("-3"), "three parts: {etag}");
        assert_eq!(one.etag, two.etag, "same file, same part size, same ETag");
        // The multipart ETag is md5 of the parts' md5s, as S3 defines it.
        let mut outer = Md5::new();
        for chunk in data.chunks(part as usize) {
            outer.update(Md5::digest(chunk));
        }
        assert_eq!(etag, format!("{}-3", hex::encode(outer.finalize())));
        assert_eq!(c.get_bytes(&b, "a/reads.bam", None).await.unwrap(), data);
    });
}

/// Copies pinned to the ETag seen: one CopyObject, and UploadPartCopy in
/// parts, each checked byte for byte; a source changed since is refused
/// with 412 and leaves no copy behind.
#[test]
fn server_side_copies_whole_and_in_parts_are_pinned_to_the_etag() {
    rt().block_on(async {
        let c = client();
        let b = fresh_bucket(&c, "copy").await;
        let data: Vec<u8> = (0..13 * 1024 * 1024u32)
            .map(|i| (i * 7 % 253) as u8)
            .collect();
        let etag = c
            .put(&b, "src/reads.cram", Bytes::from(data.clone()))
            .await
            .unwrap()
            .unwrap();
        let src = CopySource {
            bucket: &b,
            key: "src/reads.cram",
            etag: Some(&etag),
            size: data.len() as u64,
        };
        let meta = [("x-amz-meta-sha256", "ab")];
        let whole = c.copy(&src, &b, "dst/whole", &meta).await.unwrap();
        assert_eq!(
            (whole.size, whole.etag.as_deref()),
            (src.size, Some(etag.as_str()))
        );
        assert_eq!(whole.sha256.as_deref(), Some("ab"), "the new metadata");
        let part = 5 * 1024 * 1024;
        let parts = c
            .copy_in_parts(&src, &b, "dst/parts", part, &meta)
            .await
            .unwrap();
        let mut outer = Md5::new();
        for chunk in data.chunks(part as usize) {
            outer.update(Md5::digest(chunk));
        }
        let want = format!("{}-3", hex::encode(outer.finalize()));
        assert_eq!(parts.etag.as_deref(), Some(want.as_str()), "5 + 5 + 3 MiB");
        assert_eq!(parts.sha256.as_deref(), Some("ab"));
        assert_eq!(c.get_bytes(&b, "dst/parts", None).await.unwrap(), data);
        assert_eq!(c.get_bytes(&b, "dst/whole", None).await.unwrap(), data);

        let stale = CopySource {
            etag: Some("0123456789abcdef0123456789abcdef"),
            ..src
        };
        for (what, got) in [
            ("whole", c.copy(&stale, &b, "dst/stale1", &meta).await),
            (
                "parts",
                c.copy_in_parts(&stale, &b, "dst/stale2", part, &meta).await,
            ),
        ] {
            match got {
                Err(RemoteError::Http { status: 412, .. }) => {}
                other => panic!("{what}: a stale ETag must be refused with 412: {other:?}"),
            }
        }
        assert_eq!(c.head(&b, "dst/stale1").await.unwrap(), None);
        assert_eq!(c.head(&b, "dst/stale2").await.unwrap(), None, "aborted");
    });
}

#[test]
fn a_wrong_secret_is_an_auth_error_naming_the_source_and_no_signature() {
    rt().block_on(async {
        let good = client();
        let b = fresh_bucket(&good, "auth").await;
        good.put(&b, "k", Bytes::from_static(b"x")).await.unwrap();
        let key = std::env::var("AWS_ACCESS_KEY_ID").unwrap();
        let bad = S3Client::new(rgw(), S3Credentials::new(&key, "wrong-secret")).unwrap();
        let err = bad.get_bytes(&b, "k", None).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, RemoteError::Auth { status: 403, .. }),
            "{text}"
        );
        assert!(text.contains(&format!("s3://{b}/k")), "{text}");
        assert!(
            text.contains("environment"),
            "names the credential source: {text}"
        );
        assert!(
            !text.contains("X-Amz-Signature") && !text.contains("wrong-secret"),
            "{text}"
        );
    });
}

#[test]
fn an_unreachable_store_is_retried_then_named() {
    rt().block_on(async {
        let mut config = rgw();
        config.endpoint = "http://127.0.0.1:9".parse().unwrap(); // discard port: nothing listens
        config.retry = Retry {
            attempts: 3,
            first_delay: Duration::from_millis(10),
        };
        let c = S3Client::new(config, S3Credentials::new("AKID", "SECRET")).unwrap();
        let err = c.head("bkt", "reads.bam").await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, RemoteError::Transport { attempts: 3, .. }),
            "{text}"
        );
        assert!(text.contains("s3://bkt/reads.bam"), "{text}");
        assert!(
            !text.contains("X-Amz") && !text.contains("SECRET"),
            "{text}"
        );
    });
}

mod fetch {
    use std::sync::Arc;

    use bytes::Bytes;
    use drsd::pool::{Oid, Pool, Tier};
    use drsd::remote::{fetch_into_pool, Fetch, FetchError, FetchOptions, Origin};
    use md5::{Digest, Md5};

    use super::{client, fresh_bucket, rt};

    const MIB: usize = 1 << 20;

    fn data(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8)
            .collect()
    }

    fn opts() -> FetchOptions {
        FetchOptions {
            chunk: MIB as u64,
            parallel: 4,
            bandwidth: None,
            read_soon: false,
        }
    }

    fn partial_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir.join("partial"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    #[test]
    fn parallel_ranges_land_hashed_in_the_pool_with_md5_checked() {
        rt().block_on(async {
            let c = client();
            let b = fresh_bucket(&c, "fetch").await;
            let dir = tempfile::tempdir().unwrap();
            let pool = Arc::new(Pool::open(dir.path(), None).unwrap());
            let body = data(5 * MIB + 123, 1);
            let etag = c
                .put(&b, "big.bam", Bytes::from(body.clone()))
                .await
                .unwrap()
                .unwrap();
            let seen = std::sync::Mutex::new(0u64);
            let req = Fetch {
                origin: s3(&c, &b, "big.bam"),
                size: body.len() as u64,
                etag: Some(&etag),
                last_modified: None,
                expect: None,
                md5: true,
                part_sizes: &[],
            };
            let got = fetch_into_pool(pool.clone(), req, opts(), &|n| *seen.lock().unwrap() = n)
                .await
                .unwrap();
            assert_eq!(got.put.oid, Oid::of(&body));
            assert_eq!(
                (got.put.tier, got.put.stored, got.resumed_from),
                (Tier::Large, true, 0)
            );
            assert_eq!(got.md5.unwrap().as_slice(), Md5::digest(&body).as_slice());
            assert_eq!(*seen.lock().unwrap(), body.len() as u64);
            assert_eq!(
                pool.get(&got.put.oid).unwrap().unwrap().to_vec().unwrap(),
                body
            );
            assert!(
                partial_files(dir.path()).is_empty(),
                "the partial file was adopted"
            );

            // A small object lands in the kv tier.
            let small = data(1000, 2);
            let etag = c
                .put(&b, "small.txt", Bytes::from(small.clone()))
                .await
                .unwrap()
                .unwrap();
            let req = Fetch {
                origin: s3(&c, &b, "small.txt"),
                size: 1000,
                etag: Some(&etag),
                ..req_of(&c, &b)
            };
            let got = fetch_into_pool(pool.clone(), req, opts(), &|_| {})
                .await
                .unwrap();
            assert_eq!((got.put.oid, got.put.tier), (Oid::of(&small), Tier::Kv));
        });
    }

    fn s3<'a>(client: &'a drsd::stores::S3Client, bucket: &'a str, key: &'a str) -> Origin<'a> {
        Origin::S3 {
            client,
            bucket,
            key,
        }
    }

    fn req_of<'a>(c: &'a drsd::stores::S3Client, b: &'a str) -> Fetch<'a> {
        Fetch {
            origin: s3(c, b, ""),
            size: 0,
            etag: None,
            last_modified: None,
            expect: None,
            md5: true,
            part_sizes: &[],
        }
    }

    #[test]
    fn a_multipart_etag_is_checked_against_the_part_size_given() {
        rt().block_on(async {
            let c = client();
            let b = fresh_bucket(&c, "parts").await;
            let dir = tempfile::tempdir().unwrap();
            let pool = Arc::new(Pool::open(dir.path(), None).unwrap());
            let body = data(12 * MIB + 5, 9);
            let src = dir.path().join("src.bin");
            std::fs::write(&src, &body).unwrap();
            let meta = c
                .put_multipart(&b, "p.bam", &src, 5 * MIB as u64, &[])
                .await
                .unwrap();
            let etag = meta.etag.unwrap();
            assert!(etag.ends_with("-3"), "{etag}");
            let (right, wrong) = ([5 * MIB as u64], [4 * MIB as u64]);
            let req = |sizes: bool| Fetch {
                origin: s3(&c, &b, "p.bam"),
                size: body.len() as u64,
                etag: Some(&etag),
                last_modified: None,
                expect: None,
                md5: false,
                part_sizes: if sizes { &right } else { &wrong },
            };
            let got = fetch_into_pool(pool.clone(), req(true), opts(), &|_| {})
                .await
                .unwrap();
            assert_eq!(got.put.oid, Oid::of(&body));
            pool.delete(&got.put.oid).unwrap();
            // The wrong part size gives another ETag: refused, nothing kept.
            let err = fetch_into_pool(pool.clone(), req(false), opts(), &|_| {})
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    FetchError::Mismatch {
                        what: "multipart md5 (the ETag)",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(!pool.has(&Oid::of(&body)).unwrap());
            assert!(partial_files(dir.path()).is_empty());
        });
    }

    #[test]
    fn an_interrupted_download_resumes_and_a_bad_prefix_is_caught() {
        rt().block_on(async {
            let c = client();
            let b = fresh_bucket(&c, "resume").await;
            let dir = tempfile::tempdir().unwrap();
            let pool = Arc::new(Pool::open(dir.path(), None).unwrap());
            let body = data(4 * MIB + 7, 3);
            let etag = c
                .put(&b, "r.cram", Bytes::from(body.clone()))
                .await
                .unwrap()
                .unwrap();
            let req = Fetch {
                origin: s3(&c, &b, "r.cram"),
                size: body.len() as u64,
                etag: Some(&etag),
                expect: Some(Oid::of(&body)),
                ..req_of(&c, &b)
            };
            // A wrong ETag refuses every range: what arrived stays for a resume.
            let stale = Fetch {
                etag: Some("0123456789abcdef0123456789abcdef"),
                ..req.clone()
            };
            let err = fetch_into_pool(pool.clone(), stale, opts(), &|_| {})
                .await
                .unwrap_err();
            assert!(matches!(err, FetchError::Changed { .. }), "{err}");
            assert!(!pool.has(&Oid::of(&body)).unwrap());

            assert!(
                partial_files(dir.path()).is_empty(),
                "a changed object keeps no partial"
            );

            // What an earlier try left: 2.5 MiB of the right bytes.
            let part = dir.path().join("partial");
            let name = {
                let id = format!("s3://{b}/r.cram\n{etag}\n{}", body.len());
                format!("{}.part", Oid::of(id.as_bytes()))
            };
            // A resume trusts only what the partial's record says was
            // checked (docs/add-url.md): the earlier try recorded it.
            let record = |checked: usize| {
                let text = serde_json::json!({
                    "object": format!("s3://{b}/r.cram"), "etag": etag,
                    "size": body.len(), "last_modified": null, "checked": checked,
                });
                std::fs::write(part.join(format!("{name}.json")), text.to_string()).unwrap();
            };
            std::fs::write(part.join(&name), &body[..5 * MIB / 2]).unwrap();
            record(5 * MIB / 2);
            let got = fetch_into_pool(pool.clone(), req.clone(), opts(), &|_| {})
                .await
                .unwrap();
            assert_eq!(
                got.resumed_from,
                2 * MIB as u64,
                "resumes at the last whole chunk"
            );
            assert_eq!(got.put.oid, Oid::of(&body));
            assert_eq!(got.md5.unwrap().as_slice(), Md5::digest(&body).as_slice());

            // A partial file holding wrong bytes fails the hash and is discarded.
            pool.delete(&got.put.oid).unwrap();
            std::fs::write(part.join(&name), vec![0u8; 3 * MIB]).unwrap();
            record(3 * MIB);
            let err = fetch_into_pool(pool.clone(), req.clone(), opts(), &|_| {})
                .await
                .unwrap_err();
            assert!(
                matches!(err, FetchError::Mismatch { what: "sha256", .. }),
                "{err}"
            );
            assert!(partial_files(dir.path()).is_empty());
            assert!(!pool.has(&Oid::of(&body)).unwrap());
            // ... and the next try starts over and succeeds.
            let got = fetch_into_pool(pool.clone(), req, opts(), &|_| {})
                .await
                .unwrap();
            assert_eq!((got.resumed_from, got.put.oid), (0, Oid::of(&body)));
        });
    }
}

mod upload {
    use std::sync::Arc;

    use bytes::Bytes;
    use drsd::pool::{Oid, Pool};
    use drsd::remote::{upload_from_pool, UploadOptions, Uploaded};
    use drsd::stores::ObjectLayout;

    use super::{client, fresh_bucket, rt};

    #[test]
    fn uploads_once_in_the_layout_and_skips_what_is_there() {
        rt().block_on(async {
            let c = client();
            let b = fresh_bucket(&c, "up").await;
            let layout = ObjectLayout::parse(&format!("s3://{b}/lfs")).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let pool = Arc::new(Pool::open(dir.path(), None).unwrap());
            let opts = UploadOptions {
                multipart_from: 8 << 20,
                part_size: 5 << 20,
                put_first_below: 1 << 20,
                ..UploadOptions::default()
            };
            let mut oids = Vec::new();
            for (i, len) in [1000usize, 6 << 20, 12 << 20].into_iter().enumerate() {
                let data: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
                oids.push((pool.put_stream(None, &data[..]).unwrap().oid, len as u64));
            }
            for (oid, len) in &oids {
                let sent = upload_from_pool(&c, pool.clone(), &layout, oid, opts)
                    .await
                    .unwrap();
                let Uploaded::Sent(meta) = sent else {
                    panic!("first upload of {oid} skipped")
                };
                assert_eq!(meta.size, *len);
                assert_eq!(meta.sha256, Some(oid.to_hex()));
                let key = layout.key(oid);
                let back = c.get_bytes(&b, &key, None).await.unwrap();
                assert_eq!(Oid::of(&back), *oid);
                let again = upload_from_pool(&c, pool.clone(), &layout, oid, opts)
                    .await
                    .unwrap();
                assert!(
                    matches!(again, Uploaded::Skipped(_)),
                    "second upload of {oid} sent again"
                );
            }
            let multipart = c.head(&b, &layout.key(&oids[2].0)).await.unwrap().unwrap();
            assert!(multipart.etag.unwrap().ends_with("-3"));

            // Same key, other bytes, no sha256: not skipped, replaced; for a
            // small object too, whose conditional PUT finds the key taken.
            for (oid, _) in &oids[..2] {
                c.put(&b, &layout.key(oid), Bytes::from_static(b"impostor"))
                    .await
                    .unwrap();
                let fixed = upload_from_pool(&c, pool.clone(), &layout, oid, opts)
                    .await
                    .unwrap();
                assert!(matches!(fixed, Uploaded::Sent(_)), "{oid}: {fixed:?}");
                let back = c.get_bytes(&b, &layout.key(oid), None).await.unwrap();
                assert_eq!(Oid::of(&back), *oid);
            }
            let missing = Oid::of(b"never stored");
            let err = upload_from_pool(&c, pool, &layout, &missing, opts)
                .await
                .unwrap_err();
            assert!(err.to_string().contains(&missing.to_hex()), "{err}");
        });
    }
}
