//! What can stop a prune, each naming what it was doing and on what; the
//! server's `wire_error` gives each its wire code. A place that cannot be
//! asked about one object does not stop it: that object is kept, and the
//! report says why.

use std::path::PathBuf;

use crate::git::GitError;
use crate::lfs::scan::ScanError;
use crate::lfs::setup::SetupError;
use crate::pool::PoolError;
use crate::registry::RegistryError;
use crate::safe_write::SafeWriteError;

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// No repo named and none registered: nothing to prune.
    #[error(
        "prune: no repo is registered and none was named; name one (drsctl prune PATH) \
         or register your repos (drsctl repos add PATH)"
    )]
    NoRepos,
    /// A repo named is not a git work tree.
    #[error("prune: {0}")]
    NotInRepo(#[source] GitError),
    /// What a repo needs could not be read: its objects would look unneeded.
    #[error(
        "prune stopped before freeing anything: what {shown} needs cannot be read ({source}); \
         bring it back, or `drsctl repos remove {shown}`",
        shown = repo.display()
    )]
    Unreadable {
        repo: PathBuf,
        #[source]
        source: ScanError,
    },
    /// The drsd settings in a repo's `.gitattributes` could not be read.
    #[error("prune: the object remote of {}: {source}", repo.display())]
    Settings {
        repo: PathBuf,
        #[source]
        source: SetupError,
    },
    /// Reading what the registry records for the repos' foreign objects.
    #[error("prune stopped: {0}")]
    Registry(#[from] RegistryError),
    /// Reading or sweeping the pool.
    #[error("prune: {0}")]
    Pool(#[from] PoolError),
    /// Listing or removing a repo's copies in `.git/lfs/objects`.
    #[error("prune: {0}")]
    Io(#[from] crate::IoError),
    /// A folder of `.git/lfs/objects` is a symlink or not a folder: nothing
    /// is removed through it.
    #[error("prune: {0}")]
    Unsafe(#[from] SafeWriteError),
}
