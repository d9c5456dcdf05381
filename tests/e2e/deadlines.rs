//! A DRS server that trickles its answer (a byte every 2 s, each well
//! within the read timeout) does not hold `drsctl add-url` forever: every
//! DRS call has a whole-answer deadline (`DRSD_METADATA_TIMEOUT`, here
//! 3 s), and the error names the server and the deadline. The server is in
//! this process; the daemon reads the variables from this process's
//! environment (one test per process).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use super::add_url::{text, World};

/// A server that answers each request with `start`, then one byte of
/// `then` every 2 s, until the client goes.
fn trickling(start: &'static str, then: u8) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                if stream.write_all(start.as_bytes()).is_err() {
                    return;
                }
                while stream.write_all(&[then]).is_ok() {
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
        }
    });
    base
}

fn add_url_ends_naming_the_server(start: &'static str) {
    const HOST: &str = "slow.example.org";
    let base = trickling(start, b' ');
    std::env::set_var("DRSD_DRS_SERVERS", format!("{HOST}={base}"));
    std::env::set_var("DRSD_METADATA_TIMEOUT", "3");
    let world = World::new();
    let repo = world.repo("r");
    let started = Instant::now();
    let out = world.drsctl(
        &repo,
        &["add-url", &format!("drs://{HOST}/slow-1"), "s.bam"],
    );
    let took = started.elapsed();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    // service-info, then the bulk lookup: each given 3 s.
    assert!(took < Duration::from_secs(15), "{took:?}: {said}");
    assert!(said.contains("drs://slow.example.org/slow-1"), "{said}");
    assert!(said.contains(base.trim_start_matches("http://")), "{said}");
    assert!(
        said.contains("3.0 s") && said.contains("DRSD_METADATA_TIMEOUT"),
        "{said}"
    );
    eprintln!("add-url ended after {took:?}: {said}");
}

#[test]
fn add_url_of_a_drs_id_whose_server_trickles_its_body_ends_at_the_deadline_naming_it() {
    add_url_ends_naming_the_server(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
    );
}

#[test]
fn add_url_of_a_drs_id_whose_server_trickles_its_headers_ends_at_the_deadline_naming_it() {
    add_url_ends_naming_the_server("HTTP/1.1 200 OK\r\nX-Slow: ");
}
