//! `drsctl add-url`: reference remote objects from a repo by URL.
//!
//! Per URL: exactly one HEAD (retried only on failure), never a read of the
//! content. The pointer's oid is the content oid when it can be known
//! without the bytes (`--sha256`, a store checksum, the registry), else the
//! provisional oid from the ETag (`registry::provisional_oid`). Then, for the whole request: one registry
//! transaction, the repo's mirror, the pointer files, one `.gitattributes`
//! update and one `git add`. A line that fails is reported with its number
//! and leaves nothing behind; the other lines still go in.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::{internal, Progressor, Shared};
use crate::ipc::{
    AddUrlEntry, AddUrlReport, AddedUrl, ErrorCode, FailedUrl, OidSource, Progress, Reply, WireError,
};
use crate::lfs::scan::git_dirs;
use crate::lfs::{track, Pointer};
use crate::registry::{self, mirror, Entry, ForeignObject, Registry};
use crate::remote::{ObjectMeta, ObjectUrl, Remote};

/// HEADs in flight at once for a batch.
const CONCURRENT_HEADS: usize = 32;

/// One line to add: where it came from, the URL, where its pointer goes.
struct Line {
    no: usize,
    text_url: String,
    path: Option<PathBuf>,
    sha256: Option<String>,
}

/// A line whose URL parsed and whose path is usable.
struct Target {
    no: usize,
    raw: String,
    url: ObjectUrl,
    rel: String,
    sha256: Option<String>,
}

/// A target with the oid its pointer gets.
struct Resolved {
    target: Target,
    entry: Entry,
    oid_from: OidSource,
}

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    cwd: PathBuf,
    entries: Vec<AddUrlEntry>,
    force: bool,
    no_fetch: bool,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "{} is relative; send an absolute folder",
            cwd.display()
        )));
    }
    let (cwd, RepoAt { top, common }) = blocking(move || locate(&cwd).map(|at| (cwd, at)))
        .await
        .map_err(invalid)?;
    // A repo seen for the first time is registered (watched, scanned), and
    // gets back its entries when the daemon's state was lost. A registered
    // one had that at registration or at the daemon's start.
    if !shared.repos.paths().contains(&top) {
        let report = shared.repos.add(top.clone()).await?;
        restore(shared, &report.path).await?;
    }
    let lines = from_entries(entries);
    let mut failed = Vec::new();
    let targets = plan(&top, &cwd, lines, force, &mut failed).await;
    let resolved = head_all(shared, targets, progress, &mut failed).await;
    let added = commit(
        shared,
        &top,
        &common,
        resolved,
        (force, no_fetch),
        &mut failed,
    )
    .await?;
    failed.sort_by_key(|f| f.line);
    Ok(Reply::AddUrl(AddUrlReport {
        repo: top,
        added,
        failed,
    }))
}

/// Puts back the entries `repo`'s mirror lists and the registry lacks, then
/// settles the objects among them already hashed (see `jobs::catch_up`).
pub(crate) async fn restore(shared: &Shared, repo: &Path) -> Result<(), WireError> {
    let (registry, repo) = (shared.registry.clone(), repo.to_path_buf());
    let restored = blocking(move || {
        let file = mirror::path_in(&git_dirs(&repo).map_err(internal)?.common_dir);
        let entries = mirror::read(&file).map_err(internal)?;
        let n = registry.restore(&repo, &entries).map_err(internal)?;
        Ok::<_, WireError>((repo, n))
    })
    .await?;
    if restored.1 > 0 {
        log::info!(
            "restored {} registry entries of {} from its mirror",
            restored.1,
            restored.0.display()
        );
    }
    crate::server::jobs::catch_up(shared, &restored.0).await;
    Ok(())
}

/// At start: every saved repo gets back what its mirror lists and the
/// registry lacks (the registry file may have been lost on its own).
pub(crate) async fn restore_saved(shared: Arc<Shared>) {
    for repo in shared.repos.paths() {
        if let Err(e) = restore(&shared, &repo).await {
            log::warn!(
                "restoring the registry entries of {}: {}",
                repo.display(),
                e.message
            );
        }
    }
}

/// The work tree containing the client's folder and its common git folder.
struct RepoAt {
    top: PathBuf,
    common: PathBuf,
}

/// Both with one git process (a single add-url runs a handful in all).
fn locate(cwd: &Path) -> Result<RepoAt, String> {
    let out = crate::lfs::scan::git(cwd)
        .args(["rev-parse", "--show-toplevel", "--git-common-dir"])
        .output()
        .map_err(|e| format!("running git in {}: {e}", cwd.display()))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{} is not in a git work tree: {}",
            cwd.display(),
            why.trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (top, common) = (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    );
    let top = Path::new(top)
        .canonicalize()
        .map_err(|e| format!("{top}: {e}"))?;
    // --git-common-dir is relative to the folder git ran in.
    Ok(RepoAt {
        top,
        common: cwd.join(common),
    })
}

