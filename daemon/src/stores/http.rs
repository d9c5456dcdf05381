//! Plain HTTP(S) objects: a HEAD for what the server says about an object
//! and conditional, ranged GETs, with the same bounded retries as S3.
//!
//! Extra trusted roots come from the PEM file named by the `ca_file`
//! setting, `DRSD_CA_FILE` (a site's own CA, or a test server's
//! self-signed certificate). URLs in
//! errors and logs are shown without their query string: a signed URL's
//! query is a secret.
//!
//! Redirects are followed here, not by reqwest: a DRS access URL's
//! headers (`X-Api-Key`, a bearer) are meant for its own origin, and
//! reqwest drops only `Authorization`, `Cookie` and the like when a
//! redirect leaves the host, never a custom header. So each hop is asked
//! anew: the headers go only while the chain is still on the first URL's
//! origin (scheme, host, port) and never again once it left it, and no
//! request carries a `Referer` (it would hand the signed URL, query and
//! all, to the next host). Cross-origin redirects are followed, not
//! refused: presigned S3 URLs may redirect to a regional endpoint, and a
//! DRS server's URL may send to a signed one in a cloud store; the target
//! carries its own signature in its own query.
//!
//! A HEAD (what add-url and the end of a download in ranges ask) must be
//! answered in full within the `metadata_timeout` setting, retries and
//! redirects included: the read timeout alone lets a server trickling a
//! byte a second hold it forever. A GET's bytes keep the read timeout only:
//! a 1 TiB object takes what it takes.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};

use super::transport::{
    chain, head_size, header, ranged_if, send_retrying, transport, with_secret_headers, within,
    Retry, Sent,
};
use super::{checksum, ObjectMeta, ObjectUrl, RemoteError};
use crate::settings::env::CA_FILE_ENV;
use crate::settings::{Key, Settings, SettingsError};

/// The `metadata_timeout` default: far above what a healthy server needs
/// for a JSON answer or a HEAD, short enough that a stalled one is named
/// while the user still waits.
pub const DEFAULT_METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many redirects a request follows (reqwest's own bound).
const MAX_REDIRECTS: usize = 10;

#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub retry: Retry,
    /// The most one read may wait: the bound of a download's stream.
    pub timeout: Duration,
    /// The most a metadata request (DRS, Indexd, a HEAD) may take in all,
    /// from its first byte sent to its answer's last byte read, retries
    /// and redirects included.
    pub metadata_timeout: Duration,
    /// A PEM file whose certificates are trusted besides the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for HttpConfig {
    /// Default retries and timeouts, the system's roots alone.
    fn default() -> HttpConfig {
        HttpConfig {
            retry: Retry::default(),
            timeout: Duration::from_secs(60),
            metadata_timeout: DEFAULT_METADATA_TIMEOUT,
            ca_file: None,
        }
    }
}

impl HttpConfig {
    /// Default retries and read timeout; the `ca_file` and
    /// `metadata_timeout` settings when set.
    pub fn from_settings(settings: &Settings) -> HttpConfig {
        HttpConfig {
            ca_file: settings.path(Key::CaFile).map(PathBuf::from),
            metadata_timeout: settings
                .secs(Key::MetadataTimeout)
                .unwrap_or(DEFAULT_METADATA_TIMEOUT),
            ..HttpConfig::default()
        }
    }

    /// [`HttpConfig::from_settings`] over the environment alone.
    pub fn from_env() -> Result<HttpConfig, SettingsError> {
        Ok(HttpConfig::from_settings(&Settings::from_env()?))
    }
}

/// A client for `https://` and `http://` object URLs.
pub struct HttpClient {
    retry: Retry,
    metadata_timeout: Duration,
    http: reqwest::Client,
}

