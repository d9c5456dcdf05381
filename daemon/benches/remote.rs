//! Download benchmark: one object from Ceph RGW into the pool (parallel
//! ranges, sha256 + md5 in the same pass, fsync, adopt) against `curl` of the
//! same object, in one run.
//!
//!     tests/with-servers.sh cargo bench -p drsd --bench remote [-- --mib N]
//!
//! `-- --md5 [--mib N]`: what md5 costs a prefetch (issue 14 item 3): the
//! same object (default 2 GiB) from RGW and from nginx over http, three
//! runs each, without md5 against `curl -o /dev/null` and with it against
//! one core's md5 (`openssl speed -evp md5`), in one run.
//!
//! `-- --proof [--mib N]`: what proving an object is in an S3 object remote
//! costs (issue 28, DESIGN.md "Trust"), for one object (default 1 GiB) on
//! RGW, best of 3: the upload a push makes when it cannot prove the key
//! (multipart, 64 MiB parts), against each proof: a read of the key hashed
//! here (into the pool, range-parallel, as `proves_held` does), the store's
//! multipart ETag against the parts' md5s of the bytes here, and the HEAD
//! that finds an ETag this daemon recorded.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsd::pool::Pool;
use drsd::remote::{fetch_into_pool, Fetch, FetchOptions, Origin};
use drsd::stores::{S3Client, S3Config, S3Credentials};
use rusty_s3::S3Action;

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if std::env::args().any(|a| a == "--prefetch") {
        let mib = mib_arg(4096);
        rt.block_on(prefetch_https(mib));
        return;
    }
    if std::env::args().any(|a| a == "--md5") {
        let mib = mib_arg(2048);
        rt.block_on(md5_cost(mib));
        return;
    }
    if std::env::args().any(|a| a == "--proof") {
        let mib = mib_arg(1024);
        rt.block_on(proof_cost(mib));
        return;
    }
    if std::env::args().any(|a| a == "--small") {
        rt.block_on(small_objects());
        return;
    }
    rt.block_on(run(mib_arg(1024)));
}

