//! Credentials for DRS requests, chosen per server, and named in errors by
//! where they came from ([`CredentialKind`]), never by their value.
//!
//! For a request to a server, in this order:
//! 1. a bearer credential, when one is configured and the server is one the
//!    user named in `DRSD_DRS_SERVERS`, or the commons that issued the
//!    user's Gen3 API key (its `iss`, `gen3.rs`): the Gen3 API key in
//!    `DRSD_GEN3_CREDENTIALS` (exchanged for short-lived access tokens,
//!    `gen3.rs`) or the token in `DRSD_DRS_TOKEN_FILE` (read at each use,
//!    so a rotated token needs no restart). Not both: that is refused.
//! 2. else the netrc `machine` entry for the server's host (`netrc.rs`);
//!    the `default` entry only for servers named in `DRSD_DRS_SERVERS`;
//! 3. else none.
//!
//! Why the server must be named: a DRS URI comes from a repo, and a repo
//! may be hostile. `drs://attacker.example/x` must not make drsd hand the
//! user's token, or post their long-lived Gen3 key, to that host. A netrc
//! `machine` entry names its host itself, so it needs no such check.

use crate::settings::env::{DRS_TOKEN_FILE_ENV, GEN3_CREDENTIALS_ENV};
use crate::settings::{Key, Settings};
use std::fmt;
use std::path::{Path, PathBuf};

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::RequestBuilder;

use super::gen3::{Gen3Key, KeyCommons};
use super::netrc::NetrcFile;
use super::{DrsError, DrsServers};

/// Which credential a request carried, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialKind {
    None,
    /// A netrc login: `file` as shown (`~/.netrc` for the default file).
    Netrc {
        file: String,
        host: String,
    },
    TokenFile(PathBuf),
    Gen3(PathBuf),
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialKind::None => f.write_str("no credentials"),
            CredentialKind::Netrc { file, host } => write!(f, "{file} login for {host}"),
            CredentialKind::TokenFile(path) => {
                write!(f, "the bearer token in {}", path.display())
            }
            CredentialKind::Gen3(path) => write!(f, "the Gen3 API key in {}", path.display()),
        }
    }
}

/// What goes on one request: the `Authorization` value (marked sensitive,
/// so reqwest and `Debug` never show it) and where it came from.
#[derive(Clone)]
pub(super) struct Credential {
    pub kind: CredentialKind,
    header: Option<HeaderValue>,
}

impl Credential {
    pub fn new(kind: CredentialKind, header: HeaderValue) -> Credential {
        Credential {
            kind,
            header: Some(header),
        }
    }

    fn none() -> Credential {
        Credential {
            kind: CredentialKind::None,
            header: None,
        }
    }

    /// Whether this credential is the header value `value`.
    pub fn carries(&self, value: &HeaderValue) -> bool {
        self.header.as_ref() == Some(value)
    }

    pub fn apply(&self, req: RequestBuilder) -> RequestBuilder {
        match &self.header {
            Some(value) => req.header(AUTHORIZATION, value.clone()),
            None => req,
        }
    }

    /// The secret texts this credential sends, for taking them out of
    /// what a server echoes: a bearer token; a Basic pair's base64, its
    /// `user:password` and its password.
    pub fn secrets(&self) -> Vec<String> {
        use base64::Engine;
        let Some(value) = self.header.as_ref().and_then(|v| v.to_str().ok()) else {
            return Vec::new();
        };
        let (scheme, secret) = value.split_once(' ').unwrap_or(("", value));
        let mut out = vec![secret.to_string()];
        if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(secret)
                .ok()
                .and_then(|d| String::from_utf8(d).ok());
            if let Some(pair) = decoded {
                out.extend(
                    pair.split_once(':')
                        .map(|(_, password)| password.to_string()),
                );
                out.push(pair);
            }
        }
        out.retain(|s| !s.is_empty());
        out
    }

    /// A Gen3 access token, which a 401 may mean has been revoked early.
    pub fn is_renewable(&self) -> bool {
        matches!(self.kind, CredentialKind::Gen3(_))
    }
}