impl HttpClient {
    pub fn new(config: HttpConfig) -> Result<HttpClient, RemoteError> {
        // Redirects are followed by `send`, hop by hop (see the module's
        // notes): reqwest would carry a custom header to any host.
        let http = client_builder(&config)?
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| RemoteError::Protocol {
                op: "configure",
                object: "the HTTPS client".into(),
                why: chain(&e),
            })?;
        Ok(HttpClient {
            retry: config.retry,
            metadata_timeout: config.metadata_timeout,
            http,
        })
    }

    /// What the server says about the object, or `None` on 404 / 410.
    /// A weak ETag keeps its `W/` prefix (`W/abc`): it is not an identity.
    pub async fn head(&self, url: &url::Url) -> Result<Option<ObjectMeta>, RemoteError> {
        self.head_with(url, &[]).await
    }

    /// [`HttpClient::head`] with extra request headers (a DRS access
    /// URL's), sent as secrets: nothing prints their values, and they go
    /// to the URL's own origin only. Bounded by `metadata_timeout` in all.
    pub async fn head_with(
        &self,
        url: &url::Url,
        headers: &[(String, String)],
    ) -> Result<Option<ObjectMeta>, RemoteError> {
        let object = shown(url);
        let gone = [StatusCode::NOT_FOUND, StatusCode::GONE];
        let asked = async {
            let resp = self
                .send("HEAD", &object, &gone, url, |at, own| {
                    let req = self.http.head(at.clone());
                    if own {
                        with_secret_headers(req, headers)
                    } else {
                        req
                    }
                })
                .await?;
            if gone.contains(&resp.status()) {
                return Ok(None);
            }
            meta(&resp, &object).map(Some)
        };
        within(self.metadata_timeout, "HEAD", &object, asked).await
    }

    /// A GET of the object or of `range` of it, ready to stream; with `etag`,
    /// it fails with HTTP 412 unless the object still has that ETag.
    pub async fn get_if(
        &self,
        url: &url::Url,
        range: Option<Range<u64>>,
        etag: Option<&str>,
    ) -> Result<Response, RemoteError> {
        self.get_if_with(url, range, etag, &[]).await
    }

    /// [`HttpClient::get_if`] with extra request headers, as
    /// [`HttpClient::head_with`]. No overall deadline: the body streams
    /// under the read timeout alone.
    pub async fn get_if_with(
        &self,
        url: &url::Url,
        range: Option<Range<u64>>,
        etag: Option<&str>,
        headers: &[(String, String)],
    ) -> Result<Response, RemoteError> {
        let object = shown(url);
        self.send("GET", &object, &[], url, |at, own| {
            let req = self.http.get(at.clone());
            let req = if own {
                with_secret_headers(req, headers)
            } else {
                req
            };
            // The range and condition are the request's meaning, not a
            // secret: they go to wherever the object is.
            ranged_if(req, range.as_ref(), etag)
        })
        .await
    }

    /// Sends `make(url, own)` with bounded retries (5xx, 429, 408,
    /// timeouts, refused connections), following redirects hop by hop:
    /// `own` is true while every URL so far is on `url`'s origin, and the
    /// caller adds its secret headers only then. Success and the statuses
    /// in `accept` come back as responses; anything else is an error
    /// naming `object`.
    async fn send(
        &self,
        op: &'static str,
        object: &str,
        accept: &[StatusCode],
        url: &url::Url,
        make: impl Fn(&url::Url, bool) -> RequestBuilder,
    ) -> Result<Response, RemoteError> {
        let mut accepted = accept.to_vec();
        accepted.extend(REDIRECTS);
        let mut at = url.clone();
        let mut own = true;
        for _hop in 0..=MAX_REDIRECTS {
            let resp = match send_retrying(self.retry, &accepted, || make(&at, own)).await {
                Sent::Answered(resp) => resp,
                Sent::Refused { resp, attempt } => {
                    return Err(status_error(op, object, attempt, resp.status()))
                }
                Sent::Failed { error, attempt } => {
                    return Err(transport(op, object, attempt, &error))
                }
            };
            if !REDIRECTS.contains(&resp.status()) || accept.contains(&resp.status()) {
                return Ok(resp);
            }
            at = next_hop(&resp, &at).map_err(|why| RemoteError::Redirect {
                op,
                object: object.into(),
                why: why.to_string(),
            })?;
            // Once the chain left the first origin, nothing it sends back
            // there gets the headers either: the other host chose that URL.
            own = own && at.origin() == url.origin();
        }
        Err(RemoteError::Redirect {
            op,
            object: object.into(),
            why: format!(
                "more than {MAX_REDIRECTS} redirects (the last to {}): a redirect loop?",
                shown(&at)
            ),
        })
    }
}