/// Each entry numbered by its line in the client's `--from` list, else by
/// its place in the request.
fn from_entries(entries: Vec<AddUrlEntry>) -> Vec<Line> {
    let lines = entries.into_iter().enumerate();
    lines
        .map(|(i, e)| Line {
            no: e.line.unwrap_or(i + 1),
            text_url: e.url,
            path: e.path,
            sha256: e.sha256,
        })
        .collect()
}

/// Checks each line's URL and path; refused lines go to `failed`.
async fn plan(
    top: &Path,
    cwd: &Path,
    lines: Vec<Line>,
    force: bool,
    failed: &mut Vec<FailedUrl>,
) -> Vec<Target> {
    let (top, cwd) = (top.to_path_buf(), cwd.to_path_buf());
    let (targets, refused) = blocking(move || {
        let mut seen = HashSet::new();
        let mut refused = Vec::new();
        let mut targets = Vec::new();
        for line in lines {
            match target(&top, &cwd, &line, force, &mut seen) {
                Ok(t) => targets.push(t),
                Err((url, message)) => refused.push(FailedUrl {
                    line: line.no,
                    url,
                    message,
                }),
            }
        }
        (targets, refused)
    })
    .await;
    failed.extend(refused);
    targets
}

fn target(
    top: &Path,
    cwd: &Path,
    line: &Line,
    force: bool,
    seen: &mut HashSet<String>,
) -> Result<Target, (String, String)> {
    let url = ObjectUrl::parse(&line.text_url).map_err(|e| {
        let shown = crate::remote::redacted(&line.text_url);
        (shown.chars().take(80).collect(), e.to_string())
    })?;
    let fail = |why: String| (url.to_string(), why);
    let given = match (&line.path, url.file_name()) {
        (Some(p), _) => p.clone(),
        (None, Some(name)) => PathBuf::from(name),
        (None, None) => return Err(fail("the URL has no file name: give PATH".into())),
    };
    let rel = repo_relative(top, &cwd.join(&given)).map_err(fail)?;
    if !seen.insert(rel.clone()) {
        return Err(fail(format!(
            "{rel} is already the path of an earlier line"
        )));
    }
    check_inside(top, &rel).map_err(fail)?;
    check_existing(&top.join(&rel), force).map_err(fail)?;
    let sha256 = match &line.sha256 {
        Some(hex) => Some(parse_sha256(hex).map_err(fail)?),
        None => None,
    };
    Ok(Target {
        no: line.no,
        raw: line.text_url.clone(),
        url,
        rel,
        sha256,
    })
}

/// `abs` as a `/`-separated path inside `top` (`..` resolved without the
/// file system: the path need not exist yet).
fn repo_relative(top: &Path, abs: &Path) -> Result<String, String> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in abs.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let clean: PathBuf = std::iter::once(Component::RootDir.as_os_str())
        .chain(parts)
        .collect();
    let rel = clean
        .strip_prefix(top)
        .map_err(|_| format!("{} is outside the repo {}", clean.display(), top.display()))?;
    let text = rel
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", rel.display()))?;
    if text.is_empty() || rel.iter().any(is_git_dir_name) {
        return Err(format!(
            "{} is not a file path in the repo's work tree",
            clean.display()
        ));
    }
    track::check_expressible(text).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

/// A name git treats as its own folder, as it does on case-insensitive
/// filesystems (`core.protectNTFS`, `core.protectHFS`): `.git` in any
/// case, with trailing dots or spaces, or its short name `git~1`. git
/// refuses to stage a path through one, so it is refused before anything
/// is written.
fn is_git_dir_name(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy().to_ascii_lowercase();
    let name = name.trim_end_matches(['.', ' ']);
    name == ".git" || name == "git~1"
}

/// Refuses a repo-relative path that reaches through a symlink in the repo
/// (`linkout/x.bin` with `linkout -> /elsewhere`, or `-> sub`: git refuses
/// paths beyond a link), a file where a folder should be, or a folder whose
/// real place is not inside `top`, before anything is written.
fn check_inside(top: &Path, rel: &str) -> Result<(), String> {
    let parent = Path::new(rel).parent().unwrap_or(Path::new(""));
    crate::safe_write::check_dirs(top, parent).map_err(|e| e.to_string())?;
    // Belt and braces: the deepest folder that exists is really inside.
    let mut existing = top.join(parent);
    while !existing.exists() && existing != top {
        existing.pop();
    }
    let real = existing
        .canonicalize()
        .map_err(|e| format!("checking {}: {e}", existing.display()))?;
    if !real.starts_with(top) {
        return Err(format!(
            "{} leads outside the repo {} (to {})",
            top.join(rel).display(),
            top.display(),
            real.display()
        ));
    }
    Ok(())
}

