//! `drsctl fetch`: the prefetch (download and hash) of the objects behind
//! named provisional pointers queued, so that they can be promoted. An
//! object added with `add-url --no-fetch` has a `skipped` job that no
//! worker takes; a `failed` one is not tried again by itself: both are
//! queued again with fresh tries, and an object without a job gets one.

use std::path::PathBuf;

use super::promotion::provisional_entries;
use super::{standing, ForeignError, ForeignObjects, Standing, Waiting};
use crate::git::Repo;
use crate::pool::Oid;
use crate::registry::{Entry, JobState, Registry};

/// What `drsctl fetch` asks: the wire's request, taken as it is.
pub use drsd_proto::FetchRequest;

/// What `drsctl fetch` did, by path relative to the repo's top.
#[derive(Debug, Default)]
pub struct FetchOutcome {
    pub repo: PathBuf,
    /// Not hashed yet: where each one's job stands now.
    pub fetching: Vec<Waiting>,
    /// Hashed already: only `drsctl promote` is missing.
    pub hashed: Vec<String>,
}

impl ForeignObjects {
    /// Queues the prefetch of the named (or all) provisional pointers'
    /// objects in the repo containing `request.cwd`, and wakes the workers.
    pub async fn fetch_asked(&self, request: FetchRequest) -> Result<FetchOutcome, ForeignError> {
        let registry = self.registry.clone();
        let wanted = crate::blocking(move || wanted(&registry, &request)).await?;
        let (registry, unhashed) = (self.registry.clone(), wanted.unhashed.clone());
        let queued = crate::blocking(move || {
            registry.queue_again(&unhashed, &[JobState::Skipped, JobState::Failed])
        })
        .await?;
        if queued > 0 {
            log::info!("{queued} prefetch job(s) queued again, as asked");
        }
        // Objects with no job at all get one; this also wakes the workers.
        self.queue_unhashed().await;
        let registry = self.registry.clone();
        crate::blocking(move || standing_of(&registry, wanted)).await
    }
}

/// The provisional entries asked for, in the repo at `top`.
struct Wanted {
    top: PathBuf,
    entries: Vec<Entry>,
    /// The provisional oids of those not hashed yet.
    unhashed: Vec<Oid>,
}

fn wanted(registry: &Registry, request: &FetchRequest) -> Result<Wanted, ForeignError> {
    let top = Repo::locate(&request.cwd)
        .map_err(ForeignError::NotInRepo)?
        .top;
    let entries = provisional_entries(registry, &top, &request.cwd, &request.paths, request.all)?;
    let unhashed = entries
        .iter()
        .filter(|e| e.object.content_oid.is_none())
        .map(|e| e.object.provisional_oid)
        .collect();
    Ok(Wanted {
        top,
        entries,
        unhashed,
    })
}

/// Where each entry's object stands after the queueing.
fn standing_of(registry: &Registry, wanted: Wanted) -> Result<FetchOutcome, ForeignError> {
    let mut outcome = FetchOutcome {
        repo: wanted.top,
        ..FetchOutcome::default()
    };
    for e in &wanted.entries {
        let w = standing::waiting(registry, e)?;
        match w.standing {
            Standing::Hashed => outcome.hashed.push(w.path),
            Standing::Job(_) => outcome.fetching.push(w),
        }
    }
    Ok(outcome)
}
