//! Every setting the daemon reads: its key in the settings file, the
//! environment variables that set it, the `drsd` flag that sets it if any,
//! what values it takes and what its default is. One table, so the file's
//! keys, the environment and `drsctl config` cannot drift apart.

use super::env::{
    CA_FILE_ENV, DRS_SERVERS_ENV, DRS_TOKEN_FILE_ENV, DRS_WAIT_ENV, GEN3_CREDENTIALS_ENV,
    METADATA_TIMEOUT_ENV, PARTIAL_MAX_ENV, STATE_DIR_ENV, TEAM_DB_ENV, TEAM_LARGE_ENV,
    TEAM_LEASE_ENV, TEAM_MIN_GRACE_ENV, TEAM_NODE_ENV, TEAM_REQUIRED_ENV, TEAM_TRUST_MEMBERS_ENV,
    TRUST_CLAIMS_ENV,
};

/// A setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Pool,
    StateDir,
    IdleTimeout,
    PrefetchJobs,
    PrefetchSmallJobs,
    PrefetchBandwidth,
    PrefetchMaxSize,
    RetrySecs,
    MultipartPartSize,
    PartialMax,
    UploadPartSize,
    CopyWholeMax,
    CaFile,
    DrsServers,
    DrsTokenFile,
    Gen3Credentials,
    DrsWaitSecs,
    MetadataTimeout,
    TrustClaims,
    Netrc,
    S3Endpoint,
    S3Region,
    S3AccessKeyId,
    S3SecretAccessKey,
    S3SessionToken,
    S3Profile,
    S3CredentialsFile,
    TeamDb,
    TeamLarge,
    TeamRequired,
    TeamNode,
    TeamLeaseSecs,
    TeamMinGraceSecs,
    TeamTrustMembers,
}

/// What values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number.
    Count,
    /// Bytes: a whole number, or a string with a K, M or G suffix (powers of 1024).
    Size,
    /// Seconds, fractions allowed.
    Secs,
    Path,
    /// An http(s) URL.
    Url,
    /// `NAME=URL[,NAME=URL...]` (see `stores::drs::servers`).
    DrsServers,
    Text,
    /// `true` or `false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    Bool,
    /// A PostgreSQL connection URL as libpq takes it (`postgresql://…` or
    /// `key=value` pairs). Shown without its password, and never quoted in
    /// an error (the password may be in it).
    PgUrl,
}

