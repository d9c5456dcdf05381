//! [`Pool`] itself: the two-tier store every repo shares, routing each blob
//! to the kv or the large engine by length alone, so one content never sits
//! in two tiers and nothing ever migrates.
//!
//! Owns what spans both engines: hashing on the way in (nothing is stored
//! under a key it does not hash to), pins against sweeps, sweeping and
//! verifying, stats per tier, and the threshold fixed in `pool.json` when
//! the pool is created. The engines only store bytes under opaque keys.

use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use sha2::{Digest, Sha256};

use super::backend::{Backend, Blob, Staged, TierStats};
use super::error::{IoContext, PoolError, Result};
use super::local::LocalEngine;
use super::node_dir::NodeFile;
use super::pins::{MemPins, Pin, PinTable};
use super::sqlite::SqliteEngine;
use super::verified::{copy_hashed, hash_blob, sealed, CopyFailed, Stamp, Verified};
use super::Oid;

/// Blobs shorter than this go to the kv tier, the rest to the large tier.
pub const DEFAULT_THRESHOLD: u64 = 128 * 1024;
/// The read and write size of streaming large puts.
const CHUNK: usize = 1 << 20;

/// The tier names travel as they are: the wire's own enum.
pub use drsd_proto::Tier;

/// What a put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put {
    pub oid: Oid,
    pub len: u64,
    pub tier: Tier,
    /// False when the pool had the key already (the put was a no-op).
    pub stored: bool,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TierReport {
    pub tier: Tier,
    pub engine: String,
    #[serde(flatten)]
    pub stats: TierStats,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PoolStats {
    pub threshold: u64,
    pub tiers: Vec<TierReport>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub kept: usize,
    /// Deleted, or in a dry run what would be.
    pub deleted: Vec<Swept>,
    /// Not live, but pinned by a put or batch in flight.
    pub pinned: usize,
    /// Not live, but stored since the listing the sweep was limited to.
    pub newer: usize,
}

/// An entry a sweep deleted (or would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub key: Vec<u8>,
    pub tier: Tier,
    pub bytes: u64,
}

/// An entry whose bytes no longer hash to its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEntry {
    pub key: Vec<u8>,
    pub tier: Tier,
    pub problem: String,
    /// Where its bytes were moved, out of every lookup; `None` when it was
    /// gone before it could be moved.
    pub quarantined: Option<String>,
}

/// Entries a sweep deletes per batch: one pin-table transaction and one
/// engine delete each, where the engines have transactions.
const SWEEP_BATCH: usize = 1000;

/// The two-tier content-addressed pool. Routing is a pure function of length:
/// `len < threshold` goes to kv, the rest to large, whatever path put it, so
/// one content never sits in two tiers and nothing ever migrates.
pub struct Pool {
    kv: Arc<dyn Backend>,
    large: Arc<dyn Backend>,
    threshold: u64,
    /// Where pins are kept: in memory unless [`Pool::with_pins`] says.
    pins: Arc<dyn PinTable>,
    partial: Option<PathBuf>,
    verified: Verified,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PoolFile {
    threshold: u64,
}

impl Pool {
    /// Opens or creates the default pool at `dir`: sqlite kv in `kv.sqlite`,
    /// local files under `large/`. The threshold is fixed when the pool is
    /// created (`pool.json`); `threshold` must then match it or be `None`.
    pub fn open(dir: &Path, threshold: Option<u64>) -> Result<Pool> {
        // Private (0700, the kv database 0600): what the user fetched is
        // nobody else's to read.
        crate::private::dir(dir).at("create pool folder", dir)?;
        let threshold = Self::recorded_threshold(dir, threshold)?;
        let kv_path = dir.join("kv.sqlite");
        crate::private::sqlite(&kv_path).at("make private", &kv_path)?;
        let kv = SqliteEngine::open(&kv_path)?;
        let large = LocalEngine::open(&dir.join("large"))?;
        let partial = dir.join("partial");
        crate::private::dir(&partial).at("create folder", &partial)?;
        let mut pool = Pool::with_engines(Arc::new(kv), Arc::new(large), threshold);
        pool.partial = Some(partial);
        Ok(pool)
    }

