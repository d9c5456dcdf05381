//! Moving a machine into a lab's team and out again (issue 31, item 7):
//! `drsctl team join` copies this machine's own pool and registry (what the
//! daemon opens without `team_db`) into the team's; `drsctl team leave`
//! copies back what this node's repos need, so they work with the team gone.
//!
//! Both run in a daemon started in team mode. The rules they keep:
//! - **verified**: every entry's bytes are hashed to its oid on the way
//!   (the destination pool checks them again as it stores them); an entry
//!   whose bytes do not match is reported by name and not copied;
//! - **idempotent**: an entry the destination holds is counted as there
//!   and not read; a record the destination has as it is is not written;
//!   a second run copies nothing;
//! - **resumable, nothing half-visible**: each entry is committed whole by
//!   its engine (a kv batch in one transaction, a large entry staged then
//!   renamed or committed), and the records go after the bytes they name,
//!   so a kill at any point leaves whole entries and whole records, and a
//!   rerun does what is left.
//!
//! The join reads the own stores read-only ([`OwnPoolReader`],
//! [`SqliteRegistry::open_read_only`]): a join changes nothing there, so
//! the machine can go back to them by removing `team_db`. Not copied: the
//! records of what object remotes and Indexd servers were shown to hold
//! (a push asks the store again) and this node's open uploads.

mod error;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::MigrateError;

use crate::blocking;
use crate::ops::foreign::ForeignObjects as ForeignService;
use crate::ops::repos::RepoBook;
use crate::pool::{Oid, OwnPoolReader, Pool, PoolError};
use crate::registry::{Entry, ForeignObjects, Registry, SqliteRegistry};
use drsd_proto::{RefusedEntry, TeamMigrateReport};

/// Kv entries read and written per batch (one transaction in the team's kv).
const KV_BATCH: usize = 512;

/// The migration service: the team's pool and registry (the daemon's own,
/// in team mode), and where this machine's own stores live.
pub struct Migration {
    /// `None` unless the daemon runs in team mode.
    team: Option<TeamSide>,
    book: Arc<RepoBook>,
    own_pool: PathBuf,
    own_registry: PathBuf,
    /// One join or leave at a time.
    running: tokio::sync::Mutex<()>,
}

struct TeamSide {
    pool: Arc<Pool>,
    registry: Arc<Registry>,
    foreign: Arc<ForeignService>,
}

impl Migration {
    /// The service of a daemon in team mode (`team`: its pool, registry
    /// and foreign objects) or on its own (`None`: join and leave refused).
    pub(crate) fn new(
        team: Option<(Arc<Pool>, Arc<Registry>, Arc<ForeignService>)>,
        book: Arc<RepoBook>,
        own_pool: &Path,
        own_registry: &Path,
    ) -> Migration {
        Migration {
            team: team.map(|(pool, registry, foreign)| TeamSide {
                pool,
                registry,
                foreign,
            }),
            book,
            own_pool: own_pool.to_path_buf(),
            own_registry: own_registry.to_path_buf(),
            running: tokio::sync::Mutex::new(()),
        }
    }

    fn side(&self, op: &'static str) -> Result<&TeamSide, MigrateError> {
        self.team.as_ref().ok_or(MigrateError::NotInTeam { op })
    }

    /// `drsctl team join`: this machine's own pool, then its registry's
    /// records for the registered repos, into the team's.
    pub async fn join(&self) -> Result<TeamMigrateReport, MigrateError> {
        let side = self.side("join")?;
        let _one = self.running.try_lock().map_err(|_| MigrateError::Busy)?;
        let (pool, registry) = (side.pool.clone(), side.registry.clone());
        let (dir, reg_path, repos) = (
            self.own_pool.clone(),
            self.own_registry.clone(),
            self.book.paths(),
        );
        let report = blocking(move || {
            let mut report = TeamMigrateReport::default();
            join_pool(&dir, &pool, &mut report)?;
            join_records(&reg_path, &registry, &repos, &mut report)?;
            Ok::<_, MigrateError>(report)
        })
        .await?;
        // Objects the own registry had not hashed yet: the team's workers
        // fetch them (once, lab-wide).
        side.foreign.queue_unhashed().await;
        log::info!(
            "team join: {} pool entries copied ({} bytes), {} there already, {} refused; \
             {} records of {} repos",
            report.copied,
            report.bytes,
            report.present,
            report.refused.len(),
            report.records,
            report.repos
        );
        Ok(report)
    }