/// `mib` MiB of random bytes at `path`.
fn random_file(path: &std::path::Path, mib: u64) {
    let status = Command::new("head")
        .args(["-c", &format!("{}", mib << 20), "/dev/urandom"])
        .stdout(std::fs::File::create(path).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
}

/// `--mib N`, else `default`.
fn mib_arg(default: u64) -> u64 {
    std::env::args()
        .skip_while(|a| a != "--mib")
        .nth(1)
        .map(|n| n.parse().expect("--mib N"))
        .unwrap_or(default)
}

async fn run(mib: u64) {
    let config = S3Config::from_env().expect("AWS_ENDPOINT_URL: run under tests/with-servers.sh");
    let creds = S3Credentials::from_env().unwrap();
    let client = S3Client::new(config.clone(), creds).unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let src = dir.path().join("object.bin");
    random_file(&src, mib);
    client.create_bucket("bench").await.unwrap();
    let meta = client
        .put_multipart("bench", "object.bin", &src, 64 << 20, &[])
        .await
        .unwrap();
    let etag = meta.etag.clone().unwrap();
    std::fs::remove_file(&src).unwrap();

    let url = presign(&config, "bench", "object.bin");
    let curl = |out: &str| {
        best_of(3, || {
            let t = Instant::now();
            let ok = Command::new("curl")
                .args(["-sf", "-o", out, &url])
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "curl failed");
            t.elapsed()
        })
    };
    let curl_null = curl("/dev/null");
    let out = dir.path().join("curl.out");
    let curl_file = curl(out.to_str().unwrap());
    let _ = std::fs::remove_file(&out);

    let pool = Arc::new(Pool::open(&dir.path().join("pool"), None).unwrap());
    // (ranges in flight, range MiB, md5 too)
    let configs = [
        (1, 256, false),
        (2, 64, false),
        (4, 64, false),
        (4, 8, false),
        (1, 256, true),
    ];
    let mut rows = Vec::new();
    for (parallel, chunk_mib, md5) in configs {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let req = Fetch {
                origin: Origin::S3 {
                    client: &client,
                    bucket: "bench",
                    key: "object.bin",
                },
                size: meta.size,
                etag: Some(&etag),
                last_modified: None,
                expect: None,
                md5,
                part_sizes: &[],
            };
            let opts = FetchOptions {
                parallel,
                chunk: chunk_mib << 20,
                bandwidth: None,
                read_soon: false,
            };
            let t = Instant::now();
            let got = fetch_into_pool(pool.clone(), req, opts, &|_| {})
                .await
                .unwrap();
            best = best.min(t.elapsed());
            pool.delete(&got.put.oid).unwrap();
        }
        rows.push((parallel, chunk_mib, md5, best));
    }
    // The network and RGW alone: the same kind of ranges, bodies dropped.
    let mut network = Vec::new();
    for chunk_mib in [8u64, 32, 128] {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            use futures_util::stream::{self, StreamExt};
            let chunk = chunk_mib << 20;
            let t = Instant::now();
            let total: usize = stream::iter((0..meta.size).step_by(chunk as usize))
                .map(|from| {
                    client.get_bytes(
                        "bench",
                        "object.bin",
                        Some(from..(from + chunk).min(meta.size)),
                    )
                })
                .buffered(4)
                .map(|r| r.unwrap().len())
                .fold(0, |a, n| async move { a + n })
                .await;
            assert_eq!(total as u64, meta.size);
            best = best.min(t.elapsed());
        }
        network.push((format!("4 × {chunk_mib} MiB range GETs"), best));
    }
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let mut resp = client.get("bench", "object.bin", None).await.unwrap();
        let mut total = 0;
        while let Some(c) = resp.chunk().await.unwrap() {
            total += c.len();
        }
        assert_eq!(total as u64, meta.size);
        best = best.min(t.elapsed());
    }
    network.push(("one streamed GET".to_string(), best));
    let rate = |d: Duration| mib as f64 / d.as_secs_f64();
    println!("### Download of a {mib} MiB object from Ceph RGW on loopback, best of 3\n");
    println!("| what | MiB/s | / curl -o /dev/null | / curl -o FILE |");
    println!("|---|---|---|---|");
    for (parallel, chunk_mib, md5, d) in rows {
        let hashes = if md5 { "sha256 + md5" } else { "sha256" };
        println!(
            "| pool fetch: {parallel} × {chunk_mib} MiB streamed ranges, {hashes}, fsync, into the pool | {:.0} | {:.2}× | {:.2}× |",
            rate(d),
            rate(d) / rate(curl_null),
            rate(d) / rate(curl_file)
        );
    }
    for (what, d) in network {
        println!(
            "| reqwest, {what}, bodies dropped (no hash, no disk) | {:.0} | {:.2}× | {:.2}× |",
            rate(d),
            rate(d) / rate(curl_null),
            rate(d) / rate(curl_file)
        );
    }
    println!("| `curl -o /dev/null` | {:.0} | | |", rate(curl_null));
    println!("| `curl -o FILE` | {:.0} | | |", rate(curl_file));
}

fn presign(config: &S3Config, bucket: &str, key: &str) -> String {
    let b = rusty_s3::Bucket::new(
        config.endpoint.clone(),
        rusty_s3::UrlStyle::Path,
        bucket.to_string(),
        config.region.clone(),
    )
    .unwrap();
    let creds = rusty_s3::Credentials::from_env().unwrap();
    b.get_object(Some(&creds), key)
        .sign(Duration::from_secs(3600))
        .to_string()
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().unwrap()
}

/// RGW's own rate for 2,000 × 16 KiB objects (PUT, HEAD, GET) at several
/// concurrencies: the floor under any push or clone of that many objects.
async fn small_objects() {
    use futures_util::stream::{self, StreamExt};
    let config = S3Config::from_env().expect("AWS_ENDPOINT_URL: run under tests/with-servers.sh");
    let client = S3Client::new(config, S3Credentials::from_env().unwrap()).unwrap();
    let bucket = format!("bench-small-{}", std::process::id());
    client.create_bucket(&bucket).await.unwrap();
    let body = bytes::Bytes::from(vec![7u8; 16 << 10]);
    println!("### 2,000 × 16 KiB objects straight to Ceph RGW (S3Client, no daemon)\n");
    println!("| concurrency | PUT/s | HEAD/s | GET/s |");
    println!("|---|---|---|---|");
    for (round, parallel) in [1usize, 8, 32, 64].into_iter().enumerate() {
        let keys: Vec<String> = (0..2000).map(|i| format!("r{round}/k{i:04}")).collect();
        let timed = |what: &'static str| {
            let (client, bucket, keys, body) = (&client, &bucket, &keys, &body);
            async move {
                let t = Instant::now();
                stream::iter(keys.iter())
                    .map(|k| async move {
                        match what {
                            "put" => drop(client.put(bucket, k, body.clone()).await.unwrap()),
                            "head" => assert!(client.head(bucket, k).await.unwrap().is_some()),
                            _ => assert_eq!(
                                client.get_bytes(bucket, k, None).await.unwrap().len(),
                                16 << 10
                            ),
                        }
                    })
                    .buffer_unordered(parallel)
                    .collect::<Vec<()>>()
                    .await;
                2000.0 / t.elapsed().as_secs_f64()
            }
        };
        let put = timed("put").await;
        let head = timed("head").await;
        let get = timed("get").await;
        println!("| {parallel} | {put:.0} | {head:.0} | {get:.0} |");
    }
}