    /// A team's pool: `kv` and `large` shared with the other nodes, the
    /// threshold recorded in `threshold_dir` (the shared folder, so every
    /// node routes alike), and this node's own `partial` folder for
    /// resumable downloads (on the large tier's file system when it has
    /// one, so a finished download is adopted by a rename; one per node, so
    /// two nodes never write one partial file).
    pub fn open_team(
        kv: Arc<dyn Backend>,
        large: Arc<dyn Backend>,
        threshold_dir: &Path,
        partial: &Path,
        threshold: Option<u64>,
    ) -> Result<Pool> {
        std::fs::create_dir_all(threshold_dir).at("create folder", threshold_dir)?;
        let threshold = Self::recorded_threshold(threshold_dir, threshold)?;
        // In a lab's shared folder another member may have made it first,
        // or left a link in its place: refused by name (`node_dir`).
        super::node_dir::open(partial)?;
        let mut pool = Pool::with_engines(kv, large, threshold);
        pool.partial = Some(partial.to_path_buf());
        Ok(pool)
    }

    /// The threshold in `dir`'s `pool.json`, or `wanted` (else the
    /// default) recorded there first. In a lab's shared folder another
    /// member may write: the file is read without following a link and
    /// with a bound, written through its own handle, and put in place only
    /// if no other node did first (then that one's is read).
    fn recorded_threshold(dir: &Path, wanted: Option<u64>) -> Result<u64> {
        let path = dir.join("pool.json");
        match read_pool_file(&path) {
            Ok(text) => {
                let file: PoolFile =
                    serde_json::from_slice(&text).map_err(|e| PoolError::Config {
                        path: path.clone(),
                        why: e.to_string(),
                    })?;
                match wanted {
                    Some(t) if t != file.threshold => Err(PoolError::Config {
                        path,
                        why: format!(
                            "the pool was built with threshold {} and cannot change to {t}: \
                             content would then route to another tier",
                            file.threshold
                        ),
                    }),
                    _ => Ok(file.threshold),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let threshold = wanted.unwrap_or(DEFAULT_THRESHOLD);
                let text = serde_json::to_vec(&PoolFile { threshold }).expect("plain struct");
                let mut tmp = tempfile::NamedTempFile::new_in(dir).at("create file in", dir)?;
                std::io::Write::write_all(tmp.as_file_mut(), &text).at("write", tmp.path())?;
                // Readable by every member of a lab sharing the folder (a
                // threshold is no secret; a user's own pool folder is 0700).
                use std::os::unix::fs::PermissionsExt;
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o444))
                    .at("make readable", tmp.path())?;
                match tmp.persist_noclobber(&path) {
                    Ok(_) => Ok(threshold),
                    // Another node recorded it first: theirs holds.
                    Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::recorded_threshold(dir, wanted)
                    }
                    Err(e) => Err(PoolError::Io(crate::IoError::new(
                        "write",
                        path.clone(),
                        e.error,
                    ))),
                }
            }
            Err(e) => Err(e).at("read", path),
        }
    }

    /// A pool over any two engines. Passing the same engine twice gives a
    /// one-engine pool, which is how the contract suite drives each engine.
    pub fn with_engines(kv: Arc<dyn Backend>, large: Arc<dyn Backend>, threshold: u64) -> Pool {
        Pool {
            kv,
            large,
            threshold,
            pins: Arc::new(MemPins::default()),
            partial: None,
            verified: Verified::default(),
        }
    }

    /// The same pool with its pins kept in `pins` (a table shared with the
    /// other daemons sweeping the same engines) instead of in memory.
    pub fn with_pins(mut self, pins: Arc<dyn PinTable>) -> Pool {
        self.pins = pins;
        self
    }

    /// The folder [`Pool::open`] opened (`partial/` is in it), for errors
    /// that must name it (a full disk); `None` for pools built from engines.
    pub fn dir(&self) -> Option<&Path> {
        self.partial.as_deref().and_then(Path::parent)
    }

    /// Where resumable downloads keep their partial files: on the large
    /// tier's filesystem, so a finished one is adopted by a rename. `None`
    /// for pools built from engines.
    pub fn partial_dir(&self) -> Option<&Path> {
        self.partial.as_deref()
    }

    /// Takes the finished file `file` of this node's folder as the entry
    /// `oid`, moving it (no copy) when it goes to the large tier. The caller
    /// hashed exactly these `len` bytes as they were written; the file is
    /// gone afterwards. It is reached through the folder's checked
    /// descriptor alone: a folder swapped for a link meanwhile gives
    /// nothing in, and loses nothing.
    pub(crate) fn adopt_verified(&self, file: &NodeFile, oid: &Oid, len: u64) -> Result<Put> {
        let _pin = self.pin(oid)?;
        let tier = self.tier_for(len);
        if tier == Tier::Large && self.holds_good(oid)? {
            file.remove().at("remove", &file.shown)?;
            return Ok(Put {
                oid: *oid,
                len,
                tier,
                stored: false,
            });
        }
        let opened = file.open_read().at("open", &file.shown)?;
        let written = identity(&opened.metadata().at("stat", &file.shown)?);
        let stored = self.engine(tier).adopt_at(oid.as_bytes(), file, opened)?;
        if stored && tier == Tier::Large {
            self.remember(oid, Some(written));
        }
        Ok(Put {
            oid: *oid,
            len,
            tier,
            stored,
        })
    }

    /// `$XDG_DATA_HOME/drsd/pool` (or the platform's equivalent).
    pub fn default_dir() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "drsd").map(|d| d.data_dir().join("pool"))
    }

    pub(crate) fn large_engine(&self) -> &dyn Backend {
        &*self.large
    }

    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    pub fn tier_for(&self, len: u64) -> Tier {
        if len < self.threshold {
            Tier::Kv
        } else {
            Tier::Large
        }
    }

    fn engine(&self, tier: Tier) -> &dyn Backend {
        match tier {
            Tier::Kv => &*self.kv,
            Tier::Large => &*self.large,
        }
    }

    /// The tiers with distinct engines (one for a one-engine pool).
    fn tiers(&self) -> Vec<(Tier, &dyn Backend)> {
        let mut out = vec![(Tier::Kv, &*self.kv)];
        if !Arc::ptr_eq(&self.kv, &self.large) {
            out.push((Tier::Large, &*self.large));
        }
        out
    }

    pub fn has(&self, oid: &Oid) -> Result<bool> {
        Ok(self.kv.has(oid.as_bytes())? || self.large.has(oid.as_bytes())?)
    }

    pub fn size(&self, oid: &Oid) -> Result<Option<u64>> {
        match self.kv.size(oid.as_bytes())? {
            Some(n) => Ok(Some(n)),
            None => self.large.size(oid.as_bytes()),
        }
    }

    pub fn get(&self, oid: &Oid) -> Result<Option<Blob>> {
        match self.kv.get(oid.as_bytes())? {
            Some(b) => Ok(Some(b)),
            None => self.large.get(oid.as_bytes()),
        }
    }

    /// Up to `len` bytes at `offset` (pread for large blobs); `None` when the
    /// pool lacks the key, an error when `offset` is past the end.
    pub fn read_range(&self, oid: &Oid, offset: u64, len: u64) -> Result<Option<Vec<u8>>> {
        let found = match self.kv.read_range(oid.as_bytes(), offset, len)? {
            Some(found) => Some(found),
            None => self.large.read_range(oid.as_bytes(), offset, len)?,
        };
        let Some((bytes, size)) = found else {
            return Ok(None);
        };
        if offset > size {
            return Err(PoolError::Range {
                key: *oid,
                offset,
                len,
                size,
            });
        }
        Ok(Some(bytes))
    }

    /// Whether entry `key` is a large file another user stored in a lab's
    /// shared folder (see [`Backend::stored_by_another`]).
    pub fn stored_by_another(&self, key: &[u8]) -> Result<bool> {
        self.large.stored_by_another(key)
    }

    pub fn delete(&self, oid: &Oid) -> Result<bool> {
        self.verified.forget(oid);
        let mut found = false;
        for (_, engine) in self.tiers() {
            found |= engine.delete(oid.as_bytes())?;
        }
        Ok(found)
    }

    /// Every key in the pool, each once, in order.
    pub fn list(&self) -> Result<Vec<Vec<u8>>> {
        let mut keys = BTreeSet::new();
        for (_, engine) in self.tiers() {
            keys.extend(engine.list()?);
        }
        Ok(keys.into_iter().collect())
    }

    /// Keeps `oid` out of every sweep until the pin drops.
    pub fn pin(&self, oid: &Oid) -> Result<Pin> {
        Pin::new(&self.pins, *oid)
    }

    /// Puts whose keys stay pinned until the batch is dropped.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            pool: self,
            pins: Vec::new(),
        }
    }

    /// Stores `bytes` under `oid` after checking that they hash to it.
    pub fn put(&self, oid: &Oid, bytes: &[u8]) -> Result<Put> {
        self.put_pinned(oid, bytes).map(|(put, _)| put)
    }

    fn put_pinned(&self, oid: &Oid, bytes: &[u8]) -> Result<(Put, Pin)> {
        let pin = self.pin(oid)?;
        let len = bytes.len() as u64;
        let tier = self.tier_for(len);
        // A large blob already there (and good) is not hashed or written
        // again; a small one costs less to hash than to look up first.
        if tier == Tier::Large && self.holds_good(oid)? {
            let put = Put {
                oid: *oid,
                len,
                tier,
                stored: false,
            };
            return Ok((put, pin));
        }
        check(Some(oid), Oid::of(bytes), len)?;
        Ok((self.store(oid, bytes, tier)?, pin))
    }

    /// Stores each `(oid, bytes)` after checking that the bytes hash to the
    /// oid, as [`Pool::put`] does; the kv tier's share goes in one engine
    /// write (one SQLite transaction). A pair that does not hash to its oid
    /// fails the whole call before anything is written.
    pub fn put_many(&self, entries: &[(Oid, &[u8])]) -> Result<Vec<Put>> {
        let _pins = entries
            .iter()
            .map(|(oid, _)| self.pin(oid))
            .collect::<Result<Vec<Pin>>>()?;
        for (oid, bytes) in entries {
            check(Some(oid), Oid::of(bytes), bytes.len() as u64)?;
        }
        let small: Vec<(&[u8], &[u8])> = entries
            .iter()
            .filter(|(_, b)| self.tier_for(b.len() as u64) == Tier::Kv)
            .map(|(oid, b)| (oid.as_bytes().as_slice(), *b))
            .collect();
        let mut stored = self.kv.put_many(&small)?.into_iter();
        entries
            .iter()
            .map(|(oid, bytes)| {
                let tier = self.tier_for(bytes.len() as u64);
                match tier {
                    Tier::Kv => Ok(Put {
                        oid: *oid,
                        len: bytes.len() as u64,
                        tier,
                        stored: stored.next().unwrap_or(false),
                    }),
                    Tier::Large => self.store(oid, bytes, tier),
                }
            })
            .collect()
    }

    /// Write transactions the kv engine has committed since the pool was
    /// opened (see [`Backend::write_transactions`]).
    pub fn kv_write_transactions(&self) -> u64 {
        self.kv.write_transactions()
    }

    /// Writes verified bytes into their tier's engine.
    fn store(&self, oid: &Oid, bytes: &[u8], tier: Tier) -> Result<Put> {
        let stored = match tier {
            Tier::Kv => self.kv.put(oid.as_bytes(), bytes)?,
            Tier::Large if self.holds_good(oid)? => false,
            Tier::Large => {
                let mut staged = self.large.stage()?;
                staged.write(bytes)?;
                let written = staged.identity();
                staged.commit(oid.as_bytes())?;
                self.remember(oid, written);
                true
            }
        };
        Ok(Put {
            oid: *oid,
            len: bytes.len() as u64,
            tier,
            stored,
        })
    }

    /// Stores a stream of unknown length. Up to the threshold it waits in
    /// memory; past it the prefix goes into a fresh stage file and the rest
    /// follows (the source is never read twice). The sha256 of exactly the
    /// bytes stored must equal `expect` when given; otherwise it names the
    /// entry. Any error lands nothing and leaves no stage file. With
    /// `expect` already present the source is not read at all.
    pub fn put_stream(&self, expect: Option<&Oid>, src: impl Read) -> Result<Put> {
        self.put_stream_pinned(expect, src).map(|(put, _)| put)
    }

    fn put_stream_pinned(&self, expect: Option<&Oid>, mut src: impl Read) -> Result<(Put, Pin)> {
        let early_pin = expect.map(|oid| self.pin(oid)).transpose()?;
        if let Some(oid) = expect {
            if let Some(len) = self.size(oid)? {
                let put = Put {
                    oid: *oid,
                    len,
                    tier: self.tier_for(len),
                    stored: false,
                };
                return Ok((put, early_pin.expect("pinned above")));
            }
        }
        let mut prefix = Vec::new();
        (&mut src)
            .take(self.threshold)
            .read_to_end(&mut prefix)
            .map_err(|source| PoolError::Stream {
                at: prefix.len() as u64,
                source,
            })?;
        if (prefix.len() as u64) < self.threshold {
            let oid = Oid::of(&prefix);
            check(expect, oid, prefix.len() as u64)?;
            let pin = match early_pin {
                Some(pin) => pin,
                None => self.pin(&oid)?,
            };
            return Ok((self.store(&oid, &prefix, Tier::Kv)?, pin));
        }
        let mut staged = self.large.stage()?;
        let (oid, len) = stream_into(&mut *staged, prefix, src)?;
        check(expect, oid, len)?;
        let pin = match early_pin {
            Some(pin) => pin,
            None => self.pin(&oid)?,
        };
        let stored = !self.holds_good(&oid)?;
        if stored {
            let written = staged.identity();
            staged.commit(oid.as_bytes())?;
            self.remember(&oid, written);
        }
        let put = Put {
            oid,
            len,
            tier: Tier::Large,
            stored,
        };
        Ok((put, pin))
    }

    /// Stores the file at `path` (see [`Pool::put_stream`]).
    pub fn put_file(&self, expect: Option<&Oid>, path: &Path) -> Result<Put> {
        let file = std::fs::File::open(path).at("open", path)?;
        self.put_stream(expect, file)
    }

    /// Deletes every entry, in both tiers, that is neither in `live` nor
    /// pinned. Each check-and-delete runs in [`PinTable::unless_pinned`], so a put that pins
    /// its key first can never lose it to a concurrent sweep.
    pub fn sweep(&self, live: &HashSet<Oid>) -> Result<SweepReport> {
        self.sweep_or_list(None, live, true)
    }

    /// Sweeps only entries among `listed` (keys from an earlier
    /// [`Pool::list`]); with `delete` false, only says what would go.
    ///
    /// For a caller that lists, then finds what is live, then sweeps: an
    /// entry stored in between, whose reference may have come after the
    /// search, is left for the next sweep.
    pub fn sweep_listed(
        &self,
        listed: &HashSet<Vec<u8>>,
        live: &HashSet<Oid>,
        delete: bool,
    ) -> Result<SweepReport> {
        self.sweep_or_list(Some(listed), live, delete)
    }

    /// Deletes (or, without `delete`, sizes) the entries `oids` that the
    /// caller chose (`drsctl prune`: objects proven elsewhere) the way a
    /// sweep deletes: in batches under the pins' lock, so an entry a put
    /// pinned first stays (counted in `pinned`). A kill between two
    /// batches leaves the rest as they were.
    pub fn sweep_chosen(&self, oids: &[Oid], delete: bool) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        if delete {
            oids.iter().for_each(|oid| self.verified.forget(oid));
        }
        for (tier, engine) in self.tiers() {
            for batch in oids.chunks(SWEEP_BATCH) {
                self.sweep_batch(engine, tier, batch, delete, &mut report)?;
            }
        }
        Ok(report)
    }

    fn sweep_or_list(
        &self,
        listed: Option<&HashSet<Vec<u8>>>,
        live: &HashSet<Oid>,
        delete: bool,
    ) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        for (tier, engine) in self.tiers() {
            let mut doomed = Vec::new();
            for key in engine.list()? {
                if Oid::from_key(&key).is_some_and(|o| live.contains(&o)) {
                    report.kept += 1;
                } else if listed.is_some_and(|l| !l.contains(&key)) {
                    report.newer += 1;
                } else {
                    match Oid::from_key(&key) {
                        Some(oid) => doomed.push(oid),
                        None => self.sweep_unkeyed(engine, tier, key, delete, &mut report)?,
                    }
                }
            }
            for batch in doomed.chunks(SWEEP_BATCH) {
                self.sweep_batch(engine, tier, batch, delete, &mut report)?;
            }
            if delete && !doomed.is_empty() {
                crate::failpoint::hit(match tier {
                    Tier::Kv => "gc-after-kv-deletes",
                    Tier::Large => "gc-after-large-deletes",
                });
            }
        }
        Ok(report)
    }

    /// Deletes (or, without `delete`, sizes) a batch of unreferenced
    /// entries under the pin table's lock, so a put that pinned one of them
    /// first keeps it.
    fn sweep_batch(
        &self,
        engine: &dyn Backend,
        tier: Tier,
        batch: &[Oid],
        delete: bool,
        report: &mut SweepReport,
    ) -> Result<()> {
        let mut gone = Vec::new();
        let ran = self.pins.unless_pinned_many(batch, &mut |free| {
            let keys: Vec<&[u8]> = free.iter().map(|o| o.as_bytes().as_slice()).collect();
            let sizes = match delete {
                true => engine.delete_many(&keys)?,
                false => keys.iter().map(|k| engine.size(k)).collect::<Result<_>>()?,
            };
            gone.extend(
                free.iter()
                    .zip(sizes)
                    .filter_map(|(o, s)| s.map(|b| (*o, b))),
            );
            Ok(())
        })?;
        report.pinned += ran.iter().filter(|ran| !**ran).count();
        report
            .deleted
            .extend(gone.into_iter().map(|(oid, bytes)| Swept {
                key: oid.as_bytes().to_vec(),
                tier,
                bytes,
            }));
        Ok(())
    }

    /// A key that is no sha256 cannot be pinned: swept on its own.
    fn sweep_unkeyed(
        &self,
        engine: &dyn Backend,
        tier: Tier,
        key: Vec<u8>,
        delete: bool,
        report: &mut SweepReport,
    ) -> Result<()> {
        let Some(bytes) = engine.size(&key)? else {
            return Ok(()); // gone since the listing
        };
        if !delete || engine.delete(&key)? {
            report.deleted.push(Swept { key, tier, bytes });
        }
        Ok(())
    }

    /// Gives deleted entries' space back to the file system (after a
    /// sweep); returns the bytes given back.
    pub fn compact(&self) -> Result<u64> {
        let mut freed = 0;
        for (_, engine) in self.tiers() {
            freed += engine.compact()?;
        }
        Ok(freed)
    }

    /// Entries and bytes per tier.
    pub fn stats(&self) -> Result<PoolStats> {
        let mut tiers = Vec::new();
        for (tier, engine) in self.tiers() {
            tiers.push(TierReport {
                tier,
                engine: engine.name().to_string(),
                stats: engine.stats()?,
            });
        }
        Ok(PoolStats {
            threshold: self.threshold,
            tiers,
        })
    }

    /// Re-hashes every entry, read afresh from storage; moves the ones whose
    /// bytes do not match their key aside (see [`Backend::quarantine`]) and
    /// returns them.
    pub fn verify(&self) -> Result<Vec<BadEntry>> {
        let mut bad = Vec::new();
        for (tier, engine) in self.tiers() {
            let mut found = Vec::new();
            engine.scan(&mut |key, blob| {
                if let Some(problem) = self.judge(&key, &blob)? {
                    found.push((key, problem));
                }
                Ok(())
            })?;
            for (key, problem) in found {
                if let Some(oid) = Oid::from_key(&key) {
                    self.verified.forget(&oid);
                }
                let quarantined = engine.quarantine(&key)?;
                bad.push(BadEntry {
                    key,
                    tier,
                    problem,
                    quarantined,
                });
            }
        }
        Ok(bad)
    }

    /// What is wrong with entry `key` holding `blob`, if anything. A good
    /// large file is remembered as verified.
    fn judge(&self, key: &[u8], blob: &Blob) -> Result<Option<String>> {
        let Some(want) = Oid::from_key(key) else {
            return Ok(Some(format!("key of {} bytes is not a sha256", key.len())));
        };
        let (got, _) = self.hash_checked(&want, blob)?;
        Ok((got != want).then(|| format!("content hashes to {got}")))
    }

    /// Hashes `blob`, the value of `oid`; true with it when the blob is
    /// bytes or a file whose stamp did not change while it was read. A
    /// match read from a steady file of ours ([`sealed`]) is recorded as
    /// verified: no one else can change it unseen.
    fn hash_checked(&self, oid: &Oid, blob: &Blob) -> Result<(Oid, bool)> {
        let at = || {
            blob.path()
                .map_or_else(|| oid.to_hex().into(), Path::to_path_buf)
        };
        let before = Stamp::of_blob(blob).at("stat", at())?;
        let got = hash_blob(blob).at("read", at())?;
        let Some(stamp) = before else {
            return Ok((got, true));
        };
        let steady = Stamp::of_blob(blob).at("stat", at())? == Some(stamp);
        if got == *oid && steady {
            if let Blob::File { file, .. } = blob {
                if sealed(file).at("stat", at())? {
                    self.verified.record(*oid, stamp);
                }
            }
        }
        Ok((got, steady))
    }

    /// Entry `oid`, its bytes checked against the oid first, for reads that
    /// hand it on (to a repo, standard output, a remote). A large file this
    /// pool verified since it last changed is not read again. A file
    /// someone else could change ([`sealed`]: another member's, in a lab's
    /// shared folder) is handed on as a private copy, hashed as it was
    /// made. A mismatch moves the entry aside and is an error naming it:
    /// the caller fetches the object elsewhere.
    pub fn get_verified(&self, oid: &Oid) -> Result<Option<Blob>> {
        match self.checked(oid)? {
            None => Ok(None),
            Some(Checked::Ours(blob)) => Ok(Some(blob)),
            Some(Checked::Theirs(blob)) => self.private_copy(oid, blob).map(Some),
        }
    }

    /// Entry `oid` as [`Checked`] says: bytes and files of ours verified
    /// through the very descriptor handed back; another user's file left
    /// for the caller to copy with [`copy_hashed`] and check.
    pub(crate) fn checked(&self, oid: &Oid) -> Result<Option<Checked>> {
        let Some(blob) = self.get(oid)? else {
            return Ok(None);
        };
        if let Blob::File { file, path, .. } = &blob {
            if !sealed(file).at("stat", path)? {
                return Ok(Some(Checked::Theirs(blob)));
            }
        }
        self.verify_ours(oid, blob).map(|b| Some(Checked::Ours(b)))
    }

    /// `blob`, checked against `oid`. A file whose stamp moved while it was
    /// hashed is not verified by that read (this daemon linking it for
    /// another repo moves its ctime too): read again, a few times at most.
    fn verify_ours(&self, oid: &Oid, blob: Blob) -> Result<Blob> {
        let stamp = Stamp::of_blob(&blob).at("stat", oid.to_hex())?;
        if stamp.is_some_and(|s| self.verified.holds(oid, &s)) {
            return Ok(blob);
        }
        for _ in 0..STEADY_TRIES {
            let (got, steady) = self.hash_checked(oid, &blob)?;
            if got != *oid {
                drop(blob);
                return Err(self.bad_entry(oid, got));
            }
            if steady {
                return Ok(blob);
            }
        }
        Err(PoolError::Unsteady {
            oid: *oid,
            path: blob.path().map(Path::to_path_buf).unwrap_or_default(),
        })
    }

    /// Another user's file of entry `oid`, copied into an unnamed file of
    /// this node's own (in its partial folder) and hashed as it was
    /// copied: what its owner writes afterwards reaches no reader.
    fn private_copy(&self, oid: &Oid, blob: Blob) -> Result<Blob> {
        let Blob::File { file, path, .. } = blob else {
            return Ok(blob);
        };
        let dir = self.partial.clone().unwrap_or_else(std::env::temp_dir);
        let mut copy = tempfile::tempfile_in(&dir).at("create a private copy in", &dir)?;
        let (got, len) = copy_hashed(&file, &mut copy).map_err(|e| match e {
            CopyFailed::Read(e) => PoolError::Io(crate::IoError::new("read", path.clone(), e)),
            CopyFailed::Write(e) => PoolError::Io(crate::IoError::new(
                "write a private copy in",
                dir.clone(),
                e,
            )),
        })?;
        drop(file);
        if got != *oid {
            return Err(self.bad_entry(oid, got));
        }
        use std::io::Seek;
        copy.rewind().at("read", &path)?;
        Ok(Blob::File {
            file: copy,
            len,
            path,
        })
    }

    /// Whether the large entry already under `oid` holds the oid's bytes:
    /// fresh bytes for it are dropped only then. In a shared folder the
    /// entry may be anything another member put under the name; a bad one
    /// is moved aside (if it can be: else the fresh bytes are committed
    /// over it all the same), so the caller stores the fresh bytes.
    pub(crate) fn holds_good(&self, oid: &Oid) -> Result<bool> {
        if !self.large.has(oid.as_bytes())? {
            return Ok(false);
        }
        match self.checked(oid) {
            Ok(None) => Ok(false),
            Ok(Some(Checked::Ours(_))) => Ok(true),
            Ok(Some(Checked::Theirs(blob))) => {
                let at = blob.path().map(Path::to_path_buf).unwrap_or_default();
                let got = hash_blob(&blob).at("read", at)?;
                drop(blob);
                if got == *oid {
                    return Ok(true);
                }
                let _ = self.bad_entry(oid, got);
                Ok(false)
            }
            Err(PoolError::Corrupt { .. } | PoolError::Unsteady { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Entry `oid` found to hash to `got`: moved aside, and the error that
    /// says so.
    pub(crate) fn bad_entry(&self, oid: &Oid, got: Oid) -> PoolError {
        let quarantined = match self.quarantine(oid) {
            Ok(Some(place)) => format!("moved aside to {place}"),
            Ok(None) => "already moved aside".into(),
            Err(e) => format!("not moved aside ({e})"),
        };
        log::warn!("pool entry {oid} hashes to {got}: {quarantined}");
        PoolError::Corrupt {
            oid: *oid,
            got,
            quarantined,
        }
    }

    /// Moves entry `oid` aside, out of every lookup (see
    /// [`Backend::quarantine`]); returns where it went.
    pub fn quarantine(&self, oid: &Oid) -> Result<Option<String>> {
        self.verified.forget(oid);
        for (_, engine) in self.tiers() {
            if let Some(place) = engine.quarantine(oid.as_bytes())? {
                return Ok(Some(place));
            }
        }
        Ok(None)
    }

    /// Records a large entry this pool just wrote, its bytes hashed on the
    /// way in, as verified: if the file now at its name is the very file
    /// written (`written`: its device and inode) and only ours to change.
    /// In a shared folder another member may have renamed something else
    /// there meanwhile. Best effort: without the record the next read
    /// hashes it.
    fn remember(&self, oid: &Oid, written: Option<(u64, u64)>) {
        let Some(written) = written else { return };
        if self.large.gets_are_copies() {
            return;
        }
        if let Ok(Some(Blob::File { file, .. })) = self.large.get(oid.as_bytes()) {
            let ours = file.metadata().is_ok_and(|m| identity(&m) == written);
            if let (true, Ok(true), Ok(stamp)) = (ours, sealed(&file), Stamp::of(&file)) {
                self.verified.record(*oid, stamp);
            }
        }
    }
}

/// How many times a file of ours whose stamp moves while it is hashed is
/// read again before the read-out gives up.
const STEADY_TRIES: usize = 3;

/// A large entry's file, as [`Pool::checked`] hands it on.
pub(crate) enum Checked {
    /// Bytes, or a file only this user can change, checked against the oid
    /// through the descriptor it holds.
    Ours(Blob),
    /// Another user's file: not read yet; the caller copies it with
    /// [`copy_hashed`] and checks what it copied.
    Theirs(Blob),
}

/// A file's device and inode: which file a name led to.
pub(crate) fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

pub(crate) fn check(expect: Option<&Oid>, got: Oid, len: u64) -> Result<()> {
    match expect {
        Some(expected) if *expected != got => Err(PoolError::HashMismatch {
            expected: *expected,
            got,
            len,
        }),
        _ => Ok(()),
    }
}

/// Writes `prefix` and then the rest of `src` into `staged`, hashing on a
/// second thread the very buffers handed to the stage, so hashing overlaps
/// the I/O. Returns the digest and length of everything written.
fn stream_into(staged: &mut dyn Staged, prefix: Vec<u8>, mut src: impl Read) -> Result<(Oid, u64)> {
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<Arc<Vec<u8>>>(4);
        let hasher = scope.spawn(move || {
            let mut h = Sha256::new();
            for chunk in rx {
                h.update(&chunk[..]);
            }
            Oid::from_digest(h.finalize().into())
        });
        let mut len = 0u64;
        let mut chunk = Arc::new(prefix);
        let written = loop {
            if chunk.is_empty() {
                break Ok(());
            }
            // The hasher only stops early if it panicked; join reports that.
            let _ = tx.send(Arc::clone(&chunk));
            if let Err(e) = staged.write(&chunk) {
                break Err(e);
            }
            len += chunk.len() as u64;
            let mut next = Vec::with_capacity(CHUNK);
            if let Err(source) = (&mut src).take(CHUNK as u64).read_to_end(&mut next) {
                break Err(PoolError::Stream { at: len, source });
            }
            chunk = Arc::new(next);
        };
        drop(tx);
        let oid = hasher.join().expect("the sha256 thread does not panic");
        written.map(|()| (oid, len))
    })
}

/// Puts whose keys stay pinned (safe from any sweep) until the batch drops,
/// so the caller can record them as live first.
pub struct Batch<'a> {
    pool: &'a Pool,
    pins: Vec<Pin>,
}

impl Batch<'_> {
    pub fn put(&mut self, oid: &Oid, bytes: &[u8]) -> Result<Put> {
        let (put, pin) = self.pool.put_pinned(oid, bytes)?;
        self.pins.push(pin);
        Ok(put)
    }

    pub fn put_stream(&mut self, expect: Option<&Oid>, src: impl Read) -> Result<Put> {
        let (put, pin) = self.pool.put_stream_pinned(expect, src)?;
        self.pins.push(pin);
        Ok(put)
    }

    pub fn pin(&mut self, oid: &Oid) -> Result<()> {
        self.pins.push(self.pool.pin(oid)?);
        Ok(())
    }
}

/// `pool.json` at `path`: not through a link, and 4 KiB at most (its
/// JSON is a few bytes).
fn read_pool_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    let mut text = Vec::new();
    file.take(4096).read_to_end(&mut text)?;
    Ok(text)
}
