//! Credentials on the wire: Gen3 exchanges and renewals, bearer tokens
//! only to named servers, Basic from a netrc file, and errors that name
//! the credential without showing it.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;

use super::{object, quick, reply, status, Seen, TestServer};
use crate::stores::drs::{CredentialKind, DrsAuth, DrsClient, DrsError, DrsUri};

const EXCHANGE: &str = "/user/credentials/api/access_token";

/// An unsigned JWT expiring `in_secs` from now, told apart by `n`.
fn access_token(n: usize, in_secs: u64) -> String {
    let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({"exp": now + in_secs, "n": n});
    format!(
        "{}.{}.sig",
        enc(b"{\"alg\":\"none\"}"),
        enc(claims.to_string().as_bytes())
    )
}

fn key_file(dir: &Path) -> PathBuf {
    let path = dir.join("credentials.json");
    std::fs::write(&path, r#"{"api_key": "long-lived-s3cr3t", "key_id": "k1"}"#).unwrap();
    path
}

/// How many key exchanges the server saw before this request.
fn exchanges(all: &[Seen]) -> usize {
    all.iter().filter(|s| s.path == EXCHANGE).count()
}

/// A Gen3 commons: the exchange hands out token n (expiring in
/// `lifetime` s); DRS objects are served to `accepts(token n)`.
fn commons(lifetime: u64, accepts: fn(usize) -> bool) -> impl Fn(&Seen, &[Seen]) -> super::Reply {
    let issued = std::sync::Mutex::new(Vec::<String>::new());
    move |seen, all| {
        let mut issued = issued.lock().unwrap();
        if seen.path == EXCHANGE {
            assert_eq!(seen.json()["api_key"], "long-lived-s3cr3t");
            issued.push(access_token(exchanges(all), lifetime));
            return reply(
                200,
                serde_json::json!({"access_token": issued.last().unwrap()}),
            );
        }
        let granted = issued
            .iter()
            .position(|t| seen.authorization.as_deref() == Some(&format!("Bearer {t}")))
            .map(|i| i + 1);
        match granted {
            Some(n) if accepts(n) => reply(200, object("dg.TEST/u1", 1)),
            _ => status(401),
        }
    }
}

fn gen3_client(server: &TestServer, key: PathBuf) -> DrsClient {
    let auth = DrsAuth::none().with_gen3_key(key);
    DrsClient::new(&quick(), server.servers("dg.TEST"), auth).unwrap()
}

#[tokio::test]
async fn a_gen3_token_refused_with_401_is_renewed_once_and_the_request_passes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(commons(3600, |n| n >= 2)).await;
    let client = gen3_client(&server, key_file(dir.path()));
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    client.object(&uri).await.unwrap();
    assert_eq!(server.count("POST", EXCHANGE), 2);
}

#[tokio::test]
async fn a_gen3_token_refused_again_after_renewal_is_an_auth_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let server = TestServer::start(commons(3600, |_| false)).await;
    let client = gen3_client(&server, key.clone());
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    let err = client.object(&uri).await.unwrap_err();
    let DrsError::Auth { tried, status, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!((tried, *status), (&CredentialKind::Gen3(key.clone()), 401));
    assert_eq!(server.count("POST", EXCHANGE), 2, "renewed once, not more");
    let text = err.to_string();
    assert!(text.contains(&key.display().to_string()), "{text}");
    assert!(
        !text.contains("s3cr3t") && !text.contains("Bearer"),
        "{text}"
    );
}

#[tokio::test]
async fn a_gen3_token_is_kept_until_a_minute_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    for (lifetime, want) in [(3600, 1), (30, 3)] {
        let server = TestServer::start(commons(lifetime, |_| true)).await;
        let client = gen3_client(&server, key_file(dir.path()));
        for _ in 0..3 {
            client.object(&uri).await.unwrap();
        }
        assert_eq!(
            server.count("POST", EXCHANGE),
            want,
            "lifetime {lifetime} s"
        );
    }
}

