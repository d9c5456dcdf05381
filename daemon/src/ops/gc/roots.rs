//! The roots each node of a lab has published: the oids its registered
//! repos hold, per node and repo. A node's repos are on that node only, so
//! a gc on a shared pool keeps whatever any node's published roots name;
//! a node gone for good keeps its roots until someone forgets it by name
//! (`drsctl team forget NODE`).
//!
//! [`TeamRoots`] is the store's seam: [`LocalRoots`] for one machine (in
//! memory: this node's roots, as the gc that computed them publishes them)
//! and `PgRoots` (`pg_roots.rs`) in the team database.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use crate::lock::lock;
use crate::pool::{Oid, PoolError};

/// What a published set of roots looks like from outside: who published
/// it, for which repo, how many oids, and when (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedRepo {
    pub node: String,
    pub repo: String,
    pub roots: u64,
    pub published: u64,
}

/// What forgetting a node removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    pub repos: u64,
    pub roots: u64,
    /// Whether the node was in the team's list of nodes (`drsctl status`).
    pub listed: bool,
}

/// Why the published roots could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    #[error("{op} the team's published roots: {source}")]
    Store {
        op: &'static str,
        #[source]
        source: PoolError,
    },
}

/// Where the nodes' roots are kept.
///
/// Atomicity: [`TeamRoots::publish`] replaces a node's roots for one repo
/// whole, so a reader (a gc on another node) sees the old set or the new
/// one, never a repo with half its roots, nor none between the two.
pub trait TeamRoots: Send + Sync {
    /// Replaces what `node` published for `repo` with `oids`.
    fn publish(&self, node: &str, repo: &str, oids: &HashSet<Oid>) -> Result<(), RootsError>;
    /// Drops what `node` published for repos other than `keep` (repos it
    /// no longer has registered).
    fn retain(&self, node: &str, keep: &[String]) -> Result<(), RootsError>;
    /// Every oid any node published, for any repo.
    fn all_live(&self) -> Result<HashSet<Oid>, RootsError>;
    /// Drops everything `node` published.
    fn forget(&self, node: &str) -> Result<Forgotten, RootsError>;
    /// Each node's published repos, by node then repo.
    fn nodes(&self) -> Result<Vec<PublishedRepo>, RootsError>;
    /// Seconds since the oldest last publish among the nodes other than
    /// `me` seen within `lease_secs` (`u64::MAX` when one of them never
    /// published); `None` when no other node is live.
    fn oldest_live_publish(&self, _me: &str, _lease_secs: u64) -> Result<Option<u64>, RootsError> {
        Ok(None)
    }
}

/// The repo name under which a node marks its publish itself, so a node
/// with no repo is known to have published; no repo path is empty.
pub const NODE_MARK: &str = "";

/// The roots of one machine's gc, in memory: with no team there is no one
/// else to tell, and the gc computes them afresh each time.
#[derive(Default)]
pub struct LocalRoots(Mutex<BTreeMap<NodeRepo, (HashSet<Oid>, u64)>>);

/// A published set's key: node, then repo.
type NodeRepo = (String, String);

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl TeamRoots for LocalRoots {
    fn publish(&self, node: &str, repo: &str, oids: &HashSet<Oid>) -> Result<(), RootsError> {
        let key = (node.to_string(), repo.to_string());
        lock(&self.0).insert(key, (oids.clone(), now()));
        Ok(())
    }

    fn retain(&self, node: &str, keep: &[String]) -> Result<(), RootsError> {
        lock(&self.0).retain(|(n, repo), _| n != node || keep.contains(repo));
        Ok(())
    }

    fn all_live(&self) -> Result<HashSet<Oid>, RootsError> {
        Ok(lock(&self.0)
            .values()
            .flat_map(|(oids, _)| oids.iter().copied())
            .collect())
    }

    fn forget(&self, node: &str) -> Result<Forgotten, RootsError> {
        let mut map = lock(&self.0);
        let mut gone = Forgotten::default();
        map.retain(|(n, _), (oids, _)| {
            let keep = n != node;
            if !keep {
                gone.repos += 1;
                gone.roots += oids.len() as u64;
            }
            keep
        });
        Ok(gone)
    }

    fn nodes(&self) -> Result<Vec<PublishedRepo>, RootsError> {
        Ok(lock(&self.0)
            .iter()
            .filter(|((_, repo), _)| repo != NODE_MARK)
            .map(|((node, repo), (oids, at))| PublishedRepo {
                node: node.clone(),
                repo: repo.clone(),
                roots: oids.len() as u64,
                published: *at,
            })
            .collect())
    }
}

/// The names of the nodes that published anything, each once.
pub fn node_names(published: &[PublishedRepo]) -> Vec<String> {
    let mut names: HashMap<&str, ()> = HashMap::new();
    let mut out = Vec::new();
    for p in published {
        if names.insert(&p.node, ()).is_none() {
            out.push(p.node.clone());
        }
    }
    out
}
