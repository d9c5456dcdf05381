//! Plain HTTP(S) objects: a HEAD for what the server says about an object
//! and conditional, ranged GETs, with the same bounded retries as S3.
//!
//! Extra trusted roots come from the PEM file named by the `ca_file`
//! setting, `DRSD_CA_FILE` (a site's own CA, or a test server's
//! self-signed certificate). URLs in
//! errors and logs are shown without their query string: a signed URL's
//! query is a secret.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};

use super::transport::{
    chain, head_size, header, ranged_if, send_retrying, transport, with_secret_headers, Retry, Sent,
};
use super::{checksum, ObjectMeta, ObjectUrl, RemoteError};
use crate::settings::{Key, Settings, SettingsError};

/// The environment variable naming a PEM file of extra trusted roots
/// (the `ca_file` setting).
pub const CA_FILE_ENV: &str = "DRSD_CA_FILE";

#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub retry: Retry,
    pub timeout: Duration,
    /// A PEM file whose certificates are trusted besides the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for HttpConfig {
    /// Default retries and timeout, the system's roots alone.
    fn default() -> HttpConfig {
        HttpConfig {
            retry: Retry::default(),
            timeout: Duration::from_secs(60),
            ca_file: None,
        }
    }
}

impl HttpConfig {
    /// Default retries and timeout; the `ca_file` setting when set.
    pub fn from_settings(settings: &Settings) -> HttpConfig {
        HttpConfig {
            ca_file: settings.path(Key::CaFile).map(PathBuf::from),
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
    http: reqwest::Client,
}

impl HttpClient {
    pub fn new(config: HttpConfig) -> Result<HttpClient, RemoteError> {
        let http = client_builder(&config)?
            .build()
            .map_err(|e| RemoteError::Protocol {
                op: "configure",
                object: "the HTTPS client".into(),
                why: chain(&e),
            })?;
        Ok(HttpClient {
            retry: config.retry,
            http,
        })
    }

    /// What the server says about the object, or `None` on 404 / 410.
    /// A weak ETag keeps its `W/` prefix (`W/abc`): it is not an identity.
    pub async fn head(&self, url: &url::Url) -> Result<Option<ObjectMeta>, RemoteError> {
        self.head_with(url, &[]).await
    }

    /// [`HttpClient::head`] with extra request headers (a DRS access
    /// URL's), sent as secrets: nothing prints their values.
    pub async fn head_with(
        &self,
        url: &url::Url,
        headers: &[(String, String)],
    ) -> Result<Option<ObjectMeta>, RemoteError> {
        let object = shown(url);
        let gone = [StatusCode::NOT_FOUND, StatusCode::GONE];
        let resp = self
            .send("HEAD", &object, &gone, || {
                with_secret_headers(self.http.head(url.clone()), headers)
            })
            .await?;
        if gone.contains(&resp.status()) {
            return Ok(None);
        }
        meta(&resp, &object).map(Some)
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
    /// [`HttpClient::head_with`].
    pub async fn get_if_with(
        &self,
        url: &url::Url,
        range: Option<Range<u64>>,
        etag: Option<&str>,
        headers: &[(String, String)],
    ) -> Result<Response, RemoteError> {
        let object = shown(url);
        self.send("GET", &object, &[], || {
            let req = with_secret_headers(self.http.get(url.clone()), headers);
            ranged_if(req, range.as_ref(), etag)
        })
        .await
    }

    /// Sends with bounded retries (5xx, 429, 408, timeouts, refused
    /// connections). Success and the statuses in `accept` come back as
    /// responses; anything else is an error naming `object`.
    async fn send(
        &self,
        op: &'static str,
        object: &str,
        accept: &[StatusCode],
        make: impl Fn() -> RequestBuilder,
    ) -> Result<Response, RemoteError> {
        match send_retrying(self.retry, accept, make).await {
            Sent::Answered(resp) => Ok(resp),
            Sent::Refused { resp, attempt } => {
                Err(status_error(op, object, attempt, resp.status()))
            }
            Sent::Failed { error, attempt } => Err(transport(op, object, attempt, &error)),
        }
    }
}

/// What every plain-HTTPS client starts from (this one, DRS and Indexd):
/// connect and read timeouts, and the extra roots of `DRSD_CA_FILE`.
pub(super) fn client_builder(config: &HttpConfig) -> Result<reqwest::ClientBuilder, RemoteError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(config.timeout);
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
    use crate::remote::Permanence;

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
