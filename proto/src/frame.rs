//! The lines the daemon sends: a request's progress events, then exactly
//! one result or error, each carrying the request's id.

use serde::{Deserialize, Serialize};

use crate::{Reply, WireError};

/// One line from the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    /// `None` when the request line could not be read far enough to find its id.
    pub id: Option<u64>,
    #[serde(flatten)]
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
// A frame lives only while it is encoded or decoded, one at a time: boxing
// the reply would cost an allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Body {
    Progress { progress: Progress },
    Result { result: Reply },
    Error { error: WireError },
}

/// How far a long request has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub stage: Stage,
    pub done: u64,
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a long request is doing while it reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// add-url: asking each URL's store for its size and ETag.
    Head,
    Download,
    Upload,
    /// pool verify: re-hashing entries.
    Verify,
    Hydrate,
    Gc,
    /// prune: proving objects' copies elsewhere, freeing them here.
    Prune,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Stage::Head => "head",
            Stage::Download => "download",
            Stage::Upload => "upload",
            Stage::Verify => "verify",
            Stage::Hydrate => "hydrate",
            Stage::Gc => "gc",
            Stage::Prune => "prune",
        })
    }
}

impl ResponseFrame {
    pub fn result(id: u64, result: Reply) -> ResponseFrame {
        ResponseFrame {
            id: Some(id),
            body: Body::Result { result },
        }
    }

    pub fn progress(id: u64, progress: Progress) -> ResponseFrame {
        ResponseFrame {
            id: Some(id),
            body: Body::Progress { progress },
        }
    }

    pub fn error(id: Option<u64>, error: WireError) -> ResponseFrame {
        ResponseFrame {
            id,
            body: Body::Error { error },
        }
    }
}
