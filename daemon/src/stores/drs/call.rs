//! One request to a DRS server or Indexd, the one way every call goes out:
//! the server's credential (`auth.rs`), bounded retries of what is
//! transient (`transport::send_retrying`, shared with the object
//! clients), the spec's `202 Accepted` + `Retry-After` waits (each capped,
//! and the total bounded: a server that never gets ready ends as
//! [`DrsError::StillPending`]), one renewal of a Gen3 access token a server
//! refused, and statuses mapped to errors that name what was asked and the
//! server. Answers are read into memory up to a bound: a JSON body is
//! metadata, and a server must not make the daemon hold gigabytes.
//!
//! Redirects are followed only within one origin (scheme, host, port):
//! enough for a server that adds a trailing slash, never a way to carry
//! the user's credentials, or the request, to another host; and no request
//! carries a `Referer` (`http::client_builder`).
//!
//! Each call has a whole-answer deadline, the `metadata_timeout` setting
//! (`Api::deadline`): from its first byte sent to its answer's last byte
//! read, the credential's fetch, retries and redirects included, it must
//! be done by then, or it fails as [`DrsError::Deadline`] naming the
//! server. The read timeout bounds one read only: a server trickling a
//! byte every few seconds would otherwise hold add-url, a prefetch or a
//! push forever. A `202 Accepted` wait is not a stall: the clock starts
//! again with the request that follows it (the waits have their own bound,
//! [`Pending`]).

use std::time::Duration;

use reqwest::{RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use tokio::time::{timeout_at, Instant};

use super::auth::{Credential, DrsAuth};
use super::DrsError;
use crate::stores::transport::{send_retrying, Sent};
use crate::stores::{redact_text, shown_url, HttpConfig, Permanence, Retry};

/// The most of a JSON answer read: a bulk answer of a few hundred objects
/// is a few MiB.
const MAX_BODY: usize = 32 << 20;

/// At most this many redirects, each within the origin it came from.
const MAX_REDIRECTS: usize = 5;

/// A 202 without a `Retry-After` in seconds waits this long.
const DEFAULT_WAIT: Duration = Duration::from_secs(1);

/// A 202 asking for less (`Retry-After: 0`) still waits this long, so a
/// server cannot make the daemon spin.
const MIN_WAIT: Duration = Duration::from_millis(100);

/// The HTTP client of DRS and Indexd calls, shared by every server.
#[derive(Clone)]
pub struct Api {
    pub(super) http: reqwest::Client,
    pub(super) retry: Retry,
    /// The most one call may take, answer read (`metadata_timeout`).
    pub(super) deadline: Duration,
}

impl Api {
    /// Timeouts and trusted roots as `config` says (`DRSD_CA_FILE`), and
    /// redirects only within an origin.
    pub fn new(config: &HttpConfig) -> Result<Api, DrsError> {
        let setup = |why: String| DrsError::Credentials {
            what: "the trusted roots of the DRS client",
            path: config.ca_file.clone().unwrap_or_default(),
            why,
        };
        let http = crate::stores::http::client_builder(config)
            .map_err(|e| setup(e.to_string()))?
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| setup(chain(&e)))?;
        Ok(Api {
            http,
            retry: config.retry,
            deadline: config.metadata_timeout,
        })
    }
}

fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .last()
            .is_some_and(|from| from.origin() == attempt.url().origin());
        if same && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// How long 202 answers are waited for: `each` at most per answer,
/// `bound` in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub each: Duration,
    pub bound: Duration,
}

impl Default for Pending {
    fn default() -> Pending {
        Pending {
            each: Duration::from_secs(10),
            bound: Duration::from_secs(60),
        }
    }
}

impl Pending {
    /// How long to wait before asking again, after `waited` so far, when
    /// the server asked for `asked` (`None`: it did not say, in seconds);
    /// `None` when the bound is spent.
    pub fn next_wait(&self, asked: Option<Duration>, waited: Duration) -> Option<Duration> {
        let left = self.bound.saturating_sub(waited);
        let wait = asked
            .unwrap_or(DEFAULT_WAIT)
            .max(MIN_WAIT)
            .min(self.each)
            .min(left);
        (!wait.is_zero()).then_some(wait)
    }
}

