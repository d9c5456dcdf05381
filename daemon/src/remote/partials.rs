//! The partial files of resumable downloads (`<pool>/partial/<id>.part`,
//! named by [`name`]): whose each is, and removing those no download will
//! resume, so that a failed download of a large object does not keep its
//! bytes on a full disk forever.
//!
//! A prefetch job's partial stays while the job can still run (queued,
//! running, failed and due again), so its retry resumes; but the partials
//! of failed jobs hold at most [`PARTIAL_MAX_ENV`](crate::settings::env::PARTIAL_MAX_ENV) bytes in all (1 GiB by
//! default), the oldest going first. `drsctl gc` removes every partial no
//! such job owns: those of jobs done or gone, and of the transfer agent's
//! downloads, which have no job. A partial written to within [`QUIET`] is
//! never removed by gc: a download may be writing it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::pool::Oid;
use crate::stores::ObjectUrl;

pub const DEFAULT_PARTIAL_MAX: u64 = 1 << 30;

/// How recently written a partial file may be one a download is writing.
pub const QUIET: Duration = Duration::from_secs(600);

/// The file name of the partial download of the object `origin` (as its
/// errors name it: `s3://bucket/key`, or the URL without its query) of
/// `size` bytes, pinned to `etag`.
pub fn name(origin: &str, etag: Option<&str>, size: u64) -> String {
    let id = format!("{origin}\n{}\n{size}", etag.unwrap_or(""));
    format!("{}.part", Oid::of(id.as_bytes()))
}

/// What names the owner of a partial download: the object a prefetch job
/// fetches, as the daemon's records hold it. Only what the file name is
/// made of: the housekeeping here reads nothing else of the records.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// The object's URL as recorded (it may carry a signed query).
    pub url: &'a str,
    /// Its pinned ETag, empty when it has none.
    pub etag: &'a str,
    pub size: u64,
}

/// The file name of a prefetch's partial download of `owner`'s object.
pub fn name_of<'a>(owner: impl Into<Owner<'a>>) -> Option<String> {
    let owner = owner.into();
    let origin = ObjectUrl::parse(owner.url).ok()?.to_string();
    let etag = Some(owner.etag).filter(|e| !e.is_empty());
    Some(name(&origin, etag, owner.size))
}

/// A partial file.
#[derive(Debug, Clone)]
pub struct Partial {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub modified: SystemTime,
}

/// What a clean-up removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    pub files: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum PartialsError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The folder is not this node's own (`pool::node_dir`): nothing in it
    /// is listed or removed.
    #[error(transparent)]
    NotOurs(#[from] crate::pool::NodeDirError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> PartialsError + 'a {
    move |source| PartialsError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The partials' folder, checked as this node's own and held open: every
/// listing and removal goes through its descriptor, so a folder renamed
/// away and replaced by a link (to the user's `~/Downloads`) meanwhile is
/// never followed.
pub struct PartialsDir {
    path: PathBuf,
    dir: std::fs::File,
}

impl PartialsDir {
    /// `path`, checked again now (`pool::node_dir::check`).
    pub fn open(path: &Path) -> Result<PartialsDir, PartialsError> {
        Ok(PartialsDir {
            path: path.to_path_buf(),
            dir: crate::pool::node_dir::check(path)?,
        })
    }
}

/// The partial files in `dir` (regular files named `*.part`; nothing else
/// there is touched).
pub fn list(dir: &PartialsDir) -> Result<Vec<Partial>, PartialsError> {
    use rustix::fs::{AtFlags, FileType};
    let listing =
        rustix::fs::Dir::read_from(&dir.dir).map_err(|e| io("list", &dir.path)(e.into()))?;
    let mut found = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| io("list", &dir.path)(e.into()))?;
        let Ok(name) = entry.file_name().to_str() else {
            continue; // not a name of ours
        };
        if !name.ends_with(".part") {
            continue;
        }
        // Not followed: a link there is nobody's download.
        let Ok(stat) = rustix::fs::statat(&dir.dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue; // gone meanwhile
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            continue;
        }
        found.push(Partial {
            name: name.to_string(),
            path: dir.path.join(name),
            bytes: stat.st_size.max(0) as u64,
            // A hint for housekeeping only (has anyone written it lately?):
            // no byte of a partial file is trusted by its stat data; a
            // resume trusts its record's checked bytes and hashes them
            // again from disk (`partial.rs`, `download.rs`).
            modified: SystemTime::UNIX_EPOCH
                + Duration::new(stat.st_mtime.max(0) as u64, stat.st_mtime_nsec as u32),
        });
    }
    Ok(found)
}

/// Removes the partial files in `dir` that no name in `owned` claims and
/// that were not written to within [`QUIET`] of `now`.
pub fn remove_unowned(
    dir: &PartialsDir,
    owned: &HashSet<String>,
    now: SystemTime,
) -> Result<Removed, PartialsError> {
    remove(dir, unowned(dir, owned, now)?)
}

/// What [`remove_unowned`] would remove, removing nothing: for a dry run.
pub fn count_unowned(
    dir: &PartialsDir,
    owned: &HashSet<String>,
    now: SystemTime,
) -> Result<Removed, PartialsError> {
    Ok(
        unowned(dir, owned, now)?.fold(Removed::default(), |r, p| Removed {
            files: r.files + 1,
            bytes: r.bytes + p.bytes,
        }),
    )
}