#[tokio::test]
async fn a_refused_bearer_token_is_named_by_its_file_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-s3cr3t\n").unwrap();
    let server = TestServer::start(|seen, _| {
        assert_eq!(seen.authorization.as_deref(), Some("Bearer t0ken-s3cr3t"));
        status(403)
    })
    .await;
    let auth = DrsAuth::none().with_token_file(token.clone());
    let client = DrsClient::new(&quick(), server.servers("dg.TEST"), auth).unwrap();
    let err = client
        .object(&DrsUri::parse("drs://dg.TEST:u1").unwrap())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HTTP 403")
            && text.contains(&format!("the bearer token in {}", token.display())),
        "{text}"
    );
    assert!(
        !text.contains("s3cr3t") && !format!("{err:?}").contains("s3cr3t"),
        "{err:?}"
    );
    assert_eq!(server.seen().len(), 1, "a 403 is not asked again");
}

#[tokio::test]
async fn basic_comes_from_the_netrc_machine_entry_of_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let netrc = dir.path().join(".netrc");
    std::fs::write(&netrc, "machine 127.0.0.1 login alice password pw\n").unwrap();
    let server = TestServer::start(|seen, _| match seen.authorization.as_deref() {
        Some("Basic YWxpY2U6cHc=") => reply(200, object("u1", 1)),
        _ => status(401),
    })
    .await;
    let uri = DrsUri::parse(&format!("drs://{}/u1", server.authority())).unwrap();
    let servers = server.servers(&server.authority());
    let client =
        DrsClient::new(&quick(), servers.clone(), DrsAuth::none().with_netrc(netrc)).unwrap();
    client.object(&uri).await.unwrap();
    let bare = DrsClient::new(&quick(), servers, DrsAuth::none()).unwrap();
    let err = bare.object(&uri).await.unwrap_err().to_string();
    assert!(
        err.contains("no credentials") && err.contains("HTTP 401"),
        "{err}"
    );
}

/// The three credential files a DRS request reads (a bearer token, a Gen3
/// key, a netrc file), each made writable by others, or (as root) given to
/// another user: the request fails naming the file and what to run, and
/// nothing reaches the server. Not root, the owner half is skipped (only
/// root can give a file away).
#[tokio::test]
async fn a_credential_file_another_user_could_change_is_refused_before_any_request() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(|seen, _| match seen.path.as_str() {
        EXCHANGE => reply(
            200,
            serde_json::json!({"access_token": access_token(1, 3600)}),
        ),
        _ => reply(200, object("dg.TEST/u1", 1)),
    })
    .await;
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken-s3cr3t\n").unwrap();
    let key = key_file(dir.path());
    let netrc = dir.path().join(".netrc");
    std::fs::write(&netrc, "default login alice password s3cr3t\n").unwrap();
    let root = drsd_proto::paths::current_uid() == 0;
    if !root {
        eprintln!("not root: the another-user half is skipped");
    }
    let cases: [(&Path, DrsAuth); 3] = [
        (&token, DrsAuth::none().with_token_file(token.clone())),
        (&key, DrsAuth::none().with_gen3_key(key.clone())),
        (&netrc, DrsAuth::none().with_netrc(netrc.clone())),
    ];
    for (path, auth) in cases {
        let client = DrsClient::new(&quick(), server.servers("dg.TEST"), auth).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = client.object(&uri).await.unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains("mode 666")
                && err.contains(&format!("chmod go-w {}", path.display())),
            "{err}"
        );
        assert!(!err.contains("s3cr3t"), "{err}");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if root {
            std::os::unix::fs::lchown(path, Some(65534), None).unwrap();
            let err = client.object(&uri).await.unwrap_err().to_string();
            assert!(
                err.contains(&path.display().to_string())
                    && err.contains("owned by uid 65534")
                    && err.contains("chown"),
                "{err}"
            );
            std::os::unix::fs::lchown(path, Some(0), None).unwrap();
        }
        // The user's own file again: the request passes (read at each use).
        client.object(&uri).await.unwrap();
    }
    // Only the requests after each fix went out: three with a login, and
    // the Gen3 key's one exchange.
    let seen = server.seen();
    let carried = seen.iter().filter(|s| s.authorization.is_some()).count();
    assert_eq!((seen.len(), carried), (4, 3), "{seen:?}");
}

