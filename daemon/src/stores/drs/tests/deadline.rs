//! Every DRS and Indexd call has a whole-answer deadline (the
//! `metadata_timeout` setting): a server that trickles its headers or its
//! body a byte at a time, each byte well within the read timeout, is given
//! up on when the deadline passes, naming the server and the deadline.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::quick;
use crate::pool::Oid;
use crate::stores::drs::{
    Api, DrsAuth, DrsClient, DrsError, DrsServers, DrsUri, IndexdClient, NetrcFile,
};
use crate::stores::{HttpConfig, Permanence};

/// What the tests allow a call: short, so each test ends in seconds.
const DEADLINE: Duration = Duration::from_millis(1500);

/// A server that answers every request with `start`, then one byte of
/// `then` every 200 ms, forever.
async fn trickling(start: &'static str, then: u8) -> url::Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                if conn.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if conn.write_all(&[then]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url::Url::parse(&base).unwrap()
}

/// Headers at once, then a JSON body that never ends.
const BODY_TRICKLES: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{\"id\":\"";

/// A status line, then headers that never end.
const HEADERS_TRICKLE: &str = "HTTP/1.1 200 OK\r\nx-slow: ";

fn config() -> HttpConfig {
    HttpConfig {
        metadata_timeout: DEADLINE,
        ..quick()
    }
}

/// The error is the deadline's, came in time (`calls` deadlines), and
/// names the server.
fn assert_deadline(err: &DrsError, started: Instant, server: &url::Url, calls: u32) {
    let took = started.elapsed();
    assert!(
        took < DEADLINE * calls + Duration::from_secs(2),
        "{took:?}: {err}"
    );
    assert!(matches!(err, DrsError::Deadline { .. }), "{err}");
    assert_eq!(err.permanence(), Permanence::Transient);
    let text = err.to_string();
    let host = format!("{}:{}", server.host_str().unwrap(), server.port().unwrap());
    assert!(text.contains(&host) && text.contains("1.5 s"), "{text}");
    assert!(
        text.contains(crate::settings::env::METADATA_TIMEOUT_ENV),
        "{text}"
    );
}

async fn drs_lookup(start: &'static str) {
    let base = trickling(start, b'a').await;
    let servers = DrsServers::parse(&format!("dg.TEST={base}")).unwrap();
    let client = DrsClient::new(&config(), servers, DrsAuth::none()).unwrap();
    let uri = DrsUri::parse("drs://dg.TEST:slow").unwrap();
    let started = Instant::now();
    let err = client.object(&uri).await.unwrap_err();
    assert_deadline(&err, started, &base, 1);
    assert!(err.to_string().contains("drs://dg.TEST:slow"), "{err}");
    // The bulk lookup add-url makes: service-info first (once per
    // server), then the POST, each bounded.
    let started = Instant::now();
    let got = client.objects(std::slice::from_ref(&uri)).await;
    assert_deadline(got[0].as_ref().unwrap_err(), started, &base, 2);
}

#[tokio::test]
async fn a_drs_lookup_whose_body_trickles_ends_at_the_deadline_naming_the_server() {
    drs_lookup(BODY_TRICKLES).await;
}

#[tokio::test]
async fn a_drs_lookup_whose_headers_trickle_ends_at_the_deadline_naming_the_server() {
    drs_lookup(HEADERS_TRICKLE).await;
}

#[tokio::test]
async fn an_indexd_lookup_or_registration_that_trickles_ends_at_the_deadline() {
    for start in [BODY_TRICKLES, HEADERS_TRICKLE] {
        let base = trickling(start, b' ').await;
        let client = IndexdClient::with_netrc(
            Api::new(&config()).unwrap(),
            base.clone(),
            NetrcFile::locate(|_| None),
        );
        let started = Instant::now();
        let err = client.by_sha256(Oid::of(b"abc")).await.unwrap_err();
        assert_deadline(&err, started, &base, 1);
        let started = Instant::now();
        let err = client.get("dg.TEST/slow").await.unwrap_err();
        assert_deadline(&err, started, &base, 1);
    }
}
