//! [`PgServer`]: what every PostgreSQL engine of a team (the pool's, the
//! registry's, gc's) shares: the server's connection URL read by libpq's
//! conventions (`conninfo.rs`), TLS through rustls (`tls.rs`), the schema's
//! migrations run (`schema.rs`), and a small pool of connections so
//! parallel calls do not queue on one.
//!
//! The client is the synchronous `postgres` crate: each connection runs
//! its own small runtime, so an engine must be called off the daemon's async
//! threads (`crate::blocking`), like SQLite and file I/O are.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::conninfo::{ConnInfo, Environment, ProcessEnv};
use super::tls::tls;
use crate::lock::lock;
use crate::pool::PoolError;

type Result<T, E = PoolError> = std::result::Result<T, E>;

/// Connections one engine opens at most; a caller past it waits for one.
const MAX_CONNECTIONS: usize = 16;
/// How long a connection no caller took stays open. Not fewer idle ones
/// by count: a burst past a count would close connections only to open
/// them again a moment later, and a PostgreSQL connection costs its
/// server a process started and its caches filled (measured: with four
/// nodes on two loaded cores, 8 kept idle made 3,000 connections in a
/// minute, and the server spent most of its CPU starting them).
const IDLE_CLOSE: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call waits out a server that went away (a restart takes a
/// few seconds) before it fails.
const RECONNECT_FOR: Duration = Duration::from_secs(30);
/// How long one statement may wait for a lock before it fails. Every
/// member of a lab may hold a lock on the team's tables (one role, one
/// database): a lock held for good must fail a call, never hang it. The
/// daemon's own waits are short (a gc batch's advisory locks, a row's
/// update), far below this.
pub(crate) const LOCK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one statement may run. The longest of the daemon's (gc's
/// listing of a million entries, a large object's write) take seconds.
pub(crate) const STATEMENT_TIMEOUT: Duration = Duration::from_secs(120);

/// One PostgreSQL server (and database) the engines talk to, with its
/// pooled connections.
pub struct PgServer {
    config: postgres::Config,
    /// The URL without its password: what errors and `status` show.
    shown: String,
    tls: MakeRustlsConnect,
    idle: Mutex<Idle>,
    freed: Condvar,
    outage: Outage,
    /// How long the calls of one outage wait the server out
    /// ([`RECONNECT_FOR`]; shorter in tests).
    patience: Duration,
}

/// The server out of reach, as every call to it sees it. One outage, one
/// warning (not one per waiting call) and one deadline: a call begun late
/// in an outage waits only what is left of the server's patience, and once
/// that is spent each call tries once and fails, until the server answers
/// again (said once too).
#[derive(Default)]
struct Outage {
    /// Set while `since` is: the check on every answered call.
    on: AtomicBool,
    since: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Idle {
    conns: Vec<PgConn>,
    /// Connections open now, idle or lent out.
    open: usize,
}

/// A connection with the statements prepared on it.
pub(crate) struct PgConn {
    pub(crate) client: Client,
    prepared: HashMap<&'static str, Statement>,
    /// When it was last given back.
    returned: Instant,
}

impl PgConn {
    /// `sql` prepared once per connection (a statement cached by text).
    pub(crate) fn prepare(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(stmt) = self.prepared.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client.prepare(sql)?;
        self.prepared.insert(sql, stmt.clone());
        Ok(stmt)
    }
}

impl PgServer {
    /// Reads `url` as libpq does ([`ConnInfo`]: a URL or `key=value`
    /// pairs, a service, the `PG…` variables, the password file) and
    /// connects once, so a server that is down or refuses us is an error
    /// here, naming it.
    pub fn open(url: &str) -> Result<Arc<PgServer>> {
        PgServer::open_in(url, &ProcessEnv, None)
    }

    /// [`PgServer::open`] trusting, beside the web's roots and the
    /// connection's `sslrootcert`, the extra roots of `ca_file` (the
    /// daemon's `ca_file` setting, as its HTTPS clients do).
    pub fn open_trusting(url: &str, ca_file: Option<&Path>) -> Result<Arc<PgServer>> {
        PgServer::open_in(url, &ProcessEnv, ca_file)
    }

    /// [`PgServer::open_trusting`] with the variables and home folder of
    /// `env`.
    pub fn open_in(
        url: &str,
        env: &dyn Environment,
        ca_file: Option<&Path>,
    ) -> Result<Arc<PgServer>> {
        let ConnInfo {
            mut config,
            root_cert,
        } = ConnInfo::read(url, env)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        bound_waits(&mut config);
        let mut roots = Vec::new();
        if let Some(path) = ca_file {
            roots.push(("the extra TLS roots (ca_file)", path));
        }
        if let Some(path) = root_cert.as_deref() {
            roots.push(("the team database's sslrootcert", path));
        }
        let server = Arc::new(PgServer {
            shown: shown(&config),
            config,
            tls: tls(&roots)?,
            idle: Mutex::new(Idle::default()),
            freed: Condvar::new(),
            outage: Outage::default(),
            patience: RECONNECT_FOR,
        });
        let first = server.take("connect")?;
        drop(first);
        Ok(server)
    }

    /// Brings the database's schema to this drsd's version (`schema.rs`):
    /// what a daemon joining the team does first, before any engine uses a
    /// table. Once per database: a node that finds it done changes nothing.
    pub fn migrate(&self) -> Result<i32> {
        self.with("migrate the schema", super::schema::migrate)
    }

    /// `url` as `drsctl config` shows it: host, port, database and user,
    /// and whether a password is in it, never the password itself.
    pub fn redacted(url: &str) -> String {
        match ConnInfo::read(url, &ProcessEnv).map(|info| info.config) {
            Ok(config) if config.get_password().is_some() => {
                format!("{} (password {})", shown(&config), drsd_proto::SECRET_SHOWN)
            }
            Ok(config) => shown(&config),
            Err(_) => "<not a PostgreSQL connection URL>".into(),
        }
    }

    /// The server as errors name it: host, port, database and user, never
    /// the password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    pub(crate) fn error(&self, op: &'static str) -> impl Fn(postgres::Error) -> PoolError + '_ {
        move |source| PoolError::Postgres {
            op,
            server: self.shown.clone(),
            source,
        }
    }

    /// A pooled connection, or a new one; waits while [`MAX_CONNECTIONS`]
    /// are lent out.
    pub(crate) fn take(&self, op: &'static str) -> Result<Lent<'_>> {
        self.lend().map_err(self.error(op))
    }

    fn lend(&self) -> Result<Lent<'_>, postgres::Error> {
        let mut idle = lock(&self.idle);
        loop {
            if let Some(conn) = idle.conns.pop() {
                return Ok(Lent {
                    server: self,
                    conn: Some(conn),
                });
            }
            if idle.open < MAX_CONNECTIONS {
                idle.open += 1;
                break;
            }
            idle = self.freed.wait(idle).unwrap_or_else(|e| e.into_inner());
        }
        drop(idle);
        match self.config.connect(self.tls.clone()) {
            Ok(client) => Ok(Lent {
                server: self,
                conn: Some(PgConn {
                    client,
                    prepared: HashMap::new(),
                    returned: Instant::now(),
                }),
            }),
            Err(e) => {
                self.closed();
                Err(e)
            }
        }
    }

    /// Closes every idle connection.
    fn drop_idle(&self) {
        let mut idle = lock(&self.idle);
        let gone = std::mem::take(&mut idle.conns);
        idle.open -= gone.len();
        drop(idle);
        drop(gone);
        self.freed.notify_all();
    }

    fn closed(&self) {
        lock(&self.idle).open -= 1;
        self.freed.notify_one();
    }

    /// Runs `f` on a connection. When the server went away (a restart, a
    /// failover, a cut in the network: the connection closed, refused, or
    /// ended by the server's shutdown), the connections idle beside it are
    /// dropped and `f` runs again on a new one, with a growing pause, until
    /// [`RECONNECT_FOR`] from the outage's start (see [`Outage`]): so `f`
    /// must be safe to repeat (every engine write is: puts do nothing for a
    /// present key, and a transaction the server lost was not committed).
    /// Any other error is returned at once.
    pub(crate) fn with<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut pause = Duration::from_millis(100);
        loop {
            let e = match self.try_once(&mut f) {
                Ok(out) => {
                    self.answered();
                    return Ok(out);
                }
                Err(e) => e,
            };
            if !is_gone(&e) {
                return Err(self.error(op)(e));
            }
            let deadline = self.went_away(&e) + self.patience;
            if Instant::now() + pause > deadline {
                return Err(self.error(op)(e));
            }
            // The others idle beside it are likely closed too (a restart
            // closes them all): the next try takes a new one.
            self.drop_idle();
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// When the outage `e` is part of began; the first call to meet it
    /// begins it, and says so.
    fn went_away(&self, e: &postgres::Error) -> Instant {
        let mut since = lock(&self.outage.since);
        if let Some(since) = *since {
            return since;
        }
        log::warn!(
            "{}: the server went away ({}); reconnecting for up to {}s",
            self.shown,
            pg_detail(e),
            self.patience.as_secs()
        );
        self.outage.on.store(true, Ordering::SeqCst);
        *since.insert(Instant::now())
    }

    /// Ends the outage, if any: the server answered.
    fn answered(&self) {
        if !self.outage.on.load(Ordering::Relaxed) {
            return;
        }
        let mut since = lock(&self.outage.since);
        self.outage.on.store(false, Ordering::SeqCst);
        if let Some(began) = since.take() {
            log::info!(
                "{}: the server answers again, after {}s",
                self.shown,
                began.elapsed().as_secs()
            );
        }
    }

    /// `f` once, on a pooled or new connection.
    fn try_once<T>(
        &self,
        f: &mut impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T, postgres::Error> {
        let mut conn = self.lend()?;
        f(&mut conn)
    }
}

/// The idle connections are closed off the async threads: a `postgres`
/// client blocks on its own runtime as it closes, which panics on a
/// runtime's thread (a daemon whose start fails after the team connected
/// drops its server there).
impl Drop for PgServer {
    fn drop(&mut self) {
        let idle = std::mem::take(&mut lock(&self.idle).conns);
        if !idle.is_empty() && tokio::runtime::Handle::try_current().is_ok() {
            std::thread::spawn(move || drop(idle));
        }
    }
}

/// A connection lent out; back to the pool when dropped, unless closed.
pub(crate) struct Lent<'a> {
    server: &'a PgServer,
    conn: Option<PgConn>,
}

impl std::ops::Deref for Lent<'_> {
    type Target = PgConn;
    fn deref(&self) -> &PgConn {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut PgConn {
        self.conn.as_mut().expect("present until dropped")
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let mut idle = lock(&self.server.idle);
        let mut closed = Vec::new();
        if conn.client.is_closed() {
            closed.push(conn);
        } else {
            conn.returned = Instant::now();
            // Lent last in, first out: those at the front are the ones no
            // caller needed for longest.
            idle.conns.push(conn);
            let stale = idle
                .conns
                .iter()
                .take_while(|c| c.returned.elapsed() > IDLE_CLOSE)
                .count();
            closed.extend(idle.conns.drain(..stale));
        }
        idle.open -= closed.len();
        drop(idle);
        drop(closed);
        self.server.freed.notify_all();
    }
}

/// True when `e` says the server went away rather than refused the call:
/// the connection closed or could not be made (not for want of a right
/// password or database: those are the server's answers), or the server
/// ended it by shutting down or is starting up (SQLSTATE classes 08 and
/// 57P).
pub(crate) fn is_gone(e: &postgres::Error) -> bool {
    match e.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || code.starts_with("57P")
        }
        // A socket's error (refused, reset, unreachable) or a closed
        // connection; not a value the client could not convert, which
        // would fail the same way again.
        None => {
            e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
        }
    }
}