/// The prefetch pipeline (download + sha256 + md5 + fsync + into the pool)
/// of one nginx object over https, against `curl -o /dev/null` of the same
/// URL and `openssl dgst -sha256` of the served file (the issue's
/// baselines), and against the same work done by standard tools in a shell
/// pipeline. Each row also gives the CPU time it took per GiB, on this
/// side (nginx's share is the same for every download).
async fn prefetch_https(mib: u64) {
    use drsd::stores::{HttpClient, HttpConfig};
    let www = std::env::var("DRSD_TEST_WWW").expect("run under tests/with-servers.sh");
    let base = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let ca = std::env::var("DRSD_CA_FILE").unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let served = std::path::Path::new(&www).join("bench-prefetch.bin");
    random_file(&served, mib);
    let url = url::Url::parse(&format!("{base}/bench-prefetch.bin")).unwrap();
    let client = HttpClient::new(HttpConfig::from_env().unwrap()).unwrap();
    let meta = client.head(&url).await.unwrap().unwrap();
    let etag = meta.etag.clone().unwrap();
    let shell = |script: String| {
        move || {
            let ok = Command::new("bash")
                .args(["-c", &script])
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "failed: {script}");
        }
    };
    let curl = timed(
        3,
        shell(format!("curl -sf --cacert {ca} -o /dev/null {url}")),
    );
    let openssl = timed(
        3,
        shell(format!("openssl dgst -sha256 {}", served.display())),
    );
    let copy = dir.path().join("copy.bin");
    let tools = timed(
        3,
        shell(format!(
            "set -o pipefail; curl -sf --cacert {ca} {url} \
             | tee >(openssl dgst -md5 >/dev/null) >(openssl dgst -sha256 >/dev/null) > {copy} \
             && sync {copy} && rm {copy}",
            copy = copy.display()
        )),
    );
    let pool = Arc::new(Pool::open(&dir.path().join("pool"), None).unwrap());
    let mut ours = Run::default();
    let mut sha_only = Run::default();
    for _ in 0..3 {
        for (md5, run) in [(true, &mut ours), (false, &mut sha_only)] {
            let req = Fetch {
                origin: Origin::Http {
                    client: &client,
                    url: &url,
                    headers: &[],
                },
                size: meta.size,
                etag: Some(&etag),
                last_modified: None,
                expect: None,
                md5,
                part_sizes: &[],
            };
            let (t, cpu) = (Instant::now(), cpu_seconds(libc::RUSAGE_SELF));
            let got = fetch_into_pool(pool.clone(), req, FetchOptions::default(), &|_| {})
                .await
                .unwrap();
            run.add(t.elapsed(), cpu_seconds(libc::RUSAGE_SELF) - cpu);
            pool.delete(&got.put.oid).unwrap();
        }
    }
    let _ = std::fs::remove_file(&served);
    let gib = mib as f64 / 1024.0;
    let slower = curl.rate(mib).min(openssl.rate(mib));
    println!("### Prefetch of a {mib} MiB nginx object over https, best of 3\n");
    println!("| what | MiB/s | / slower baseline | CPU s per GiB (this side) |");
    println!("|---|---|---|---|");
    let row = |what: &str, r: &Run| {
        println!(
            "| {what} | {:.0} | {:.2}× | {:.2} |",
            r.rate(mib),
            r.rate(mib) / slower,
            r.cpu / r.runs as f64 / gib
        );
    };
    row(
        "prefetch: download + sha256 + md5 + fsync + into the pool",
        &ours,
    );
    row("the same without md5 (its share of the cost)", &sha_only);
    row("`curl -o /dev/null`", &curl);
    row("`openssl dgst -sha256` of the served file", &openssl);
    row(
        "same work by tools: `curl | tee >(openssl md5) >(openssl sha256) > file; sync`",
        &tools,
    );
}