/// `Bearer <token>` or `Basic <base64>`, refused when the text could not
/// be a header (a newline in a token file would forge headers).
fn header(scheme: &str, secret: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("{scheme} {secret}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

fn basic(user: &str, password: &str) -> Option<HeaderValue> {
    use base64::Engine;
    let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    header("Basic", &pair)
}

/// The bearer credential configured, if any.
enum Bearer {
    TokenFile(PathBuf),
    Gen3(Gen3Key),
}

/// The credentials of DRS requests (see the module notes).
pub struct DrsAuth {
    bearer: Option<Bearer>,
    netrc: NetrcFile,
    /// The origins of the servers the user named (`DRSD_DRS_SERVERS`, an
    /// Indexd URL): the only ones a bearer credential or netrc's `default`
    /// login is sent to.
    named: Vec<url::Origin>,
}

impl fmt::Debug for DrsAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bearer = match &self.bearer {
            Some(Bearer::TokenFile(p)) => CredentialKind::TokenFile(p.clone()),
            Some(Bearer::Gen3(key)) => CredentialKind::Gen3(key.path().to_path_buf()),
            None => CredentialKind::None,
        };
        write!(f, "DrsAuth(bearer: {bearer}, netrc: {:?})", self.netrc)
    }
}

impl DrsAuth {
    /// The settings `gen3_credentials` (`DRSD_GEN3_CREDENTIALS`) or
    /// `drs_token_file` (`DRSD_DRS_TOKEN_FILE`), not both, and the netrc
    /// file (`netrc`, `$NETRC`, else `~/.netrc`). The files are read when
    /// used, not here.
    pub fn from_settings(settings: &Settings) -> Result<DrsAuth, DrsError> {
        let var = |key| settings.path(key).map(PathBuf::from);
        let bearer = match (var(Key::Gen3Credentials), var(Key::DrsTokenFile)) {
            (Some(_), Some(token)) => {
                return Err(DrsError::Credentials {
                    what: "the DRS credentials",
                    path: token,
                    why: format!(
                        "set one of {GEN3_CREDENTIALS_ENV} and {DRS_TOKEN_FILE_ENV}, not both"
                    ),
                })
            }
            (Some(key), None) => Some(Bearer::Gen3(Gen3Key::new(key))),
            (None, Some(token)) => Some(Bearer::TokenFile(token)),
            (None, None) => None,
        };
        Ok(DrsAuth {
            bearer,
            netrc: NetrcFile::from_settings(settings),
            named: Vec::new(),
        })
    }

    /// No bearer credential and no netrc file.
    pub fn none() -> DrsAuth {
        DrsAuth {
            bearer: None,
            netrc: NetrcFile::locate(|_| None),
            named: Vec::new(),
        }
    }

    /// These logins instead of `$NETRC` / `~/.netrc`.
    pub fn with_netrc(self, file: PathBuf) -> DrsAuth {
        self.netrc_file(NetrcFile::at(file))
    }

    pub(super) fn netrc_file(mut self, netrc: NetrcFile) -> DrsAuth {
        self.netrc = netrc;
        self
    }

    /// A bearer token read from `file` at each use.
    pub fn with_token_file(mut self, file: PathBuf) -> DrsAuth {
        self.bearer = Some(Bearer::TokenFile(file));
        self
    }

    /// A Gen3 API key file, exchanged for access tokens.
    pub fn with_gen3_key(mut self, file: PathBuf) -> DrsAuth {
        self.bearer = Some(Bearer::Gen3(Gen3Key::new(file)));
        self
    }

    /// The servers the user named, to which bearer credentials and netrc's
    /// `default` login may go. [`DrsClient::new`] sets its own map here.
    ///
    /// [`DrsClient::new`]: super::DrsClient::new
    pub fn trusting(mut self, servers: &DrsServers) -> DrsAuth {
        self.named.extend(servers.bases().map(url::Url::origin));
        self
    }

    /// Trusts the server at `url` too (an Indexd the user configured).
    pub(super) fn trusting_url(mut self, url: &url::Url) -> DrsAuth {
        self.named.push(url.origin());
        self
    }

