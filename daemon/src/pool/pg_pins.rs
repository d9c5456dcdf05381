//! The pins of a lab's daemons in one PostgreSQL table, so a sweep on any
//! machine leaves alone what a put on any other is storing. Owns
//! `drsd_pins` and the renewal of this table's leases; connections are
//! [`super::pg`]'s.
//!
//! A row is one holder's count of pins of one key (`key, holder, n, until`).
//! The holder is this [`PgPins`] (node, process, a random tag), so a daemon
//! that dies never releases its pins: they lapse when their lease
//! (`until`) passes, and a thread renews the leases of the live ones. A
//! lapsed pin is no pin: a sweep after it may take the key.
//!
//! The check-then-delete of a sweep ([`PinTable::unless_pinned`]) and a pin
//! of the same key are ordered by a transaction-scoped advisory lock on the
//! key: the sweep holds it exclusively from its check to the end of its
//! delete, a pin takes it shared for its insert. So a pin is either
//! committed before the sweep checks (and the key is kept) or taken after
//! the delete (and the put stores the key again).
//!
//! Pins are written with `synchronous_commit = off`: they live seconds to
//! hours, a put pays for one on every key, and a server crash that loses
//! the last few ms of pins loses them for puts whose connections broke too.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use postgres::Transaction;

use super::error::{PoolError, Result};
use super::pins::PinTable;
use super::Oid;
use crate::pg::schema::PINS as DDL;
use crate::pg::{create_tables, PgServer};

/// The advisory locks' first key, so the pins' locks (the second key is a
/// pool key's first four bytes) meet no other lock of the database.
const LOCK_SPACE: i32 = 0x6472_7370; // "drsp"

/// How long a pin outlives the last renewal of its holder, unless told.
pub const PIN_LEASE: Duration = Duration::from_secs(300);

const PIN: &str = "INSERT INTO drsd_pins (key, holder, n, until) \
    VALUES ($1, $2, 1, now() + make_interval(secs => $3)) \
    ON CONFLICT (key, holder) DO UPDATE SET n = drsd_pins.n + 1, until = excluded.until";
const UNPIN: &str = "UPDATE drsd_pins SET n = n - 1 WHERE key = $1 AND holder = $2 RETURNING n";
const DROP_SPENT: &str = "DELETE FROM drsd_pins WHERE key = $1 AND holder = $2 AND n <= 0";
const PINNED: &str = "SELECT 1 FROM drsd_pins WHERE key = $1 AND n > 0 AND until > now() LIMIT 1";
const RENEW: &str =
    "UPDATE drsd_pins SET until = now() + make_interval(secs => $2) WHERE holder = $1";

/// The pins of every daemon sharing one database.
pub struct PgPins {
    server: Arc<PgServer>,
    holder: String,
    lease: Duration,
    /// Dropped with the table: the renewal thread then stops.
    _renewing: mpsc::Sender<()>,
}

impl PgPins {
    /// The pins on `server`, held as `node` (named in the rows, for a
    /// person reading the table), with leases of [`PIN_LEASE`].
    pub fn new(server: Arc<PgServer>, node: &str) -> Result<PgPins> {
        PgPins::with_lease(server, node, PIN_LEASE)
    }

    /// The same with leases of `lease`, renewed every third of it. Makes
    /// the table when missing and removes the lapsed pins of dead holders.
    pub fn with_lease(server: Arc<PgServer>, node: &str, lease: Duration) -> Result<PgPins> {
        server.with("create the pins table", |c| {
            create_tables(c, DDL)?;
            c.client
                .execute("DELETE FROM drsd_pins WHERE until < now()", &[])?;
            Ok(())
        })?;
        // Unique among the live holders: two tables of one process are
        // made at different instants.
        let made = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let holder = format!("{node}:{}:{made:x}", std::process::id());
        let (tx, rx) = mpsc::channel();
        let (renewer, name) = (Arc::clone(&server), holder.clone());
        thread::Builder::new()
            .name("drsd-pin-leases".into())
            .spawn(move || renew_until_dropped(&renewer, &name, lease, &rx))
            .map_err(|e| {
                PoolError::Io(crate::IoError::new(
                    "start the pin lease thread",
                    std::path::PathBuf::from("drsd_pins"),
                    e,
                ))
            })?;
        Ok(PgPins {
            server,
            holder,
            lease,
            _renewing: tx,
        })
    }