/// `Retry-After` in seconds; an HTTP date or anything else counts as not
/// said.
fn retry_after(resp: &Response) -> Option<Duration> {
    let text = resp.headers().get("retry-after")?.to_str().ok()?;
    text.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A POST of `body` (JSON) to `url`.
pub(super) fn post_json(http: &reqwest::Client, url: &url::Url, body: &[u8]) -> RequestBuilder {
    http.post(url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_vec())
}

/// One request, as its caller describes it.
pub(super) struct Ask<'a> {
    /// What was asked, for errors: a DRS URI, or e.g. `bulk lookup of 3
    /// objects`.
    pub asked: &'a str,
    /// The server's base URL: it chooses the credential, and errors name it.
    pub server: &'a url::Url,
    /// Statuses the caller handles itself (404, 413, ...), besides 2xx.
    pub accept: &'a [StatusCode],
    pub build: &'a (dyn Fn(&reqwest::Client) -> RequestBuilder + Sync),
}

/// Sends requests with credentials, retries and 202 waits.
pub(super) struct Caller {
    pub api: Api,
    pub auth: DrsAuth,
    pub pending: Pending,
}

impl Caller {
    /// The answer to `ask`: a success other than 202, or a status the
    /// caller accepts; anything else is an error naming what was asked.
    /// The answer's body must be read by [`read_json`] before the call's
    /// deadline, which the response carries.
    pub async fn send(&self, ask: &Ask<'_>) -> Result<Response, DrsError> {
        self.send_within(ask, self.api.deadline).await
    }

    /// [`Caller::send`] for a call the server may take longer to answer
    /// than the setting gives one (completing a multipart upload of many
    /// parts): `deadline`, never less than the setting's.
    pub async fn send_within(
        &self,
        ask: &Ask<'_>,
        deadline: Duration,
    ) -> Result<Response, DrsError> {
        let deadline = deadline.max(self.api.deadline);
        let mut waited = Duration::ZERO;
        let mut renewed = false;
        loop {
            let until = Until {
                at: Instant::now() + deadline,
                deadline,
            };
            let credential = until
                .bound(ask, self.auth.credential(&self.api.http, ask.server))
                .await??;
            let make = || credential.apply((ask.build)(&self.api.http));
            let sent = until
                .bound(ask, send_retrying(self.api.retry, ask.accept, make))
                .await?;
            match sent {
                Sent::Answered(resp) if resp.status() == StatusCode::ACCEPTED => {
                    let wait = self
                        .pending
                        .next_wait(retry_after(&resp), waited)
                        .ok_or_else(|| DrsError::StillPending {
                            uri: ask.asked.to_string(),
                            waited,
                        })?;
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
                Sent::Answered(mut resp) => {
                    resp.extensions_mut().insert(until);
                    return Ok(resp);
                }
                Sent::Refused { resp, .. }
                    if resp.status() == StatusCode::UNAUTHORIZED
                        && credential.is_renewable()
                        && !renewed =>
                {
                    self.auth.forget(ask.server, &credential).await;
                    renewed = true;
                }
                Sent::Refused { resp, attempt } => {
                    let status = resp.status();
                    let url = resp.url().clone();
                    // The server's own words, read within the call's time.
                    let said = until
                        .bound(ask, error_message(resp, &credential.secrets()))
                        .await
                        .ok()
                        .flatten();
                    return Err(refused(ask, &url, &credential, status, attempt, said));
                }
                Sent::Failed { error, attempt } => return Err(failed(ask, &error, attempt)),
            }
        }
    }

    /// [`Caller::send`], then the body as JSON of type `T`.
    pub async fn json<T: DeserializeOwned>(&self, ask: &Ask<'_>) -> Result<T, DrsError> {
        let resp = self.send(ask).await?;
        read_json(resp, ask).await
    }
}

/// When one call must be done, and the setting that said so; carried by
/// the answer [`Caller::send`] returns, for [`read_json`].
#[derive(Debug, Clone, Copy)]
struct Until {
    at: Instant,
    deadline: Duration,
}

impl Until {
    /// `work`, or [`DrsError::Deadline`] once the call's time is up.
    async fn bound<T>(
        &self,
        ask: &Ask<'_>,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, DrsError> {
        timeout_at(self.at, work)
            .await
            .map_err(|_| DrsError::Deadline {
                asked: ask.asked.to_string(),
                server: shown_url(ask.server),
                deadline: self.deadline,
            })
    }
}

/// The body of `resp` as `T`, read up to [`MAX_BODY`] bytes, by the
/// deadline of the call that got it ([`Caller::send`]'s answers carry it).
pub(super) async fn read_json<T: DeserializeOwned>(
    resp: Response,
    ask: &Ask<'_>,
) -> Result<T, DrsError> {
    let read = match resp.extensions().get::<Until>().copied() {
        Some(until) => until.bound(ask, read_body(resp)).await?,
        None => read_body(resp).await,
    };
    let body = read.map_err(|(why, permanence)| match permanence {
        Permanence::Transient => DrsError::Transport {
            asked: ask.asked.to_string(),
            server: shown_url(ask.server),
            why,
            attempts: 1,
            permanence,
        },
        Permanence::Permanent => bad_answer(ask, why),
    })?;
    serde_json::from_slice(&body).map_err(|e| bad_answer(ask, json_error(&e)))
}

/// serde_json's own message quotes the value it choked on, which may be a
/// token or a signed URL: only its class and place are told.
pub(super) fn json_error(e: &serde_json::Error) -> String {
    format!(
        "not the JSON expected ({:?} error at line {}, column {})",
        e.classify(),
        e.line(),
        e.column()
    )
}

async fn read_body(mut resp: Response) -> Result<Vec<u8>, (String, Permanence)> {
    let too_big = || {
        (
            format!("the answer is larger than the {MAX_BODY} bytes drsd reads"),
            Permanence::Permanent,
        )
    };
    if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        (
            format!("the answer broke off: {}", chain(&e)),
            Permanence::Transient,
        )
    })? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