/// Best wall time over the runs, and the CPU time they took in all.
#[derive(Default)]
struct Run {
    best: Option<Duration>,
    cpu: f64,
    runs: usize,
}

impl Run {
    fn add(&mut self, wall: Duration, cpu: f64) {
        self.best = Some(self.best.map_or(wall, |b| b.min(wall)));
        self.cpu += cpu;
        self.runs += 1;
    }

    fn rate(&self, mib: u64) -> f64 {
        mib as f64 / self.best.expect("ran").as_secs_f64()
    }
}

/// Runs `f` (which starts child processes) `n` times.
fn timed(n: usize, mut f: impl FnMut()) -> Run {
    let mut run = Run::default();
    for _ in 0..n {
        let (t, cpu) = (Instant::now(), cpu_seconds(libc::RUSAGE_CHILDREN));
        f();
        run.add(t.elapsed(), cpu_seconds(libc::RUSAGE_CHILDREN) - cpu);
    }
    run
}

/// User plus system CPU seconds of this process (all threads) or of its
/// waited-for children.
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid start.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// One core's md5 in MiB/s: `openssl speed -evp md5`'s 16 KiB column.
fn openssl_md5_rate() -> f64 {
    let out = Command::new("openssl")
        .args(["speed", "-seconds", "3", "-bytes", "16384", "-evp", "md5"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("md5"))
        .unwrap_or_else(|| panic!("no md5 line in: {text}"));
    let kbytes: f64 = line
        .split_whitespace()
        .last()
        .and_then(|v| v.trim_end_matches('k').parse().ok())
        .expect("a rate in 1000s of bytes per second");
    kbytes * 1000.0 / (1 << 20) as f64
}

/// A prefetch with and without md5 of the same object, from RGW and from
/// nginx over http, against `curl -o /dev/null` and one core's md5.
async fn md5_cost(mib: u64) {
    use drsd::stores::{HttpClient, HttpConfig};
    let config = S3Config::from_env().expect("AWS_ENDPOINT_URL: run under tests/with-servers.sh");
    let client = S3Client::new(config.clone(), S3Credentials::from_env().unwrap()).unwrap();
    let www = std::env::var("DRSD_TEST_WWW").expect("run under tests/with-servers.sh");
    let base = std::env::var("DRSD_TEST_HTTP_URL").unwrap();
    let served = std::path::Path::new(&www).join("bench-md5.bin");
    random_file(&served, mib);
    let bucket = format!("bench-md5-{}", std::process::id());
    client.create_bucket(&bucket).await.unwrap();
    let meta = client
        .put_multipart(&bucket, "object.bin", &served, 64 << 20, &[])
        .await
        .unwrap();
    let http = HttpClient::new(HttpConfig::from_env().unwrap()).unwrap();
    let url = url::Url::parse(&format!("{base}/bench-md5.bin")).unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let pool = Arc::new(Pool::open(&dir.path().join("pool"), None).unwrap());
    let md5_core = openssl_md5_rate();
    println!("### What md5 costs a prefetch of {mib} MiB, best of 3\n");
    println!("One core's md5 (`openssl speed -evp md5`, 16 KiB blocks): {md5_core:.0} MiB/s\n");
    println!("| source | `curl -o /dev/null` MiB/s | `curl \\| openssl dgst -sha256` MiB/s | prefetch, sha256 only | / curl | / curl + sha256 | prefetch, sha256 + md5 | / one core's md5 |");
    println!("|---|---|---|---|---|---|---|---|");
    let sources = [
        (
            "Ceph RGW",
            presign(&config, &bucket, "object.bin"),
            Origin::S3 {
                client: &client,
                bucket: &bucket,
                key: "object.bin",
            },
        ),
        (
            "nginx, http",
            url.to_string(),
            Origin::Http {
                client: &http,
                url: &url,
                headers: &[],
            },
        ),
    ];
    for (name, plain_url, origin) in sources {
        let curl = timed(3, || {
            let ok = Command::new("curl")
                .args(["-sf", "-o", "/dev/null", &plain_url])
                .status()
                .unwrap()
                .success();
            assert!(ok, "curl failed");
        });
        // The same download hashed by the fastest tools here, nothing kept:
        // what two cores shared with the server do for download + sha256.
        let hashed = timed(3, || {
            let script = format!(
                "set -o pipefail; curl -sf '{plain_url}' | openssl dgst -sha256 >/dev/null"
            );
            let ok = Command::new("bash")
                .args(["-c", &script])
                .status()
                .unwrap()
                .success();
            assert!(ok, "curl | openssl failed");
        });
        let mut runs = [Run::default(), Run::default()];
        for _ in 0..3 {
            for (md5, run) in [false, true].into_iter().zip(runs.iter_mut()) {
                let req = Fetch {
                    origin,
                    size: meta.size,
                    etag: None,
                    last_modified: None,
                    expect: None,
                    md5,
                    part_sizes: &[],
                };
                let (t, cpu) = (Instant::now(), cpu_seconds(libc::RUSAGE_SELF));
                let got = fetch_into_pool(pool.clone(), req, FetchOptions::default(), &|_| {})
                    .await
                    .unwrap();
                run.add(t.elapsed(), cpu_seconds(libc::RUSAGE_SELF) - cpu);
                pool.delete(&got.put.oid).unwrap();
            }
        }
        let [plain, with_md5] = runs;
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {:.2}× | {:.2}× | {:.0} | {:.2}× |",
            curl.rate(mib),
            hashed.rate(mib),
            plain.rate(mib),
            plain.rate(mib) / curl.rate(mib),
            plain.rate(mib) / hashed.rate(mib),
            with_md5.rate(mib),
            with_md5.rate(mib) / md5_core
        );
    }
    let _ = std::fs::remove_file(&served);
    let _ = client.delete(&bucket, "object.bin").await;
}

