//! The nodes' published roots in the team database: `team_roots` (one row
//! per node, repo and oid) and `team_root_sets` (one per node and repo:
//! how many, when). A publish changes only the rows that differ, under a
//! lock on the repo's `team_root_sets` row, in one transaction with the
//! count: a gc elsewhere reads the old set or the new one.

use std::collections::HashSet;
use std::sync::Arc;

use super::roots::{Forgotten, PublishedRepo, RootsError, TeamRoots};
use crate::pg::schema::ROOTS as DDL;
use crate::pg::{create_tables, PgServer};
use crate::pool::{Oid, PoolError};

/// Oids sent per statement.
const CHUNK: usize = 20_000;

const CLAIM_SET: &str = "INSERT INTO team_root_sets (node, repo, roots, published) \
    VALUES ($1, $2, 0, now()) ON CONFLICT (node, repo) DO NOTHING";
const LOCK_SET: &str = "SELECT 1 FROM team_root_sets WHERE node = $1 AND repo = $2 FOR UPDATE";
const CURRENT: &str = "SELECT oid FROM team_roots WHERE node = $1 AND repo = $2";
const DROP_SOME: &str =
    "DELETE FROM team_roots WHERE node = $1 AND repo = $2 AND oid = ANY($3::bytea[])";
const ADD_SOME: &str = "INSERT INTO team_roots (node, repo, oid) \
    SELECT $1, $2, unnest($3::bytea[]) ON CONFLICT DO NOTHING";
const COUNT_SET: &str =
    "UPDATE team_root_sets SET roots = $3, published = now() WHERE node = $1 AND repo = $2";

/// The published roots of every node sharing one database.
pub struct PgRoots {
    server: Arc<PgServer>,
    /// For tests: a publish fails right after removing the rows it drops,
    /// before adding the new ones, as a daemon killed there would.
    #[cfg(test)]
    pub(crate) fail_between: std::sync::atomic::AtomicBool,
}

impl PgRoots {
    /// The roots on `server`; the tables are made when missing.
    pub fn new(server: Arc<PgServer>) -> Result<PgRoots, RootsError> {
        server
            .with("create the roots tables", |c| create_tables(c, DDL))
            .map_err(store("create"))?;
        Ok(PgRoots {
            server,
            #[cfg(test)]
            fail_between: Default::default(),
        })
    }

    #[cfg(test)]
    fn fails_between(&self) -> bool {
        self.fail_between.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[cfg(not(test))]
    fn fails_between(&self) -> bool {
        false
    }
}

fn store(op: &'static str) -> impl Fn(PoolError) -> RootsError {
    move |source| RootsError::Store { op, source }
}

/// A stand-in for a kill: the statement fails, the transaction never commits.
fn killed(tx: &mut postgres::Transaction<'_>) -> postgres::Error {
    tx.batch_execute("SELECT 1/0")
        .expect_err("a division by zero fails")
}

/// The other live nodes: how many, whether one never published, and the
/// age in seconds of the oldest last publish among them (by the database's
/// clock). No list of nodes yet (no registry opened it): none.
const OLDEST_LIVE_PUBLISH: &str = "\
    SELECT count(*), bool_or(p.published IS NULL), \
      max(extract(epoch FROM now() - p.published))::bigint \
    FROM drsd_team_nodes n LEFT JOIN \
      (SELECT node, max(published) AS published FROM team_root_sets GROUP BY node) p \
      ON p.node = n.name \
    WHERE n.name <> $1 AND n.last_seen > now() - $2 * interval '1 second'";

impl TeamRoots for PgRoots {
    fn oldest_live_publish(&self, me: &str, lease_secs: u64) -> Result<Option<u64>, RootsError> {
        self.server
            .with("read the live nodes' publishes", |c| {
                let listed: Option<String> = c
                    .client
                    .query_one("SELECT to_regclass('drsd_team_nodes')::text", &[])?
                    .get(0);
                if listed.is_none() {
                    return Ok(None);
                }
                let row = c
                    .client
                    .query_one(OLDEST_LIVE_PUBLISH, &[&me, &(lease_secs as f64)])?;
                let (live, never, age): (i64, Option<bool>, Option<i64>) =
                    (row.get(0), row.get(1), row.get(2));
                Ok(match (live, never) {
                    (0, _) => None,
                    (_, Some(true)) => Some(u64::MAX),
                    _ => Some(age.unwrap_or(0).max(0) as u64),
                })
            })
            .map_err(store("read"))
    }

