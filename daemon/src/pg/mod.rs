//! A team's PostgreSQL database: the plumbing every engine on it shares
//! (the pool's kv and large tiers, pins and gc's records in `pool`, the
//! roots in `ops::gc`, the registry in `registry::postgres`), kept here
//! apart from what the engines store:
//! - [`PgServer`] (`server.rs`): the connections, their bounds on waits,
//!   and the retry of a call whose connection the server closed;
//! - `conninfo.rs`: the connection string read as libpq reads it
//!   ([`ConnInfo`]: a URL or `key=value` pairs, a service, the `PG…`
//!   variables, the password file);
//! - `tls.rs`: TLS through rustls, the lab's own roots read as
//!   `trusted_file` reads them;
//! - [`schema`]: every table, and the versioned migrations each node
//!   applies once at open, under an advisory lock.

mod conninfo;
pub(crate) mod schema;
mod server;
mod tls;

pub use conninfo::{ConnInfo, ConnInfoError, Environment, ProcessEnv};
pub(crate) use schema::create_tables;
pub use server::PgServer;
#[cfg(test)]
pub(crate) use server::TestDb;
pub(crate) use server::{is_gone, is_missing_table, pg_detail, PgConn};