    /// `req` with the credential for the server at `host` (any URL on it),
    /// and which credential that was.
    pub async fn authorize(
        &self,
        req: RequestBuilder,
        host: &url::Url,
    ) -> Result<(RequestBuilder, CredentialKind), DrsError> {
        let (client, request) = req.build_split();
        let request = request.map_err(|e| DrsError::Transport {
            asked: "a request to authorize".into(),
            server: crate::stores::shown_url(host),
            why: format!("it could not be built: {}", super::call::chain(&e)),
            attempts: 0,
            permanence: crate::stores::Permanence::Permanent,
        })?;
        let credential = self.credential(&client, host).await?;
        let req = credential.apply(RequestBuilder::from_parts(client, request));
        Ok((req, credential.kind))
    }

    /// The credential for the server at `server` (see the module notes).
    pub(super) async fn credential(
        &self,
        http: &reqwest::Client,
        server: &url::Url,
    ) -> Result<Credential, DrsError> {
        let named = self.named.contains(&server.origin());
        match &self.bearer {
            Some(Bearer::TokenFile(path)) if named => token_file(path).await,
            Some(Bearer::Gen3(key)) if named => key.credential(http, server).await,
            _ => self.netrc_login(server, named),
        }
    }

    /// Whether a bearer credential (a Gen3 key or a token file) goes to
    /// the server at `server`: then its signed-URL endpoint
    /// (`/objects/{id}/access/{access_id}`, Fence in a commons) is the
    /// way to its bytes rather than a raw bucket URL the user rarely holds
    /// keys for.
    pub(super) fn has_bearer_for(&self, server: &url::Url) -> bool {
        self.bearer.is_some() && self.named.contains(&server.origin())
    }

    /// The commons that issued the Gen3 API key (`None`: no key is
    /// configured), read from the key file now.
    pub(super) fn key_commons(&self) -> Option<(PathBuf, KeyCommons)> {
        match &self.bearer {
            Some(Bearer::Gen3(key)) => Some((key.path().to_path_buf(), key.commons())),
            _ => None,
        }
    }

    /// Forgets the Gen3 access token `used`, after `server` refused it.
    pub(super) async fn forget(&self, server: &url::Url, used: &Credential) {
        if let Some(Bearer::Gen3(key)) = &self.bearer {
            key.forget(server, used).await;
        }
    }

    fn netrc_login(&self, server: &url::Url, default_too: bool) -> Result<Credential, DrsError> {
        let Some(login) = self.netrc.login(server, default_too)? else {
            return Ok(Credential::none());
        };
        let header = basic(&login.user, &login.password).ok_or_else(|| DrsError::Credentials {
            what: "the netrc file",
            path: PathBuf::from(self.netrc.shown()),
            why: format!(
                "its {} holds a character no HTTP header may carry",
                login.kind
            ),
        })?;
        Ok(Credential::new(login.kind, header))
    }
}