/// A file already at the path must be an LFS pointer, unless `force`.
fn check_existing(path: &Path, force: bool) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("checking {}: {e}", path.display())),
    };
    if meta.is_dir() {
        return Err(format!("{} is a folder", path.display()));
    }
    if meta.file_type().is_symlink() {
        // Not even with --force: replacing a link is never what was meant.
        return Err(format!(
            "{} is a symbolic link; drsd does not write over links",
            path.display()
        ));
    }
    let is_pointer = meta.is_file()
        && meta.len() < crate::lfs::MAX_POINTER_SIZE
        && std::fs::read(path).is_ok_and(|b| Pointer::parse(&b).is_ok());
    if is_pointer || force {
        return Ok(());
    }
    Err(format!(
        "{} exists and is not an LFS pointer; --force replaces it",
        path.display()
    ))
}

fn parse_sha256(hex: &str) -> Result<String, String> {
    let lower = hex.trim().to_ascii_lowercase();
    if lower.len() == 64 && lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(lower)
    } else {
        Err(format!("--sha256 {hex:?} is not 64 hex digits"))
    }
}

/// HEADs every target, at most [`CONCURRENT_HEADS`] at once, and picks oids.
async fn head_all(
    shared: &Arc<Shared>,
    targets: Vec<Target>,
    progress: &Progressor,
    failed: &mut Vec<FailedUrl>,
) -> Vec<Resolved> {
    let total = targets.len() as u64;
    let mut done = 0;
    let mut heads = stream::iter(targets)
        .map(|t| async move {
            let meta = head(&shared.remote, &t.url).await;
            (t, meta)
        })
        .buffer_unordered(CONCURRENT_HEADS);
    let mut headed = Vec::with_capacity(total as usize);
    while let Some((t, meta)) = heads.next().await {
        done += 1;
        if done % 64 == 0 || done == total {
            progress.send_now(Progress {
                stage: crate::ipc::Stage::Head,
                done,
                total: Some(total),
                message: None,
            });
        }
        match meta {
            Ok(meta) => headed.push((t, meta)),
            Err(message) => failed.push(FailedUrl {
                line: t.no,
                url: t.url.to_string(),
                message,
            }),
        }
    }
    log::debug!("add-url: {total} HEADs done");
    let registry = shared.registry.clone();
    let (resolved, refused) = blocking(move || resolve_all(&registry, headed)).await;
    failed.extend(refused);
    resolved
}

async fn head(remote: &Remote, url: &ObjectUrl) -> Result<ObjectMeta, String> {
    match remote.head(url).await {
        Ok(Some(meta)) => Ok(meta),
        Ok(None) => Err(format!("{url}: no such object (HTTP 404)")),
        Err(e) => Err(e.to_string()),
    }
}

fn resolve_all(
    registry: &Registry,
    headed: Vec<(Target, ObjectMeta)>,
) -> (Vec<Resolved>, Vec<FailedUrl>) {
    let mut resolved = Vec::new();
    let mut refused = Vec::new();
    for (t, meta) in headed {
        match resolve(registry, t, meta) {
            Ok(r) => resolved.push(r),
            Err(f) => refused.push(f),
        }
    }
    (resolved, refused)
}

