//! A Gen3 commons as a repo's object remote, recorded in `.gitattributes`
//! as `drs-remote=gen3+https://host` beside `drs-authz=/programs/P/projects/Q`
//! (`drsctl init --gen3 https://host --authz ...`): for stewards who hold
//! a Gen3 API key, not keys for the commons' bucket. The commons serves
//! Indexd at `/index`, DRS at `/ga4gh/drs/v1` and Fence at `/user`.
//!
//! This module owns what the commons is ([`Gen3Commons`]), the check of
//! `drsctl init`, and downloads: an object is found in the commons' Indexd
//! by its sha256 and read through DRS, where Fence signs its access URL
//! (`resolved.rs`), checked against the oid as every download is. Pushes
//! go through Fence (`ops/transfer/gen3.rs`, the client in
//! `drs/fence.rs`).
//!
//! The commons is used only when it issued the user's Gen3 API key (the
//! key's `iss`, `stores/drs/gen3.rs`) or the user named it in
//! `DRSD_DRS_SERVERS`: a cloned repo must not choose where this user's Gen3
//! token goes, where their objects are uploaded, or where downloads are
//! looked up.

use std::sync::Arc;

use super::{FetchError, PointerFetchError, Remote, ResolveError, UnusableRemote};
use crate::pool::{Oid, Pool};
use crate::stores::drs::{BadDrsUri, DrsClient, DrsError, DrsUri};
use crate::stores::{ObjectUrl, RemoteError};

/// How a commons is recorded: `gen3+` before its root URL.
pub const GEN3_SCHEME: &str = "gen3+";

/// Why a text is not a Gen3 commons.
#[derive(Debug, thiserror::Error)]
pub enum BadCommons {
    #[error("a Gen3 commons is written {GEN3_SCHEME}https://host")]
    NoScheme,
    #[error("not a URL: {0}")]
    NotUrl(#[from] url::ParseError),
    #[error("a Gen3 commons is an http(s) URL with a host and no credentials, query or fragment")]
    NotPlain,
}

/// Why a commons cannot be used by this daemon now.
#[derive(Debug, thiserror::Error)]
pub enum CommonsError {
    /// The DRS client could not be built (its settings, its credentials).
    #[error(transparent)]
    Client(Box<DrsError>),
    /// A cloned repo named a commons the user did not.
    #[error(
        "the repo records the Gen3 commons {root}, which did not issue your Gen3 API key ({key}) and is not a server you named in DRSD_DRS_SERVERS: a repo you cloned must not choose where your Gen3 key goes or where your objects are uploaded. If you trust it, put an API key it issued in the file DRSD_GEN3_CREDENTIALS names, or add {name}={root} to DRSD_DRS_SERVERS in the daemon's environment"
    )]
    NotNamed {
        root: String,
        name: String,
        /// Which commons the key names, or that there is none.
        key: String,
    },
    /// The commons' Indexd did not answer a lookup.
    #[error("the Gen3 commons {commons}'s Indexd could not be asked: {error}")]
    Indexd {
        commons: String,
        #[source]
        error: Box<DrsError>,
    },
}

impl From<DrsError> for CommonsError {
    fn from(error: DrsError) -> CommonsError {
        CommonsError::Client(Box::new(error))
    }
}

/// A Gen3 commons: its root URL (`https://host`, no trailing slash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gen3Commons {
    root: url::Url,
}

impl Gen3Commons {
    /// From `gen3+https://host[/path]`: http(s), a host, no credentials,
    /// query or fragment.
    pub fn parse(text: &str) -> Result<Gen3Commons, BadCommons> {
        let rest = text.strip_prefix(GEN3_SCHEME).ok_or(BadCommons::NoScheme)?;
        let root = url::Url::parse(rest)?;
        let plain = matches!(root.scheme(), "http" | "https")
            && root.host_str().is_some_and(|h| !h.is_empty())
            && root.username().is_empty()
            && root.password().is_none()
            && root.query().is_none()
            && root.fragment().is_none();
        if !plain {
            return Err(BadCommons::NotPlain);
        }
        let mut root = root;
        let path = root.path().trim_end_matches('/').to_string();
        root.set_path(&path);
        Ok(Gen3Commons { root })
    }

    /// The commons' root (`https://host`).
    pub fn root(&self) -> &url::Url {
        &self.root
    }

    /// As recorded: `gen3+https://host`.
    pub fn url(&self) -> String {
        format!("{GEN3_SCHEME}{}", self.root.as_str().trim_end_matches('/'))
    }

    /// The root of the commons' Indexd: `/index` below the commons'.
    pub fn indexd(&self) -> url::Url {
        let mut url = self.root.clone();
        let path = format!("{}/index", self.root.path().trim_end_matches('/'));
        url.set_path(&path);
        url
    }

    /// The DRS URI of the record `did` on this commons (hostname form).
    pub fn drs_uri(&self, did: &str) -> Result<DrsUri, BadDrsUri> {
        let host = self.root.host_str().unwrap_or_default();
        let authority = match self.root.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let id = percent_encoding::utf8_percent_encode(did, percent_encoding::NON_ALPHANUMERIC);
        DrsUri::parse(&format!("drs://{authority}/{id}"))
    }

    /// Where object `oid` is kept, for messages.
    pub fn location(&self, oid: &Oid) -> String {
        format!("the Gen3 commons {} (sha256 {oid})", self.url())
    }
}

