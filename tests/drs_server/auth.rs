//! Who may ask: HTTP Basic or Bearer on the DRS endpoints, and Gen3's
//! token endpoint that trades an API key for a short-lived access token.
//!
//! Status codes: no credentials (or another scheme) is 401; credentials
//! that were never good are 403; a token that was good but has expired or
//! been revoked is 401 again, which is what tells a client to fetch a new
//! one rather than give up. Tokens are JWT-shaped (`header.payload.sig`,
//! base64url, an `exp` claim) so a client can read the expiry ahead of
//! time, but the server decides by its own record of each token.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Query, State as Extract};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::Json;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;

use super::reply::{Refusal, Reply};
use super::spec::Auth;
use super::state::{Shared, State, Token};

/// The credentials a request carries in `Authorization`.
enum Presented<'a> {
    Nothing,
    Basic(String),
    Bearer(&'a str),
}

fn presented(headers: &HeaderMap) -> Presented<'_> {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Presented::Nothing;
    };
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = STANDARD.decode(rest.trim()).unwrap_or_default();
        Presented::Basic(String::from_utf8_lossy(&decoded).into_owned())
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Presented::Bearer(rest.trim())
    } else {
        Presented::Nothing
    }
}

/// Lets a DRS request through under the server's [`Auth`].
pub(crate) fn check_drs(state: &State, headers: &HeaderMap) -> Result<(), Refusal> {
    match &state.auth {
        Auth::None => Ok(()),
        Auth::Basic { user, password } => check_basic(headers, user, password),
        Auth::Bearer => check_bearer(state, headers),
    }
}

/// HTTP Basic as `user:password`: 401 without, 403 with other credentials.
fn check_basic(headers: &HeaderMap, user: &str, password: &str) -> Result<(), Refusal> {
    match presented(headers) {
        Presented::Basic(given) if given == format!("{user}:{password}") => Ok(()),
        // Indexd's words for a Basic login it does not know.
        Presented::Basic(_) => Err(Refusal::forbidden("username / password mismatch")),
        _ => Err(Refusal::Unauthorized {
            scheme: "Basic",
            msg: "credentials required".into(),
        }),
    }
}

fn check_bearer(state: &State, headers: &HeaderMap) -> Result<(), Refusal> {
    let unauthorized = |msg: &str| Refusal::Unauthorized {
        scheme: "Bearer",
        msg: msg.into(),
    };
    let Presented::Bearer(token) = presented(headers) else {
        return Err(unauthorized("a bearer token is required"));
    };
    let Some(known) = state.tokens.get(token) else {
        return Err(Refusal::forbidden("unknown token"));
    };
    if known.revoked {
        return Err(unauthorized("token revoked"));
    }
    match known.expires {
        Some(at) if at <= SystemTime::now() => Err(unauthorized("token expired")),
        _ => Ok(()),
    }
}

/// Checks Indexd's write credentials, with Indexd's words: HTTP Basic
/// against its own user table (403 `username / password mismatch`), else a
/// bearer token checked with Arborist. Without Arborist (the default) that
/// is 403 `Arborist is not configured`; with it (a commons, see
/// `DrsServer::set_arborist`) a token this server's Fence issued and that
/// is still good passes, anything else is 401 `Permission denied.`. Arborist's
/// policies are not modelled: a good token may write any record.
pub(crate) fn check_indexd_write(state: &State, headers: &HeaderMap) -> Result<(), Refusal> {
    let (user, password) = &state.indexd_login;
    match presented(headers) {
        Presented::Basic(given) if given == format!("{user}:{password}") => Ok(()),
        Presented::Basic(_) => Err(Refusal::forbidden("username / password mismatch")),
        _ if !state.arborist => Err(Refusal::forbidden(
            "Arborist is not configured; cannot perform authorization check",
        )),
        Presented::Bearer(token) if good_token(state, token).is_some() => Ok(()),
        _ => Err(Refusal::Indexd(
            axum::http::StatusCode::UNAUTHORIZED,
            "Permission denied.".into(),
        )),
    }
}

/// [`check_indexd_write`] for `POST /index/` (`auth.authorize("create",
/// authz)` in uc-cdis/indexd `index/blueprint.py`): with
/// `DrsServer::set_create_denied`, Arborist gives a Fence token no
/// `create` (a user who may upload through Fence, `file_upload` on
/// `/data_file`, but not register records): 403 `Permission denied.`.
pub(crate) fn check_indexd_create(state: &State, headers: &HeaderMap) -> Result<(), Refusal> {
    check_indexd_write(state, headers)?;
    match presented(headers) {
        Presented::Bearer(_) if state.create_denied => Err(Refusal::Indexd(
            axum::http::StatusCode::FORBIDDEN,
            "Permission denied.".into(),
        )),
        _ => Ok(()),
    }
}

/// The subject of `token` when this server issued it (or a test added it)
/// and it is neither revoked nor expired.
fn good_token<'a>(state: &'a State, token: &str) -> Option<&'a str> {
    let known = state.tokens.get(token)?;
    let live = !known.revoked && known.expires.is_none_or(|at| at > SystemTime::now());
    live.then_some(known.subject.as_str())
}

