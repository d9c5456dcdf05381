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
    /// Any error status with Fence's error page: uc-cdis/fence 13.3.0
    /// (d03fe036) `fence/error_handler.py` `get_error_response` renders
    /// `fence/templates/error.html` for every error a route raises, as
    /// `text/html` whatever the client accepts; the message is shown only
    /// for a status under 500.
    Fence(StatusCode, String),
    /// A Fence error a route answers as JSON itself, `{"message": msg}`
    /// (`multipart/complete`'s `InternalError`).
    FenceJson(StatusCode, String),
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
            Refusal::Error(status, _)
            | Refusal::Indexd(status, _)
            | Refusal::Fence(status, _)
            | Refusal::FenceJson(status, _) => *status,
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
            | Refusal::Fence(status, msg)
            | Refusal::FenceJson(status, msg) => {
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
            Refusal::Fence(status, msg) => (
                status,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                fence_page(status, &msg),
            )
                .into_response(),
            Refusal::FenceJson(status, msg) => {
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

/// Fence's error page for `status` (its template's markup, the message
/// escaped as Jinja does, and left out from 500 up).
fn fence_page(status: StatusCode, msg: &str) -> String {
    let code = status.as_u16();
    let reason = status.canonical_reason().unwrap_or("Unknown error code.");
    let message = match code < 500 {
        true => format!(
            "          <p class=\"body\">Error Message:</p>\n          <p class=\"introduction\">{}</p>\n",
            escaped(msg)
        ),
        false => String::new(),
    };
    let error_id = hex::encode(rand::random::<[u8; 8]>());
    format!(
        "<!doctype html>\n\n<html lang=\"en\">\n  <head>\n    <meta charset=\"utf-8\">\n    <title>{code}</title>\n  </head>\n\n  <body>\n    <main>\n      <div class=\"error-page\">\n        <div class=\"error-page__banner\">\n          <h1>Gen3 Data Commons</h1>\n        </div>\n        <div class=\"error-page__status-code\">\n          <div class=\"error-page__status-code-text\">\n            <h1>{code}</h1>\n            <h2>{reason}</h2>\n          </div>\n        </div>\n        <div class=\"error-page__information\">\n          <p class=\"body\">Error Identifier:</p>\n          <p class=\"introduction\">{error_id}</p>\n{message}          <div>\n            <p class=\"body\">Please try again!</p>\n          </div>\n        </div>\n      </div>\n    </main>\n  </body>\n</html>\n"
    )
}

/// `text` as Jinja's autoescape writes it into HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}
