//! The wire types of a lab's team mode (issue 31) that are requests of
//! their own: `drsctl team forget NODE`, `drsctl team join` and
//! `drsctl team leave`.

use serde::{Deserialize, Serialize};

/// Remove what node `node` (gone for good) published as its repos' roots,
/// so a gc on the shared pool no longer keeps entries for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamForgetRequest {
    pub node: String,
}

/// What forgetting a node removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamForgetReport {
    pub node: String,
    /// Repos of that node whose roots were removed.
    pub repos: u64,
    /// Roots (oids) removed, over those repos.
    pub roots: u64,
    /// Whether the node was removed from the team's list of nodes.
    #[serde(default)]
    pub listed: bool,
}

/// Copy this node's own pool and registry (what the daemon opens without
/// `team_db`) into the team's (`drsctl team join`). Sent to a daemon in
/// team mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamJoinRequest {}

/// Copy back into this node's own pool and registry what its repos need
/// (`drsctl team leave`), so they work with `team_db` removed. Sent to a
/// daemon in team mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamLeaveRequest {}

/// What a join or a leave copied, counted per pool entry and per
/// registry record. A second run copies nothing: every entry is `present`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamMigrateReport {
    /// Pool entries copied, each re-hashed to its oid on the way.
    pub copied: u64,
    /// Pool entries the destination held already (not read again).
    pub present: u64,
    /// Bytes of the entries copied.
    pub bytes: u64,
    /// Entries whose bytes do not hash to their name: not copied.
    pub refused: Vec<RefusedEntry>,
    /// Leave only: oids this node's repos name that the team's pool lacks
    /// (provisional oids of objects never hashed, objects never fetched).
    pub absent: u64,
    /// Repos whose registry records were copied.
    pub repos: u64,
    /// Registry records (a repo's path pointing at a foreign object) copied.
    pub records: u64,
}

/// A pool entry a migration did not copy, by name (its key in hex: an
/// oid, or whatever a bad entry is named), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedEntry {
    pub key: String,
    pub why: String,
}
