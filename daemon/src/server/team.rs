//! The one place the daemon chooses where its pool and registry live: its
//! own (SQLite and local files in its folders, the default) or a team's,
//! when the `team_db` setting names a PostgreSQL database. A team's pool is
//! the postgres kv engine and, per `team_large`, the local engine in a
//! shared folder (`shared-dir`) or large objects in the database (`pg-lo`);
//! its registry is [`PgRegistry`], as this node (`team_node`, else
//! `USER@HOST`), its claims leased for `team_lease_secs`.
//!
//! A database that does not answer at start stops the daemon with an error
//! naming the server (never its password), unless `team_required` is
//! false: then the daemon runs on its own and says so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::DaemonError;
use crate::config::Config;
use crate::ops::gc::{GcError, GcTeam};
use crate::pg::PgServer;
use crate::pool::{LocalEngine, PgKvEngine, PgLoEngine, PgPins, Pool, PoolError};
use crate::registry::postgres::{NodeName, PrivateUrls, DEFAULT_LEASE};
use crate::registry::{PgRegistry, Registry, RegistryError, SqliteRegistry};
use crate::settings::Key;

/// `team_min_grace_secs`' default: an hour, far past a node's publish of
/// its roots (at each scan and gc).
const DEFAULT_MIN_GRACE: Duration = Duration::from_secs(3600);

/// The `team_large` value that keeps large blobs in the database.
const PG_LO: &str = "pg-lo";

/// Where a team's large tier lives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Large {
    SharedDir(PathBuf),
    PgLo,
}

/// A team database that answered, and how this node joins it.
pub(super) struct Team {
    server: Arc<PgServer>,
    large: Large,
    node: NodeName,
    lease: Duration,
    /// `team_min_grace_secs`: the least grace of a gc here.
    min_grace: Duration,
    /// `team_trust_members`: whether another member's hash is taken for a
    /// source that gives no checksum of its content.
    trust_members: bool,
}

/// The team the settings name, connected; `None` without `team_db`, or
/// when it does not answer and `team_required` is false.
pub(super) async fn connect(config: &Config) -> Result<Option<Team>, DaemonError> {
    let settings = &config.settings;
    let Some(url) = settings.text(Key::TeamDb).map(str::to_string) else {
        return Ok(None);
    };
    let required = settings.flag(Key::TeamRequired).unwrap_or(true);
    let shown = PgServer::redacted(&url);
    let ca_file = settings.path(Key::CaFile).map(PathBuf::from);
    // The schema brought to this drsd's version first thing (`pg::schema`).
    let open = move || {
        let server = PgServer::open_trusting(&url, ca_file.as_deref())?;
        server.migrate()?;
        Ok::<_, PoolError>(server)
    };
    match crate::blocking(open).await {
        Ok(server) => {
            let large = match settings.text(Key::TeamLarge) {
                None | Some(PG_LO) => Large::PgLo,
                Some(dir) => Large::SharedDir(PathBuf::from(dir)),
            };
            let node = NodeName::here(settings.text(Key::TeamNode));
            let lease = settings.secs(Key::TeamLeaseSecs).unwrap_or(DEFAULT_LEASE);
            let min_grace = settings
                .secs(Key::TeamMinGraceSecs)
                .unwrap_or(DEFAULT_MIN_GRACE);
            let trust_members = settings.flag(Key::TeamTrustMembers).unwrap_or(true);
            log::info!(
                "team mode: node {} on {} (large tier: {large:?})",
                node.name,
                server.shown()
            );
            if !trust_members {
                log::info!(
                    "team_trust_members = false: an object whose source gives no checksum of \
                     its content is fetched and hashed here, never promoted on another node's hash"
                );
            }
            Ok(Some(Team {
                server,
                large,
                node,
                lease,
                min_grace,
                trust_members,
            }))
        }
        Err(source @ PoolError::TrustedFile { .. }) => Err(DaemonError::TeamTrust {
            server: shown,
            source: Box::new(source),
        }),
        Err(source) if required => Err(DaemonError::TeamDown {
            server: shown,
            source: Box::new(source),
        }),
        Err(e) => {
            log::warn!(
                "the team database {shown} does not answer ({e}); running without the team \
                 (team_required = false): this machine's own pool and registry"
            );
            Ok(None)
        }
    }
}

impl Team {
    /// `team_trust_members`: false makes this node fetch and hash itself
    /// what the source gives no content checksum for (README "For a lab").
    pub(super) fn trusts_members(&self) -> bool {
        self.trust_members
    }

    /// The team's pool: postgres kv, the large tier per `team_large`.
    pub(super) fn open_pool(&self, config: &Config) -> Result<Pool, PoolError> {
        let kv = Arc::new(PgKvEngine::new(self.server.clone()));
        // Pins are the lab's: another node's gc keeps what this one writes.
        let pins = Arc::new(PgPins::new(self.server.clone(), &self.node.name)?);
        let pool = match &self.large {
            Large::SharedDir(dir) => {
                let large = Arc::new(LocalEngine::open_shared(&dir.join("large"), None)?);
                let partial = dir.join(format!("partial-{}", safe_name(&self.node.name)));
                Pool::open_team(kv, large, dir, &partial, config.threshold)
            }
            Large::PgLo => {
                let spool = config.pool_dir.join("spool");
                let large = Arc::new(PgLoEngine::new(self.server.clone(), &spool)?);
                let partial = config.pool_dir.join("partial");
                Pool::open_team(kv, large, &config.pool_dir, &partial, config.threshold)
            }
        }?;
        Ok(pool.with_pins(pins))
    }

    /// gc across the lab: this node's roots published, every node's kept,
    /// grace records in the database.
    pub(super) fn gc_team(&self) -> Result<GcTeam, GcError> {
        let min_grace = self.min_grace.as_secs();
        Ok(GcTeam::postgres(&self.server, &self.node.name)?
            .with_limits(self.lease.as_secs(), min_grace))
    }

    /// The team's registry; the secrets of this node's URLs in
    /// `team-urls.sqlite` in its state folder (never in the team's
    /// database, which every member reads), and its journal of uploads
    /// through Fence in `team-fence.sqlite` beside it (never in the
    /// database, which every member writes).
    pub(super) fn open_registry(&self, config: &Config) -> Result<Registry, RegistryError> {
        let urls = PrivateUrls::open(&config.state_dir.join("team-urls.sqlite"))?;
        let engine = PgRegistry::open(self.server.clone(), self.node.clone(), self.lease, urls)?;
        let journal = SqliteRegistry::open(&config.state_dir.join("team-fence.sqlite"))?;
        Ok(Registry::with_engine(Arc::new(engine), Arc::new(journal)))
    }
}

/// A node's name as a file name: anything but letters, digits, `.`, `-`,
/// `_` and `@` becomes `_`.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' | '@' => c,
            _ => '_',
        })
        .collect()
}
