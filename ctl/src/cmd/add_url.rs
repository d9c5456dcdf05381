//! `drsctl add-url URL [PATH]`, `drsctl add-url --from FILE` and `drsctl
//! add-url --manifest FILE [DIR]`: the daemon HEADs the objects and writes,
//! tracks and stages the pointers; this side reads a `--from` list (see
//! [`super::url_list`]) or a Gen3 manifest (checked whole first, see
//! [`super::manifest`]), sends it in batches, shows progress and the merged
//! outcome.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context};
use drsd_proto::{AddUrlEntry, AddUrlReport, AddUrlRequest, Client, FailedUrl, MAX_REQUEST_LINE};
use indicatif::ProgressBar;

use super::manifest::{self, Commons};
use super::url_list::{ListError, UrlList};
use crate::exit::{Failure, FAILED};
use crate::output::Output;

/// What to add: one URL (with an optional path and known sha256), a list,
/// or a manifest (its folder in `url`'s place, its commons in `commons`).
pub struct AddUrlArgs {
    pub url: Option<String>,
    pub path: Option<PathBuf>,
    pub from: Option<PathBuf>,
    pub manifest: Option<PathBuf>,
    pub commons: Option<String>,
    pub sha256: Option<String>,
    pub force: bool,
    pub no_fetch: bool,
}

/// More lines than this print a summary instead of one line per pointer.
const LIST_UP_TO: usize = 20;

/// Lines of a `--from` list per request: each request is one staging step
/// in the repo, and far below the daemon's `MAX_REQUEST_ENTRIES`.
pub const BATCH: usize = 1_000;

/// The JSON bytes of a batch's entries: half the daemon's line limit, so the
/// rest of the request always fits, and any one line of the list
/// (`url_list::MAX_LINE`, up to 6 times that JSON-escaped) alone does too.
const BATCH_BYTES: usize = MAX_REQUEST_LINE / 2;

pub async fn run(socket: &Path, args: AddUrlArgs, out: &Output) -> Result<(), Failure> {
    let cwd = std::env::current_dir().context("finding the current folder")?;
    let flags = Flags {
        force: args.force,
        no_fetch: args.no_fetch,
    };
    let (report, unit) = match (args.url, args.from, args.manifest) {
        (dir, None, Some(file)) => {
            let dir = PathBuf::from(dir.unwrap_or_default());
            let entries = from_manifest(&cwd, &file, &dir, args.commons.as_deref())?;
            let source = Source::Manifest(entries.into_iter());
            let report = in_batches(socket, &cwd, source, &flags, out).await?;
            (report, "entry")
        }
        (Some(url), None, None) => {
            let entry = AddUrlEntry {
                url,
                path: args.path,
                sha256: args.sha256,
                line: None,
                size: None,
                md5: None,
            };
            let mut client = super::connect(socket).await?;
            let mut bar = Bar::new(out);
            let report = send(&mut client, &cwd, vec![entry], &flags, &mut bar).await;
            bar.done();
            (report?, "line")
        }
        (None, Some(file), None) => {
            let list = UrlList::open(&file).map_err(anyhow::Error::from)?;
            let report = in_batches(socket, &cwd, Source::List(list), &flags, out).await?;
            (report, "line")
        }
        _ => return Err(anyhow!("give a URL, --from FILE or --manifest FILE").into()),
    };
    outcome(&report, unit, out)
}

/// The add-url lines of the manifest `file`, read and checked whole before
/// anything is sent, each pointer under `dir`. The commons of an entry that
/// names none is `commons`, else the repo's Gen3 object remote.
fn from_manifest(
    cwd: &Path,
    file: &Path,
    dir: &Path,
    commons: Option<&str>,
) -> Result<Vec<AddUrlEntry>, Failure> {
    let bytes = manifest::read(file).map_err(anyhow::Error::from)?;
    let entries = manifest::parse(file, &bytes).map_err(anyhow::Error::from)?;
    let default = match commons {
        Some(text) => {
            Some(Commons::parse(text).map_err(|why| anyhow!("--commons {text:?} {why}"))?)
        }
        None if manifest::needs_default(&entries) => repo_commons(cwd)?,
        None => None,
    };
    Ok(manifest::lines(file, entries, dir, default.as_ref()).map_err(anyhow::Error::from)?)
}

