//! Foreign objects: remote objects referenced from repos by URL, never
//! uploaded by us. This service owns their whole life on this machine:
//!
//! - [`plan`]: an add-url's lines checked (URL, path inside the repo);
//! - [`resolve`]: one HEAD per URL, and the oid each pointer gets, held
//!   to the size and md5 the client expected ([`expected`]);
//! - [`read_small`]: objects for the pool's small tier read at once, so
//!   their pointers carry the content's sha256 from the start;
//! - [`stage`]: the registry and its mirror ([`Registry::record_and_mirror`]), the
//!   pointer files, `.gitattributes` and `git add`, as the repo's one writer;
//! - [`restore`]: a repo's entries put back from its mirror;
//! - [`promotion`]: the one path from a provisional pointer to a content
//!   pointer, taken by the workers once an object is hashed, at catch-up,
//!   and by `drsctl promote`;
//! - [`standing`]: where each provisional pointer's object stands;
//! - [`fetch`]: `drsctl fetch`, the prefetch of named objects queued
//!   (after `add-url --no-fetch`, or a failure fixed);
//! - [`own_fetch`]: in a team that does not take members' word
//!   (`team_trust_members = false`), objects whose source gives no checksum
//!   of its content fetched and hashed here before a pointer is promoted.
//!
//! The prefetch queue itself is the registry's; the workers that drain it
//! are `server::workers`, which come back here to promote.

mod drs;
mod error;
mod expected;
pub mod fetch;
mod own_fetch;
pub mod plan;
pub mod promotion;
mod read_small;
pub mod resolve;
pub mod restore;
pub mod stage;
pub mod standing;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::ops::repos::RepoLocks;
use crate::pool::{Oid, Pool};
use crate::registry::Registry;
use crate::remote::Remote;

pub use error::ForeignError;
pub use plan::UrlLine;
pub use resolve::OidFrom;
pub use standing::{Standing, Waiting};

/// The foreign-object service; see the module's notes.
pub struct ForeignObjects {
    registry: Arc<Registry>,
    /// Where the HEADs go: the client for each URL's kind.
    remote: Arc<Remote>,
    pool: Arc<Pool>,
    /// One writer at a time per repo: add-url, the workers and `drsctl
    /// promote` write the same pointers, index and mirror.
    repo_locks: Arc<RepoLocks>,
    /// Wakes the prefetch workers when jobs were queued.
    jobs_wake: Arc<Notify>,
    /// Objects larger than this are held, not prefetched.
    max_size: Option<u64>,
    /// The first wait before a failed prefetch is tried again.
    retry: Duration,
    /// Hashed objects waiting for their repo's next promotion batch.
    pending: promotion::PendingPromotions,
    /// With `team_trust_members = false`: the objects this node hashes
    /// itself rather than take another member's word for them.
    own: Option<Arc<own_fetch::OwnFetches>>,
    /// Repos whose index is refreshed a second after their last promotion.
    refresh: Arc<promotion::IndexRefresh>,
}

/// An add-url request, its repo located.
pub struct AddUrls {
    /// The client's folder, absolute: relative paths start there.
    pub cwd: PathBuf,
    /// The work tree's top and its common git folder.
    pub top: PathBuf,
    pub common: PathBuf,
    pub lines: Vec<UrlLine>,
    /// Replace files that are not LFS pointers.
    pub force: bool,
    /// Do not prefetch the provisional objects.
    pub no_fetch: bool,
}

/// What an add-url did, line by line.
#[derive(Debug, Default)]
pub struct AddOutcome {
    pub added: Vec<Added>,
    /// Lines refused, by line number; each left nothing behind.
    pub refused: Vec<Refused>,
}

/// A line whose pointer was written and staged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub line: usize,
    /// The URL, shown without its query.
    pub url: String,
    /// The pointer's path, relative to the repo's top.
    pub path: String,
    pub oid: Oid,
    pub size: u64,
    /// `oid` is the provisional oid (from the ETag), not the content's.
    pub provisional: bool,
    pub oid_from: OidFrom,
}

/// A line refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub line: usize,
    /// The URL without its query (or the line's start when it is not a URL).
    pub url: String,
    pub message: String,
}

impl ForeignObjects {
    pub(crate) fn new(
        registry: Arc<Registry>,
        remote: Arc<Remote>,
        pool: Arc<Pool>,
        repo_locks: Arc<RepoLocks>,
        jobs_wake: Arc<Notify>,
        max_size: Option<u64>,
        retry: Duration,
    ) -> ForeignObjects {
        ForeignObjects {
            registry,
            remote,
            pool,
            repo_locks,
            jobs_wake,
            max_size,
            retry,
            pending: Default::default(),
            own: None,
            refresh: Default::default(),
        }
    }

    /// In a team, with `team_trust_members = false`: a content oid another
    /// node recorded is not taken for an object whose source gives no
    /// checksum of its content; this node fetches (parts of `part_size`)
    /// and hashes it itself first (`own_fetch`).
    pub(crate) fn refusing_members_word(mut self, part_size: Option<u64>) -> ForeignObjects {
        self.own = Some(Arc::new(own_fetch::OwnFetches::new(
            self.pool.clone(),
            self.remote.clone(),
            self.registry.clone(),
            part_size,
            self.retry,
        )));
        self
    }

    /// `drsctl add-url`: per URL one HEAD; then, unless `no_fetch`, one GET
    /// of each object small enough for the pool's small tier (`read_small`),
    /// never a read of a larger one; then for the whole request one registry
    /// transaction, the mirror, the pointers, one `.gitattributes` update
    /// and one `git add`.
    /// A line that fails is reported with its number and leaves nothing
    /// behind; the other lines still go in. `on_head(done, total)` is
    /// called as the HEADs come back.
    pub async fn add_urls(
        &self,
        request: AddUrls,
        on_head: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<AddOutcome, ForeignError> {
        let AddUrls {
            cwd,
            top,
            common,
            lines,
            force,
            no_fetch,
        } = request;
        let mut refused = Vec::new();
        let targets = plan::plan(&top, &cwd, lines, force, &mut refused).await;
        let resolved =
            resolve::resolve(&self.registry, &self.remote, targets, on_head, &mut refused).await;
        let (resolved, failed_reads) = match no_fetch {
            true => (resolved, Vec::new()),
            false => self.read_small(resolved).await,
        };
        let staged = stage::Staging {
            top: &top,
            common: &common,
            force,
            no_fetch,
        };
        let added = self
            .record_and_stage(staged, resolved, failed_reads, &mut refused)
            .await?;
        if !added.is_empty() {
            // Staged in the second its pointers were written: refreshed
            // a second later, as after a promotion.
            self.refresh_index_soon(&top);
        }
        refused.sort_by_key(|f| f.line);
        Ok(AddOutcome { added, refused })
    }

    /// Queues a prefetch job for every object the registry holds unhashed
    /// and wakes the workers: after an add-url, and at start.
    pub async fn queue_unhashed(&self) {
        let (registry, max) = (self.registry.clone(), self.max_size);
        match crate::blocking(move || registry.queue_unhashed(max)).await {
            Ok(_) => self.jobs_wake.notify_waiters(),
            Err(e) => log::warn!("queueing prefetch jobs: {e}"),
        }
    }

    /// Wakes the workers: jobs were queued again.
    fn wake_workers(&self) {
        self.jobs_wake.notify_waiters();
    }
}