/// True when `e` says a table is missing: a store nothing was written to
/// yet, which reads as empty.
pub(crate) fn is_missing_table(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNDEFINED_TABLE)
}

/// Sets [`LOCK_TIMEOUT`] and [`STATEMENT_TIMEOUT`] on every session, at
/// its start (the startup packet's options: no statement of ours runs
/// before them). Options the connection string gives come after, so a lab
/// that wants other bounds says so there.
fn bound_waits(config: &mut postgres::Config) {
    let ours = format!(
        "-c lock_timeout={} -c statement_timeout={}",
        LOCK_TIMEOUT.as_millis(),
        STATEMENT_TIMEOUT.as_millis()
    );
    let options = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{ours} {theirs}"),
        _ => ours,
    };
    config.options(&options);
}

fn shown(config: &postgres::Config) -> String {
    use postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432u16)))
        .map(|(host, port)| match host {
            Host::Tcp(name) => format!("{name}:{port}"),
            Host::Unix(path) => format!("{}:{port}", path.display()),
        })
        .collect();
    format!(
        "postgresql://{}@{}/{}",
        config.get_user().unwrap_or(""),
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    )
}

/// A PostgreSQL error with what the server or the socket said: the
/// client's own text is only "db error" or "error connecting to server".
pub(crate) fn pg_detail(e: &postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => format!("{e}: {}: {}", db.severity(), db.message()),
        (None, Some(cause)) => format!("{e}: {cause}"),
        (None, None) => e.to_string(),
    }
}