    /// `drsctl team leave`: what this node's repos need (their roots: the
    /// oids of their pointers and of their foreign objects' content), from
    /// the team's pool into this machine's own, then their records into the
    /// own registry.
    pub async fn leave(&self) -> Result<TeamMigrateReport, MigrateError> {
        let side = self.side("leave")?;
        let _one = self.running.try_lock().map_err(|_| MigrateError::Busy)?;
        let (pool, registry) = (side.pool.clone(), side.registry.clone());
        let (dir, reg_path, repos) = (
            self.own_pool.clone(),
            self.own_registry.clone(),
            self.book.paths(),
        );
        let report = blocking(move || {
            let mut report = TeamMigrateReport::default();
            leave_pool(&dir, &pool, &registry, &repos, &mut report)?;
            leave_records(&reg_path, &registry, &repos, &mut report)?;
            Ok::<_, MigrateError>(report)
        })
        .await?;
        log::info!(
            "team leave: {} pool entries copied back ({} bytes), {} there already, {} refused, \
             {} absent from the team; {} records of {} repos",
            report.copied,
            report.bytes,
            report.present,
            report.refused.len(),
            report.absent,
            report.records,
            report.repos
        );
        Ok(report)
    }
}

fn refuse(report: &mut TeamMigrateReport, key: &[u8], why: impl std::fmt::Display) {
    log::warn!(
        "team migration: pool entry {} not copied: {why}",
        hex::encode(key)
    );
    report.refused.push(RefusedEntry {
        key: hex::encode(key),
        why: why.to_string(),
    });
}

/// The own pool's kv entries in batches, then its large files, into the
/// team's pool; each checked against its key first.
fn join_pool(dir: &Path, team: &Pool, report: &mut TeamMigrateReport) -> Result<(), MigrateError> {
    let own_err = MigrateError::own_pool(dir);
    let own = OwnPoolReader::open(dir).map_err(&own_err)?;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = own.kv_page(after.as_deref(), KV_BATCH).map_err(&own_err)?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        let mut good: Vec<(Oid, &[u8])> = Vec::with_capacity(page.len());
        for (key, value) in &page {
            match judge(key, value) {
                Ok(oid) => good.push((oid, value)),
                Err(why) => refuse(report, key, why),
            }
        }
        for put in team.put_many(&good).map_err(MigrateError::team_pool)? {
            count(report, put.stored, put.len);
        }
    }
    for key in own.large_keys().map_err(&own_err)? {
        let Some(oid) = Oid::from_key(&key) else {
            refuse(
                report,
                &key,
                format!("key of {} bytes is not a sha256", key.len()),
            );
            continue;
        };
        if team.has(&oid).map_err(MigrateError::team_pool)? {
            report.present += 1;
            continue;
        }
        let Some(file) = own.large_file(&key).map_err(&own_err)? else {
            continue; // gone since the listing
        };
        match team.put_stream(Some(&oid), file.file) {
            Ok(put) => count(report, put.stored, put.len),
            Err(PoolError::HashMismatch { got, .. }) => {
                refuse(report, &key, Unproven::HashesTo(got))
            }
            Err(e) => return Err(MigrateError::team_pool(e)),
        }
    }
    Ok(())
}

/// Why a pool entry of this node's own is not copied into the team's.
#[derive(Debug, thiserror::Error)]
enum Unproven {
    #[error("key of {0} bytes is not a sha256")]
    NotSha256(usize),
    #[error("content hashes to {0}")]
    HashesTo(Oid),
}

/// The oid `key` names when `value` hashes to it; else why not.
fn judge(key: &[u8], value: &[u8]) -> Result<Oid, Unproven> {
    let oid = Oid::from_key(key).ok_or(Unproven::NotSha256(key.len()))?;
    let got = Oid::of(value);
    match got == oid {
        true => Ok(oid),
        false => Err(Unproven::HashesTo(got)),
    }
}

fn count(report: &mut TeamMigrateReport, stored: bool, len: u64) {
    if stored {
        report.copied += 1;
        report.bytes += len;
    } else {
        report.present += 1;
    }
}

/// The own registry's records of each registered repo into the team's,
/// those the team lacks or knows otherwise.
fn join_records(
    path: &Path,
    team: &Registry,
    repos: &[PathBuf],
    report: &mut TeamMigrateReport,
) -> Result<(), MigrateError> {
    let Some(own) = SqliteRegistry::open_read_only(path).map_err(MigrateError::own_registry)?
    else {
        return Ok(());
    };
    let copy = RecordCopy {
        from: &|repo| own.for_repo(repo).map_err(MigrateError::own_registry),
        to: &|repo| team.for_repo(repo).map_err(MigrateError::team_registry),
        write: &|repo, missing| {
            team.record(repo, missing)
                .map_err(MigrateError::team_registry)
        },
    };
    copy.records(repos, report)
}

