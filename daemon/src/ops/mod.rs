//! The service layer: what the daemon does, below the handlers that speak
//! the wire and above the pool, the remotes, the registry and git. Each
//! service is a struct the daemon's shared state owns, holding what it
//! needs (no statics); a handler validates a request, calls one operation
//! and maps its result to a reply, and the workers call the same
//! operations. Operations never call a handler.

pub mod foreign;
pub mod repos;
pub mod transfer;