/// A database of its own for one test on the tests' server
/// (`DRSD_TEST_PG_URL`, set by `tests/with-servers.sh`), dropped after it.
#[cfg(test)]
pub(crate) struct TestDb {
    admin: String,
    pub(crate) name: String,
    pub(crate) url: String,
}

#[cfg(test)]
impl TestDb {
    pub(crate) fn create() -> TestDb {
        let admin = std::env::var("DRSD_TEST_PG_URL").unwrap_or_else(|_| {
            panic!(
                "DRSD_TEST_PG_URL is not set: the PostgreSQL engines' tests need a real \
                 server; run them under tests/with-servers.sh (it starts one), e.g. \
                 tests/with-servers.sh cargo nextest run -p drsd --lib -E 'test(/pool/)'"
            )
        });
        let name = format!("drsd_test_{}", hex::encode(rand::random::<[u8; 8]>()));
        let mut admin_client = Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connect to the tests' server {admin}: {e}"));
        admin_client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let mut url = url::Url::parse(&admin).expect("DRSD_TEST_PG_URL is a URL");
        url.set_path(&format!("/{name}"));
        TestDb {
            admin,
            name,
            url: url.to_string(),
        }
    }

    pub(crate) fn client(&self) -> Client {
        Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    /// A client of the tests' server's own database (`DRSD_TEST_PG_URL`),
    /// which every test shares: where an advisory lock serialises tests
    /// that touch what the whole server shares (roles).
    pub(crate) fn admin_client(&self) -> Client {
        Client::connect(&self.admin, postgres::NoTls).unwrap()
    }
}

#[cfg(test)]
impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::tls::read_roots;

