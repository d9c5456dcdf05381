//! Secrets stay with the origin they were given for: a signed URL or a DRS
//! access URL whose host answers 302 to a third host, through real
//! `drsctl add-url` and the daemon's prefetch. The third host gets no
//! `Referer` (it would carry the whole signed URL), none of the first
//! URL's query, and none of the headers a DRS server gave for its access
//! URL (`X-Api-Key`): reqwest drops `Authorization` on its own, never a
//! custom header. The redirect is still followed: presigned URLs may
//! redirect to a regional endpoint. Both hosts are in this process, on
//! 127.0.0.1 and 127.0.0.2 (two hosts of the loopback).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use drsd_e2e::drs_server::{AccessSpec, DrsServer, ObjectSpec};
use md5::{Digest, Md5};

use super::add_url::{pointer_text, sha256_hex, World};
use super::foreign::{staged, wait_for};

/// Lower-case, as the heads are kept.
const SIGNATURE: &str = "f00dfeedcafe0123456789abcdef0123456789abcdef0123456789abcdefbead";
const API_KEY: &str = "k3y-of-the-first-origin";

/// A server on `ip` that keeps the head of each request (request line and
/// headers, lower-cased) and answers it with `answer(head)`; one request
/// per connection.
struct Recorder {
    base: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start(ip: &str, answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> Recorder {
        let listener = TcpListener::bind((ip, 0)).expect("bind a loopback address");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (kept, answer) = (heads.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (kept, answer) = (kept.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).to_lowercase();
                    kept.lock().unwrap().push(head.clone());
                    let _ = stream.write_all(&answer(&head));
                });
            }
        });
        Recorder { base, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn redirect(location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// Serves `body` to HEAD and GET (a `Range` honoured), its md5 as ETag.
fn object(body: Vec<u8>) -> impl Fn(&str) -> Vec<u8> + Send + Sync + 'static {
    let etag = hex::encode(Md5::digest(&body));
    move |head| {
        let range = head.lines().find_map(|l| {
            let (a, b) = l.strip_prefix("range: bytes=")?.trim().split_once('-')?;
            Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
        });
        let (status, part, extra) = match range {
            Some((a, b)) => {
                let b = b.min(body.len() - 1);
                let cr = format!("Content-Range: bytes {a}-{b}/{}\r\n", body.len());
                ("206 Partial Content", &body[a..=b], cr)
            }
            None => ("200 OK", &body[..], String::new()),
        };
        let mut out = format!(
            "HTTP/1.1 {status}\r\nETag: \"{etag}\"\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
             Content-Length: {}\r\n{extra}Connection: close\r\n\r\n",
            part.len()
        )
        .into_bytes();
        if head.starts_with("get ") {
            out.extend_from_slice(part);
        }
        out
    }
}

fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Each request the third host got carries nothing of the first origin's.
fn assert_clean(third: &Recorder) {
    let heads = third.heads();
    assert!(heads.iter().any(|h| h.starts_with("head ")), "{heads:?}");
    assert!(heads.iter().any(|h| h.starts_with("get ")), "{heads:?}");
    for head in heads {
        assert!(!head.contains("referer"), "a Referer went on: {head}");
        assert!(!head.contains(SIGNATURE), "the signature went on: {head}");
        assert!(!head.contains("x-api-key"), "the key went on: {head}");
        assert!(!head.contains(API_KEY), "the key went on: {head}");
        assert!(!head.contains("authorization"), "{head}");
        // Its own query, only.
        assert!(head.contains("?x-amz-signature=its-own "), "{head}");
    }
}

#[test]
fn add_url_of_a_signed_url_redirected_to_another_host_gives_it_no_referer_nor_the_signature() {
    let body = content(100_003, 1);
    let third = Recorder::start("127.0.0.2", object(body.clone()));
    let to = format!("{}/regional/reads.bam?X-Amz-Signature=its-own", third.base);
    let first = Recorder::start("127.0.0.1", move |_| redirect(&to));
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let url = format!(
        "{}/reads.bam?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={SIGNATURE}",
        first.base
    );
    world.drsctl_ok(&repo, &["add-url", &url, "reads.bam"]);
    // Read (at add-url or by the prefetch) through the redirect, promoted.
    let want = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the promotion of the redirected object", || {
        staged(&repo, "reads.bam") == want
    });
    assert_clean(&third);
    assert!(first.heads().iter().all(|h| h.contains(SIGNATURE)));
}

#[test]
fn a_drs_access_url_with_an_api_key_redirected_to_another_host_gives_it_neither_key_nor_referer() {
    const HOST: &str = "drs.example.org";
    let server = DrsServer::start();
    std::env::set_var("DRSD_DRS_SERVERS", format!("{HOST}={}", server.base_url()));
    let body = content(200_017, 2);
    let third = Recorder::start("127.0.0.2", object(body.clone()));
    let to = format!("{}/cloud/k.bam?X-Amz-Signature=its-own", third.base);
    let first = Recorder::start("127.0.0.1", move |_| redirect(&to));
    // No sha-256 in the record: add-url HEADs the access URL for an ETag,
    // and the prefetch GETs it, both with the key.
    let mut spec = ObjectSpec::blob("keyed-1", body.clone());
    spec.checksums.retain(|(kind, _)| kind == "md5");
    spec.access = vec![AccessSpec::elsewhere(
        &format!("{}/k.bam?sig={SIGNATURE}", first.base),
        &[&format!("X-Api-Key: {API_KEY}")],
    )];
    server.add_object(spec);
    let world = World::with_prefetch();
    let repo = world.repo("r");
    world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/keyed-1"), "k.bam"],
    );
    let want = pointer_text(&sha256_hex(&body), body.len() as u64);
    wait_for("the promotion of the DRS object", || {
        staged(&repo, "k.bam") == want
    });
    assert_clean(&third);
    // The first origin got the key: it was given for it.
    let heads = first.heads();
    assert!(heads.len() >= 2, "{heads:?}");
    for head in heads {
        assert!(head.contains(&format!("x-api-key: {API_KEY}")), "{head}");
    }
}
