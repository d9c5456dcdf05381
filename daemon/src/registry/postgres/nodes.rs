//! The team's nodes: one row per daemon (a user on a host) that opened the
//! team's registry, with when it was last seen. The heartbeat (`mod.rs`)
//! renews `last_seen` and this node's leases in one transaction, so a node
//! listed as seen a moment ago also holds its claims.

use std::sync::Arc;

use crate::pg::PgServer;
use crate::registry::RegistryError;

/// Who this daemon is in the team: `user@host` unless the `team_node`
/// setting names it otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeName {
    pub name: String,
    pub host: String,
    pub user: String,
}

impl NodeName {
    /// This host and user; named `named` when given, else `user@host`.
    pub fn here(named: Option<&str>) -> NodeName {
        let host = hostname().unwrap_or_else(|| "localhost".into());
        let uid = rustix::process::getuid().as_raw();
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| format!("uid{uid}"));
        let name = named
            .filter(|n| !n.is_empty())
            .map_or_else(|| format!("{user}@{host}"), str::to_string);
        NodeName { name, host, user }
    }
}

fn hostname() -> Option<String> {
    let name = rustix::system::uname();
    let name = name.nodename().to_str().ok()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// A node as `drsctl status` lists it.
pub use drsd_proto::TeamNode;

/// Records the node as seen now and renews the leases of its running jobs.
pub(super) fn beat(server: &PgServer, node: &NodeName, lease_ms: i64) -> Result<(), RegistryError> {
    server.with("renew this node's leases", |conn| {
        let mut tx = conn.client.transaction()?;
        tx.execute(
            "INSERT INTO drsd_team_nodes (name, host, username) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET host = excluded.host,
                username = excluded.username, last_seen = now()",
            &[&node.name, &node.host, &node.user],
        )?;
        tx.execute(
            "UPDATE drsd_reg_jobs SET lease_until = now() + $2 * interval '1 millisecond'
             WHERE state = 'running' AND claimed_by = $1",
            &[&node.name, &(lease_ms as f64)],
        )?;
        tx.commit()
    })?;
    Ok(())
}

/// Removes node `name` from the list; whether it was there.
pub(super) fn forget(server: &PgServer, name: &str) -> Result<bool, RegistryError> {
    let removed = server.with("forget a team node", |conn| {
        conn.client
            .execute("DELETE FROM drsd_team_nodes WHERE name = $1", &[&name])
    })?;
    Ok(removed > 0)
}

/// Every node of the team, most recently seen first.
pub(super) fn list(server: &Arc<PgServer>) -> Result<Vec<TeamNode>, RegistryError> {
    let rows = server.with("list the team's nodes", |conn| {
        conn.client.query(
            "SELECT name, host, username,
                extract(epoch FROM last_seen)::bigint,
                extract(epoch FROM now() - last_seen)::bigint
             FROM drsd_team_nodes ORDER BY last_seen DESC, name",
            &[],
        )
    })?;
    Ok(rows
        .iter()
        .map(|r| TeamNode {
            name: r.get(0),
            host: r.get(1),
            user: r.get(2),
            last_seen: r.get::<_, i64>(3).max(0) as u64,
            seen_secs_ago: r.get::<_, i64>(4).max(0) as u64,
        })
        .collect())
}