/// Fence's check of a caller (`require_auth_header`): the subject of a good
/// bearer token, else 401 in Fence's body.
pub(crate) fn fence_subject(state: &State, headers: &HeaderMap) -> Result<String, Refusal> {
    let unauthorized = |msg: &str| Refusal::Fence(axum::http::StatusCode::UNAUTHORIZED, msg.into());
    let Presented::Bearer(token) = presented(headers) else {
        return Err(unauthorized("no authorization token provided"));
    };
    good_token(state, token)
        .map(str::to_string)
        .ok_or_else(|| unauthorized("Authentication Error: token is invalid, expired or revoked"))
}

#[derive(Deserialize, Default)]
pub(crate) struct ApiKey {
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    key_id: Option<String>,
}

/// `?expires_in=` of the token endpoint.
#[derive(Deserialize)]
pub(crate) struct Lifetime {
    expires_in: Option<String>,
}

/// `POST /user/credentials/api/access_token[?expires_in=S]` `{api_key,
/// key_id}` -> `{access_token}`, valid for the configured time (or the
/// shorter one asked), as Fence answers: 400 without an `api_key`, 401 for
/// one it does not know.
pub(crate) async fn access_token(
    Extract(shared): Extract<Arc<Shared>>,
    Query(lifetime): Query<Lifetime>,
    body: Result<Json<ApiKey>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.token += 1;
    let key = body.map(|Json(k)| k).unwrap_or_default();
    if key.api_key.is_none() {
        return Err(Refusal::Fence(
            axum::http::StatusCode::BAD_REQUEST,
            "Please provide an api_key in payload".into(),
        ));
    }
    let ttl = match lifetime.expires_in {
        None => state.token_ttl,
        Some(asked) => match asked.parse::<u64>() {
            Ok(secs) => state.token_ttl.min(Duration::from_secs(secs)),
            Err(_) => {
                let msg = format!("Invalid 'expires_in' value '{asked}'");
                return Err(Refusal::Fence(axum::http::StatusCode::BAD_REQUEST, msg));
            }
        },
    };
    let key_id = known_key(&state, &key)
        .ok_or_else(|| Refusal::Unauthorized {
            scheme: "Bearer",
            msg: "unknown or wrong API key".into(),
        })?
        .to_string();
    let expires = SystemTime::now() + ttl;
    let token = jwt(&shared.secret, &shared.base_url, &key_id, expires);
    let record = Token {
        expires: Some(expires),
        revoked: false,
        subject: key_id,
    };
    state.tokens.insert(token.clone(), record);
    Ok(Json(json!({ "access_token": token })).into_response())
}

/// The key id of a matching API key (named by `key_id`, or any key whose
/// value matches when none is named).
fn known_key<'a>(state: &'a State, key: &ApiKey) -> Option<&'a str> {
    state
        .api_keys
        .iter()
        .find(|(id, value)| {
            Some(*value) == key.api_key.as_ref()
                && key.key_id.as_ref().is_none_or(|named| named == *id)
        })
        .map(|(id, _)| id.as_str())
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// A Gen3 API key for `key_id`, as Fence's `POST /user/credentials/api/`
/// makes one (`generate_api_key` in fence/jwt/token.py, uc-cdis/fence
/// 13.3.0, d03fe036): a JWT whose claims are `pur: api_key`, `iss` (Fence's
/// `BASE_URL`, the commons' root and `/user`), `sub`, `aud`, `iat`, `exp`,
/// `jti`, `azp` and `scope`; a client finds the commons by its `iss`, as
/// the gen3 SDK does. Signed with HS256 here (Fence signs RS256): nothing
/// checks the signature of a key but the server that made it.
pub(crate) fn api_key(secret: &[u8], issuer: &str, key_id: &str, expires: SystemTime) -> String {
    let claims = json!({
        "pur": "api_key",
        "iss": format!("{issuer}/user"),
        "sub": key_id,
        "aud": ["gen3"],
        "iat": unix(SystemTime::now()),
        "exp": unix(expires),
        "jti": hex::encode(rand::random::<[u8; 16]>()),
        "azp": "",
        "scope": ["openid", "user", "data", "fence"],
    });
    signed_jwt(secret, &claims)
}

/// `base64url(header).base64url(claims).base64url(HMAC-SHA256)`, as HS256.
fn jwt(secret: &[u8], issuer: &str, subject: &str, expires: SystemTime) -> String {
    let claims = json!({
        "iss": format!("{issuer}/user"),
        "sub": subject,
        "iat": unix(SystemTime::now()),
        "exp": unix(expires),
        "jti": hex::encode(rand::random::<[u8; 16]>()),
        "scope": ["openid", "user", "data"],
    });
    signed_jwt(secret, &claims)
}

fn signed_jwt(secret: &[u8], claims: &serde_json::Value) -> String {
    let header = json!({ "alg": "HS256", "typ": "JWT" });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let sig = URL_SAFE_NO_PAD.encode(mac(secret, &signed).finalize().into_bytes());
    format!("{signed}.{sig}")
}

/// HMAC-SHA256 under the server's secret, fed `message`.
fn mac(secret: &[u8], message: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(message.as_bytes());
    mac
}

/// The signature of `message`, hex.
pub(crate) fn sign(secret: &[u8], message: &str) -> String {
    hex::encode(mac(secret, message).finalize().into_bytes())
}

/// Whether `sig` is [`sign`]'s for `message`, compared in constant time.
pub(crate) fn verify(secret: &[u8], message: &str, sig: &str) -> bool {
    hex::decode(sig).is_ok_and(|raw| mac(secret, message).verify_slice(&raw).is_ok())
}

pub(crate) fn unix_now() -> u64 {
    unix(SystemTime::now())
}
