//! A plain HTTP/1.1 server that lies on demand, for the cases no real
//! server does when asked: it ignores `Range` or `If-Match`, sends another
//! range or total than asked, changes `Last-Modified` between a GET and a
//! HEAD, states an absurd `Content-Length`, or breaks a body off. Minimal:
//! one request per connection (`Connection: close`), GET and HEAD only.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The object served, and the lies told about it. Change it between
/// requests through [`Liar::lies`].
#[derive(Debug, Clone, Default)]
pub struct Lies {
    /// Answer every GET with 200 and the whole body, ignoring `Range`.
    pub ignore_range: bool,
    /// Serve GETs this other version (ETag, bytes), ignoring `If-Match`.
    pub other_version: Option<(String, Vec<u8>)>,
    /// Send the bytes and `Content-Range` of the range asked, moved this
    /// many bytes later, for ranges that do not start at 0.
    pub shift_range: u64,
    /// State this total in `Content-Range` instead of the size.
    pub total: Option<u64>,
    /// The `Last-Modified` of HEAD answers, when not the GETs' one.
    pub head_last_modified: Option<String>,
    /// The `Content-Length` of HEAD answers, when not the size.
    pub head_length: Option<String>,
    /// Close the connection after this many body bytes of a range that
    /// does not start at 0.
    pub break_after: Option<usize>,
}

/// A running lying server; stops when the test process ends.
pub struct Liar {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

struct State {
    body: Vec<u8>,
    etag: String,
    last_modified: String,
    lies: Lies,
    requests: Vec<String>,
}

impl Liar {
    /// Serves `body` with `etag` (unquoted) and `last_modified`.
    pub fn start(body: Vec<u8>, etag: &str, last_modified: &str) -> Liar {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            body,
            etag: etag.to_string(),
            last_modified: last_modified.to_string(),
            lies: Lies::default(),
            requests: Vec::new(),
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = answer(stream, &state);
                });
            }
        });
        Liar { port, state }
    }

    /// `http://127.0.0.1:PORT/rel`.
    pub fn url(&self, rel: &str) -> String {
        format!("http://127.0.0.1:{}/{rel}", self.port)
    }

    /// Sets what it lies about from now on.
    pub fn lies(&self, lies: Lies) {
        self.state.lock().unwrap().lies = lies;
    }

    /// The request lines with their `Range` so far (`GET bytes=0-9`, `HEAD -`).
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }
}

fn answer(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let method = line.split_whitespace().next().unwrap_or("").to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("range") {
                range = parse_range(value.trim());
            }
        }
    }
    let (head, body) = {
        let mut s = state.lock().unwrap();
        let shown = range.map_or("-".into(), |(a, b)| format!("bytes={a}-{b}"));
        s.requests.push(format!("{method} {shown}"));
        respond(&s, &method, range)
    };
    let mut out = stream;
    out.write_all(head.as_bytes())?;
    out.write_all(&body)?;
    out.flush()
}

/// `bytes=FIRST-LAST`.
fn parse_range(value: &str) -> Option<(u64, u64)> {
    let (a, b) = value.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The status line and headers, and the body to send.
fn respond(s: &State, method: &str, range: Option<(u64, u64)>) -> (String, Vec<u8>) {
    let lies = &s.lies;
    let (etag, body) = match &lies.other_version {
        Some((etag, body)) if method == "GET" => (etag.clone(), body.clone()),
        _ => (s.etag.clone(), s.body.clone()),
    };
    let size = body.len() as u64;
    let mut headers = vec![format!("ETag: \"{etag}\"")];
    if method == "HEAD" {
        let lm = lies.head_last_modified.as_ref().unwrap_or(&s.last_modified);
        let len = lies.head_length.clone().unwrap_or(size.to_string());
        headers.push(format!("Last-Modified: {lm}"));
        headers.push(format!("Content-Length: {len}"));
        return (head("200 OK", &headers), Vec::new());
    }
    headers.push(format!("Last-Modified: {}", s.last_modified));
    let Some((first, last)) = range.filter(|_| !lies.ignore_range) else {
        headers.push(format!("Content-Length: {size}"));
        return (head("200 OK", &headers), body);
    };
    let shift = if first > 0 { lies.shift_range } else { 0 };
    let (first, last) = (first + shift, (last + shift).min(size - 1));
    let total = lies.total.unwrap_or(size);
    let mut part = body[first as usize..=last as usize].to_vec();
    headers.push(format!("Content-Range: bytes {first}-{last}/{total}"));
    if let Some(n) = lies.break_after.filter(|_| first > 0) {
        // Chunked, so the cut shows as a short body, not a framing error.
        part.truncate(n);
        headers.push("Transfer-Encoding: chunked".into());
        let mut chunked = format!("{:x}\r\n", part.len()).into_bytes();
        chunked.extend_from_slice(&part);
        chunked.extend_from_slice(b"\r\n");
        return (head("206 Partial Content", &headers), chunked);
    }
    headers.push(format!("Content-Length: {}", part.len()));
    (head("206 Partial Content", &headers), part)
}

fn head(status: &str, headers: &[String]) -> String {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text
}
