//! drsd: a per-user daemon that keeps remote genomics objects in Git LFS repos
//! without hashing them at `git add`, and one content-addressed pool shared by
//! every repo on the machine.
//!
//! One folder per concern, each with a small public face:
//! - [`pool`]: the two-tier content-addressed store (kv for small blobs, large
//!   files for the rest), dispatched by length.
//! - [`remote`]: S3-compatible stores (Ceph RGW) and object URLs.

pub mod pool;
pub mod remote;