/// The Gen3 project of an authz list, as calypr/git-drs names it: `P-Q`
/// for the first `/programs/P/projects/Q`.
pub fn project_of(authz: &[String]) -> Option<String> {
    authz.iter().find_map(|path| {
        let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        match parts.as_slice() {
            ["", "programs", p, "projects", q] if !p.is_empty() && !q.is_empty() => {
                Some(format!("{p}-{q}"))
            }
            _ => None,
        }
    })
}

impl Remote {
    /// The DRS client, once the commons is shown to be the one that issued
    /// the user's Gen3 API key or a server the user named in
    /// `DRSD_DRS_SERVERS`; else why not, with what to do.
    pub fn commons_client(&self, commons: &Gen3Commons) -> Result<Arc<DrsClient>, CommonsError> {
        let drs = self.drs()?;
        if drs.servers().names(commons.root()) {
            return Ok(drs);
        }
        let root = commons.root().as_str().trim_end_matches('/').to_string();
        let name = match commons.root().port() {
            Some(port) => format!("{}:{port}", commons.root().host_str().unwrap_or_default()),
            None => commons.root().host_str().unwrap_or_default().to_string(),
        };
        let key = match drs.servers().key_commons() {
            Some(issuer) => format!("it was issued by {}", issuer.as_str().trim_end_matches('/')),
            None => "none names its commons".into(),
        };
        Err(CommonsError::NotNamed { root, name, key })
    }

    /// Object `oid` of `size` bytes from the commons into `pool`: its
    /// Indexd records of that sha256 (and size), each read through DRS
    /// (Fence-signed access with the Gen3 key), checked against the oid.
    pub async fn fetch_from_commons(
        &self,
        pool: Arc<Pool>,
        commons: &Gen3Commons,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<(), PointerFetchError> {
        let failed = |why: String| {
            PointerFetchError::Fetch(FetchError::Remote(RemoteError::Protocol {
                op: "fetch",
                object: commons.location(&oid),
                why,
            }))
        };
        self.commons_client(commons)
            .map_err(|e| failed(e.to_string()))?;
        let indexd = self
            .indexd(&commons.indexd())
            .map_err(|e| failed(e.to_string()))?;
        let records = indexd
            .by_sha256(oid)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut tried = Vec::new();
        for record in records.iter().filter(|r| r.size.is_none_or(|s| s == size)) {
            let uri = match commons.drs_uri(&record.did) {
                Ok(uri) => uri,
                Err(why) => {
                    tried.push(why.to_string());
                    continue;
                }
            };
            let url = ObjectUrl::Drs(uri.clone());
            match self
                .fetch_verified(pool.clone(), &url, oid, size, report)
                .await
            {
                Ok(_) => return Ok(()),
                Err(ResolveError::Fetch(e @ FetchError::Mismatch { .. })) => {
                    log::warn!("{uri}: not object {oid}: {e}");
                    tried.push(format!("{uri}: {e}"));
                }
                Err(e) => tried.push(format!("{uri}: {e}")),
            }
        }
        if tried.is_empty() {
            return Err(PointerFetchError::Missing {
                oid,
                object: commons.location(&oid),
            });
        }
        Err(failed(tried.join("; ")))
    }

    /// `drsctl init --gen3`'s check: the commons issued the user's key or
    /// is named in `DRSD_DRS_SERVERS`, and its Indexd answers a lookup.
    pub async fn check_commons(&self, commons: &Gen3Commons) -> Result<(), UnusableRemote> {
        self.commons_client(commons)?;
        let indexd = self.indexd(&commons.indexd()).map_err(CommonsError::from)?;
        indexd
            .by_sha256(Oid::of(b""))
            .await
            .map(drop)
            .map_err(|error| {
                UnusableRemote::Commons(CommonsError::Indexd {
                    commons: commons.url(),
                    error: Box::new(error),
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commons_is_recorded_as_gen3_plus_its_root() {
        let c = Gen3Commons::parse("gen3+https://data.example.org/").unwrap();
        assert_eq!(c.url(), "gen3+https://data.example.org");
        assert_eq!(c.indexd().as_str(), "https://data.example.org/index");
        assert_eq!(Gen3Commons::parse(&c.url()).unwrap(), c);
        for bad in [
            "gen3+ftp://h",
            "gen3+https://u:pw@h",
            "gen3+https://h/?x=1",
            "https://h",
            "gen3+not a url",
        ] {
            assert!(Gen3Commons::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_did_becomes_a_hostname_drs_uri_on_the_commons() {
        let c = Gen3Commons::parse("gen3+http://127.0.0.1:8080").unwrap();
        let uri = c.drs_uri("dg.TEST/0a-1b").unwrap();
        assert_eq!(uri.id(), "dg.TEST/0a-1b");
        assert!(
            uri.as_str().starts_with("drs://127.0.0.1:8080/"),
            "{}",
            uri.as_str()
        );
    }

    #[test]
    fn the_project_is_program_dash_project_of_the_first_project_path() {
        let authz = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            project_of(&authz(&["/open", "/programs/P/projects/Q"])).as_deref(),
            Some("P-Q")
        );
        assert_eq!(project_of(&authz(&["/programs/P"])), None);
        assert_eq!(project_of(&authz(&["/programs//projects/Q"])), None);
    }
}
