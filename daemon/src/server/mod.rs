//! The daemon: claims the socket, serves connections, watches repos, and
//! stops by draining what is in flight.
//!
//! [`run`] is the whole daemon; [`Daemon::bind`] then [`Daemon::serve`] is the
//! same in two steps, so a caller can tell when the socket accepts
//! connections (the `drsd serve --ready` line, tests).

mod connection;
mod error;
mod handlers;
mod idle;
mod listen;
mod team;
pub(crate) mod wire_error;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interprocess::local_socket::tokio::{prelude::*, Listener};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::ops::foreign::ForeignObjects;
use crate::ops::gc::Gc;
use crate::ops::pool::PoolCare;
use crate::ops::prune::Prune;
use crate::ops::repos::{state_file, Registrar, RepoBook, RepoLocks};
use crate::ops::team::Migration;
use crate::ops::transfer::Transfers;
use crate::ops::uploads;
use crate::ops::workers::Workers;
use crate::pool::Pool;
use crate::registry::Registry;
use crate::remote::Remote;
use crate::watch::Watcher;

pub use error::DaemonError;

/// What every connection and request shares: the settings, the services
/// (`ops`), and the handles that stop and drain the daemon. The pool, the
/// registry and the object stores are reached through the services only.
/// The fields are the server's own (its handlers read them).
pub(crate) struct Shared {
    config: Config,
    started: Instant,
    /// Cancelled when the daemon starts stopping.
    stop: CancellationToken,
    /// Connections and the requests they run.
    tasks: TaskTracker,
    /// For the idle timer: when a client last came or work last ran.
    activity: idle::Activity,
    /// The pool's figures and its verification.
    care: Arc<PoolCare>,
    /// The prefetch workers, and the queue as status shows it.
    workers: Arc<Workers>,
    /// The pool's garbage collection.
    gc: Gc,
    /// Objects between repos, the pool and object remotes.
    transfers: Transfers,
    /// Foreign objects: add-url, restore, promotion, the prefetch queue.
    foreign: Arc<ForeignObjects>,
    /// Registering repos: the book and their foreign objects in step.
    registrar: Registrar,
    /// Joining a team and leaving it.
    migration: Migration,
    /// Freeing this machine's copies of objects proven elsewhere.
    prune: Prune,
}

/// A daemon that holds its socket and is ready to serve.
pub struct Daemon {
    shared: Arc<Shared>,
    claimed: listen::Claimed,
    changes: UnboundedReceiver<Vec<PathBuf>>,
}

/// Runs a daemon until `shutdown` resolves or a client asks it to stop.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
    Daemon::bind(config).await?.serve(shutdown).await
}