pub(super) fn bad_answer(ask: &Ask<'_>, why: impl std::fmt::Display) -> DrsError {
    DrsError::BadAnswer {
        asked: ask.asked.to_string(),
        server: shown_url(ask.server),
        why: why.to_string(),
    }
}

/// The refusal of `url` (the URL asked, redirects followed), naming it
/// rather than the server's root: `/user/data/upload` and
/// `/index/index/{did}` on one commons fail for different reasons.
fn refused(
    ask: &Ask<'_>,
    url: &url::Url,
    credential: &Credential,
    status: StatusCode,
    attempts: u32,
    said: Option<String>,
) -> DrsError {
    let server = shown_url(url);
    let asked = ask.asked.to_string();
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return DrsError::Auth {
            asked,
            server,
            tried: credential.kind.clone(),
            status: status.as_u16(),
            said,
        };
    }
    DrsError::Http {
        asked,
        server,
        status: status.as_u16(),
        attempts,
        said,
    }
}

/// The most of an error body read for its message.
const MAX_ERROR_BODY: usize = 16 << 10;

/// The message of an error answer as Indexd (`{"error": ...}`), DRS
/// servers and Indexd's DRS routes (`{"msg": ..., "status_code": N}`) and
/// others (`message`, `detail`) write it, or as an HTML error page says it
/// (Fence's, a proxy's; `error_page.rs`): quoted, shortened, with
/// `secrets` (the credential sent), bearer-like tokens and URL secrets
/// taken out, so a server echoing what it was sent shows no secret; and
/// the identifier Fence logged the error under. `None` for a body that
/// says nothing readable.
pub(super) async fn error_message(mut resp: Response, secrets: &[String]) -> Option<String> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ERROR_BODY {
            return None;
        }
    }
    said_in(&body, secrets)
}

/// [`error_message`] of a body already read.
pub(super) fn said_in(body: &[u8], secrets: &[String]) -> Option<String> {
    let (text, id) = match json_message(body) {
        Some(text) => (text, None),
        None => {
            let page = super::error_page::page_message(body)?;
            (page.message, page.id)
        }
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let quoted = super::model::quoted(&scrubbed(text, secrets));
    Some(match id {
        Some(id) => format!("{quoted} (error id {})", scrubbed(&id, secrets)),
        None => quoted,
    })
}

/// The message of a JSON error body, in the shapes [`error_message`] names.
fn json_message(body: &[u8]) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    ["error", "msg", "message", "detail"]
        .iter()
        .find_map(|key| match json.get(key)? {
            serde_json::Value::String(s) => Some(s.clone()),
            // `{"error": {"message": ...}}`
            serde_json::Value::Object(o) => o.get("message")?.as_str().map(str::to_string),
            _ => None,
        })
}

/// `text` without `secrets`, JWT-like words or URL secrets.
fn scrubbed(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 3) {
        out = out.replace(secret.as_str(), "[redacted]");
    }
    let words: Vec<String> = out
        .split(' ')
        .map(|word| {
            let bare = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
            if bare.starts_with("eyJ") && bare.len() >= 20 {
                word.replace(bare, "[redacted]")
            } else {
                word.to_string()
            }
        })
        .collect();
    redact_text(&words.join(" "))
}