/// The oid for the pointer, best first: `--sha256`, the store's checksum,
/// the registry's content oid for this URL/ETag/size, the provisional oid.
fn resolve(registry: &Registry, t: Target, meta: ObjectMeta) -> Result<Resolved, FailedUrl> {
    let fail = |message: String| FailedUrl {
        line: t.no,
        url: t.url.to_string(),
        message,
    };
    let strong = meta.etag.clone().filter(|e| !e.starts_with("W/"));
    let etag = strong.clone().unwrap_or_default();
    let known = match &strong {
        Some(tag) => registry
            .lookup_by_location(&t.raw, tag, meta.size)
            .map_err(|e| fail(e.to_string()))?,
        None => None,
    };
    let (content, oid_from) = match (&t.sha256, &meta.sha256, known.and_then(|k| k.content_oid)) {
        (Some(user), _, _) => (Some(user.clone()), OidSource::Sha256Option),
        (None, Some(store), _) => (Some(store.clone()), OidSource::StoreChecksum),
        (None, None, Some(known)) => (Some(known), OidSource::Registry),
        (None, None, None) => (None, OidSource::Etag),
    };
    if content.is_none() && strong.is_none() {
        return Err(fail(no_identity(&t.url, &meta)));
    }
    let provisional = match &strong {
        Some(tag) => registry::provisional_oid(&t.raw, tag),
        // No ETag: the object is known by its content oid alone.
        None => content.clone().expect("checked above"),
    };
    let (bucket, key) = match &t.url {
        ObjectUrl::S3 { bucket, key } => (Some(bucket.clone()), Some(key.clone())),
        ObjectUrl::Https(_) => (None, None),
    };
    let object = ForeignObject {
        url: t.raw.as_str().into(),
        bucket,
        key,
        version_id: meta.version_id,
        etag,
        size: meta.size,
        provisional_oid: provisional.clone(),
        content_oid: content.clone(),
        drs_id: None,
        last_modified: meta.last_modified,
        recorded_at: registry::now(),
        md5: None,
    };
    let entry = Entry {
        path: t.rel.clone(),
        oid: content.unwrap_or(provisional),
        object,
    };
    Ok(Resolved {
        target: t,
        entry,
        oid_from,
    })
}

fn no_identity(url: &ObjectUrl, meta: &ObjectMeta) -> String {
    let etag = match &meta.etag {
        Some(weak) => format!("only a weak ETag ({weak}), which does not identify the content,"),
        None => "no ETag".to_string(),
    };
    format!(
        "{url}: the server sent {etag} and no SHA-256 checksum; cannot name the object without reading it (give --sha256 HEX if you know its hash)"
    )
}

/// Registry, mirror, pointer files, `.gitattributes`, `git add`: in that
/// order, so a kill at any point leaves the registry knowing at least what
/// the repo points at. As the repo's only writer (its lock held): the
/// paths are checked again first (the work tree may have changed during
/// the HEADs), and a failure after the registry puts the work tree back.
async fn commit(
    shared: &Arc<Shared>,
    top: &Path,
    common: &Path,
    resolved: Vec<Resolved>,
    (force, no_fetch): (bool, bool),
    failed: &mut Vec<FailedUrl>,
) -> Result<Vec<AddedUrl>, WireError> {
    if resolved.is_empty() {
        return Ok(Vec::new());
    }
    let _writing = shared.repo_locks.lock(top).await;
    let registry = shared.registry.clone();
    let (top, common) = (top.to_path_buf(), common.to_path_buf());
    let (added, refused) = blocking(move || {
        let (resolved, refused) = recheck(&top, resolved, force);
        check_attributes_file(&top)?;
        wait_for_index(&top)?;
        let added = write_all(&registry, &top, &common, resolved)?;
        if no_fetch {
            // Before any job is queued for them, so no worker takes one.
            let oids: Vec<String> = added
                .iter()
                .filter(|a| a.provisional)
                .map(|a| a.oid.to_hex())
                .collect();
            registry.skip(&oids).map_err(internal)?;
        }
        Ok::<_, WireError>((added, refused))
    })
    .await?;
    failed.extend(refused);
    crate::server::jobs::queue_new(shared).await;
    Ok(added)
}

/// The planned paths checked again under the repo's lock: a symlink or a
/// file planted since the plan is refused, not written through or over.
fn recheck(top: &Path, resolved: Vec<Resolved>, force: bool) -> (Vec<Resolved>, Vec<FailedUrl>) {
    let mut refused = Vec::new();
    let mut ok = Vec::with_capacity(resolved.len());
    for r in resolved {
        let rel = &r.entry.path;
        let checked = check_inside(top, rel).and_then(|()| check_existing(&top.join(rel), force));
        match checked {
            Ok(()) => ok.push(r),
            Err(message) => refused.push(FailedUrl {
                line: r.target.no,
                url: r.target.url.to_string(),
                message,
            }),
        }
    }
    (ok, refused)
}

/// Refuses, before anything is written, a top `.gitattributes` that is not
/// a regular file (git does not read one that is a symlink either).
fn check_attributes_file(top: &Path) -> Result<(), WireError> {
    let file = top.join(".gitattributes");
    match std::fs::symlink_metadata(&file) {
        Ok(m) if !m.is_file() => Err(invalid(format!(
            "{} is not a regular file (a symbolic link or a folder); nothing was added",
            file.display()
        ))),
        _ => Ok(()),
    }
}

