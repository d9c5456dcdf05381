//! Sending one HTTP request to an object store, for both clients (S3 and
//! plain HTTPS): bounded retries with doubling delays for what
//! [`Permanence`] calls transient, conditional and ranged GETs, reading the
//! headers every answer is judged by, and errors that never quote a request
//! URL (a presigned one carries its signature).

use std::ops::Range;
use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};

use super::{Permanence, RemoteError};

/// Bounded retries with doubling delays, for what [`Permanence`] calls
/// transient (5xx, 429, 408, timeouts, refused connections); anything
/// permanent (another 4xx, an unknown host, TLS to a plain port) is final at
/// once.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub first_delay: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 5,
            first_delay: Duration::from_millis(200),
        }
    }
}

/// How a request ended after [`send_retrying`].
pub(super) enum Sent {
    /// A success, or one of the statuses the caller accepts.
    Answered(Response),
    /// Any other status, after `attempt` tries.
    Refused { resp: Response, attempt: u32 },
    /// No answer (connect, timeout, ...), after `attempt` tries.
    Failed { error: reqwest::Error, attempt: u32 },
}

/// Sends `make()` until it is answered, with bounded retries and doubling
/// delays for what [`Permanence`] calls transient; a permanent failure
/// returns at once.
pub(super) async fn send_retrying(
    retry: Retry,
    accept: &[StatusCode],
    make: impl Fn() -> RequestBuilder,
) -> Sent {
    let mut delay = retry.first_delay;
    for attempt in 1..=retry.attempts.max(1) {
        let last = attempt >= retry.attempts;
        match make().send().await {
            Ok(resp) if resp.status().is_success() || accept.contains(&resp.status()) => {
                return Sent::Answered(resp)
            }
            Ok(resp) if retryable(resp.status()) && !last => {}
            Ok(resp) => return Sent::Refused { resp, attempt },
            Err(e) if Permanence::of_transport(&e) == Permanence::Transient && !last => {}
            Err(error) => return Sent::Failed { error, attempt },
        }
        tokio::time::sleep(delay).await;
        delay *= 2;
    }
    unreachable!("the last attempt returns")
}

/// A GET of `range` only (when given), failing with HTTP 412 unless the
/// object still has `etag` (when given).
pub(super) fn ranged_if(
    mut req: RequestBuilder,
    range: Option<&Range<u64>>,
    etag: Option<&str>,
) -> RequestBuilder {
    if let Some(r) = range {
        req = req.header("range", format!("bytes={}-{}", r.start, r.end - 1));
    }
    if let Some(tag) = etag {
        req = req.header("if-match", format!("\"{tag}\""));
    }
    req
}

/// `req` with `headers` (a DRS access URL's: they may carry a bearer
/// token), each value marked sensitive so no `Debug` of the request shows
/// it. A pair that is no header makes the request fail to build, at send.
pub(super) fn with_secret_headers(
    mut req: RequestBuilder,
    headers: &[(String, String)],
) -> RequestBuilder {
    use reqwest::header::{HeaderName, HeaderValue};
    for (name, value) in headers {
        req = match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(mut value)) => {
                value.set_sensitive(true);
                req.header(name, value)
            }
            _ => req.header(name.as_str(), value.as_str()),
        };
    }
    req
}

pub(super) fn with_headers(mut req: RequestBuilder, headers: &[(&str, &str)]) -> RequestBuilder {
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req
}

/// `work` (a metadata request: its retries, redirects and answer), or a
/// [`RemoteError::Deadline`] naming `object` once `deadline` has passed.
/// The read timeout bounds one read; this bounds the whole, so a server
/// trickling its answer a byte at a time cannot hold the caller forever.
pub(super) async fn within<T>(
    deadline: Duration,
    op: &'static str,
    object: &str,
    work: impl std::future::Future<Output = Result<T, RemoteError>>,
) -> Result<T, RemoteError> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(RemoteError::Deadline {
                op,
                object: object.into(),
                deadline,
            })
        })
}

fn retryable(status: StatusCode) -> bool {
    Permanence::of_status(status.as_u16()) == Permanence::Transient
}

/// The error and its causes, without the request URL (it carries the signature).
pub(super) fn chain(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    let mut first = true;
    while let Some(err) = cur {
        let text = if first {
            // reqwest prints "... for url (...)": keep what comes before.
            let t = err.to_string();
            t.split(" for url").next().unwrap_or("").to_string()
        } else {
            err.to_string()
        };
        if !text.is_empty() && !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        first = false;
        cur = err.source();
    }
    out
}

pub(super) fn transport(
    op: &'static str,
    object: &str,
    attempts: u32,
    e: &reqwest::Error,
) -> RemoteError {
    let mut why = chain(e);
    // The host is no secret (the signature is in the query), and a name
    // that did not resolve is only actionable once you know which.
    if let Some(host) = e
        .url()
        .and_then(|u| u.host_str())
        .filter(|_| super::error::is_name_failure(e))
    {
        why.push_str(&format!(" (looking up the host {host})"));
    }
    RemoteError::Transport {
        op,
        object: object.into(),
        attempts,
        why,
        permanence: Permanence::of_transport(e),
    }
}

pub(super) fn header(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

pub(super) fn etag(resp: &Response) -> Option<String> {
    header(resp, "etag")
        .map(|e| e.trim_matches('"').to_string())
        .filter(|e| !e.is_empty())
}

/// The object's size from a HEAD's `Content-Length`: present, a number,
/// and no larger than [`crate::MAX_OBJECT_SIZE`].
pub(super) fn head_size(
    resp: &Response,
    op: &'static str,
    object: &str,
) -> Result<u64, RemoteError> {
    let bad = |why: String| RemoteError::Protocol {
        op,
        object: object.into(),
        why,
    };
    let Some(text) = header(resp, "content-length") else {
        return Err(bad("no Content-Length: the object's size is unknown".into()));
    };
    let size = text
        .trim()
        .parse::<u64>()
        .map_err(|_| bad(format!("Content-Length {text:?} is not a size")))?;
    if size > crate::MAX_OBJECT_SIZE {
        return Err(bad(format!(
            "Content-Length {size} is past the largest object size drsd handles ({} bytes)",
            crate::MAX_OBJECT_SIZE
        )));
    }
    Ok(size)
}