/// A request that got no answer, naming the URL asked when reqwest knows
/// it, else the server's root.
fn failed(ask: &Ask<'_>, error: &reqwest::Error, attempts: u32) -> DrsError {
    DrsError::Transport {
        asked: ask.asked.to_string(),
        server: shown_url(error.url().unwrap_or(ask.server)),
        why: chain(error),
        attempts,
        permanence: Permanence::of_transport(error),
    }
}

/// reqwest's error and its causes without the request URL, any URL left
/// in them redacted.
pub(super) fn chain(e: &reqwest::Error) -> String {
    redact_text(&crate::stores::transport::chain(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_202_waits_what_it_asks_within_the_cap_and_the_bound() {
        let p = Pending::default();
        assert_eq!(p.next_wait(Some(S(3)), S(0)), Some(S(3)));
        assert_eq!(
            p.next_wait(Some(S(3600)), S(0)),
            Some(S(10)),
            "capped at 10 s"
        );
        assert_eq!(p.next_wait(None, S(0)), Some(S(1)), "unsaid: 1 s");
        assert_eq!(p.next_wait(Some(S(0)), S(0)), Some(MS(100)), "never a spin");
        assert_eq!(p.next_wait(Some(S(10)), S(55)), Some(S(5)), "what is left");
        assert_eq!(p.next_wait(Some(S(10)), S(60)), None, "the bound is spent");
        assert_eq!(p.next_wait(Some(S(1)), S(61)), None);
    }

    #[test]
    fn an_error_body_is_quoted_in_each_servers_shape_without_the_secrets_sent() {
        let secrets = vec!["hunter2-pass".to_string()];
        let said = |body: &str| said_in(body.as_bytes(), &secrets);
        assert_eq!(
            said(r#"{"error": "username / password mismatch"}"#).as_deref(),
            Some("\"username / password mismatch\"")
        );
        assert_eq!(
            said(r#"{"msg": "no record found", "status_code": 404}"#).as_deref(),
            Some("\"no record found\"")
        );
        let echoed = said(
            r#"{"error": "bad login hunter2-pass, token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig at https://h/x?sig=s3cr3t"}"#,
        )
        .unwrap();
        for secret in ["hunter2-pass", "eyJhbGci", "s3cr3t"] {
            assert!(!echoed.contains(secret), "{echoed}");
        }
        assert!(echoed.contains("bad login [redacted]"), "{echoed}");
        let forged = said("{\"error\": \"a\\nforged line\"}").unwrap();
        assert!(!forged.contains('\n'), "{forged}");
        assert_eq!(said("<html>502 Bad Gateway</html>"), None);
        assert_eq!(said(r#"{"error": ""}"#), None);
    }

    #[test]
    fn a_fence_error_page_is_quoted_by_its_message_and_error_id() {
        use super::super::error_page::fence_page;
        let secrets = vec!["k3y-s3cr3t".to_string()];
        let said = |body: String| said_in(body.as_bytes(), &secrets);
        let not_found = fence_page(
            404,
            "Not Found",
            Some("No indexed document found with id dg.TEST/0a1b"),
        );
        assert_eq!(
            said(not_found).as_deref(),
            Some(
                "\"No indexed document found with id dg.TEST/0a1b\" \
                 (error id 6f1c2a7e-93b4-4d0a-8e5f-2b9c1d3e4f50)"
            )
        );
        let failed = said(fence_page(500, "Internal Server Error", None)).unwrap();
        assert!(failed.starts_with("\"Internal Server Error\""), "{failed}");
        let echoed = said(fence_page(
            401,
            "Unauthorized",
            Some("bad key k3y-s3cr3t, token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"),
        ))
        .unwrap();
        assert!(
            !echoed.contains("s3cr3t") && !echoed.contains("eyJhbGci"),
            "{echoed}"
        );
        let long = said(fence_page(400, "Bad Request", Some(&"word ".repeat(400)))).unwrap();
        assert!(long.len() < 200, "shortened: {long}");
    }

    #[test]
    fn a_json_error_tells_no_value_of_the_body() {
        let e = serde_json::from_str::<u64>("\"https://h/x?sig=s3cr3t\"").unwrap_err();
        let text = json_error(&e);
        assert!(
            !text.contains("s3cr3t") && !text.contains("https"),
            "{text}"
        );
        assert!(text.contains("line 1"), "{text}");
    }
}