/// The statuses `send` follows.
const REDIRECTS: [StatusCode; 5] = [
    StatusCode::MOVED_PERMANENTLY,
    StatusCode::FOUND,
    StatusCode::SEE_OTHER,
    StatusCode::TEMPORARY_REDIRECT,
    StatusCode::PERMANENT_REDIRECT,
];

/// Why a redirect cannot be followed: the `why` of
/// [`RemoteError::Redirect`]. No URL's query is in it.
#[derive(Debug, thiserror::Error)]
enum Unfollowed {
    #[error("HTTP {status} without a Location to follow")]
    NoLocation { status: u16 },
    #[error("HTTP {status} to a Location that is no URL ({error})")]
    NotAUrl { status: u16, error: url::ParseError },
    #[error("HTTP {status} to a {scheme}: URL, which drsd does not follow")]
    Scheme { status: u16, scheme: String },
}

/// Where a redirect from `at` sends: its `Location`, relative to `at`,
/// with its own query only (a relative one without a query gets none of
/// `at`'s), `http` or `https`. Errors show no URL's query.
fn next_hop(resp: &Response, at: &url::Url) -> Result<url::Url, Unfollowed> {
    let status = resp.status().as_u16();
    let location = header(resp, "location").ok_or(Unfollowed::NoLocation { status })?;
    let mut next = at
        .join(location.trim())
        .map_err(|error| Unfollowed::NotAUrl { status, error })?;
    if !matches!(next.scheme(), "http" | "https") {
        return Err(Unfollowed::Scheme {
            status,
            scheme: next.scheme().to_string(),
        });
    }
    next.set_fragment(None);
    Ok(next)
}

