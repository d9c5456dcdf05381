//! The wire types of a lab's team mode (issue 31) that are requests of
//! their own: `drsctl team forget NODE`.

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
}