    /// This table's name for itself in `drsd_pins.holder`.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }
}

/// The leases of `holder`'s pins pushed forward every third of `lease`
/// until the table is dropped. A failed renewal is logged and tried again:
/// pins outlive one missed renewal.
fn renew_until_dropped(
    server: &PgServer,
    holder: &str,
    lease: Duration,
    stop: &mpsc::Receiver<()>,
) {
    loop {
        match stop.recv_timeout(lease / 3) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let renewed = server.with("renew pins", |c| {
            let mut tx = relaxed(&mut c.client)?;
            tx.execute(RENEW, &[&holder, &lease.as_secs_f64()])?;
            tx.commit()
        });
        if let Err(e) = renewed {
            log::warn!("{e}; the pins of this daemon lapse unless renewed soon");
        }
    }
}

/// A transaction that does not wait for the WAL's flush at commit.
fn relaxed(client: &mut postgres::Client) -> Result<Transaction<'_>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.batch_execute("SET LOCAL synchronous_commit = off")?;
    Ok(tx)
}

/// The advisory lock's second key for `oid`: its first four bytes. Two
/// keys that share them only wait for each other.
fn lock_key(oid: &Oid) -> i32 {
    let b = oid.as_bytes();
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl PinTable for PgPins {
    fn pin(&self, oid: Oid) -> Result<()> {
        let key = oid.as_bytes().as_slice();
        self.server.with("pin", |c| {
            let mut tx = relaxed(&mut c.client)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock_shared($1, $2)",
                &[&LOCK_SPACE, &lock_key(&oid)],
            )?;
            tx.execute(PIN, &[&key, &self.holder, &self.lease_secs()])?;
            tx.commit()
        })
    }

    fn unpin(&self, oid: Oid) {
        let key = oid.as_bytes().as_slice();
        let released = self.server.with("unpin", |c| {
            let mut tx = relaxed(&mut c.client)?;
            // The row lock the update takes orders two unpins of one key.
            let left = tx.query_opt(UNPIN, &[&key, &self.holder])?;
            if left.is_some_and(|r| r.get::<_, i32>(0) <= 0) {
                tx.execute(DROP_SPENT, &[&key, &self.holder])?;
            }
            tx.commit()
        });
        if let Err(e) = released {
            log::warn!("{e}; the pin of {oid} lapses with its lease");
        }
    }

    fn unless_pinned(&self, oid: Oid, then: &mut dyn FnMut() -> Result<()>) -> Result<bool> {
        let err = self.server.error("sweep under the pins' lock");
        let mut conn = self.server.take("sweep under the pins' lock")?;
        let mut tx = conn.client.transaction().map_err(&err)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, $2)",
            &[&LOCK_SPACE, &lock_key(&oid)],
        )
        .map_err(&err)?;
        let key = oid.as_bytes().as_slice();
        if tx.query_opt(PINNED, &[&key]).map_err(&err)?.is_some() {
            tx.commit().map_err(&err)?;
            return Ok(false);
        }
        // On an error the transaction rolls back as it drops, releasing the lock.
        then()?;
        tx.commit().map_err(&err)?;
        Ok(true)
    }

    /// One transaction for the batch: the keys' locks taken in order (two
    /// sweeps never wait on each other in a cycle; a pin takes one lock),
    /// the pinned among them read in one query.
    fn unless_pinned_many(
        &self,
        oids: &[Oid],
        then: &mut dyn FnMut(&[Oid]) -> Result<()>,
    ) -> Result<Vec<bool>> {
        let err = self.server.error("sweep under the pins' lock");
        let mut conn = self.server.take("sweep under the pins' lock")?;
        let mut tx = conn.client.transaction().map_err(&err)?;
        let mut locks: Vec<i32> = oids.iter().map(lock_key).collect();
        locks.sort_unstable();
        locks.dedup();
        tx.execute(
            "SELECT count(pg_advisory_xact_lock($1, k)) FROM \
             (SELECT k FROM unnest($2::int4[]) k ORDER BY k) locks",
            &[&LOCK_SPACE, &locks],
        )
        .map_err(&err)?;
        let keys: Vec<&[u8]> = oids.iter().map(|o| o.as_bytes().as_slice()).collect();
        let pinned: std::collections::HashSet<Vec<u8>> = tx
            .query(
                "SELECT DISTINCT key FROM drsd_pins \
                 WHERE key = ANY($1::bytea[]) AND n > 0 AND until > now()",
                &[&keys],
            )
            .map_err(&err)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let free: Vec<bool> = keys.iter().map(|k| !pinned.contains(*k)).collect();
        let unpinned: Vec<Oid> = oids
            .iter()
            .zip(&free)
            .filter(|(_, f)| **f)
            .map(|(o, _)| *o)
            .collect();
        then(&unpinned)?;
        tx.commit().map_err(&err)?;
        Ok(free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::TestDb;

    fn sweep(pins: &PgPins, oid: Oid) -> bool {
        pins.unless_pinned(oid, &mut || Ok(())).unwrap()
    }

    #[test]
    fn a_pin_taken_on_one_machine_holds_off_the_sweep_of_another() {
        let db = TestDb::create();
        let server = PgServer::open(&db.url).unwrap();
        let (a, b) = (
            PgPins::new(server.clone(), "node-a").unwrap(),
            PgPins::new(PgServer::open(&db.url).unwrap(), "node-b").unwrap(),
        );
        let oid = Oid::of(b"in flight on a");
        a.pin(oid).unwrap();
        assert!(!sweep(&b, oid), "b swept what a is storing");
        // b's own pins and releases do not touch a's.
        b.pin(oid).unwrap();
        b.unpin(oid);
        b.unpin(oid);
        assert!(!sweep(&b, oid), "b's releases let go of a's pin");
        a.unpin(oid);
        assert!(sweep(&b, oid), "released by a, the key is b's to sweep");
    }

    #[test]
    fn the_pins_of_a_daemon_that_died_lapse_with_their_lease_and_live_ones_are_renewed() {
        let db = TestDb::create();
        let server = PgServer::open(&db.url).unwrap();
        let lease = Duration::from_millis(1500);
        let (dead, live) = (Oid::of(b"dead"), Oid::of(b"live"));
        let dying = PgPins::with_lease(server.clone(), "gone", lease).unwrap();
        dying.pin(dead).unwrap();
        // Killed: it never unpins, and its renewal stops.
        drop(dying);
        let alive = PgPins::with_lease(server.clone(), "here", lease).unwrap();
        alive.pin(live).unwrap();
        let sweeper = PgPins::new(server, "sweeper").unwrap();
        assert!(
            !sweep(&sweeper, dead),
            "a fresh pin of a dead daemon still holds"
        );
        thread::sleep(lease * 2);
        assert!(
            sweep(&sweeper, dead),
            "the dead daemon's pin outlived its lease"
        );
        assert!(
            !sweep(&sweeper, live),
            "a live daemon's pin lapsed: its lease was not renewed"
        );
    }

    #[test]
    fn gc_records_written_on_one_machine_are_read_on_another() {
        use crate::pool::{GcRecords, PgGcRecords};
        let db = TestDb::create();
        let key = Oid::of(b"seen").as_bytes().to_vec();
        let listed: std::collections::HashSet<Vec<u8>> = [key.clone()].into();
        let mut a = PgGcRecords::new(PgServer::open(&db.url).unwrap()).unwrap();
        a.last_referenced(&listed, &[Oid::of(b"seen")].into(), 100, true)
            .unwrap();
        let mut b = PgGcRecords::new(PgServer::open(&db.url).unwrap()).unwrap();
        let last = b
            .last_referenced(&listed, &Default::default(), 500, false)
            .unwrap();
        assert_eq!(last[&key], 100, "b did not count from a's sighting");
    }
}
