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

/// A server whose HEAD answers at once (a small object, 1,000 bytes) and
/// whose GET sends its headers, then one body byte every 2 s.
fn trickling_get() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"slow-1\"\r\n\
                            Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() || buf[..n].starts_with(b"HEAD") {
                    return;
                }
                while stream.write_all(b"x").is_ok() {
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
        }
    });
    base
}

#[test]
fn add_url_of_a_small_object_whose_get_trickles_ends_at_the_deadline_and_leaves_it_to_the_prefetch()
{
    let base = trickling_get();
    std::env::set_var("DRSD_METADATA_TIMEOUT", "3");
    let world = World::with_prefetch();
    let repo = world.repo("r");
    let url = format!("{base}/small.bin");
    let started = Instant::now();
    let mut child = std::process::Command::new(drsd_e2e::bin("drsctl"))
        .current_dir(&repo)
        .args(["add-url", &url, "small.bin"])
        .envs(world.env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Without the deadline the read goes on a byte every 2 s for 2,000 s.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(40) {
            let _ = child.kill();
            panic!("add-url still held after {:?}", started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    // The HEAD, then the read given 3 s.
    assert!(took < Duration::from_secs(15), "{took:?}: {said}");
    let pointer = std::fs::read_to_string(repo.join("small.bin")).unwrap();
    assert!(pointer.starts_with("version https://git-lfs"), "{pointer}");
    // The failed read is the prefetch job's first try, its reason kept.
    let status = text(&world.drsctl(&repo, &["status"]));
    assert!(
        status.contains("metadata_timeout") && status.contains("small.bin"),
        "{status}"
    );
    eprintln!("add-url ended after {took:?}: {said}\n{status}");
}