impl Daemon {
    /// Claims the socket and opens the pool and the repo book.
    pub async fn bind(config: Config) -> Result<Daemon, DaemonError> {
        let claimed = listen::claim(&config.socket)?;
        let team = team::connect(&config).await?.map(Arc::new);
        let pool = open_pool(&config, team.clone()).await?;
        let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
        let watcher = Watcher::start(config.debounce, tx)?;
        let repos = RepoBook::load(state_file(&config.state_dir), pool.clone(), watcher)?;
        let repos = Arc::new(repos);
        let registry = open_registry(&config, team.clone()).await?;
        let left = uploads::left_over(&registry).await;
        // Every multipart upload from now on is recorded in the registry.
        let journal: Arc<dyn crate::stores::UploadJournal> = registry.clone();
        let remote = Arc::new(Remote::new(Some(journal), config.settings.clone()));
        tokio::spawn(uploads::abort(remote.clone(), registry.clone(), left));
        let (jobs_wake, repo_locks): (_, Arc<RepoLocks>) = (Arc::default(), Arc::default());
        let transfers = Transfers::new(
            pool.clone(),
            remote.clone(),
            registry.clone(),
            repo_locks.clone(),
            config.upload,
        );
        let foreign = ForeignObjects::new(
            registry.clone(),
            remote.clone(),
            pool.clone(),
            Arc::clone(&repo_locks),
            Arc::clone(&jobs_wake),
            config.prefetch.max_size,
            config.prefetch.retry,
        );
        let foreign = Arc::new(match team.as_ref().is_some_and(|t| !t.trusts_members()) {
            true => foreign.refusing_members_word(config.prefetch.part_size),
            false => foreign,
        });
        let registrar = Registrar::new(repos.clone(), foreign.clone(), remote.clone());
        let migration = Migration::new(
            team.as_ref()
                .map(|_| (pool.clone(), registry.clone(), foreign.clone())),
            repos.clone(),
            &config.pool_dir,
            &own_registry_path(&config),
        );
        let care = Arc::new(PoolCare::new(pool.clone()));
        let prune = Prune::new(
            pool.clone(),
            remote.clone(),
            registry.clone(),
            repos.clone(),
            repo_locks.clone(),
            care.clone(),
            team.is_some(),
        );
        let stop = CancellationToken::new();
        let workers = Arc::new(Workers::new(
            registry.clone(),
            pool.clone(),
            remote.clone(),
            foreign.clone(),
            config.prefetch.clone(),
            jobs_wake,
            stop.clone(),
        ));
        let gc = Gc::new(
            pool.clone(),
            registry.clone(),
            repos.clone(),
            care.clone(),
            &config.pool_dir,
            &config.state_dir,
        );
        let gc = match team.clone() {
            // Opening the team's gc tables blocks: off the async threads.
            Some(team) => {
                let gc_team = crate::blocking(move || team.gc_team()).await;
                gc.with_team(gc_team.map_err(|e| DaemonError::TeamGc(Box::new(e)))?)
            }
            None => gc,
        };
        let shared = Arc::new(Shared {
            config,
            care,
            started: Instant::now(),
            stop,
            tasks: TaskTracker::new(),
            workers,
            gc,
            activity: Default::default(),
            transfers,
            foreign,
            registrar,
            migration,
            prune,
        });
        log::info!(
            "drsd {} listening on {}",
            env!("CARGO_PKG_VERSION"),
            shared.config.socket.display()
        );
        Ok(Daemon {
            shared,
            claimed,
            changes,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.shared.config.socket
    }

    /// Serves until `shutdown` resolves, a client sends `shutdown` or the
    /// idle timeout passes with nothing to do; then stops accepting, waits
    /// up to the drain timeout for requests in flight, and removes the socket.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
        let Daemon {
            shared,
            claimed,
            changes,
        } = self;
        let background = tokio::spawn(watch_loop(shared.clone(), changes));
        let measuring = tokio::spawn(measure_pool(shared.clone()));
        let teamwork = tokio::spawn(team_loop(shared.clone()));
        let prefetching = tokio::spawn(crate::ops::workers::run(shared.workers.clone()));
        let restoring = shared.clone();
        tokio::spawn(async move { restoring.registrar.restore_saved().await });
        let idle = idle::idle(shared.clone());
        let stop = async {
            tokio::select! {
                _ = shutdown => {}
                _ = idle => {}
            }
        };
        accept_loop(&shared, &claimed.listener, stop).await;
        shared.stop.cancel();
        drop(claimed.listener); // removes the socket file: no new connections
        drain(&shared).await;
        background.abort();
        measuring.abort();
        teamwork.abort();
        prefetching.abort();
        log::info!("drsd stopped");
        Ok(())
    }
}

/// This machine's own pool, or the team's (see [`team`]).
async fn open_pool(
    config: &Config,
    team: Option<Arc<team::Team>>,
) -> Result<Arc<Pool>, DaemonError> {
    let cfg = config.clone();
    let opened = crate::blocking(move || match team {
        Some(team) => team.open_pool(&cfg),
        None => Pool::open(&cfg.pool_dir, cfg.threshold),
    })
    .await;
    opened.map(Arc::new).map_err(|source| DaemonError::Pool {
        path: config.pool_dir.clone(),
        source: Box::new(source),
    })
}

/// This machine's own registry, or the team's (see [`team`]).
async fn open_registry(
    config: &Config,
    team: Option<Arc<team::Team>>,
) -> Result<Arc<Registry>, DaemonError> {
    let path = own_registry_path(config);
    let cfg = config.clone();
    let opened = crate::blocking(move || match team {
        Some(team) => team.open_registry(&cfg),
        None => Registry::open(&path),
    })
    .await;
    opened
        .map(Arc::new)
        .map_err(|e| DaemonError::Registry(Box::new(e)))
}

/// This machine's own registry: what the daemon opens without a team.
fn own_registry_path(config: &Config) -> PathBuf {
    config.state_dir.join("registry.sqlite")
}

async fn accept_loop(
    shared: &Arc<Shared>,
    listener: &Listener,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            // Stop requests first, so a flood of connections cannot starve them.
            biased;
            _ = &mut shutdown => return,
            _ = shared.stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    shared.activity.touch();
                    let shared = shared.clone();
                    shared.tasks.clone().spawn(async move {
                        connection::serve(shared.clone(), stream).await;
                        // Idle time counts from when the last client left.
                        shared.activity.touch();
                    });
                }
                Err(e) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    log::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// Waits for connections and their requests, at most the drain timeout.
async fn drain(shared: &Shared) {
    shared.tasks.close();
    let bound = shared.config.drain_timeout;
    if tokio::time::timeout(bound, shared.tasks.wait())
        .await
        .is_err()
    {
        log::warn!(
            "{} connection(s) still busy after the {bound:?} drain timeout; stopping anyway",
            shared.tasks.len()
        );
    }
}

/// Keeps the pool figures of `status` fresh.
async fn measure_pool(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(crate::ops::pool::REFRESH);
    loop {
        tick.tick().await;
        shared.care.refresh().await;
    }
}

/// How often a team's node looks for objects another node hashed.
const TEAM_POLL: Duration = Duration::from_secs(2);

/// How often a team's node publishes the roots its repos hold, so a gc on
/// another node keeps them (a multiple of [`TEAM_POLL`]).
const TEAM_PUBLISH: Duration = Duration::from_secs(60);

/// Team mode only: promotes, in this node's repos, the objects another
/// node's workers hashed (they promote their own node's repos only).
/// Polling with a bound ([`TEAM_POLL`]) rather than LISTEN/NOTIFY: one
/// indexed query per repo, and nothing to re-arm after a reconnect.
async fn team_loop(shared: Arc<Shared>) {
    if shared.workers.team_name().is_none() {
        return;
    }
    let mut tick = tokio::time::interval(TEAM_POLL);
    for n in 0u64.. {
        tick.tick().await;
        // This node's roots, for a gc on any node: at start, then each
        // TEAM_PUBLISH (a gc here publishes them first thing too).
        if n % (TEAM_PUBLISH.as_secs() / TEAM_POLL.as_secs()) == 0 {
            if let Err(e) = shared.gc.publish_roots().await {
                log::warn!("publishing this node's roots to the team: {e}");
            }
        }
        for repo in shared.registrar.paths() {
            shared.foreign.catch_up_if_hashed_elsewhere(&repo).await;
        }
    }
}

/// Rescans repos on watch events and on the poll timer; scans the saved
/// repos once at start.
async fn watch_loop(shared: Arc<Shared>, mut changes: UnboundedReceiver<Vec<PathBuf>>) {
    for repo in shared.registrar.paths() {
        shared.registrar.rescan(&repo).await;
    }
    let mut tick = tokio::time::interval(shared.config.poll_interval);
    tick.tick().await; // the first tick is immediate
    loop {
        let due = tokio::select! {
            Some(repos) = changes.recv() => repos,
            _ = tick.tick() => shared.registrar.due_for_poll(),
            else => return,
        };
        for repo in due {
            shared.registrar.rescan(&repo).await;
        }
    }
}