/// A Gen3 API key as Fence makes one: a JWT whose `iss` is `fence`.
fn api_key(fence: &str) -> String {
    let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let claims = serde_json::json!({"iss": fence, "pur": "api_key", "sub": "7", "jti": "k1"});
    format!(
        "{}.{}.sig",
        enc(b"{\"alg\":\"RS256\"}"),
        enc(claims.to_string().as_bytes())
    )
}

fn key_file_of(dir: &Path, api_key: &str) -> PathBuf {
    let path = dir.join("credentials.json");
    let text = serde_json::json!({"api_key": api_key, "key_id": "k1"});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

/// The commons that issued the key, on plain http and its own port, named
/// nowhere else: `drs://HOST:PORT/...` and `drs://HOST/...` reach it
/// there, with a token the key was exchanged for.
#[tokio::test]
async fn the_commons_that_issued_the_key_is_reached_with_no_server_named() {
    let dir = tempfile::tempdir().unwrap();
    let token = access_token(1, 3600);
    let issued = token.clone();
    let server = TestServer::start(move |seen, _| match seen.path.as_str() {
        EXCHANGE => reply(200, serde_json::json!({"access_token": issued})),
        _ if seen.authorization.as_deref() == Some(&format!("Bearer {issued}")) => {
            reply(200, object("u1", 1))
        }
        _ => status(401),
    })
    .await;
    let fence = format!("{}user", server.root);
    let key = key_file_of(dir.path(), &api_key(&fence));
    let auth = DrsAuth::none().with_gen3_key(key);
    let client = DrsClient::new(&quick(), Default::default(), auth).unwrap();
    assert_eq!(client.servers().key_commons(), Some(&server.root));
    for text in [
        format!("drs://{}/u1", server.authority()),
        "drs://127.0.0.1/u1".to_string(),
    ] {
        let uri = DrsUri::parse(&text).unwrap();
        assert_eq!(client.object(&uri).await.unwrap().id, "u1", "{text}");
    }
    let exchanged = server.seen().into_iter().find(|s| s.path == EXCHANGE);
    assert_eq!(
        exchanged.unwrap().json()["api_key"],
        api_key(&fence).as_str()
    );
    assert!(client.read_the_key());
}

/// A key goes to the origin that issued it and nowhere else: not the same
/// host on another port, not the same port over another scheme, not a
/// server a repo names; nothing is even asked there.
#[tokio::test]
async fn a_key_is_sent_to_no_server_but_the_one_that_issued_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(|_, _| status(500)).await;
    let key = key_file_of(dir.path(), &api_key("http://127.0.0.1:9/user"));
    let auth = DrsAuth::none().with_gen3_key(key);
    let client = DrsClient::new(&quick(), Default::default(), auth).unwrap();
    let https = url::Url::parse("https://127.0.0.1:9/").unwrap();
    for other in [server.root.clone(), https] {
        let credential = client
            .caller
            .auth
            .credential(&client.caller.api.http, &other)
            .await
            .unwrap();
        assert_eq!(credential.kind, CredentialKind::None, "{other}");
    }
    let uri = DrsUri::parse(&format!("drs://{}/u1", server.authority())).unwrap();
    let shown = client.credential_shown(&uri);
    assert!(shown.starts_with("none is sent to it"), "{shown}");
    assert!(server.seen().is_empty());
}
