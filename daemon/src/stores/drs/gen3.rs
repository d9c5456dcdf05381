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
        let bad = |why: String| DrsError::Credentials {
            what: "the Gen3 API key",
            path: self.path.clone(),
            why,
        };
        // Read (and checked) at each exchange (`trusted_file`).
        let path = self.path.clone();
        let text = crate::blocking(move || crate::trusted_file::read(&path))
            .await
            .map_err(|e| bad(e.to_string()))?;
        let key: KeyFile = serde_json::from_slice(&text).map_err(|e| {
            bad(format!(
                "{} (want {{\"api_key\", \"key_id\"}})",
                call::json_error(&e)
            ))
        })?;
        if key.api_key.trim().is_empty() {
            return Err(bad("its api_key is empty".into()));
        }
        Ok(key)
    }
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
    use base64::Engine;
    #[derive(serde::Deserialize)]
    struct Claims {
        exp: Option<u64>,
    }
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice::<Claims>(&json).ok()?.exp
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
}