/// `Bearer <the file's text, trimmed>`.
async fn token_file(path: &Path) -> Result<Credential, DrsError> {
    let bad = |why: String| DrsError::Credentials {
        what: "the bearer token file",
        path: path.to_path_buf(),
        why,
    };
    // Read (and checked) at each use: a token another user could write
    // would let them choose what drsd sends (`trusted_file`).
    let owned = path.to_path_buf();
    let bytes = crate::blocking(move || crate::trusted_file::read(&owned))
        .await
        .map_err(|e| bad(format!("{e} (named by {DRS_TOKEN_FILE_ENV})")))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        bad(format!(
            "it is not UTF-8 text (named by {DRS_TOKEN_FILE_ENV})"
        ))
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(bad("it is empty".into()));
    }
    let header = header("Bearer", token)
        .ok_or_else(|| bad("it holds a character no HTTP header may carry".into()))?;
    Ok(Credential::new(
        CredentialKind::TokenFile(path.to_path_buf()),
        header,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    fn shown(req: RequestBuilder) -> Option<String> {
        let req = req.build().unwrap();
        req.headers()
            .get(AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_string())
    }

    fn netrc(dir: &Path) -> PathBuf {
        let path = dir.join("netrc");
        std::fs::write(
            &path,
            "machine h.org login alice password pw\ndefault login any password dflt\n",
        )
        .unwrap();
        path
    }

    #[tokio::test]
    async fn a_token_goes_only_to_named_servers_and_netrc_fills_in_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "  tok-1\n").unwrap();
        let servers = DrsServers::parse("dg.TEST=https://named.org").unwrap();
        let auth = DrsAuth::none()
            .with_netrc(netrc(dir.path()))
            .with_token_file(token.clone())
            .trusting(&servers);
        let client = reqwest::Client::new();
        let ask = |at: &str| client.get(url(at));

        let (req, kind) = auth
            .authorize(ask("https://named.org/x"), &url("https://named.org/"))
            .await
            .unwrap();
        assert_eq!(shown(req).as_deref(), Some("Bearer tok-1"));
        assert_eq!(kind, CredentialKind::TokenFile(token.clone()));

        let (req, kind) = auth
            .authorize(ask("https://h.org/x"), &url("https://h.org/"))
            .await
            .unwrap();
        assert!(shown(req).unwrap().starts_with("Basic "));
        assert_eq!(
            kind.to_string(),
            format!("{} login for h.org", dir.path().join("netrc").display())
        );

        let (req, kind) = auth
            .authorize(ask("https://evil.org/x"), &url("https://evil.org/"))
            .await
            .unwrap();
        assert_eq!(shown(req), None, "neither the token nor the default login");
        assert_eq!(kind, CredentialKind::None);
    }

    #[tokio::test]
    async fn the_token_file_is_read_at_each_use() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        let servers = DrsServers::parse("p=https://named.org").unwrap();
        let auth = DrsAuth::none()
            .with_token_file(token.clone())
            .trusting(&servers);
        let client = reqwest::Client::new();
        let at = url("https://named.org/");
        for value in ["one", "two"] {
            std::fs::write(&token, value).unwrap();
            let (req, _) = auth.authorize(client.get(at.clone()), &at).await.unwrap();
            assert_eq!(shown(req), Some(format!("Bearer {value}")));
        }
    }

    #[tokio::test]
    async fn a_token_file_that_is_empty_or_forges_headers_is_refused_without_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        let servers = DrsServers::parse("p=https://named.org").unwrap();
        let auth = DrsAuth::none()
            .with_token_file(token.clone())
            .trusting(&servers);
        let client = reqwest::Client::new();
        let at = url("https://named.org/");
        for (text, why) in [("  \n", "empty"), ("tok\nX-Evil: 1", "character")] {
            std::fs::write(&token, text).unwrap();
            let err = auth
                .authorize(client.get(at.clone()), &at)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(why) && err.contains("token"), "{err}");
            assert!(!err.contains("X-Evil"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_gen3_key_is_not_even_exchanged_for_a_server_the_user_did_not_name() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("credentials.json");
        std::fs::write(&key, r#"{"api_key": "k", "key_id": "i"}"#).unwrap();
        let servers = DrsServers::parse("dg.TEST=https://named.org").unwrap();
        let auth = DrsAuth::none().with_gen3_key(key).trusting(&servers);
        // Nothing listens there: an exchange would fail, not pass silently.
        let elsewhere = url("http://127.0.0.1:9/ga4gh/drs/v1");
        let client = reqwest::Client::new();
        let credential = auth.credential(&client, &elsewhere).await.unwrap();
        assert_eq!(credential.kind, CredentialKind::None);
    }

    #[test]
    fn credential_kinds_read_as_sentences() {
        assert_eq!(CredentialKind::None.to_string(), "no credentials");
        let netrc = CredentialKind::Netrc {
            file: "~/.netrc".into(),
            host: "h.org".into(),
        };
        assert_eq!(netrc.to_string(), "~/.netrc login for h.org");
        assert_eq!(
            CredentialKind::Gen3("/k.json".into()).to_string(),
            "the Gen3 API key in /k.json"
        );
    }
}