/// One direction of a migration's record copy: what each repo has where
/// it comes from and where it goes, and how to write there (each with its
/// side's error).
struct RecordCopy<'a> {
    from: &'a ReadRecords<'a>,
    to: &'a ReadRecords<'a>,
    write: &'a WriteRecords<'a>,
}

/// A repo's entries in one registry.
type ReadRecords<'a> = dyn Fn(&Path) -> Result<Vec<Entry>, MigrateError> + 'a;
/// Records a repo's entries in one registry.
type WriteRecords<'a> = dyn Fn(&Path, &[Entry]) -> Result<(), MigrateError> + 'a;

impl RecordCopy<'_> {
    /// Writes, for each of `repos`, the entries the other side lacks or
    /// knows less of ([`not_in`]); idempotent, so a rerun after a kill
    /// finishes the copy.
    fn records(
        &self,
        repos: &[PathBuf],
        report: &mut TeamMigrateReport,
    ) -> Result<(), MigrateError> {
        for repo in repos {
            let missing = not_in(&(self.from)(repo)?, &(self.to)(repo)?);
            if !missing.is_empty() {
                (self.write)(repo, &missing)?;
                report.repos += 1;
                report.records += missing.len() as u64;
            }
        }
        Ok(())
    }
}

/// The entries of `from` that `to` lacks, or holds with less known (another
/// object, no content oid where `from` has one, or one not read where
/// `from` read it: a mirror's record, restored at start, is a claim, and
/// the team would fetch the object again to read it).
fn not_in(from: &[Entry], to: &[Entry]) -> Vec<Entry> {
    let known: std::collections::HashMap<&str, &Entry> =
        to.iter().map(|e| (e.path.as_str(), e)).collect();
    from.iter()
        .filter(|e| {
            known.get(e.path.as_str()).is_none_or(|k| {
                k.oid != e.oid
                    || k.object.url != e.object.url
                    || k.object.etag != e.object.etag
                    || k.object.size != e.object.size
                    || (k.object.content_oid.is_none() && e.object.content_oid.is_some())
                    || (!k.object.content_read && e.object.content_read)
            })
        })
        .cloned()
        .collect()
}

/// Every root of this node's repos the own pool lacks, from the team's
/// pool (its verified read-out) into the own pool (which hashes it again).
fn leave_pool(
    dir: &Path,
    team: &Pool,
    registry: &Registry,
    repos: &[PathBuf],
    report: &mut TeamMigrateReport,
) -> Result<(), MigrateError> {
    let own_err = MigrateError::own_pool(dir);
    let mut roots: Vec<Oid> = crate::ops::gc::own_roots(registry, repos)
        .map_err(|e| MigrateError::Roots(Box::new(e)))?
        .into_iter()
        .flat_map(|(_, oids)| oids)
        .collect();
    roots.sort_unstable();
    roots.dedup();
    let own = Pool::open(dir, None).map_err(&own_err)?;
    for oid in roots {
        if own.has(&oid).map_err(&own_err)? {
            report.present += 1;
            continue;
        }
        let blob = match team.get_verified(&oid) {
            Ok(Some(blob)) => blob,
            Ok(None) => {
                report.absent += 1;
                continue;
            }
            Err(PoolError::Corrupt {
                got, quarantined, ..
            }) => {
                let why = format!("the team's copy hashes to {got}; {quarantined}");
                refuse(report, oid.as_bytes(), why);
                continue;
            }
            Err(e) => return Err(MigrateError::team_pool(e)),
        };
        match own.put_stream(Some(&oid), blob.into_reader()) {
            Ok(put) => count(report, put.stored, put.len),
            Err(PoolError::HashMismatch { got, .. }) => {
                refuse(report, oid.as_bytes(), Unproven::HashesTo(got))
            }
            Err(e) => return Err(own_err(e)),
        }
    }
    Ok(())
}

/// The team registry's records of each registered repo into the own
/// registry, those it lacks or knows otherwise.
fn leave_records(
    path: &Path,
    team: &Registry,
    repos: &[PathBuf],
    report: &mut TeamMigrateReport,
) -> Result<(), MigrateError> {
    let own = Registry::open(path).map_err(MigrateError::own_registry)?;
    let copy = RecordCopy {
        from: &|repo| team.for_repo(repo).map_err(MigrateError::team_registry),
        to: &|repo| own.for_repo(repo).map_err(MigrateError::own_registry),
        write: &|repo, missing| {
            own.record(repo, missing)
                .map_err(MigrateError::own_registry)
        },
    };
    copy.records(repos, report)
}
