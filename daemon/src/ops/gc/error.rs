//! What can stop a gc, each naming what it was doing and on what; the
//! server's `wire_error` gives each its wire code.

use std::path::PathBuf;

use crate::lfs::scan::ScanError;
use crate::pool::PoolError;
use crate::registry::RegistryError;
use crate::remote::partials::PartialsError;

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