/// The Gen3 commons the repo at `cwd` records as its object remote
/// (`drsctl init --gen3`, `.gitattributes drs-remote=gen3+URL`), if it
/// records one; outside a repo, none (the daemon then says so).
fn repo_commons(cwd: &Path) -> Result<Option<Commons>, Failure> {
    let git = |dir: &Path, args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .with_context(|| format!("running git {}", args[0]))
    };
    let top = git(cwd, &["rev-parse", "--show-toplevel"])?;
    if !top.status.success() {
        return Ok(None);
    }
    let top = PathBuf::from(String::from_utf8_lossy(&top.stdout).trim_end_matches('\n'));
    let attr = git(&top, &["check-attr", "drs-remote", "--", ".gitattributes"])?;
    // ".gitattributes: drs-remote: <value>", or "unspecified" / "unset".
    let said = String::from_utf8_lossy(&attr.stdout);
    let value = said.trim_end().rsplit(": ").next().unwrap_or_default();
    match value.starts_with("gen3+") {
        true => Commons::parse(value)
            .map(Some)
            .map_err(|why| anyhow!("the repo's object remote {value:?} {why}").into()),
        false => Ok(None),
    }
}

/// `--force` and `--no-fetch`, as every batch sends them.
struct Flags {
    force: bool,
    no_fetch: bool,
}

/// Shows the report, naming failures by `unit` (`line` of a list, `entry`
/// of a manifest); a failed one makes the command fail (exit 1).
fn outcome(report: &AddUrlReport, unit: &str, out: &Output) -> Result<(), Failure> {
    show(report, unit, out);
    if report.failed.is_empty() {
        return Ok(());
    }
    let first = &report.failed[0];
    let error = match report.failed.len() {
        1 if report.added.is_empty() => anyhow!("{}", first.message),
        n => anyhow!(
            "{n} of {} URLs were not added (see above)",
            n + report.added.len()
        ),
    };
    Err(Failure {
        code: FAILED,
        error,
        wire_code: None,
        answered: out.json,
    })
}

/// Where the lines come from: a `--from` list, read as they are sent, or a
/// manifest's lines, checked before the first is sent.
enum Source {
    List(UrlList),
    Manifest(std::vec::IntoIter<AddUrlEntry>),
}

impl Source {
    fn next_entry(&mut self) -> Result<Option<AddUrlEntry>, ListError> {
        match self {
            Source::List(list) => list.next_entry(),
            Source::Manifest(entries) => Ok(entries.next()),
        }
    }
}

/// Sends the lines in batches over one connection and merges the reports.
/// A line the list cannot go past (too long, unreadable) ends the command
/// with its error, after showing what the batches before it added.
async fn in_batches(
    socket: &Path,
    cwd: &Path,
    list: Source,
    flags: &Flags,
    out: &Output,
) -> Result<AddUrlReport, Failure> {
    let mut client = super::connect(socket).await?;
    let mut merged = AddUrlReport {
        repo: PathBuf::new(),
        added: Vec::new(),
        failed: Vec::new(),
    };
    let mut batches = Batches::new(list, cwd);
    let mut bar = Bar::new(out);
    let end = loop {
        let batch = batches.next(&mut merged.failed);
        if !batch.is_empty() {
            let mut report = match send(&mut client, cwd, batch, flags, &mut bar).await {
                Ok(report) => report,
                Err(e) => break Err(e),
            };
            merged.repo = report.repo;
            merged.added.append(&mut report.added);
            merged.failed.append(&mut report.failed);
        }
        match batches.end.take() {
            Some(Ok(())) => break Ok(()),
            Some(Err(e)) => {
                // What the earlier batches added stays added: say so first.
                merged.failed.sort_by_key(|f| f.line);
                bar.done();
                let _ = outcome(&merged, "line", out);
                break Err(anyhow::Error::from(e).into());
            }
            None => {}
        }
    };
    bar.done();
    end?;
    merged.failed.sort_by_key(|f| f.line);
    Ok(merged)
}

/// The list cut into requests of up to [`BATCH`] entries and [`BATCH_BYTES`]
/// of JSON.
struct Batches {
    list: Source,
    cwd: PathBuf,
    /// The entry that did not fit in the batch before.
    held: Option<(AddUrlEntry, usize)>,
    /// Each pointer path given so far, with its line.
    paths: HashMap<PathBuf, usize>,
    /// Set when the list has ended (`Ok`) or cannot be read on (`Err`).
    end: Option<Result<(), ListError>>,
}

impl Batches {
    fn new(list: Source, cwd: &Path) -> Batches {
        Batches {
            list,
            cwd: cwd.to_path_buf(),
            held: None,
            paths: HashMap::new(),
            end: None,
        }
    }