impl Kind {
    /// What is accepted, for error messages.
    pub fn accepted(self) -> &'static str {
        match self {
            Kind::Count => "a whole number",
            Kind::Size => "a size: a whole number of bytes, or a string such as \"64M\" (K, M, G)",
            Kind::Secs => "a number of seconds",
            Kind::Path => "a path (a string)",
            Kind::Url => "an http:// or https:// URL (a string)",
            Kind::DrsServers => {
                "NAME=URL[,NAME=URL...] (a string), e.g. \"dg.TEST=https://data.example.org\""
            }
            Kind::Text => "a string",
            Kind::Bool => "true or false",
            Kind::PgUrl => {
                "a PostgreSQL connection URL (a string), e.g. \"postgresql://alice@db.lab/drsd\""
            }
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Spec {
    pub key: Key,
    /// The table in the file (`s3`), `None` at the top level.
    pub table: Option<&'static str>,
    /// The key in its table.
    pub name: &'static str,
    /// The variables that set it, the first one set winning.
    pub env: &'static [&'static str],
    /// The `drsd` flag that sets it (and overrides the environment).
    pub flag: Option<&'static str>,
    pub kind: Kind,
    /// Never shown, logged or put in an error.
    pub secret: bool,
    /// What applies when it is not set, for `drsctl config`.
    pub default: &'static str,
}

impl Spec {
    /// `prefetch_jobs`, `s3.endpoint`.
    pub fn dotted(&self) -> String {
        match self.table {
            Some(table) => format!("{table}.{}", self.name),
            None => self.name.to_string(),
        }
    }
}

const fn top(key: Key, name: &'static str, env: &'static [&'static str], kind: Kind) -> Spec {
    Spec {
        key,
        table: None,
        name,
        env,
        flag: None,
        kind,
        secret: false,
        default: "unset",
    }
}

const fn s3(key: Key, name: &'static str, env: &'static [&'static str], kind: Kind) -> Spec {
    Spec {
        table: Some("s3"),
        ..top(key, name, env, kind)
    }
}

const fn flag(spec: Spec, flag: &'static str) -> Spec {
    Spec {
        flag: Some(flag),
        ..spec
    }
}

const fn default(spec: Spec, default: &'static str) -> Spec {
    Spec { default, ..spec }
}

const fn secret(spec: Spec) -> Spec {
    Spec {
        secret: true,
        ..spec
    }
}

/// Every setting, in the order `drsctl config` shows them.
pub static SPECS: &[Spec] = &[
    default(
        flag(top(Key::Pool, "pool", &["DRSD_POOL"], Kind::Path), "--pool"),
        "$XDG_DATA_HOME/drsd/pool",
    ),
    default(
        flag(
            top(Key::StateDir, "state_dir", &[STATE_DIR_ENV], Kind::Path),
            "--state-dir",
        ),
        "$XDG_STATE_HOME/drsd",
    ),
    default(
        flag(
            top(
                Key::IdleTimeout,
                "idle_timeout",
                &[drsd_proto::IDLE_TIMEOUT_ENV],
                Kind::Secs,
            ),
            "--idle-timeout",
        ),
        "never (900 when a client starts the daemon)",
    ),
    default(
        top(
            Key::PrefetchJobs,
            "prefetch_jobs",
            &["DRSD_PREFETCH_JOBS"],
            Kind::Count,
        ),
        "2",
    ),
    default(
        top(
            Key::PrefetchSmallJobs,
            "prefetch_small_jobs",
            &["DRSD_PREFETCH_SMALL_JOBS"],
            Kind::Count,
        ),
        "32",
    ),
    default(
        top(
            Key::PrefetchBandwidth,
            "prefetch_bandwidth",
            &["DRSD_PREFETCH_BANDWIDTH"],
            Kind::Size,
        ),
        "unlimited",
    ),
    default(
        top(
            Key::PrefetchMaxSize,
            "prefetch_max_size",
            &["DRSD_PREFETCH_MAX_SIZE"],
            Kind::Size,
        ),
        "unlimited",
    ),
    default(
        top(
            Key::RetrySecs,
            "retry_secs",
            &["DRSD_RETRY_SECS"],
            Kind::Secs,
        ),
        "30",
    ),
    default(
        top(
            Key::MultipartPartSize,
            "multipart_part_size",
            &["DRSD_MULTIPART_PART_SIZE"],
            Kind::Size,
        ),
        "unset (multipart ETags not checked)",
    ),
    default(
        top(
            Key::PartialMax,
            "partial_max",
            &[PARTIAL_MAX_ENV],
            Kind::Size,
        ),
        "1G",
    ),
    default(
        top(
            Key::UploadPartSize,
            "upload_part_size",
            &["DRSD_UPLOAD_PART_SIZE"],
            Kind::Size,
        ),
        "64M",
    ),
    default(
        top(
            Key::CopyWholeMax,
            "copy_whole_max",
            &["DRSD_COPY_WHOLE_MAX"],
            Kind::Size,
        ),
        "5G",
    ),
    default(
        top(Key::CaFile, "ca_file", &[CA_FILE_ENV], Kind::Path),
        "the system's roots only",
    ),
    top(
        Key::DrsServers,
        "drs_servers",
        &[DRS_SERVERS_ENV],
        Kind::DrsServers,
    ),
    top(
        Key::DrsTokenFile,
        "drs_token_file",
        &[DRS_TOKEN_FILE_ENV],
        Kind::Path,
    ),
    top(
        Key::Gen3Credentials,
        "gen3_credentials",
        &[GEN3_CREDENTIALS_ENV],
        Kind::Path,
    ),
    default(
        top(
            Key::DrsWaitSecs,
            "drs_wait_secs",
            &[DRS_WAIT_ENV],
            Kind::Secs,
        ),
        "60",
    ),
    default(
        top(
            Key::MetadataTimeout,
            "metadata_timeout",
            &[METADATA_TIMEOUT_ENV],
            Kind::Secs,
        ),
        "30",
    ),
    default(
        top(
            Key::TrustClaims,
            "trust_claims",
            &[TRUST_CLAIMS_ENV],
            Kind::Text,
        ),
        "none: every object remote and Indexd must show the bytes",
    ),
    default(top(Key::Netrc, "netrc", &["NETRC"], Kind::Path), "~/.netrc"),
    default(
        s3(
            Key::S3Endpoint,
            "endpoint",
            &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
            Kind::Url,
        ),
        "https://s3.amazonaws.com",
    ),
    default(
        s3(
            Key::S3Region,
            "region",
            &["AWS_REGION", "AWS_DEFAULT_REGION"],
            Kind::Text,
        ),
        "us-east-1",
    ),
    s3(
        Key::S3AccessKeyId,
        "access_key_id",
        &["AWS_ACCESS_KEY_ID"],
        Kind::Text,
    ),
    secret(s3(
        Key::S3SecretAccessKey,
        "secret_access_key",
        &["AWS_SECRET_ACCESS_KEY"],
        Kind::Text,
    )),
    secret(s3(
        Key::S3SessionToken,
        "session_token",
        &["AWS_SESSION_TOKEN"],
        Kind::Text,
    )),
    default(
        s3(Key::S3Profile, "profile", &["AWS_PROFILE"], Kind::Text),
        "default",
    ),
    default(
        s3(
            Key::S3CredentialsFile,
            "credentials_file",
            &["AWS_SHARED_CREDENTIALS_FILE"],
            Kind::Path,
        ),
        "~/.aws/credentials",
    ),
    // The team mode (a lab's machines on one PostgreSQL database).
    default(
        top(Key::TeamDb, "team_db", &[TEAM_DB_ENV], Kind::PgUrl),
        "unset: this machine's own pool and registry (SQLite, local files)",
    ),
    default(
        top(Key::TeamLarge, "team_large", &[TEAM_LARGE_ENV], Kind::Text),
        "unset: with team_db, the large tier in pg-lo",
    ),
    default(
        top(
            Key::TeamRequired,
            "team_required",
            &[TEAM_REQUIRED_ENV],
            Kind::Bool,
        ),
        "true: with team_db, no daemon starts while the database is down",
    ),
    default(
        top(Key::TeamNode, "team_node", &[TEAM_NODE_ENV], Kind::Text),
        "USER@HOSTNAME",
    ),
    default(
        top(
            Key::TeamLeaseSecs,
            "team_lease_secs",
            &[TEAM_LEASE_ENV],
            Kind::Secs,
        ),
        "60",
    ),
    default(
        top(
            Key::TeamMinGraceSecs,
            "team_min_grace_secs",
            &[TEAM_MIN_GRACE_ENV],
            Kind::Secs,
        ),
        "3600",
    ),
    default(
        top(
            Key::TeamTrustMembers,
            "team_trust_members",
            &[TEAM_TRUST_MEMBERS_ENV],
            Kind::Bool,
        ),
        "true: another member's hash of an object whose source gives no content checksum is taken",
    ),
];

/// The row of `key`.
pub fn spec(key: Key) -> &'static Spec {
    SPECS
        .iter()
        .find(|s| s.key == key)
        .expect("every key has a row")
}
