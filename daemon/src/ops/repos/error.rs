//! What can go wrong registering repos and setting them up, each naming
//! the repo, the setting or the file; the server's `wire_error` gives each
//! its wire code.

use std::path::PathBuf;

use super::state::StateError;
use crate::git::GitError;
use crate::lfs::setup::SetupError;
use crate::ops::foreign::ForeignError;
use crate::stores::RemoteError;

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The path asked to register is not in a git work tree.
    #[error(transparent)]
    NotInRepo(GitError),
    #[error("{} is not a registered repo", path.display())]
    NotRegistered { path: PathBuf },
    /// Saving the repo book (`repos.json`).
    #[error(transparent)]
    Save(StateError),
    /// Putting back the repo's foreign objects from its mirror.
    #[error(transparent)]
    Foreign(#[from] ForeignError),
    /// `--remote` is not an object remote.
    #[error("--remote: {0}")]
    RemoteText(#[source] RemoteError),
    /// `--indexd` is not an Indexd base URL.
    #[error(
        "--indexd {0:?}: give the Indexd's http(s) base URL without credentials, like https://data.example.org"
    )]
    IndexdText(String),
    /// `--authz` is not a list of resource paths.
    #[error("--authz {0:?}: give resource paths like /programs/P/projects/Q, comma-separated")]
    AuthzText(String),
    /// `--gen3` without the project (`--authz /programs/P/projects/Q`).
    #[error("--gen3: give the project its records go to, --authz /programs/P/projects/Q")]
    Gen3WithoutProject,
    /// The object remote asked for cannot be used: nothing was changed.
    #[error("object remote {remote}: {why}; nothing was changed")]
    Unusable { remote: String, why: String },
    /// Setting the repo up (`drsctl init`) or taking it back (`--undo`).
    #[error(transparent)]
    Setup(SetupError),
}