/// The partial files in `dir` no name in `owned` claims and not written to
/// within [`QUIET`] of `now`.
fn unowned<'a>(
    dir: &PartialsDir,
    owned: &'a HashSet<String>,
    now: SystemTime,
) -> Result<impl Iterator<Item = Partial> + 'a, PartialsError> {
    Ok(list(dir)?.into_iter().filter(move |p| {
        !owned.contains(&p.name)
            && now.duration_since(p.modified).unwrap_or(Duration::ZERO) >= QUIET
    }))
}

/// Of the partial files in `dir` named in `capped` (those of failed jobs),
/// removes the oldest until the rest hold at most `max` bytes in all.
pub fn cap(
    dir: &PartialsDir,
    capped: &HashSet<String>,
    max: u64,
) -> Result<Removed, PartialsError> {
    let mut held: Vec<Partial> = list(dir)?
        .into_iter()
        .filter(|p| capped.contains(&p.name))
        .collect();
    held.sort_by_key(|p| std::cmp::Reverse(p.modified)); // newest first
    let mut total = 0u64;
    let over = held.into_iter().filter(|p| {
        total = total.saturating_add(p.bytes);
        total > max
    });
    remove(dir, over)
}

/// Removes each of `partials` from `dir`, by name under its descriptor.
fn remove(
    dir: &PartialsDir,
    partials: impl Iterator<Item = Partial>,
) -> Result<Removed, PartialsError> {
    use rustix::fs::AtFlags;
    let mut removed = Removed::default();
    for p in partials {
        match rustix::fs::unlinkat(&dir.dir, p.name.as_str(), AtFlags::empty()) {
            Ok(()) => {
                // Its record of checked bytes (`partial.rs`) goes with it.
                let record = format!("{}.json", p.name);
                let _ = rustix::fs::unlinkat(&dir.dir, record.as_str(), AtFlags::empty());
                removed.files += 1;
                removed.bytes += p.bytes;
            }
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(io("remove", &p.path)(e.into())),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn partial(dir: &Path, name: &str, len: usize, age: Duration) -> String {
        let path = dir.join(name);
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        name.to_string()
    }

    fn names(dir: &Path) -> HashSet<String> {
        list(&at(dir))
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    fn at(dir: &Path) -> PartialsDir {
        PartialsDir::open(dir).unwrap()
    }

    #[test]
    fn the_partials_of_failed_jobs_are_capped_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let old = partial(dir.path(), "old.part", 400, 3 * hour);
        let mid = partial(dir.path(), "mid.part", 400, 2 * hour);
        let new = partial(dir.path(), "new.part", 400, hour);
        let other = partial(dir.path(), "running.part", 5000, 4 * hour);
        let capped = HashSet::from([old.clone(), mid.clone(), new.clone()]);
        let removed = cap(&at(dir.path()), &capped, 900).unwrap();
        assert_eq!(
            removed,
            Removed {
                files: 1,
                bytes: 400
            }
        );
        assert_eq!(names(dir.path()), HashSet::from([mid, new, other.clone()]));
        // One partial larger than the cap alone goes too.
        let removed = cap(&at(dir.path()), &capped, 100).unwrap();
        assert_eq!(removed.files, 2);
        assert_eq!(names(dir.path()), HashSet::from([other]));
    }

    #[test]
    fn unowned_partials_go_unless_written_lately_and_nothing_else_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let owned = partial(dir.path(), "queued.part", 10, hour);
        let stale = partial(dir.path(), "unknown.part", 10, hour);
        let busy = partial(dir.path(), "writing.part", 10, Duration::ZERO);
        std::fs::write(dir.path().join("unknown.part.json"), "{}").unwrap();
        let other = partial(dir.path(), "adopt-x", 10, hour);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.part")).unwrap();
        let claimed = HashSet::from([owned.clone()]);
        let counted = count_unowned(&at(dir.path()), &claimed, SystemTime::now()).unwrap();
        assert!(
            dir.path().join(&stale).exists(),
            "a dry run removes nothing"
        );
        let removed = remove_unowned(&at(dir.path()), &claimed, SystemTime::now()).unwrap();
        assert_eq!(counted, removed);
        assert_eq!(
            removed,
            Removed {
                files: 1,
                bytes: 10
            }
        );
        assert!(!dir.path().join(stale).exists());
        assert!(
            !dir.path().join("unknown.part.json").exists(),
            "its record goes too"
        );
        for kept in [owned, busy, other, "link.part".into()] {
            assert!(
                std::fs::symlink_metadata(dir.path().join(&kept)).is_ok(),
                "{kept} kept"
            );
        }
    }

    #[test]
    fn a_folder_swapped_for_a_link_is_refused_and_nothing_behind_it_is_removed() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("partial-n");
        std::fs::create_dir(&dir).unwrap();
        let precious = top.path().join("Downloads");
        std::fs::create_dir(&precious).unwrap();
        let kept = partial(&precious, "thesis.part", 10, Duration::from_secs(7200));
        std::fs::rename(&dir, top.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&precious, &dir).unwrap();
        let err = PartialsDir::open(&dir).err().expect("refused").to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(precious.join(kept).exists());
    }

    #[test]
    fn a_prefetch_partial_is_named_as_the_download_names_it() {
        let object = Owner {
            url: "https://h/a/b.bam?X-Amz-Signature=s",
            etag: "abc",
            size: 42,
        };
        assert_eq!(
            name_of(object),
            Some(name("https://h/a/b.bam", Some("abc"), 42))
        );
    }
}
