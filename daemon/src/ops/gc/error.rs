//! What can stop a gc, each naming what it was doing and on what; the
//! server's `wire_error` gives each its wire code.

use std::path::PathBuf;

use crate::lfs::scan::ScanError;
use crate::pool::PoolError;
use crate::registry::RegistryError;
use crate::remote::partials::PartialsError;

use super::roots::RootsError;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// No repo is registered: every entry would look unreferenced.
    #[error(
        "gc refused: no repo is registered, so every pool entry would look unreferenced \
         (was {} lost?). Register your repos again (`drsctl repos add PATH` or \
         `drsctl init PATH`), or run `drsctl gc --force` to sweep anyway (entries a repo \
         referenced within the grace period stay)",
        state_file.display()
    )]
    NoRepos { state_file: PathBuf },
    /// A registered repo's objects could not be listed: what it needs would
    /// look unreferenced.
    #[error(
        "gc stopped: the registered repo {shown} cannot be read ({source}), and what it \
         needs would look unreferenced; bring it back, or `drsctl repos remove {shown}`",
        shown = repo.display()
    )]
    Unreadable {
        repo: PathBuf,
        #[source]
        source: ScanError,
    },
    /// Listing, sweeping or compacting the pool, or its record of sightings.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// Reading what the registry records for the repos.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Publishing this node's roots or reading every node's.
    #[error("gc stopped before deleting anything: {0}")]
    Roots(#[from] RootsError),
    /// Sweeping the partial downloads no job will resume.
    #[error("gc of partial downloads: {0}")]
    Partials(#[source] PartialsSweepError),
}

/// Why the partial downloads could not be listed or swept.
#[derive(Debug, thiserror::Error)]
pub enum PartialsSweepError {
    /// Reading which jobs own partials.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Listing or removing the files.
    #[error(transparent)]
    Files(#[from] PartialsError),
}

/// Why `drsctl team forget NODE` removed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// The node asked to forget is this one.
    #[error(
        "team forget {node}: that is this node; its roots would be published again at its \
         next gc. Unregister its repos instead (`drsctl repos remove PATH`)"
    )]
    Own { node: String },
    /// No node of that name published roots or is listed.
    #[error("team forget {node}: no node of that name is listed or published roots (known: {})",
        if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    Unknown { node: String, known: Vec<String> },
    /// The node was seen within its lease: it may be running.
    #[error(
        "team forget {node}: refused, that node was seen {secs} s ago, within its lease of \
         {lease} s: it may be running, and its repos may hold what no other node's do. \
         Forget it once it has been silent longer than team_lease_secs"
    )]
    Live { node: String, secs: u64, lease: u64 },
    /// Reading or removing the roots.
    #[error("team forget: {0}")]
    Roots(#[from] RootsError),
    /// Reading or changing the team's list of nodes.
    #[error("team forget: {0}")]
    Nodes(#[from] RegistryError),
}