    fn publish(&self, node: &str, repo: &str, oids: &HashSet<Oid>) -> Result<(), RootsError> {
        let wanted: HashSet<&[u8]> = oids.iter().map(|o| o.as_bytes().as_slice()).collect();
        let count = wanted.len() as i64;
        self.server
            .with("publish roots", |c| {
                let mut tx = c.client.transaction()?;
                tx.execute(CLAIM_SET, &[&node, &repo])?;
                tx.execute(LOCK_SET, &[&node, &repo])?;
                let current: HashSet<Vec<u8>> = tx
                    .query(CURRENT, &[&node, &repo])?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let gone: Vec<&[u8]> = current
                    .iter()
                    .map(Vec::as_slice)
                    .filter(|k| !wanted.contains(k))
                    .collect();
                let new: Vec<&[u8]> = wanted
                    .iter()
                    .copied()
                    .filter(|k| !current.contains(*k))
                    .collect();
                for chunk in gone.chunks(CHUNK) {
                    tx.execute(DROP_SOME, &[&node, &repo, &chunk])?;
                }
                if self.fails_between() {
                    return Err(killed(&mut tx));
                }
                for chunk in new.chunks(CHUNK) {
                    tx.execute(ADD_SOME, &[&node, &repo, &chunk])?;
                }
                tx.execute(COUNT_SET, &[&node, &repo, &count])?;
                tx.commit()
            })
            .map_err(store("publish"))
    }

    fn retain(&self, node: &str, keep: &[String]) -> Result<(), RootsError> {
        self.server
            .with("drop unregistered repos' roots", |c| {
                let mut tx = c.client.transaction()?;
                tx.execute(
                    "DELETE FROM team_roots WHERE node = $1 AND NOT (repo = ANY($2))",
                    &[&node, &keep],
                )?;
                tx.execute(
                    "DELETE FROM team_root_sets WHERE node = $1 AND NOT (repo = ANY($2))",
                    &[&node, &keep],
                )?;
                tx.commit()
            })
            .map_err(store("retain"))
    }

    fn all_live(&self) -> Result<HashSet<Oid>, RootsError> {
        self.server
            .with("read roots", |c| {
                let rows = c.client.query("SELECT oid FROM team_roots", &[])?;
                Ok(rows
                    .iter()
                    .filter_map(|r| Oid::from_key(r.get::<_, &[u8]>(0)))
                    .collect())
            })
            .map_err(store("read"))
    }

    fn forget(&self, node: &str) -> Result<Forgotten, RootsError> {
        self.server
            .with("forget a node's roots", |c| {
                let mut tx = c.client.transaction()?;
                let roots = tx.execute("DELETE FROM team_roots WHERE node = $1", &[&node])?;
                let repos = tx.execute("DELETE FROM team_root_sets WHERE node = $1", &[&node])?;
                tx.commit()?;
                Ok(Forgotten {
                    repos,
                    roots,
                    listed: false,
                })
            })
            .map_err(store("forget"))
    }

    fn nodes(&self) -> Result<Vec<PublishedRepo>, RootsError> {
        self.server
            .with("list published roots", |c| {
                let rows = c.client.query(
                    "SELECT node, repo, roots, extract(epoch FROM published)::bigint \
                     FROM team_root_sets WHERE repo <> '' ORDER BY node, repo",
                    &[],
                )?;
                Ok(rows
                    .iter()
                    .map(|r| PublishedRepo {
                        node: r.get(0),
                        repo: r.get(1),
                        roots: r.get::<_, i64>(2) as u64,
                        published: r.get::<_, i64>(3) as u64,
                    })
                    .collect())
            })
            .map_err(store("list"))
    }
}