/// What every plain-HTTPS client starts from (this one, DRS and Indexd):
/// connect and read timeouts, the extra roots of `DRSD_CA_FILE`, and no
/// `Referer` ever: on a redirect it would hand the whole URL, a signed
/// query included, to the next host.
pub(super) fn client_builder(config: &HttpConfig) -> Result<reqwest::ClientBuilder, RemoteError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(config.timeout)
        .referer(false);
    if let Some(path) = &config.ca_file {
        for cert in read_roots(path)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

/// The URL as errors and logs may show it: no query string, no user info.
pub fn shown(url: &url::Url) -> String {
    ObjectUrl::Https(url.clone()).to_string()
}

fn read_roots(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, RemoteError> {
    let bad = |why: String| RemoteError::Credentials {
        path: path.to_path_buf(),
        why: format!("{why} (named by {CA_FILE_ENV})"),
    };
    // Extra roots decide which servers drsd trusts: only a file no other
    // user could have written (`trusted_file`).
    let pem = crate::trusted_file::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| bad(format!("not PEM certificates: {}", chain(&e))))?;
    if certs.is_empty() {
        return Err(bad("holds no certificate".into()));
    }
    Ok(certs)
}

fn status_error(op: &'static str, object: &str, attempt: u32, status: StatusCode) -> RemoteError {
    let tries = if attempt > 1 {
        format!(" (after {attempt} attempts)")
    } else {
        String::new()
    };
    if matches!(status, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED) {
        return RemoteError::Auth {
            op,
            object: object.into(),
            status: status.as_u16(),
            code: tries,
            source_: "none (a plain HTTPS URL; a signed URL carries its own)".into(),
        };
    }
    RemoteError::Http {
        op,
        object: object.into(),
        status: status.as_u16(),
        code: String::new(),
        tries,
    }
}

/// The ETag as sent, quotes removed; a weak one as `W/value`.
fn etag_of(resp: &Response) -> Option<String> {
    let raw = header(resp, "etag")?;
    let raw = raw.trim();
    let (weak, tag) = match raw.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let tag = tag.trim_matches('"');
    if tag.is_empty() {
        return None;
    }
    Some(if weak {
        format!("W/{tag}")
    } else {
        tag.to_string()
    })
}

fn meta(resp: &Response, object: &str) -> Result<ObjectMeta, RemoteError> {
    let size = head_size(resp, "HEAD", object)?;
    Ok(ObjectMeta {
        size,
        etag: etag_of(resp),
        last_modified: header(resp, "last-modified"),
        version_id: None,
        sha256: checksum::content_sha256(resp.headers()),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::settings::env::METADATA_TIMEOUT_ENV;
    use crate::stores::Permanence;

    #[test]
    fn shown_urls_lose_their_query_and_user() {
        let url = url::Url::parse("https://u:pw@h:8443/a/b.bam?X-Amz-Signature=secret").unwrap();
        assert_eq!(shown(&url), "https://h:8443/a/b.bam");
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("none.pem");
        let junk = tmp.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        for path in [missing, junk] {
            let config = HttpConfig {
                ca_file: Some(path.clone()),
                ..HttpConfig::default()
            };
            let err = HttpClient::new(config).err().expect("refused").to_string();
            assert!(
                err.contains(&path.display().to_string()) && err.contains(CA_FILE_ENV),
                "{err}"
            );
        }
    }

    /// Extra roots decide which servers are trusted: a CA file another user
    /// could write is refused, naming it, its mode and the chmod, before it
    /// is parsed. Not root, the another-user half is skipped.
    #[test]
    fn a_ca_file_another_user_could_change_is_refused_naming_it() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("site-ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let err = |mode: u32| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let config = HttpConfig {
                ca_file: Some(path.clone()),
                ..HttpConfig::default()
            };
            HttpClient::new(config).err().expect("refused").to_string()
        };
        let text = err(0o666);
        assert!(
            text.contains(&path.display().to_string())
                && text.contains("mode 666")
                && text.contains(&format!("chmod go-w {}", path.display())),
            "{text}"
        );
        // Only its owner may write it: past the check, read (and holding
        // no certificate).
        let text = err(0o644);
        assert!(
            text.contains("certificate") && !text.contains("go-w"),
            "{text}"
        );
        if drsd_proto::paths::current_uid() == 0 {
            std::os::unix::fs::lchown(&path, Some(65534), None).unwrap();
            let text = err(0o644);
            assert!(text.contains("owned by uid 65534"), "{text}");
        } else {
            eprintln!("not root: the another-user half is skipped");
        }
    }

    /// A server on loopback that answers every connection with `reply`
    /// (after reading the request's head) and counts the connections.
    async fn canned(reply: &'static [u8]) -> (u16, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    // A TLS ClientHello has no blank line: answer it as is.
                    if head.first() == Some(&0x16) {
                        break;
                    }
                }
                let _ = conn.write_all(reply).await;
                let _ = conn.shutdown().await;
            }
        });
        (port, count)
    }

    fn patient() -> HttpClient {
        HttpClient::new(HttpConfig {
            retry: Retry {
                attempts: 4,
                first_delay: Duration::from_millis(1),
            },
            ..HttpConfig::default()
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_404_is_asked_once_and_is_permanent() {
        let (port, count) =
            canned(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        let url = url::Url::parse(&format!("http://127.0.0.1:{port}/x.bam")).unwrap();
        let err = patient().get_if(&url, Some(0..10), None).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Permanent, "{err}");
        assert_eq!(count.load(Ordering::SeqCst), 1, "{err}");
    }

    #[tokio::test]
    async fn a_503_is_asked_again_up_to_the_limit() {
        let (port, count) =
            canned(b"HTTP/1.1 503 Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        let url = url::Url::parse(&format!("http://127.0.0.1:{port}/x.bam")).unwrap();
        let err = patient().get_if(&url, Some(0..10), None).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Transient, "{err}");
        assert_eq!(count.load(Ordering::SeqCst), 4, "{err}");
    }

    #[tokio::test]
    async fn tls_spoken_to_a_plain_http_port_is_tried_once() {
        let (port, count) = canned(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        let url = url::Url::parse(&format!("https://127.0.0.1:{port}/x.bam")).unwrap();
        let err = patient().head(&url).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Permanent, "{err}");
        assert_eq!(count.load(Ordering::SeqCst), 1, "{err}");
        assert!(err.to_string().contains("after 1 attempts"), "{err}");
    }

    #[tokio::test]
    async fn a_host_name_that_does_not_exist_is_tried_once() {
        // `.invalid` never resolves (RFC 2606).
        let url = url::Url::parse("http://no-such-host.invalid/x.bam?sig=secret").unwrap();
        let err = patient().head(&url).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Permanent, "{err}");
        let text = err.to_string();
        assert!(text.contains("after 1 attempts"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient() {
        // Port 9 (discard) on loopback: nothing listens there in the test machines.
        let url = url::Url::parse("http://127.0.0.1:9/x.bam").unwrap();
        let err = patient().head(&url).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Transient, "{err}");
        assert!(err.to_string().contains("after 4 attempts"), "{err}");
    }

    /// A server on `ip` that keeps each request's head (request line and
    /// headers, lower-cased) and answers it with `reply(head)`.
    struct Recorder {
        base: String,
        heads: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Recorder {
        async fn start(
            ip: &str,
            reply: impl Fn(&str) -> String + Send + Sync + 'static,
        ) -> Recorder {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (kept, reply) = (heads.clone(), Arc::new(reply));
            tokio::spawn(async move {
                while let Ok((mut conn, _)) = listener.accept().await {
                    let (kept, reply) = (kept.clone(), reply.clone());
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        let head = String::from_utf8_lossy(&head).to_lowercase();
                        kept.lock().unwrap().push(head.clone());
                        let _ = conn.write_all(reply(&head).as_bytes()).await;
                        let _ = conn.shutdown().await;
                    });
                }
            });
            Recorder { base, heads }
        }

        fn heads(&self) -> Vec<String> {
            self.heads.lock().unwrap().clone()
        }
    }

    fn redirect_to(location: &str) -> String {
        format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    }

    const OBJECT: &str =
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\netag: \"e1\"\r\nconnection: close\r\n\r\nbytes";

    const SECRETS: [(&str, &str); 2] = [
        ("x-api-key", "k3y-s3cr3t"),
        ("authorization", "Bearer t0k3n"),
    ];

    fn secrets() -> Vec<(String, String)> {
        SECRETS
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// `head` carries none of the first origin's secrets: no header of
    /// [`SECRETS`], no `Referer`, nothing of the first URL's query.
    fn assert_clean(head: &str) {
        for (name, value) in SECRETS {
            assert!(
                !head.contains(name) && !head.contains(&value.to_lowercase()),
                "{head}"
            );
        }
        assert!(!head.contains("referer"), "{head}");
        assert!(!head.contains("s1gnature"), "{head}");
    }

    #[tokio::test]
    async fn a_redirect_to_another_host_drops_the_api_key_the_referer_and_the_query() {
        // 127.0.0.2 is another host than 127.0.0.1 (same loopback).
        let target = Recorder::start("127.0.0.2", |_| OBJECT.to_string()).await;
        let to = format!("{}/bucket/obj.bam?X-Amz-Signature=its-own", target.base);
        let first = Recorder::start("127.0.0.1", move |_| redirect_to(&to)).await;
        let url =
            url::Url::parse(&format!("{}/obj.bam?X-Amz-Signature=s1gnature", first.base)).unwrap();
        let client = patient();
        let meta = client
            .head_with(&url, &secrets())
            .await
            .unwrap()
            .expect("found");
        assert_eq!((meta.size, meta.etag.as_deref()), (5, Some("e1")));
        let resp = client
            .get_if_with(&url, Some(0..5), Some("e1"), &secrets())
            .await
            .unwrap();
        assert_eq!(resp.bytes().await.unwrap().as_ref(), b"bytes");
        let heads = target.heads();
        assert_eq!(heads.len(), 2, "{heads:?}");
        for head in &heads {
            assert_clean(head);
            // Its own query, and what the request means (range, condition).
            assert!(
                head.contains("/bucket/obj.bam?x-amz-signature=its-own "),
                "{head}"
            );
        }
        assert!(
            heads[1].contains("range: bytes=0-4") && heads[1].contains("if-match"),
            "{}",
            heads[1]
        );
        // The first origin got them: they were meant for it.
        for head in first.heads() {
            assert!(head.contains("x-api-key: k3y-s3cr3t"), "{head}");
        }
    }

    #[tokio::test]
    async fn a_redirect_within_the_origin_keeps_the_headers_and_one_back_from_elsewhere_does_not() {
        // first -> first/moved (same origin: kept) -> other -> first/back
        // (the other host chose it: nothing).
        let first_base = Arc::new(std::sync::Mutex::new(String::new()));
        let base = first_base.clone();
        let other = Recorder::start("127.0.0.2", move |_| {
            redirect_to(&format!("{}/back", base.lock().unwrap()))
        })
        .await;
        let to_other = format!("{}/away", other.base);
        let first = Recorder::start("127.0.0.1", move |head| {
            if head.starts_with("head /start") {
                redirect_to("/moved")
            } else if head.starts_with("head /moved") {
                redirect_to(&to_other)
            } else {
                OBJECT.to_string()
            }
        })
        .await;
        *first_base.lock().unwrap() = first.base.clone();
        let url = url::Url::parse(&format!("{}/start?sig=s1gnature", first.base)).unwrap();
        patient()
            .head_with(&url, &secrets())
            .await
            .unwrap()
            .expect("found");
        let heads = first.heads();
        assert_eq!(heads.len(), 3, "{heads:?}");
        assert!(heads[0].contains("x-api-key: k3y-s3cr3t"), "{}", heads[0]);
        assert!(
            heads[1].starts_with("head /moved ") && heads[1].contains("x-api-key: k3y-s3cr3t"),
            "{}",
            heads[1]
        );
        assert!(heads[2].starts_with("head /back "), "{}", heads[2]);
        assert_clean(&heads[2]);
        assert_clean(&other.heads()[0]);
    }

    #[tokio::test]
    async fn a_redirect_to_another_scheme_than_http_is_refused_for_good() {
        let first = Recorder::start("127.0.0.1", |_| redirect_to("file:///etc/passwd")).await;
        let url = url::Url::parse(&format!("{}/x?sig=s1gnature", first.base)).unwrap();
        let err = patient().head(&url).await.unwrap_err();
        assert_eq!(err.permanence(), Permanence::Permanent, "{err}");
        let text = err.to_string();
        assert!(
            text.contains("file: URL") && !text.contains("s1gnature"),
            "{text}"
        );
        assert_eq!(first.heads().len(), 1);
    }

    /// A server that sends `start`, then one byte of `then` every 200 ms,
    /// forever: each read comes well within the read timeout.
    async fn trickling(start: &'static str, then: u8) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
        base
    }

    #[tokio::test]
    async fn a_head_whose_headers_trickle_ends_at_the_metadata_deadline_naming_the_url() {
        let base = trickling("HTTP/1.1 200 OK\r\nx-slow: ", b'a').await;
        let client = HttpClient::new(HttpConfig {
            metadata_timeout: Duration::from_millis(1500),
            ..HttpConfig::default()
        })
        .unwrap();
        let url = url::Url::parse(&format!("{base}/slow.bam?sig=s1gnature")).unwrap();
        let started = std::time::Instant::now();
        let err = client.head(&url).await.unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(4), "{took:?}: {err}");
        assert!(matches!(err, RemoteError::Deadline { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{base}/slow.bam")) && text.contains("1.5 s"),
            "{text}"
        );
        assert!(
            text.contains(METADATA_TIMEOUT_ENV) && !text.contains("s1gnature"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_get_streams_past_the_metadata_deadline_under_the_read_timeout() {
        // Headers at once, then the body a byte per 200 ms: a download,
        // however slow, is not cut by the metadata deadline.
        let base = trickling("HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n", b'x').await;
        let client = HttpClient::new(HttpConfig {
            metadata_timeout: Duration::from_millis(500),
            ..HttpConfig::default()
        })
        .unwrap();
        let url = url::Url::parse(&format!("{base}/big.bam")).unwrap();
        let resp = client.get_if(&url, None, None).await.unwrap();
        assert_eq!(resp.bytes().await.unwrap().as_ref(), b"xxxxxxxxxxxx");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_retried_then_named_without_the_query() {
        let config = HttpConfig {
            retry: Retry {
                attempts: 2,
                first_delay: Duration::from_millis(1),
            },
            ..HttpConfig::default()
        };
        let client = HttpClient::new(config).unwrap();
        // Port 9 (discard) on loopback: nothing listens there in the test machines.
        let url = url::Url::parse("http://127.0.0.1:9/x.bam?sig=secret").unwrap();
        let err = client.head(&url).await.unwrap_err().to_string();
        assert!(err.contains("http://127.0.0.1:9/x.bam"), "{err}");
        assert!(
            err.contains("2 attempts") && !err.contains("secret"),
            "{err}"
        );
    }
}
