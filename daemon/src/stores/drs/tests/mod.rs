//! The DRS and Indexd clients against a small server in the test process
//! (axum on loopback), each test scripting its answers: batches, 413s,
//! servers without bulk, 202s, Gen3 renewals, netrc logins, and servers
//! that answer about objects nobody asked for.

mod auth;
mod bulk_access;
mod client;
mod deadline;
mod indexd_client;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use crate::stores::{HttpConfig, Retry};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// The path as sent, percent-encoding kept.
    pub path: String,
    pub query: Option<String>,
    pub authorization: Option<String>,
    pub body: String,
}

impl Seen {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

pub fn reply(status: u16, body: serde_json::Value) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
    }
}

pub fn status(status: u16) -> Reply {
    reply(
        status,
        serde_json::json!({"msg": "scripted", "status_code": status}),
    )
}

/// Answers each request from what it is and every request seen so far
/// (itself last).
type Script = dyn Fn(&Seen, &[Seen]) -> Reply + Send + Sync;

pub struct TestServer {
    pub root: url::Url,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    pub async fn start(
        script: impl Fn(&Seen, &[Seen]) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        let script: Arc<Script> = Arc::new(script);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |req: Request| {
            let (script, log) = (script.clone(), log.clone());
            async move { answer(req, &*script, &log).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root = url::Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        TestServer { root, seen }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests so far whose method and path are these.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.method == method && s.path == path)
            .count()
    }

    /// `drs_prefix=<this server>`, for compact URIs and trusted credentials.
    pub fn servers(&self, prefix: &str) -> crate::stores::drs::DrsServers {
        crate::stores::drs::DrsServers::parse(&format!("{prefix}={}", self.root)).unwrap()
    }

    /// `host:port` of this server, for hostname-form URIs.
    pub fn authority(&self) -> String {
        format!(
            "{}:{}",
            self.root.host_str().unwrap(),
            self.root.port().unwrap()
        )
    }
}

async fn answer(req: Request, script: &Script, log: &Mutex<Vec<Seen>>) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        authorization: parts
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap_or_default().to_string()),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let all = {
        let mut log = log.lock().unwrap();
        log.push(seen.clone());
        log.clone()
    };
    let reply = script(&seen, &all);
    let mut resp = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in reply.headers {
        resp = resp.header(name, value);
    }
    resp.body(Body::from(reply.body)).unwrap()
}

/// Few, fast retries: tests wait for nothing.
pub fn quick() -> HttpConfig {
    HttpConfig {
        retry: Retry {
            attempts: 2,
            first_delay: Duration::from_millis(1),
        },
        timeout: Duration::from_secs(10),
        metadata_timeout: Duration::from_secs(10),
        ca_file: None,
    }
}

/// A DRS object answer.
pub fn object(id: &str, size: u64) -> serde_json::Value {
    serde_json::json!({
        "id": id,
        "self_uri": format!("drs://x/{id}"),
        "size": size,
        "checksums": [{"type": "md5", "checksum": "900150983cd24fb0d6963f7d28e17f72"}],
        "access_methods": [{"type": "https", "access_url": {"url": format!("https://store.example/{size}")}}],
    })
}
