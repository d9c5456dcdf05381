//! The names of the environment variables the settings are read from,
//! where the rest of the daemon needs one by name (in an error that says
//! which variable to fix). The settings table (`keys.rs`) names every
//! variable of every setting; the clients import the names from here and
//! never read the environment themselves.

/// The `state_dir` setting: where the registry and the logs live.
pub const STATE_DIR_ENV: &str = "DRSD_STATE_DIR";
/// The `partial_max` setting: the most bytes the partial files of failed
/// prefetch jobs may hold in all (`1G`, `500M`...).
pub const PARTIAL_MAX_ENV: &str = "DRSD_PARTIAL_MAX";
/// The `ca_file` setting: a PEM file of extra trusted roots.
pub const CA_FILE_ENV: &str = "DRSD_CA_FILE";
/// The `drs_servers` setting: the map from DRS URI prefixes and hosts to
/// servers.
pub const DRS_SERVERS_ENV: &str = "DRSD_DRS_SERVERS";
/// The `drs_token_file` setting: a bearer token file, read at each use.
pub const DRS_TOKEN_FILE_ENV: &str = "DRSD_DRS_TOKEN_FILE";
/// The `gen3_credentials` setting: a Gen3 API key file (`{"api_key",
/// "key_id"}`), as the Gen3 portal saves it.
pub const GEN3_CREDENTIALS_ENV: &str = "DRSD_GEN3_CREDENTIALS";
/// The `drs_wait_secs` setting (default 60).
pub const DRS_WAIT_ENV: &str = "DRSD_DRS_WAIT_SECS";
/// The `metadata_timeout` setting: seconds a metadata request (DRS,
/// Indexd, a HEAD) has for its whole answer.
pub const METADATA_TIMEOUT_ENV: &str = "DRSD_METADATA_TIMEOUT";
/// The `trust_claims` setting.
pub const TRUST_CLAIMS_ENV: &str = "DRSD_TRUST_CLAIMS";
/// The `team_db` setting: the team's PostgreSQL database (a libpq URL).
pub const TEAM_DB_ENV: &str = "DRSD_TEAM_DB";
/// The `team_large` setting: the team's large tier, a shared folder or `pg-lo`.
pub const TEAM_LARGE_ENV: &str = "DRSD_TEAM_LARGE";
/// The `team_required` setting: whether a team database that does not
/// answer at start stops the daemon (true) or leaves it on its own (false).
pub const TEAM_REQUIRED_ENV: &str = "DRSD_TEAM_REQUIRED";
/// The `team_node` setting: this daemon's name among the team's nodes.
pub const TEAM_NODE_ENV: &str = "DRSD_TEAM_NODE";
/// The `team_lease_secs` setting: how long a claimed job stays this node's
/// without a heartbeat.
pub const TEAM_LEASE_ENV: &str = "DRSD_TEAM_LEASE_SECS";
/// The `team_min_grace_secs` setting: the least grace a gc on a lab's
/// shared pool gives an entry, whatever `--grace` asks.
pub const TEAM_MIN_GRACE_ENV: &str = "DRSD_TEAM_MIN_GRACE_SECS";
/// The `team_trust_members` setting: whether a content oid another member's
/// daemon recorded is taken for a source that gives nothing derived from
/// content (true, the default), or this node fetches and hashes the object
/// itself (false).
pub const TEAM_TRUST_MEMBERS_ENV: &str = "DRSD_TEAM_TRUST_MEMBERS";
