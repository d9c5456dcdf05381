//! What a test hands the server: the objects it serves, how each can be
//! reached, which credentials it wants, and the counts it keeps. Plain data,
//! so a test states a case in one literal and the handlers stay free of
//! set-up concerns.

use std::time::Duration;

use md5::Md5;
use sha2::{Digest, Sha256};

/// One DRS object (a single blob) as a test states it.
#[derive(Debug, Clone)]
pub struct ObjectSpec {
    /// The DRS id; any string (it is percent-encoded in URLs).
    pub id: String,
    /// The DRS `name`, when it has one.
    pub name: Option<String>,
    /// The bytes this server holds, or only the size of an object whose
    /// bytes are elsewhere (an `s3://` access URL the test filled itself).
    pub content: Content,
    /// `(type, hex)` pairs, as DRS lists them: `sha-256`, `md5`, `etag`, ...
    pub checksums: Vec<(String, String)>,
    /// The access methods, in the order listed.
    pub access: Vec<AccessSpec>,
}

/// The bytes of an object, or only their size.
#[derive(Debug, Clone)]
pub enum Content {
    Bytes(Vec<u8>),
    /// Metadata only: `/data` has nothing to serve for it.
    Size(u64),
}

/// How one access method of an object reaches the bytes.
#[derive(Debug, Clone)]
pub enum AccessSpec {
    /// An `access_url` to `/data/{id}` on this server (type `https`, the
    /// only web type DRS 1.2 names, though the URL is plain http on
    /// loopback). Each `Name: value` header is listed in
    /// `access_url.headers` and required by the data endpoint.
    Served { headers: Vec<String> },
    /// An `access_url` elsewhere, listed as given (e.g. `s3`,
    /// `s3://bucket/key`) with its `headers` (`Name: value`); this server
    /// does not serve it.
    Url {
        kind: String,
        url: String,
        headers: Vec<String>,
    },
    /// An `access_id` only: `GET /objects/{id}/access/{access_id}` answers
    /// with a URL to `/data/{id}` signed for `ttl`, and the data endpoint
    /// refuses a bad or expired signature.
    ///
    /// With `raw`, the method lists that URL too as its `access_url` and is
    /// typed by its scheme, as Indexd renders a stored `s3://` URL in a
    /// commons (where Fence serves the access id on the same host).
    Signed {
        access_id: String,
        ttl: Duration,
        raw: Option<String>,
    },
}

impl AccessSpec {
    /// Served here with no header required.
    pub fn served() -> AccessSpec {
        AccessSpec::Served {
            headers: Vec::new(),
        }
    }

    /// Served here, to requests carrying `header` (`Name: value`) only.
    pub fn served_with(header: &str) -> AccessSpec {
        AccessSpec::Served {
            headers: vec![header.to_string()],
        }
    }

    /// `s3://bucket/key`, type `s3`.
    pub fn s3(bucket: &str, key: &str) -> AccessSpec {
        AccessSpec::Url {
            kind: "s3".into(),
            url: format!("s3://{bucket}/{key}"),
            headers: Vec::new(),
        }
    }

    /// `url` (served elsewhere), type `https`, listing `headers`.
    pub fn elsewhere(url: &str, headers: &[&str]) -> AccessSpec {
        AccessSpec::Url {
            kind: "https".into(),
            url: url.to_string(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
        }
    }

    /// An `access_id` resolved to a URL signed for `ttl`.
    pub fn signed(access_id: &str, ttl: Duration) -> AccessSpec {
        AccessSpec::Signed {
            access_id: access_id.to_string(),
            ttl,
            raw: None,
        }
    }

    /// An `access_id` resolved to a URL signed for `ttl`, listed with the
    /// raw `access_url` `raw` (`s3://commons-bucket/key`), as Indexd does.
    pub fn signed_over(access_id: &str, ttl: Duration, raw: &str) -> AccessSpec {
        AccessSpec::Signed {
            access_id: access_id.to_string(),
            ttl,
            raw: Some(raw.to_string()),
        }
    }
}

impl ObjectSpec {
    /// A blob of `bytes` served here with no header required, listing its
    /// `sha-256` and `md5`: the common case, to adjust field by field.
    pub fn blob(id: &str, bytes: Vec<u8>) -> ObjectSpec {
        ObjectSpec {
            id: id.to_string(),
            name: None,
            checksums: vec![
                ("sha-256".into(), hex::encode(Sha256::digest(&bytes))),
                ("md5".into(), hex::encode(Md5::digest(&bytes))),
            ],
            content: Content::Bytes(bytes),
            access: vec![AccessSpec::served()],
        }
    }
}

/// What the DRS endpoints (objects, bulk, access) ask of a caller. The data
/// endpoint follows the access methods instead; service-info and OPTIONS
/// are open, as the spec has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Auth {
    #[default]
    None,
    /// HTTP Basic with this user and password.
    Basic { user: String, password: String },
    /// `Authorization: Bearer T` for a token added with
    /// [`super::DrsServer::add_token`] or issued by the token endpoint.
    Bearer,
}

/// An endpoint that can be told to answer `202 Accepted` for an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /objects/{id}`.
    Object,
    /// `GET /objects/{id}/access/{access_id}`, for any access id, and
    /// `POST /objects/access` naming the id among others.
    Access,
    /// `POST /objects` naming the id among others.
    Bulk,
    /// `OPTIONS /objects/{id}`.
    Options,
}

/// How many answers a deferral lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    Next(u32),
    Forever,
}

/// Requests seen per endpoint (whatever was answered) and the body bytes
/// the data endpoint sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub service_info: u64,
    pub objects_get: u64,
    pub objects_options: u64,
    pub bulk_post: u64,
    /// `GET /objects/{id}/access/{access_id}`.
    pub access: u64,
    /// `POST /objects/access` (bulk access URLs), served or not.
    pub bulk_access: u64,
    pub data_get: u64,
    pub data_head: u64,
    /// Body bytes handed to the connection by `GET /data/...`.
    pub data_bytes: u64,
    /// `GET /index/{did}`.
    pub index_get: u64,
    /// `GET /index?hash=...` (any query of the index).
    pub index_by_hash: u64,
    /// Of those, the ones asking by md5.
    pub index_by_md5: u64,
    pub index_post: u64,
    /// `POST /index/{did}`: new versions of a record.
    pub index_version: u64,
    /// `PUT /index/{did}` and `PUT /index/blank/{did}`.
    pub index_update: u64,
    /// Requests to Fence's `/user/data/...` routes.
    pub fence: u64,
    /// PUTs to the upload bucket (whole objects and parts), and their bytes.
    pub bucket_put: u64,
    pub bucket_bytes_in: u64,
    /// GETs and HEADs of the upload bucket (their body bytes count in
    /// `data_bytes`).
    pub bucket_get: u64,
    /// `POST /user/credentials/api/access_token`.
    pub token: u64,
}
