//! Every way a handler declines a request, as one type so handlers can use
//! `?`: a DRS error body (`{msg, status_code}`, as Indexd's DRS routes
//! write it), Indexd's own (`{error}`), Fence's (`{message}`), a 401 with
//! its challenge, or a 202 with `Retry-After`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A refusal, rendered by [`IntoResponse`].
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Any error status with the DRS error body.
    Error(StatusCode, String),
    /// Any error status with Indexd's error body, `{"error": msg}`.
    Indexd(StatusCode, String),
    /// Any error status with Fence's error body, `{"message": msg}`.
    Fence(StatusCode, String),
    /// 401, challenging with `scheme` (`Basic` or `Bearer`).
    Unauthorized { scheme: &'static str, msg: String },
    /// 202 Accepted: ask again after this many seconds.
    Later(u64),
}

/// What a handler returns.
pub(crate) type Reply = Result<Response, Refusal>;

impl Refusal {
    pub(crate) fn not_found(what: impl std::fmt::Display) -> Refusal {
        Refusal::Error(StatusCode::NOT_FOUND, format!("{what} not found"))
    }

    pub(crate) fn bad_request(msg: impl Into<String>) -> Refusal {
        Refusal::Error(StatusCode::BAD_REQUEST, msg.into())
    }

    pub(crate) fn forbidden(msg: impl Into<String>) -> Refusal {
        Refusal::Error(StatusCode::FORBIDDEN, msg.into())
    }

    /// The status it answers with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Refusal::Error(status, _) | Refusal::Indexd(status, _) | Refusal::Fence(status, _) => {
                *status
            }
            Refusal::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Refusal::Later(_) => StatusCode::ACCEPTED,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Error(status, msg)
            | Refusal::Indexd(status, msg)
            | Refusal::Fence(status, msg) => {
                write!(f, "{status}: {msg}")
            }
            Refusal::Unauthorized { msg, .. } => write!(f, "401 Unauthorized: {msg}"),
            Refusal::Later(secs) => write!(f, "202 Accepted: retry after {secs} s"),
        }
    }
}

/// The DRS error body for `status`.
fn error_body(status: StatusCode, msg: &str) -> Json<serde_json::Value> {
    Json(json!({ "msg": msg, "status_code": status.as_u16() }))
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Error(status, msg) => (status, error_body(status, &msg)).into_response(),
            Refusal::Indexd(status, msg) => (status, Json(json!({ "error": msg }))).into_response(),
            Refusal::Fence(status, msg) => {
                (status, Json(json!({ "message": msg }))).into_response()
            }
            Refusal::Unauthorized { scheme, msg } => {
                let status = StatusCode::UNAUTHORIZED;
                let challenge = format!("{scheme} realm=\"drs-test-server\"");
                let mut response = (status, error_body(status, &msg)).into_response();
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                response
            }
            // The spec's 202 has the header and no body.
            Refusal::Later(secs) => (
                StatusCode::ACCEPTED,
                [(header::RETRY_AFTER, secs.to_string())],
            )
                .into_response(),
        }
    }
}
