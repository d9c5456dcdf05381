//! Attacks the daemon already withstood, kept as tests so it goes on
//! withstanding them: hostile JSON, a flood of connections, a server that
//! redirects forever.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

/// Open file descriptors of this process (the in-process daemon's included).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_json_is_refused_and_the_connection_goes_on() {
    let daemon = start().await;
    let mut raw = Raw::connect(&daemon.socket);
    raw.hello();
    // Far past serde_json's recursion limit, well under the line limit:
    // a recursive decoder without a limit would overflow the stack here.
    let depth = 30_000;
    let mut line = b"{\"id\":3,\"method\":\"status\",\"x\":".to_vec();
    line.extend(std::iter::repeat_n(b'[', depth));
    line.extend(std::iter::repeat_n(b']', depth));
    line.extend(b"}\n");
    assert!(line.len() < MAX_REQUEST_LINE);
    raw.send(&line);
    assert_eq!(error_code(&raw.answer()), ErrorCode::BadRequest);
    raw.send(b"{\"id\":4,\"method\":\"status\"}\n");
    let answer = raw.answer();
    assert_eq!(answer.id, Some(4));
    assert!(matches!(answer.body, Body::Result { .. }), "{answer:?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_thousand_connections_come_and_go_without_leaking_a_descriptor() {
    let daemon = start().await;
    let socket = daemon.socket.clone();
    // Warm up: the first status opens what the daemon keeps open anyway.
    daemon.status().await;
    let before = open_fds();
    tokio::task::spawn_blocking(move || {
        for i in 0..12_000 {
            let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            // Some say nothing, some half a line, some hello and go.
            match i % 3 {
                0 => {}
                1 => s.write_all(b"{\"id\":1,\"meth").unwrap(),
                _ => {
                    s.write_all(
                        b"{\"id\":0,\"method\":\"hello\",\"version\":1,\"client\":\"x\"}\n",
                    )
                    .unwrap();
                    let mut byte = [0u8; 1];
                    s.read_exact(&mut byte).unwrap();
                }
            }
        }
    })
    .await
    .unwrap();
    // The daemon closes its ends asynchronously: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds() > before + 8 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        open_fds() <= before + 8,
        "{} descriptors open after the flood, {before} before",
        open_fds()
    );
    assert_eq!(daemon.status().await.pid, std::process::id());
    daemon.stop().await;
}

/// A server answering every request with a redirect to itself; counts them.
fn redirecting_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/loop?X-Amz-Signature=s3cr3t",
        listener.local_addr().unwrap()
    );
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let location = url.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (url, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_ends_in_an_error_naming_the_url_without_its_secret() {
    let (url, count) = redirecting_server();
    let mut config = crate::stores::HttpConfig::default();
    config.retry.attempts = 2;
    let client = crate::stores::HttpClient::new(config).unwrap();
    let err = client
        .head(&url::Url::parse(&url).unwrap())
        .await
        .expect_err("a redirect loop is an error");
    let text = err.to_string();
    assert!(text.contains("/loop"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
    // reqwest follows at most 10 redirects a request; retries are bounded.
    let asked = count.load(Ordering::SeqCst);
    assert!((2..=2 * 11).contains(&asked), "{asked} requests");
}
