//! Where a provisional pointer's object stands: its prefetch job's state,
//! or hashed once only `drsctl promote` is missing. For `drsctl
//! provisional` and the pointers `drsctl promote` leaves waiting.

use std::fmt;
use std::path::PathBuf;

use super::{ForeignError, ForeignObjects};
use crate::git::Repo;
use crate::registry::{Entry, JobState, Registry};

/// Where a provisional pointer's object stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Hashed: only `drsctl promote` is missing.
    Hashed,
    /// Not hashed yet: its prefetch job's state (queued when it has none yet).
    Job(JobState),
}

impl Standing {
    /// As the wire names it: `hashed`, or the job's state.
    pub const fn as_str(self) -> &'static str {
        match self {
            Standing::Hashed => "hashed",
            Standing::Job(state) => state.as_str(),
        }
    }
}

impl fmt::Display for Standing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provisional pointer and where its object stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Relative to the repo's top.
    pub path: String,
    /// The object's URL, redacted.
    pub url: String,
    pub standing: Standing,
    /// Why its job last failed (retrying, failed).
    pub error: Option<String>,
}

/// Where the object of the entry's pointer stands.
pub(super) fn waiting(registry: &Registry, e: &Entry) -> Result<Waiting, ForeignError> {
    let o = &e.object;
    let (standing, error) = match &o.content_oid {
        Some(_) => (Standing::Hashed, None),
        None => {
            let job = registry.job_state(o.url.expose(), &o.etag, o.size)?;
            let (state, error) = job.unwrap_or((JobState::Queued, None));
            (Standing::Job(state), error)
        }
    };
    Ok(Waiting {
        path: e.path.clone(),
        url: o.url.to_string(),
        standing,
        error,
    })
}

impl ForeignObjects {
    /// The provisional pointers of the repo containing `cwd` (its top
    /// returned with them), and where each one's object stands.
    pub async fn provisional(&self, cwd: PathBuf) -> Result<(PathBuf, Vec<Waiting>), ForeignError> {
        let registry = self.registry.clone();
        crate::blocking(move || {
            let top = Repo::locate(&cwd).map_err(ForeignError::NotInRepo)?.top;
            let mut pointers = Vec::new();
            for e in registry.for_repo(&top)? {
                if e.is_provisional() {
                    pointers.push(waiting(&registry, &e)?);
                }
            }
            Ok((top, pointers))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standing_is_named_as_the_wire_names_it() {
        assert_eq!(Standing::Hashed.to_string(), "hashed");
        assert_eq!(Standing::Job(JobState::Skipped).to_string(), "skipped");
    }
}
