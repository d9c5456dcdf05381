//! Gen3 API keys: the long-lived key a Gen3 portal hands out
//! (`credentials.json`, `{"api_key", "key_id"}`) is exchanged at the
//! commons' `POST /user/credentials/api/access_token` for a short-lived
//! access token, which DRS requests carry as `Bearer`.
//!
//! An access token is kept per server until 60 s before the `exp` of its
//! JWT payload (one without a readable `exp` is kept until refused), or
//! until a server refuses it (401): then it is exchanged again, once per
//! request. One exchange at a time: the cache is behind an async mutex, so
//! requests that find the token stale wait for one new token instead of
//! each asking for their own. The key file is read at each exchange, so a
//! rotated key needs no restart; the key and tokens never reach a log, an
//! error or a `Debug` print.
//!
//! The key also says which commons issued it: it is a JWT whose `iss` is
//! that commons' Fence (`https://commons.example/user`), as the gen3 SDK
//! finds its endpoint. [`Gen3Key::commons`] reads it, so the commons that
//! issued the user's key needs no naming in `DRSD_DRS_SERVERS`
//! (`servers.rs`). The claim is read without checking the signature (no
//! key to check it is at hand): it only chooses where the key goes, and
//! the only place it can choose is the host that issued it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderValue;
use reqwest::StatusCode;
use tokio::sync::Mutex;

use super::auth::{Credential, CredentialKind};
use super::call::{self, Ask};
use super::DrsError;
use crate::stores::transport::{send_retrying, Sent};
use crate::stores::{shown_url, Permanence, Retry};

/// Where a commons exchanges API keys for access tokens.
const EXCHANGE_PATH: &str = "/user/credentials/api/access_token";

/// A token is renewed this long before its `exp`, so no request carries
/// one that expires on the way.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// A Gen3 API key file and the access tokens it was exchanged for.
pub(super) struct Gen3Key {
    path: PathBuf,
    /// By server origin (`https://host:port`).
    tokens: Mutex<HashMap<String, Token>>,
}

#[derive(Clone)]
struct Token {
    header: HeaderValue,
    /// `None`: no readable `exp`; kept until a server refuses it.
    renew_at: Option<SystemTime>,
}

/// The most the refusal of a key exchange is waited on for its message.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(5);

#[derive(serde::Deserialize)]
struct KeyFile {
    api_key: String,
    #[serde(default)]
    key_id: Option<String>,
}

#[derive(serde::Deserialize)]
struct Exchanged {
    access_token: String,
}

/// What a key file says of the commons that issued its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyCommons {
    /// The root of the commons (`https://host`): the `iss` without `/user`.
    Root(url::Url),
    /// The file was read, and its key names no commons drsd can use: why.
    Unnamed(String),
    /// The file could not be read (missing, another user's): why.
    Unread(String),
}

