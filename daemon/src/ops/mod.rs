//! The service layer: the daemon's operations, owned by its shared state
//! and holding no statics. A request handler only validates its request,
//! calls one operation here and maps the result to a reply; workers call
//! the same operations. Operations use the stores below them (the pool,
//! the remotes, the registry, git) and never a handler.

pub mod transfer;
