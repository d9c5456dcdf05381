//! What can go wrong in the transfer service, each failure naming what it
//! was doing and on which repo, object or path. The server's `wire_error`
//! alone gives each its wire code; what the service itself must tell apart
//! (a full disk to go around, a copy that is not the object) it asks here.

use std::path::PathBuf;

use crate::git::GitError;
use crate::lfs::scan::ScanError;
use crate::lfs::setup::SetupError;
use crate::pool::{Oid, PoolError};
use crate::registry::RegistryError;
use crate::remote::{CommonsError, PointerFetchError, UploadError};
use crate::safe_write::SafeWriteError;
use crate::stores::drs::DrsError;
use crate::stores::RemoteError;

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The repo records no object remote.
    #[error(
        "{} has no object remote: record one with drsctl init --remote s3://bucket/prefix (or a folder: --remote /shared/objects; it goes in .gitattributes)",
        repo.display()
    )]
    NoObjectRemote { repo: PathBuf },
    /// The object remote `.gitattributes` records cannot be used as written.
    #[error(transparent)]
    BadObjectRemote(RemoteError),
    /// The folder asked about is not in a git work tree.
    #[error(transparent)]
    NotInRepo(GitError),
    /// The drsd settings in the repo's `.gitattributes` could not be read.
    #[error(transparent)]
    Settings(SetupError),
    /// The repo's `lfs/tmp`, where objects are handed out, could not be made.
    #[error(transparent)]
    LfsTmp(SafeWriteError),
    /// Reading the repo's pointers (HEAD's, the pushed commits', the index's).
    #[error(transparent)]
    Pointers(ScanError),
    /// Keeping a file handed out in `lfs/tmp`.
    #[error(transparent)]
    HandOut(tempfile::PathPersistError),
    /// The pool failed to read, take or place an object.
    #[error(transparent)]
    Pool(PoolError),
    /// The pool's copy could not be handed out (it is reported as is).
    #[error(transparent)]
    Export(PoolError),
    #[error("object {oid} left the pool right after its download")]
    LeftThePool { oid: Oid },
    /// Fetching a pointer's object from the repo's object remote.
    #[error(transparent)]
    Fetch(PointerFetchError),
    /// The object remote lacks the object, and the places it is known to be
    /// elsewhere (`tried`) failed too.
    #[error("{missing}; and elsewhere: {tried}")]
    Elsewhere {
        missing: Box<TransferError>,
        tried: String,
    },
    /// A corrupt pool entry (moved aside), then the fetch again failed.
    #[error("{corrupt}; and from the object remote: {then}")]
    Refetch {
        corrupt: PoolError,
        then: Box<TransferError>,
    },
    /// The pool was full (`full`), then the fetch straight into the repo's
    /// `lfs/tmp` failed too.
    #[error("{full}; and fetched straight into {}: {then}", tmp.display())]
    AroundPool {
        full: Box<TransferError>,
        tmp: PathBuf,
        then: Box<TransferError>,
    },
    /// The repo's copy at `from` is not the object its oid names.
    #[error("{from}: {source}")]
    NotTheObject {
        from: String,
        #[source]
        source: PoolError,
    },
    #[error("object {oid} has {len} bytes, the pointer says {size}")]
    WrongSize { oid: Oid, len: u64, size: u64 },
    #[error("object {oid} is neither in the pool nor in the repo")]
    NotHere { oid: Oid },
    /// Sending the repo's copy to the object remote.
    #[error(transparent)]
    UploadFile(UploadError),
    /// Sending the pool's copy to the object remote.
    #[error(transparent)]
    UploadPooled(UploadError),
    /// The S3 client an `s3://` object remote needs cannot be made.
    #[error(transparent)]
    S3Setup(RemoteError),
    /// An Indexd is recorded, but the object remote is not `s3://`.
    #[error(
        "{}: an Indexd record needs an s3:// object remote (others cannot read the folder {objects}): record one with drsctl init --remote s3://bucket/prefix, or remove drs-indexd from .gitattributes; nothing was pushed",
        top.display()
    )]
    IndexdNeedsS3 { top: PathBuf, objects: String },
    /// The DRS client, or the Indexd client, cannot be made.
    #[error(transparent)]
    Drs(DrsError),
    /// The repo's Indexd is not one the user named.
    #[error(
        "the repo records Indexd {base}, which is not a server you named in DRSD_DRS_SERVERS: a repo you cloned must not choose where your objects are registered or looked up. If you trust it, add NAME={base} to DRSD_DRS_SERVERS in the daemon's environment"
    )]
    UntrustedIndexd { base: url::Url },
    /// Reading the repo's foreign objects.
    #[error(transparent)]
    Registry(RegistryError),
    /// The repo's Gen3 commons cannot be used (not named by the user, its
    /// client not built).
    #[error(transparent)]
    Commons(CommonsError),
    /// The repo's object remote is a commons and it records no project.
    #[error(
        "the repo's object remote is the Gen3 commons {commons}, whose records need a project: record one with drsctl init --gen3 {root} --authz /programs/P/projects/Q; nothing was pushed"
    )]
    CommonsWithoutProject { commons: String, root: String },
}

impl TransferError {
    /// Whether a full file system is behind the failure, where the service
    /// looks for one: then the pool is gone around (it is a cache), and the
    /// user hears that freeing space is what helps. A failure whose cause
    /// is not looked into (the repo's own setup, a hand-out) never is.
    pub fn is_out_of_space(&self) -> bool {
        use TransferError as E;
        match self {
            E::Elsewhere { missing, .. } => missing.is_out_of_space(),
            E::Refetch { then, .. } | E::AroundPool { then, .. } => then.is_out_of_space(),
            E::Fetch(PointerFetchError::Head(_)) => false,
            E::BadObjectRemote(_)
            | E::Pointers(_)
            | E::Pool(_)
            | E::Fetch(_)
            | E::UploadFile(_)
            | E::UploadPooled(_)
            | E::S3Setup(_)
            | E::Drs(_)
            | E::Registry(_) => crate::io_error::out_of_space(self),
            E::NoObjectRemote { .. }
            | E::NotInRepo(_)
            | E::Settings(_)
            | E::LfsTmp(_)
            | E::HandOut(_)
            | E::Export(_)
            | E::LeftThePool { .. }
            | E::NotTheObject { .. }
            | E::WrongSize { .. }
            | E::NotHere { .. }
            | E::IndexdNeedsS3 { .. }
            | E::UntrustedIndexd { .. }
            | E::Commons(_)
            | E::CommonsWithoutProject { .. } => false,
        }
    }

    /// Whether the copy offered is not the object, or cannot be sent the
    /// way the repo is set up: a push refuses it (pushing again will not
    /// help) rather than failing.
    pub fn refuses_the_object(&self) -> bool {
        use TransferError as E;
        match self {
            E::NotTheObject { .. } | E::WrongSize { .. } => true,
            E::S3Setup(_) | E::UploadFile(UploadError::NotTheObject { .. }) => {
                !self.is_out_of_space()
            }
            _ => false,
        }
    }
}