    /// `url` with a port nobody listens on: every connection refused.
    fn moved(url: &str) -> postgres::Config {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let mut url = url::Url::parse(url).unwrap();
        url.set_port(Some(port)).unwrap();
        url.as_str().parse().unwrap()
    }

    fn ping(server: &PgServer) -> Result<()> {
        server.with("ping", |c| c.client.batch_execute("SELECT 1"))
    }

    /// Fails, and how long it took.
    fn refused(server: &PgServer) -> Duration {
        let began = Instant::now();
        assert!(ping(server).is_err(), "the server still answers");
        began.elapsed()
    }

    /// A self-made CA's certificate (no key kept): what a lab's own CA file
    /// holds.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBjTCCATOgAwIBAgIUNBndMNXxh7O0qV6DspBlXo+YCw4wCgYIKoZIzj0EAwIw\n\
GzEZMBcGA1UEAwwQZHJzZCB0ZXN0IGxhYiBDQTAgFw0yNjEyMDcyMTA2MzRaGA8y\n\
MTI2MTExMzIxMDYzNFowGzEZMBcGA1UEAwwQZHJzZCB0ZXN0IGxhYiBDQTBZMBMG\n\
ByqGSM49AgEGCCqGSM49AwEHA0IABKxJmNQMaFqML1yRgnMwqXitsUdZb1ef609K\n\
WcB3tPnjRi839NuU/OuPjX8DqzQIAPqHxedKHgs5t0km5PpFWcmjUzBRMB0GA1Ud\n\
DgQWBBQ+h+kYaevkFFIE9naMtbl6sPWlDTAfBgNVHSMEGDAWgBQ+h+kYaevkFFIE\n\
9naMtbl6sPWlDTAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIGLt\n\
QUdG8/T1JKpHYWSzNF3u0eWzZ4d0MBVxQ4L9paeqAiEA/RSCIlUuWO+KBrBoz5u7\n\
uUg99eMXONg0m10REvpH2dg=\n\
-----END CERTIFICATE-----\n\
";

