//! Background work on foreign objects: prefetch and hash, ahead of push.
//! The queue itself lives in the registry ([`crate::registry::Registry::claim`]);
//! this is what a worker does with a job.

mod prefetch;

pub use prefetch::{backoff, prefetch, Hashed, PrefetchError, MISMATCH_TRIES};
