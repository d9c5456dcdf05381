//! What stops a team join or leave, naming the side (this machine's own
//! stores or the team's) and what it was doing.

use std::path::PathBuf;

use crate::ops::gc::GcError;
use crate::pool::PoolError;
use crate::registry::RegistryError;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// Join and leave copy between this machine's stores and a team's.
    #[error(
        "drsctl team {op} needs the daemon in team mode: set team_db (DRSD_TEAM_DB) and \
         restart it"
    )]
    NotInTeam { op: &'static str },
    /// Another join or leave is running in this daemon.
    #[error("a team join or leave is running already in this daemon; wait for it")]
    Busy,
    /// Reading this machine's own pool (`dir`) or writing to it.
    #[error("this machine's own pool in {dir}: {source}")]
    OwnPool {
        dir: PathBuf,
        #[source]
        source: Box<PoolError>,
    },
    /// Reading the team's pool or writing to it.
    #[error("the team's pool: {0}")]
    TeamPool(#[source] Box<PoolError>),
    /// Reading this machine's own registry or writing to it.
    #[error("this machine's own registry: {0}")]
    OwnRegistry(#[source] Box<RegistryError>),
    /// Reading the team's registry or writing to it.
    #[error("the team's registry: {0}")]
    TeamRegistry(#[source] Box<RegistryError>),
    /// Reading what this node's repos need (their pointers and records).
    #[error("reading what this node's repos need: {0}")]
    Roots(#[source] Box<GcError>),
}

impl MigrateError {
    pub(super) fn own_pool(dir: &std::path::Path) -> impl Fn(PoolError) -> MigrateError + '_ {
        move |source| MigrateError::OwnPool {
            dir: dir.to_path_buf(),
            source: Box::new(source),
        }
    }

    pub(super) fn team_pool(e: PoolError) -> MigrateError {
        MigrateError::TeamPool(Box::new(e))
    }

    pub(super) fn own_registry(e: RegistryError) -> MigrateError {
        MigrateError::OwnRegistry(Box::new(e))
    }

    pub(super) fn team_registry(e: RegistryError) -> MigrateError {
        MigrateError::TeamRegistry(Box::new(e))
    }
}
