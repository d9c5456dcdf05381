//! Git LFS as the repos see it: the pointer format and scanning a repo's
//! HEAD tree for pointers; setting a repo up for drsd and back.

pub mod checkout;
pub mod hydrate;
pub mod needed;
pub use drsd_proto::pointer;
#[cfg(test)]
mod pointer_props;
pub mod promote;
pub mod scan;
pub mod setup;
pub mod track;
#[cfg(test)]
mod track_props;

pub use hydrate::{hydrate, Hydrated};
pub use pointer::{Pointer, PointerError, MAX_POINTER_SIZE};
pub use scan::{head_pointers, pushed_pointers, scan_repo, stored_pointers, Pushed, ScanError};