/// `--proof`: see the module's notes.
async fn proof_cost(mib: u64) {
    use drsd::pool::Oid;
    use drsd::remote::{presence, Local, Presence, Proof};
    use drsd::stores::ObjectLayout;
    let config = S3Config::from_env().expect("AWS_ENDPOINT_URL: run under tests/with-servers.sh");
    let client = S3Client::new(config, S3Credentials::from_env().unwrap()).unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let src = dir.path().join("object.bin");
    random_file(&src, mib);
    let oid = {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        std::io::copy(&mut std::fs::File::open(&src).unwrap(), &mut hash).unwrap();
        Oid::from_digest(hash.finalize().into())
    };
    let size = mib << 20;
    let part = 64u64 << 20;
    client.create_bucket("proof").await.unwrap();
    let layout = ObjectLayout::parse("s3://proof/lfs").unwrap();
    let key = layout.key(&oid);
    let mut upload = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        client
            .put_multipart("proof", &key, &src, part, &[])
            .await
            .unwrap();
        upload = upload.min(t.elapsed());
    }
    let pool = Arc::new(Pool::open(&dir.path().join("pool"), None).unwrap());
    let mut read = Duration::MAX;
    for _ in 0..3 {
        let req = Fetch {
            origin: Origin::S3 {
                client: &client,
                bucket: "proof",
                key: &key,
            },
            size,
            etag: None,
            last_modified: None,
            expect: Some(oid),
            md5: false,
            part_sizes: &[],
        };
        let opts = FetchOptions {
            read_soon: true,
            ..FetchOptions::default()
        };
        let t = Instant::now();
        fetch_into_pool(pool.clone(), req, opts, &|_| {})
            .await
            .unwrap();
        read = read.min(t.elapsed());
        pool.delete(&oid).unwrap();
    }
    let mut etag = Duration::MAX;
    for _ in 0..3 {
        let local = Local::File(std::fs::File::open(&src).unwrap(), size, src.clone());
        let t = Instant::now();
        let got = presence(&client, &layout, oid, size, Some(local), part)
            .await
            .unwrap();
        etag = etag.min(t.elapsed());
        assert!(matches!(got, Presence::Proven(Proof::Parts, _)), "{got:?}");
    }
    let mut head = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        client.head("proof", &key).await.unwrap().unwrap();
        head = head.min(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("### Proving a {mib} MiB object is in an S3 object remote (Ceph RGW on loopback), best of 3\n");
    println!("| what | ms | / the upload |");
    println!("|---|---|---|");
    println!("| upload (multipart, 64 MiB parts): what a push does when it cannot prove the key | {:.0} | 1.00× |", ms(upload));
    for (what, d) in [
        ("proof by a read: the key read range-parallel into the pool and its sha256 checked (no bytes here)", read),
        ("proof by the store's MD5: its multipart ETag against the parts' md5s of the bytes here", etag),
        ("proof by a recorded ETag: one HEAD (the key sent from here)", head),
    ] {
        println!("| {what} | {:.0} | {:.2}× |", ms(d), d.as_secs_f64() / upload.as_secs_f64());
    }
}