impl Gen3Key {
    pub fn new(path: PathBuf) -> Gen3Key {
        Gen3Key {
            path,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn kind(&self) -> CredentialKind {
        CredentialKind::Gen3(self.path.clone())
    }

    /// A fresh access token for `server`, exchanged when none is kept.
    pub async fn credential(
        &self,
        http: &reqwest::Client,
        server: &url::Url,
    ) -> Result<Credential, DrsError> {
        let origin = server.origin().ascii_serialization();
        let mut tokens = self.tokens.lock().await;
        let now = SystemTime::now();
        let kept = tokens
            .get(&origin)
            .filter(|t| t.renew_at.is_none_or(|at| now < at));
        let token = match kept {
            Some(token) => token.clone(),
            None => {
                let token = self.exchange(http, server).await?;
                tokens.insert(origin, token.clone());
                token
            }
        };
        Ok(Credential::new(self.kind(), token.header))
    }

    /// Drops the token `used` for `server`, unless another request has
    /// already put a newer one in its place.
    pub async fn forget(&self, server: &url::Url, used: &Credential) {
        let origin = server.origin().ascii_serialization();
        let mut tokens = self.tokens.lock().await;
        if tokens.get(&origin).is_some_and(|t| used.carries(&t.header)) {
            tokens.remove(&origin);
        }
    }

    async fn exchange(&self, http: &reqwest::Client, server: &url::Url) -> Result<Token, DrsError> {
        let key = self.read().await?;
        let mut url = server.clone();
        url.set_path(EXCHANGE_PATH);
        url.set_query(None);
        let body = serde_json::json!({"api_key": key.api_key, "key_id": key.key_id})
            .to_string()
            .into_bytes();
        let asked = format!("exchange of the Gen3 API key in {}", self.path.display());
        let ask = Ask {
            asked: &asked,
            server: &url,
            accept: &[],
            build: &|http| call::post_json(http, &url, &body),
        };
        let resp = match send_retrying(Retry::default(), &[], || (ask.build)(http)).await {
            Sent::Answered(resp) => resp,
            Sent::Refused { resp, attempt } => {
                let status = resp.status();
                let secrets = [key.api_key.clone()];
                let said =
                    tokio::time::timeout(ERROR_BODY_WAIT, call::error_message(resp, &secrets))
                        .await
                        .ok()
                        .flatten();
                return Err(self.refused(&ask, status, attempt, said));
            }
            Sent::Failed { error, attempt } => {
                return Err(DrsError::Transport {
                    asked: asked.clone(),
                    server: shown_url(&url),
                    why: call::chain(&error),
                    attempts: attempt,
                    permanence: Permanence::of_transport(&error),
                })
            }
        };
        let exchanged: Exchanged = call::read_json(resp, &ask).await?;
        let header = bearer(&exchanged.access_token)
            .ok_or_else(|| call::bad_answer(&ask, "the access token is not a header value"))?;
        let renew_at = jwt_exp(&exchanged.access_token)
            .map(|exp| UNIX_EPOCH + Duration::from_secs(exp).saturating_sub(RENEW_BEFORE));
        Ok(Token { header, renew_at })
    }

    fn refused(
        &self,
        ask: &Ask<'_>,
        status: StatusCode,
        attempts: u32,
        said: Option<String>,
    ) -> DrsError {
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return DrsError::Auth {
                asked: ask.asked.to_string(),
                server: shown_url(ask.server),
                tried: self.kind(),
                status: status.as_u16(),
                said,
            };
        }
        DrsError::Http {
            asked: ask.asked.to_string(),
            server: shown_url(ask.server),
            status: status.as_u16(),
            attempts,
            said,
        }
    }

    async fn read(&self) -> Result<KeyFile, DrsError> {
        // Read (and checked) at each exchange (`trusted_file`).
        let path = self.path.clone();
        let text = crate::blocking(move || crate::trusted_file::read(&path))
            .await
            .map_err(|e| self.bad(e.to_string()))?;
        parse_key(&text).map_err(|why| self.bad(why.to_string()))
    }

    fn bad(&self, why: String) -> DrsError {
        DrsError::Credentials {
            what: "the Gen3 API key",
            path: self.path.clone(),
            why,
        }
    }

    /// The commons that issued the key, by its `iss` claim. Read here and
    /// now, on the caller's thread: it is called once, when a DRS client
    /// is built, and the file is a few hundred bytes.
    pub fn commons(&self) -> KeyCommons {
        let text = match crate::trusted_file::read(&self.path) {
            Ok(text) => text,
            Err(e) => return KeyCommons::Unread(e.to_string()),
        };
        let key = match parse_key(&text) {
            Ok(key) => key,
            Err(why) => return KeyCommons::Unnamed(why.to_string()),
        };
        let Some(claims) = jwt_payload::<Issued>(key.api_key.trim()) else {
            return KeyCommons::Unnamed("its api_key is not a JWT".into());
        };
        let Some(iss) = claims.iss else {
            return KeyCommons::Unnamed("its api_key has no `iss` claim".into());
        };
        match commons_of_issuer(&iss) {
            Ok(root) => KeyCommons::Root(root),
            Err(why) => KeyCommons::Unnamed(format!(
                "its `iss` claim {} {why}",
                super::model::quoted(&crate::stores::redacted(&iss))
            )),
        }
    }
}

/// The `iss` claim of an API key.
#[derive(serde::Deserialize)]
struct Issued {
    #[serde(default)]
    iss: Option<String>,
}

/// A key file's `{"api_key", "key_id"}`, its api_key not empty.
fn parse_key(text: &[u8]) -> Result<KeyFile, BadKeyFile> {
    let key: KeyFile =
        serde_json::from_slice(text).map_err(|e| BadKeyFile::Json(call::json_error(&e)))?;
    if key.api_key.trim().is_empty() {
        return Err(BadKeyFile::EmptyApiKey);
    }
    Ok(key)
}

/// Why a key file is not a Gen3 API key.
#[derive(Debug, thiserror::Error)]
enum BadKeyFile {
    #[error("{0} (want {{\"api_key\", \"key_id\"}})")]
    Json(String),
    #[error("its api_key is empty")]
    EmptyApiKey,
}

/// The root of the commons whose Fence is `iss` (`https://host[:port]
/// [/prefix]/user`): that URL without its `/user`. Anything else (another
/// scheme, user-info, a query, no `/user`) names no commons: why not.
pub(super) fn commons_of_issuer(iss: &str) -> Result<url::Url, &'static str> {
    let mut url = url::Url::parse(iss.trim()).map_err(|_| "is not a URL")?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("is not an http(s) URL with a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("holds user-info");
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("has a query or fragment");
    }
    let path = url.path().trim_end_matches('/').to_string();
    let root = path
        .strip_suffix("/user")
        .ok_or("does not end in /user, where a commons serves Fence")?;
    url.set_path(root);
    Ok(url)
}