    /// The next batch (empty at the end). A line whose path an earlier line
    /// gave, in this batch or an earlier one, goes to `failed` here: the
    /// daemon sees one batch at a time.
    fn next(&mut self, failed: &mut Vec<FailedUrl>) -> Vec<AddUrlEntry> {
        let (mut batch, mut bytes) = (Vec::new(), 0);
        while batch.len() < BATCH && self.end.is_none() {
            let (entry, size) = match self.held.take() {
                Some(held) => held,
                None => match self.list.next_entry() {
                    Ok(Some(entry)) => {
                        let size = serde_json::to_vec(&entry).map_or(0, |json| json.len() + 1);
                        (entry, size)
                    }
                    Ok(None) => {
                        self.end = Some(Ok(()));
                        break;
                    }
                    Err(e) => {
                        self.end = Some(Err(e));
                        break;
                    }
                },
            };
            if let Some(dup) = earlier_line(&entry, &self.cwd, &mut self.paths) {
                failed.push(dup);
                continue;
            }
            if !batch.is_empty() && bytes + size > BATCH_BYTES {
                self.held = Some((entry, size));
                break;
            }
            batch.push(entry);
            bytes += size;
        }
        batch
    }
}

/// The failure of a line whose pointer path an earlier line already has
/// (as the daemon says it within one request), else records its path.
fn earlier_line(
    entry: &AddUrlEntry,
    cwd: &Path,
    paths: &mut HashMap<PathBuf, usize>,
) -> Option<FailedUrl> {
    let (shown, file_name) = shown_and_file_name(&entry.url)?;
    let given = match &entry.path {
        Some(path) => path.clone(),
        None => PathBuf::from(file_name),
    };
    let line = entry.line.unwrap_or_default();
    let first = *paths.entry(lexical(&cwd.join(&given))).or_insert(line);
    (first != line).then(|| FailedUrl {
        line,
        url: shown,
        message: format!(
            "{} is already the path of an earlier line (line {first})",
            given.display()
        ),
    })
}

/// The URL as the daemon's reports show it (no user, query or fragment:
/// nothing secret), and its last path segment, the pointer's default file
/// name; `None` when it is not a URL the daemon would take, which the
/// daemon then refuses by line itself.
fn shown_and_file_name(text: &str) -> Option<(String, String)> {
    let url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "s3" | "http" | "https") {
        return None;
    }
    let mut shown = format!("{}://{}", url.scheme(), url.host_str()?);
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    let name = url.path().rsplit('/').next().filter(|s| !s.is_empty())?;
    Some((shown.clone(), name.to_string()))
}

/// `path` with `.` and `..` resolved without the file system, as the daemon
/// resolves a pointer's path.
fn lexical(path: &Path) -> PathBuf {
    let mut clean = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(p) => clean.push(p),
            Component::ParentDir => {
                clean.pop();
            }
            _ => {}
        }
    }
    clean
}

/// The progress bar across batches: each batch's HEADs counted after the
/// batches before it.
struct Bar {
    bar: ProgressBar,
    before: u64,
}

impl Bar {
    fn new(out: &Output) -> Bar {
        let bar = crate::output::progress_bar(out, "{bar:30} {pos}/{len} HEADs [{elapsed}] {msg}");
        Bar { bar, before: 0 }
    }

    fn done(&self) {
        self.bar.finish_and_clear();
    }
}

/// One request of `entries`; its report.
async fn send(
    client: &mut Client,
    cwd: &Path,
    entries: Vec<AddUrlEntry>,
    flags: &Flags,
    bar: &mut Bar,
) -> Result<AddUrlReport, Failure> {
    let count = entries.len() as u64;
    let request = AddUrlRequest {
        cwd: cwd.to_path_buf(),
        entries,
        from: None,
        force: flags.force,
        no_fetch: flags.no_fetch,
    };
    let before = bar.before;
    let report = client
        .add_url(request, |p| {
            if let Some(total) = p.total {
                bar.bar.set_length(before + total);
            }
            bar.bar.set_position(before + p.done);
        })
        .await;
    bar.before += count;
    Ok(report?)
}

fn show(report: &AddUrlReport, unit: &str, out: &Output) {
    out.show(report, || {
        if report.added.len() <= LIST_UP_TO {
            for a in &report.added {
                let kind = if a.provisional {
                    "provisional oid, from the ETag"
                } else {
                    "content oid"
                };
                println!("added {} ({} bytes, {kind}: {})", a.path, a.size, a.oid);
            }
        } else {
            println!(
                "added {} pointers to {}",
                report.added.len(),
                report.repo.display()
            );
        }
    });
    // With --json the report names them; standard error stays empty.
    if !out.json && (report.failed.len() > 1 || !report.added.is_empty()) {
        for f in &report.failed {
            eprintln!("{unit} {}: {}", f.line, f.message);
        }
    }
}