    /// A PEM file of one self-made certificate, at `mode`.
    fn ca_file(dir: &Path, mode: u32) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("lab-ca.pem");
        std::fs::write(&path, TEST_CA).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_ca_file_others_may_write_is_refused_naming_it_before_anything_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = ca_file(dir.path(), 0o664);
        // A port nobody listens on: had the file been taken, the error
        // would be the refused connection.
        let url = moved("postgresql://lab@127.0.0.1:5432/lab?sslmode=require");
        let url = format!(
            "postgresql://lab@127.0.0.1:{}/lab?sslmode=require",
            url.get_ports()[0]
        );
        let err = PgServer::open_in(&url, &ProcessEnv, Some(&path))
            .err()
            .expect("a CA file others may write is refused");
        let said = err.to_string();
        assert!(matches!(err, PoolError::TrustedFile { .. }), "{said}");
        assert!(
            said.contains(&path.display().to_string()) && said.contains("chmod go-w"),
            "{said}"
        );
        // sslrootcert is held to the same rule.
        let url = format!("{url}&sslrootcert={}", path.display());
        let err = PgServer::open_in(&url, &ProcessEnv, None)
            .err()
            .expect("an sslrootcert others may write is refused");
        assert!(
            matches!(err, PoolError::TrustedFile { what, .. } if what.contains("sslrootcert")),
            "{err}"
        );
    }

    #[test]
    fn a_ca_file_of_the_user_is_taken_and_one_holding_no_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = ca_file(dir.path(), 0o644);
        assert_eq!(read_roots("ca_file", &good).unwrap().len(), 1);
        assert!(tls(&[("ca_file", &good)]).is_ok());
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let err = tls(&[("ca_file", &empty)]).err().unwrap().to_string();
        assert!(
            err.contains("empty.pem") && err.contains("no certificate"),
            "{err}"
        );
        let missing = dir.path().join("missing.pem");
        let err = tls(&[("ca_file", &missing)]).err().unwrap().to_string();
        assert!(err.contains("missing.pem"), "{err}");
    }

    #[test]
    fn every_session_gives_up_on_a_lock_held_by_another_session_and_its_options_stay() {
        let db = TestDb::create();
        let mut holder = db.client();
        holder.batch_execute("CREATE TABLE held (n int)").unwrap();
        holder
            .batch_execute("BEGIN; LOCK TABLE held IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        // The connection string's own options come after ours: they win.
        let url = format!("{}?options=-cstatement_timeout%3D60000", db.url);
        let server = PgServer::open(&url).unwrap();
        let (lock, statement): (String, String) = server
            .with("show", |c| {
                let row = c.client.query_one(
                    "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
                    &[],
                )?;
                Ok((row.get(0), row.get(1)))
            })
            .unwrap();
        assert_eq!(lock, "15s");
        assert_eq!(
            statement, "1min",
            "the connection string's own options were lost"
        );
        let began = Instant::now();
        let err = server
            .with("read the held table", |c| {
                c.client.batch_execute("SELECT * FROM held")
            })
            .unwrap_err();
        let waited = began.elapsed();
        assert!(
            waited >= LOCK_TIMEOUT && waited < LOCK_TIMEOUT + Duration::from_secs(5),
            "waited {waited:?}"
        );
        assert!(err.to_string().contains("lock timeout"), "{err}");
    }

    #[test]
    fn connections_a_burst_opened_stay_open_for_the_next_burst_instead_of_being_made_again() {
        let db = TestDb::create();
        let server = PgServer::open(&db.url).unwrap();
        let burst = || {
            let together = std::sync::Barrier::new(MAX_CONNECTIONS);
            std::thread::scope(|s| {
                for _ in 0..MAX_CONNECTIONS {
                    s.spawn(|| {
                        server
                            .with("hold", |c| {
                                together.wait();
                                c.client.batch_execute("SELECT 1")
                            })
                            .unwrap()
                    });
                }
            });
        };
        let backends = |c: &mut Client| -> i64 {
            c.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
        };
        burst();
        assert_eq!(
            lock(&server.idle).conns.len(),
            MAX_CONNECTIONS,
            "some were closed"
        );
        let mut admin = db.client();
        let pids = |c: &mut Client| -> Vec<i32> {
            let mut pids: Vec<i32> = c
                .query(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid()",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            pids.sort();
            pids
        };
        let before = pids(&mut admin);
        assert_eq!(backends(&mut admin), MAX_CONNECTIONS as i64);
        burst();
        assert_eq!(
            pids(&mut admin),
            before,
            "the second burst made new connections"
        );
    }

    #[test]
    fn the_calls_of_one_outage_share_its_wait_and_a_later_outage_is_waited_out_again() {
        let db = TestDb::create();
        let server = PgServer::open(&db.url).unwrap();
        let mut server = Arc::try_unwrap(server).ok().expect("the only owner");
        server.patience = Duration::from_secs(1);
        server.drop_idle();
        server.config = moved(&db.url);

        let first = refused(&server);
        assert!(
            first >= Duration::from_millis(600),
            "the first call waited {first:?}"
        );
        let second = refused(&server);
        assert!(
            second < Duration::from_millis(400),
            "a call of the same outage waited it out again: {second:?}"
        );
        assert!(lock(&server.outage.since).is_some());

        server.config = db.url.parse().unwrap();
        ping(&server).unwrap();
        assert!(
            lock(&server.outage.since).is_none(),
            "the outage did not end"
        );

        server.drop_idle();
        server.config = moved(&db.url);
        let again = refused(&server);
        assert!(
            again >= Duration::from_millis(600),
            "a new outage was not waited out: {again:?}"
        );
    }
}