/// How long git's `index.lock`, held by another git, is waited for.
const INDEX_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits a little for another git's `index.lock` in the repo to go, so the
/// files are not written only for staging to fail; a clear error, with
/// nothing written, when it stays.
fn wait_for_index(top: &Path) -> Result<(), WireError> {
    let git_dir = git_dirs(top).map_err(internal)?.git_dir;
    let lock = git_dir.join("index.lock");
    let start = std::time::Instant::now();
    while lock.exists() {
        if start.elapsed() > INDEX_WAIT {
            return Err(invalid(format!(
                "{}: another git command holds {} (for over {}s); nothing was added. Run add-url again once it is done, or remove that file if no git is running",
                top.display(),
                lock.display(),
                INDEX_WAIT.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

fn write_all(
    registry: &Registry,
    top: &Path,
    common: &Path,
    resolved: Vec<Resolved>,
) -> Result<Vec<AddedUrl>, WireError> {
    let entries: Vec<Entry> = resolved.iter().map(|r| r.entry.clone()).collect();
    let clock = std::time::Instant::now();
    registry.record(top, &entries).map_err(internal)?;
    let listed = registry.for_repo(top).map_err(internal)?;
    mirror::write(common, &listed).map_err(internal)?;
    let recorded = clock.elapsed();
    let before = WorkTree::save(top, &entries);
    let written = write_files(top, &entries).inspect_err(|_| before.put_back(top))?;
    log::debug!(
        "add-url of {} objects: registry and mirror {recorded:?}, pointers, {written} .gitattributes lines and staging {:?}",
        entries.len(),
        clock.elapsed() - recorded
    );
    Ok(resolved.into_iter().map(added).collect())
}

/// The pointer files, `.gitattributes` and the index; returns how many
/// `.gitattributes` lines were added.
fn write_files(top: &Path, entries: &[Entry]) -> Result<usize, WireError> {
    for e in entries {
        write_pointer(top, e)?;
    }
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    track::track_and_stage(top, &paths).map_err(internal)
}

/// The work-tree files an add-url is about to write, as they were, so a
/// failure before they are staged (git's index held too long, a full disk)
/// leaves no untracked pointer or stray `.gitattributes` line. The registry
/// keeps its entries: it may know more than the repo points at, never less.
struct WorkTree(Vec<(String, Option<Vec<u8>>)>);

impl WorkTree {
    fn save(top: &Path, entries: &[Entry]) -> WorkTree {
        let paths = entries.iter().map(|e| e.path.as_str());
        let files = std::iter::once(".gitattributes").chain(paths);
        WorkTree(
            files
                .map(|rel| (rel.to_string(), std::fs::read(top.join(rel)).ok()))
                .collect(),
        )
    }

    fn put_back(&self, top: &Path) {
        for (rel, old) in &self.0 {
            let undone = match old {
                Some(bytes) => track::replace(top, rel, bytes).map_err(|e| e.to_string()),
                None => match std::fs::remove_file(top.join(rel)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
                    _ => Ok(()),
                },
            };
            if let Err(e) = undone {
                log::warn!("add-url in {}: putting {rel} back: {e}", top.display());
            }
        }
    }
}

fn write_pointer(top: &Path, e: &Entry) -> Result<(), WireError> {
    let oid = e.oid.parse().map_err(internal)?;
    let text = Pointer {
        oid,
        size: e.object.size,
    }
    .to_text();
    track::replace(top, &e.path, text.as_bytes()).map_err(internal)
}

fn added(r: Resolved) -> AddedUrl {
    AddedUrl {
        line: r.target.no,
        url: r.target.url.to_string(),
        path: r.entry.path,
        provisional: r.entry.object.content_oid.is_none(),
        oid: r
            .entry
            .oid
            .parse()
            .expect("the registry holds only oids drsd made"),
        size: r.entry.object.size,
        oid_from: r.oid_from,
    }
}

fn invalid(why: String) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, why)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("blocking task panicked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_inside_the_repo_only() {
        let top = Path::new("/r");
        assert_eq!(
            repo_relative(top, Path::new("/r/a/../b/x.bam")).unwrap(),
            "b/x.bam"
        );
        assert_eq!(
            repo_relative(top, Path::new("/r/./x.bam")).unwrap(),
            "x.bam"
        );
        for bad in [
            "/r/../x.bam",
            "/other/x.bam",
            "/r",
            "/r/.git/config",
            "/r/.GIT/hooks/x",
            "/r/sub/.Git/x",
            "/r/.git. /x",
            "/r/GIT~1/x",
            "/r/a\nb.bam",
            "/r/a\tb.bam",
        ] {
            assert!(repo_relative(top, Path::new(bad)).is_err(), "{bad}");
        }
    }
}