fn bearer(token: &str) -> Option<HeaderValue> {
    let token = token.trim();
    if token.is_empty() {
        return None;
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The `exp` claim (seconds since the epoch) of a JWT's payload, read
/// without checking the signature: it only decides when to ask for a new
/// token, and the server checks the token itself.
pub(super) fn jwt_exp(token: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Claims {
        exp: Option<u64>,
    }
    jwt_payload::<Claims>(token)?.exp
}

/// The payload of a JWT (`header.payload.signature`, base64url) as `T`,
/// the signature not checked.
fn jwt_payload<T: serde::de::DeserializeOwned>(token: &str) -> Option<T> {
    use base64::Engine;
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// An unsigned JWT with `claims` as its payload.
    pub(crate) fn jwt(claims: &serde_json::Value) -> String {
        let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.{}",
            enc(br#"{"alg":"none"}"#),
            enc(claims.to_string().as_bytes()),
            enc(b"sig")
        )
    }

    #[test]
    fn the_exp_claim_is_read_from_the_payload() {
        let token = jwt(&serde_json::json!({"exp": 1_900_000_000u64, "sub": "u"}));
        assert_eq!(jwt_exp(&token), Some(1_900_000_000));
    }

    #[test]
    fn a_payload_with_padding_still_reads() {
        let enc = base64::engine::general_purpose::URL_SAFE.encode(br#"{"exp":77}"#);
        assert!(enc.ends_with('='), "{enc}");
        assert_eq!(jwt_exp(&format!("h.{enc}.s")), Some(77));
    }

    #[test]
    fn tokens_that_are_not_jwts_have_no_exp() {
        for token in [
            "opaque-token",
            "a.b",
            "a.b.c.d",
            "a.!!!.c",
            &jwt(&serde_json::json!({"sub": "u"})),
            &jwt(&serde_json::json!({"exp": "soon"})),
        ] {
            assert_eq!(jwt_exp(token), None, "{token}");
        }
    }

    #[test]
    fn the_commons_of_an_issuer_is_its_url_without_user() {
        for (iss, root) in [
            ("https://commons.example/user", "https://commons.example/"),
            ("https://commons.example/user/", "https://commons.example/"),
            ("http://127.0.0.1:8080/user", "http://127.0.0.1:8080/"),
            ("https://h.example/prefix/user", "https://h.example/prefix"),
        ] {
            assert_eq!(commons_of_issuer(iss).unwrap().as_str(), root, "{iss}");
        }
    }

    #[test]
    fn an_issuer_that_is_not_an_http_fence_url_names_no_commons() {
        for (iss, why) in [
            ("commons.example/user", "not a URL"),
            ("ftp://commons.example/user", "http(s)"),
            ("https://commons.example/", "/user"),
            ("https://commons.example/userx", "/user"),
            ("https://u:pw@commons.example/user", "user-info"),
            ("https://commons.example/user?x=1", "query"),
            ("https://commons.example/user#x", "fragment"),
        ] {
            let err = commons_of_issuer(iss).unwrap_err();
            assert!(err.contains(why), "{iss}: {err}");
        }
    }

    fn key_in(dir: &Path, api_key: &str) -> Gen3Key {
        let path = dir.join("credentials.json");
        let text = serde_json::json!({"api_key": api_key, "key_id": "k1"});
        std::fs::write(&path, text.to_string()).unwrap();
        Gen3Key::new(path)
    }

    #[test]
    fn a_key_file_names_the_commons_that_issued_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = jwt(&serde_json::json!({
            "iss": "https://commons.example/user", "pur": "api_key", "sub": "7"
        }));
        assert_eq!(
            key_in(dir.path(), &key).commons(),
            KeyCommons::Root(url::Url::parse("https://commons.example").unwrap())
        );
    }

    #[test]
    fn a_key_file_without_a_usable_issuer_says_why_and_shows_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        for (api_key, why) in [
            ("opaque-s3cr3t", "not a JWT"),
            (&jwt(&serde_json::json!({"sub": "s3cr3t"})), "no `iss`"),
            (
                &jwt(&serde_json::json!({"iss": "https://h/user?sig=s3cr3t"})),
                "query",
            ),
        ] {
            let KeyCommons::Unnamed(said) = key_in(dir.path(), api_key).commons() else {
                panic!("{api_key}");
            };
            assert!(said.contains(why), "{said}");
            assert!(!said.contains("s3cr3t"), "{said}");
        }
        let missing = Gen3Key::new(dir.path().join("none.json"));
        assert!(matches!(missing.commons(), KeyCommons::Unread(_)));
    }
}
