//! Downloads into the pool: parallel range requests delivered in order to
//! one writer that hashes (sha256, and md5 when asked) in the same pass,
//! resumable from a partial file that survives errors and restarts.
//!
//! No byte is used before its answer is checked against the request
//! (`answer.rs`): a server that ignores `Range` (200 to a ranged GET) gets
//! one GET of the whole object from byte 0 instead; one that answers with
//! another version, range or size fails the download and nothing of it is
//! kept. A resume trusts only the bytes its partial file's record says came
//! from checked answers of the same version (`partial.rs`).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use std::ops::Range;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use md5::Md5;
use reqwest::Response;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc::{self as tokio_mpsc, Receiver, Sender};
use tokio::sync::Semaphore;

use super::answer::{self, Asked, Fits, Unfit};
use super::append::Appender;
use super::partial::{Partial, Record};
use crate::pool::{NodeFile, Oid, Pool, PoolError, Put, Tier};
use crate::stores::{HttpClient, ObjectMeta, RemoteError, S3Client};

/// Where the bytes come from. Every range is asked `If-Match` the ETag, when
/// there is one.
#[derive(Clone, Copy)]
pub enum Origin<'a> {
    S3 {
        client: &'a S3Client,
        bucket: &'a str,
        key: &'a str,
    },
    /// `https://` or `http://`; a signed URL's query never shows in errors.
    /// `headers` go on every request (a DRS access URL's; usually none).
    Http {
        client: &'a HttpClient,
        url: &'a url::Url,
        headers: &'a [(String, String)],
    },
}

impl Origin<'_> {
    /// The object's name in errors, and part of its partial file's identity.
    pub fn describe(&self) -> String {
        match self {
            Origin::S3 { bucket, key, .. } => format!("s3://{bucket}/{key}"),
            Origin::Http { url, .. } => crate::stores::shown_url(url),
        }
    }

    /// What the store says about the object now; `None` when it is gone.
    pub async fn head(&self) -> Result<Option<ObjectMeta>, RemoteError> {
        match self {
            Origin::S3 {
                client,
                bucket,
                key,
            } => client.head(bucket, key).await,
            Origin::Http {
                client,
                url,
                headers,
            } => client.head_with(url, headers).await,
        }
    }

    /// A GET of `range`, or of the whole object.
    async fn get(
        &self,
        range: Option<Range<u64>>,
        etag: Option<&str>,
    ) -> Result<Response, RemoteError> {
        match self {
            Origin::S3 {
                client,
                bucket,
                key,
            } => client.get_if(bucket, key, range, etag).await,
            Origin::Http {
                client,
                url,
                headers,
            } => client.get_if_with(url, range, etag, headers).await,
        }
    }
}

/// One object to fetch, with what we already know about it.
#[derive(Clone)]
pub struct Fetch<'a> {
    pub origin: Origin<'a>,
    pub size: u64,
    /// Every range is requested `If-Match` this ETag, so a change on the
    /// server mid-download is refused, and partial files resume only when
    /// they belong to it.
    pub etag: Option<&'a str>,
    /// The `Last-Modified` recorded with the ETag, for an ETag that the
    /// bytes cannot be checked against (not an MD5 of them): every answer
    /// that states one must state this one. A resumed download's partial
    /// file belongs to it too.
    pub last_modified: Option<&'a str>,
    /// The content oid, when known: the download must hash to it.
    pub expect: Option<Oid>,
    /// Compute md5 too, on a thread of its own beside sha256 (and check a
    /// single-part ETag with it). Only when it checks something: md5 is one
    /// serial chain, slower than the network on a fast link.
    pub md5: bool,
    /// The part sizes a multipart upload may have used (`remote::parts`):
    /// a `-N` ETag is then checked against the md5 of the parts' md5s, one
    /// hash thread per size, and must match one of them. Empty: not checked.
    pub part_sizes: &'a [u64],
}

/// How a download is cut: `parallel` range requests of `chunk` bytes in
/// flight, each streamed. On loopback with RGW on the same cores, two of
/// 64 MiB were never far from the best and the best under load
/// (docs/benchmarks.md); a long path to a cluster wants more.
#[derive(Debug, Clone, Copy)]
pub struct FetchOptions {
    pub chunk: u64,
    pub parallel: usize,
    /// At most this many bytes a second, when set.
    pub bandwidth: Option<u64>,
    /// The bytes are read again at once (an object fetched for a checkout:
    /// git-lfs or the check-out copies it into the work tree next): written
    /// through the page cache (with early writeback), so that read finds
    /// them there. Otherwise (a prefetch, for later) whole blocks go
    /// around the cache with O_DIRECT. Read back from disk, blocks written
    /// a moment before came at 0.3-1.6 s for 512 MiB on the test VM, from
    /// the cache at 0.15-0.17 s (`cp`, three runs each).
    pub read_soon: bool,
}

impl Default for FetchOptions {
    fn default() -> FetchOptions {
        FetchOptions {
            chunk: 64 << 20,
            parallel: 2,
            bandwidth: None,
            read_soon: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Fetched {
    pub put: Put,
    pub md5: Option<[u8; 16]>,
    /// Bytes taken from an earlier, interrupted download.
    pub resumed_from: u64,
    /// The whole object came in one answer that named the pinned ETag and,
    /// when one is pinned, the pinned `Last-Modified`: the bytes are of one
    /// version, the one added, and a HEAD afterwards could add nothing.
    pub one_version: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("{object} changed on the server since it was added: {why}")]
    Changed { object: String, why: String },
    #[error(
        "{object}: {what} mismatch: expected {expected}, got {got}; the download was discarded"
    )]
    Mismatch {
        object: String,
        what: &'static str,
        expected: String,
        got: String,
    },
    #[error("{object}: {why}")]
    Short { object: String, why: String },
    /// The server answered something else than what was asked (another
    /// range, status or length): nothing of the download is kept.
    #[error("{object}: the server's answer does not fit the request: {why}; nothing of the download was kept")]
    Answer { object: String, why: String },
    /// A 200 to a ranged GET of part of the object: the server ignores
    /// `Range`. Internal: the download then falls back to one GET of the
    /// whole object, so [`fetch_into_pool`] never returns it.
    #[error("{object}: the server ignores Range requests")]
    NoRanges { object: String },
    #[error(transparent)]
    Io(#[from] crate::IoError),
    #[error("the pool has no folder for partial downloads")]
    NoPartialDir,
    /// The partial downloads' folder is not this node's own (in a lab's
    /// shared folder, another member made it, or left a link in its place).
    #[error(transparent)]
    NotOurs(#[from] crate::pool::NodeDirError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> FetchError + 'a {
    move |source| FetchError::Io(crate::IoError::new(op, path.to_path_buf(), source))
}

/// Bodies reach the writer in pieces of this size: few enough channel hops
/// and write calls, small enough to keep the hash threads busy.
const PIECE: usize = 1 << 20;

/// How many pieces a range may hold before it waits for the writer: the
/// memory bound per range in flight.
const PIECES_AHEAD: usize = 8;

/// A resume starts at a multiple of this.
const RESUME_ALIGN: u64 = 1 << 20;

/// The writer syncs the partial file and records its checked length this
/// often: what a kill -9 loses at most.
const CHECKPOINT_EVERY: u64 = 128 << 20;

/// Fetches the object into the pool and returns what landed. On a network
/// error the bytes received so far stay in the partial file for the next
/// try; on a hash or ETag mismatch, or an answer that does not fit the
/// request, nothing stays. `progress` gets the bytes held so far as they
/// arrive.
pub async fn fetch_into_pool(
    pool: Arc<Pool>,
    req: Fetch<'_>,
    opts: FetchOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Fetched, FetchError> {
    let object = req.origin.describe();
    if pool.tier_for(req.size) == Tier::Kv {
        return fetch_small(pool, &req, &object, progress).await;
    }
    let at = partial_path(&pool, &req)?;
    // Only a version pinned by an ETag may resume: without one, bytes of
    // an earlier try may be of another version.
    let (mut partial, file, start) = open_partial(&at, &req, &object, req.etag.is_some())?;
    let mut run = attempt(
        &req,
        &object,
        &partial,
        file,
        start,
        Cut::Ranges,
        opts,
        progress,
    )
    .await?;
    if matches!(run.0, Err(FetchError::NoRanges { .. })) {
        log::info!("{object}: the server ignores Range; fetching it whole from byte 0");
        let (fresh, file, _) = open_partial(&at, &req, &object, false)?;
        partial = fresh;
        run = attempt(&req, &object, &partial, file, 0, Cut::Whole, opts, progress).await?;
    }
    let (fetched, done) = run;
    progress(done.len);
    let checked = fetched.and_then(|()| verify(&req, &object, &done));
    match &checked {
        Ok(()) => {}
        // A network error keeps the bytes, all from checked answers, for a
        // resume; anything else makes them worthless.
        Err(FetchError::Remote(_) | FetchError::Short { .. }) => partial
            .checkpoint(done.len)
            .map_err(io("record the checked bytes of", &at.shown))?,
        Err(_) => partial.discard(),
    }
    checked?;
    let oid = done.sha256;
    let adopt = at.clone();
    let put = crate::blocking(move || pool.adopt_verified(&adopt, &oid, done.len)).await?;
    partial.adopted();
    Ok(Fetched {
        put,
        md5: done.md5,
        resumed_from: start,
        one_version: false, // ranges, maybe of several tries
    })
}

/// Fetches the object into a fresh file in `dir`, around the pool: for an
/// object the pool cannot take (its disk is full), to hand to git all the
/// same. The file is created exclusively under a random name (`dir` may be
/// in a repo someone else made), filled and hashed in one pass with every
/// answer checked as [`fetch_into_pool`] checks it, and returned only when
/// its size and sha256 are `req.expect`'s; on any failure it is removed.
/// Nothing resumes from it: the next try starts over.
pub async fn fetch_into_file(
    dir: &Path,
    req: Fetch<'_>,
    opts: FetchOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<tempfile::TempPath, FetchError> {
    let object = req.origin.describe();
    let Some(want) = req.expect else {
        return Err(FetchError::Short {
            object,
            why: "no content oid to check a download outside the pool against".into(),
        });
    };
    let made = tempfile::Builder::new()
        .prefix(".drsd-download-")
        .tempfile_in(dir)
        .map_err(io("create a temp file in", dir))?;
    let file_path = made.into_temp_path();
    let at = in_folder(dir, &file_path)?;
    // A byte written is a byte read next (git's copy): not around the cache.
    let opts = FetchOptions {
        read_soon: true,
        ..opts
    };
    let (partial, file, _) = open_partial(&at, &req, &object, false)?;
    let run = async {
        let run = attempt(
            &req,
            &object,
            &partial,
            file,
            0,
            Cut::Ranges,
            opts,
            progress,
        )
        .await?;
        if !matches!(run.0, Err(FetchError::NoRanges { .. })) {
            return Ok(run);
        }
        let (_, file, _) = open_partial(&at, &req, &object, false)?;
        attempt(&req, &object, &partial, file, 0, Cut::Whole, opts, progress).await
    }
    .await;
    // Its record is of no use, whatever happened: nothing resumes from it.
    partial.adopted();
    let (fetched, done) = run?;
    fetched.and_then(|()| verify(&req, &object, &done))?;
    debug_assert_eq!(done.sha256, want, "verify checked it");
    progress(done.len);
    Ok(file_path)
}

/// The file at `path`, just made in `dir`, reached through `dir` opened
/// now (a download around the pool goes to a folder of the caller's).
fn in_folder(dir: &Path, path: &Path) -> Result<NodeFile, FetchError> {
    let folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(io("open the folder", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(NodeFile::new(Arc::new(folder), dir, name))
}

/// How a download is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// In ranges, several in flight.
    Ranges,
    /// In one GET without `Range`, for a server that does not do ranges.
    Whole,
}

/// One try into the partial file from `start`: how the stream ended, and
/// what the writer holds (synced) and hashed. Only the writer's own
/// failure (the disk) is an error here.
#[allow(clippy::too_many_arguments)]
async fn attempt(
    req: &Fetch<'_>,
    object: &str,
    partial: &Partial,
    file: File,
    start: u64,
    cut: Cut,
    opts: FetchOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Result<(), FetchError>, Done), FetchError> {
    let (tx, rx) = tokio_mpsc::channel::<Bytes>(PIECES_AHEAD);
    let parts = match req.etag {
        Some(e) if e.contains('-') => req.part_sizes.to_vec(),
        _ => Vec::new(),
    };
    let write = Write {
        start,
        direct: !opts.read_soon,
    };
    let sink = Sink::spawn(file, partial.for_writer(), write, (req.md5, parts), rx);
    let fetched = stream_in_order(req, object, start, cut, opts, tx, progress).await;
    let done = crate::blocking(move || sink.finish()).await?;
    Ok((fetched, done))
}

/// An object for the kv tier: one GET into memory, checked, one put. No
/// partial file: there is nothing worth resuming, and a file and its fsync
/// per object would cost more than the transfer.
async fn fetch_small(
    pool: Arc<Pool>,
    req: &Fetch<'_>,
    object: &str,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Fetched, FetchError> {
    let SmallBody {
        bytes,
        oid,
        md5,
        one_version,
    } = read_small_as(req, object).await?;
    progress(bytes.len() as u64);
    let put = crate::blocking(move || pool.put(&oid, &bytes)).await?;
    Ok(Fetched {
        put,
        md5,
        resumed_from: 0,
        one_version,
    })
}

/// An object of the pool's kv tier read whole into memory and checked as
/// [`fetch_into_pool`] checks it, for the caller to put into the pool: one
/// put each, or many in one transaction.
#[derive(Debug)]
pub struct SmallBody {
    pub bytes: Vec<u8>,
    pub oid: Oid,
    /// Computed only when asked ([`Fetch::md5`]).
    pub md5: Option<[u8; 16]>,
    /// As [`Fetched::one_version`].
    pub one_version: bool,
}

/// Reads a small object (see [`SmallBody`]) with one GET.
pub async fn read_small(req: &Fetch<'_>) -> Result<SmallBody, FetchError> {
    read_small_as(req, &req.origin.describe()).await
}

async fn read_small_as(req: &Fetch<'_>, object: &str) -> Result<SmallBody, FetchError> {
    let (tx, mut rx) = tokio_mpsc::channel::<Bytes>(PIECES_AHEAD);
    let range = 0..req.size;
    let collect = async {
        let mut body = Vec::with_capacity(req.size as usize);
        while let Some(piece) = rx.recv().await {
            body.extend_from_slice(&piece);
        }
        Ok::<_, FetchError>(body)
    };
    let (body, stated) = if req.size == 0 {
        (Vec::new(), false)
    } else {
        let (stated, body) =
            tokio::try_join!(stream_range(req, object, range, Cut::Ranges, tx), collect)?;
        (body, stated)
    };
    let done = Done {
        len: body.len() as u64,
        sha256: Oid::of(&body),
        md5: req.md5.then(|| Md5::digest(&body).into()),
        multipart: Vec::new(),
    };
    verify(req, object, &done)?;
    Ok(SmallBody {
        bytes: body,
        oid: done.sha256,
        md5: done.md5,
        one_version: stated && req.etag.is_some(),
    })
}

/// Streams `start..size` as `opts.parallel` range requests in flight and
/// hands their pieces to the writer in file order. A range ahead of the one
/// being written buffers at most [`PIECES_AHEAD`] pieces, then waits.
async fn stream_in_order(
    req: &Fetch<'_>,
    object: &str,
    start: u64,
    cut: Cut,
    opts: FetchOptions,
    writer: Sender<Bytes>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(), FetchError> {
    let chunk = match cut {
        Cut::Ranges => opts.chunk.max(RESUME_ALIGN),
        Cut::Whole => req.size.max(1),
    };
    let ranges = (start..req.size)
        .step_by(chunk as usize)
        .map(|from| from..(from + chunk).min(req.size));
    // A permit per range not yet written: the bound on ranges in flight,
    // counting those received whole but still waiting for their turn.
    let permits = Arc::new(Semaphore::new(opts.parallel.max(1)));
    let (order_tx, mut order_rx) = tokio_mpsc::unbounded_channel();
    let produce = async move {
        let mut running = FuturesUnordered::new();
        for range in ranges {
            // Wait for a permit while the ranges in flight go on.
            let permit = loop {
                tokio::select! {
                    p = permits.clone().acquire_owned() => break p.expect("never closed"),
                    Some(done) = running.next() => { done?; }
                }
            };
            let (tx, rx) = tokio_mpsc::channel(PIECES_AHEAD);
            if order_tx.send((range.clone(), rx, permit)).is_err() {
                break; // the consumer stopped; it reports why
            }
            running.push(stream_range(req, object, range, cut, tx));
        }
        drop(order_tx);
        while let Some(done) = running.next().await {
            done?;
        }
        Ok::<(), FetchError>(())
    };
    let began = tokio::time::Instant::now();
    let consume = async move {
        let mut held = start;
        while let Some((range, mut rx, _permit)) = order_rx.recv().await {
            while let Some(piece) = rx.recv().await {
                held += piece.len() as u64;
                writer.send(piece).await.map_err(|_| FetchError::Short {
                    object: object.to_string(),
                    why: "the writer stopped".into(),
                })?;
                progress(held);
                if let Some(rate) = opts.bandwidth.filter(|r| *r > 0) {
                    let due = Duration::from_secs_f64((held - start) as f64 / rate as f64);
                    tokio::time::sleep_until(began + due).await;
                }
            }
            if held != range.end {
                return Err(FetchError::Short {
                    object: object.to_string(),
                    why: format!("bytes {}-{} broke off", range.start, range.end - 1),
                });
            }
        }
        Ok(())
    };
    tokio::try_join!(produce, consume).map(|_| ())
}

/// `partial/<sha256 of what identifies this version>.part`, in the folder
/// checked now and reached through that check's descriptor from here on.
fn partial_path(pool: &Pool, req: &Fetch<'_>) -> Result<NodeFile, FetchError> {
    let dir = pool.partial_dir().ok_or(FetchError::NoPartialDir)?;
    // Checked again at each download: in a lab's shared folder another
    // member may have swapped it for a link since the daemon started.
    let checked = crate::pool::node_dir::check(dir)?;
    let name = super::partials::name(&req.origin.describe(), req.etag, req.size);
    Ok(NodeFile::new(Arc::new(checked), dir, name))
}

/// Opens the partial file for this version (see `partial.rs`) and decides
/// where to resume: after the checked bytes of an earlier try, when
/// `resumable`, else at 0.
fn open_partial(
    at: &NodeFile,
    req: &Fetch<'_>,
    object: &str,
    resumable: bool,
) -> Result<(Partial, File, u64), FetchError> {
    let version = Record {
        object: object.to_string(),
        etag: req.etag.map(str::to_string),
        size: req.size,
        last_modified: req.last_modified.map(str::to_string),
        checked: 0,
    };
    Partial::open(at.clone(), version, resumable, RESUME_ALIGN)
        .map_err(io("open the partial download", &at.shown))
}

/// One range request (or, with [`Cut::Whole`], a GET of the whole object),
/// its answer checked before any of its body is used, the body sent on in
/// pieces of [`PIECE`] bytes. Returns whether the answer stated the
/// pinned `Last-Modified` (true when none is pinned): its ETag, when one
/// is pinned, is always checked.
async fn stream_range(
    req: &Fetch<'_>,
    object: &str,
    range: Range<u64>,
    cut: Cut,
    tx: Sender<Bytes>,
) -> Result<bool, FetchError> {
    let want = range.end - range.start;
    let ask = (cut == Cut::Ranges).then(|| range.clone());
    let mut resp = req
        .origin
        .get(ask.clone(), req.etag)
        .await
        .map_err(|e| match e {
            RemoteError::Http { status: 412, .. } => FetchError::Changed {
                object: object.to_string(),
                why: format!("its ETag is no longer {}", req.etag.unwrap_or("")),
            },
            other => other.into(),
        })?;
    let asked = Asked {
        range: ask,
        size: req.size,
        etag: req.etag,
        last_modified: req.last_modified,
    };
    let span = format!("bytes {}-{}", range.start, range.end - 1);
    let wrong = |why: String| FetchError::Answer {
        object: object.to_string(),
        why: format!("{span}: {why}"),
    };
    match answer::check(&asked, resp.status(), resp.headers()) {
        Ok(Fits::Asked) => {}
        Ok(Fits::NoRanges) => {
            return Err(FetchError::NoRanges {
                object: object.to_string(),
            })
        }
        Err(Unfit::Changed(why)) => {
            return Err(FetchError::Changed {
                object: object.to_string(),
                why,
            })
        }
        Err(Unfit::Wrong(why)) => return Err(wrong(why)),
    }
    // Checked above: when the answer states one, it is the pinned one.
    let stated = req.last_modified.is_none() || resp.headers().contains_key("last-modified");
    let broke = |why: String| FetchError::Short {
        object: object.to_string(),
        why: format!("{span}: {why}"),
    };
    let mut got = 0u64;
    let mut piece = BytesMut::with_capacity(PIECE);
    loop {
        let part = resp
            .chunk()
            .await
            .map_err(|e| broke(format!("the body broke off: {e}")))?;
        let end = part.is_none();
        if let Some(part) = part {
            got += part.len() as u64;
            if got > want {
                return Err(wrong(format!("it sent more than the {want} bytes asked")));
            }
            piece.extend_from_slice(&part);
        }
        if (piece.len() >= PIECE || end) && !piece.is_empty() {
            let full = std::mem::replace(&mut piece, BytesMut::with_capacity(PIECE));
            if tx.send(full.freeze()).await.is_err() {
                return Ok(stated); // the writer stopped; it reports why
            }
        }
        if end {
            break;
        }
    }
    if got != want {
        return Err(broke(format!("got {got} of {want}")));
    }
    Ok(stated)
}

fn verify(req: &Fetch<'_>, object: &str, done: &Done) -> Result<(), FetchError> {
    let mismatch = |what, expected: String, got: String| FetchError::Mismatch {
        object: object.to_string(),
        what,
        expected,
        got,
    };
    if done.len != req.size {
        return Err(FetchError::Changed {
            object: object.to_string(),
            why: format!("{} bytes instead of {}", done.len, req.size),
        });
    }
    if let Some(want) = req.expect.filter(|w| *w != done.sha256) {
        return Err(mismatch("sha256", want.to_hex(), done.sha256.to_hex()));
    }
    // A multipart ETag is the md5 of the parts' md5s, then `-N`: one of
    // the part sizes tried must give it.
    if let Some(etag) = req.etag.filter(|_| !done.multipart.is_empty()) {
        if !done.multipart.iter().any(|p| etag.eq_ignore_ascii_case(p)) {
            return Err(mismatch(
                "multipart md5 (the ETag)",
                etag.to_string(),
                done.multipart.join(" or "),
            ));
        }
    }
    // A single-part ETag is the md5 of the content: check it when we have both.
    if let (Some(etag), Some(md5)) = (req.etag, done.md5) {
        let is_md5 = etag.len() == 32 && etag.bytes().all(|b| b.is_ascii_hexdigit());
        if is_md5 && !etag.eq_ignore_ascii_case(&hex::encode(md5)) {
            return Err(mismatch(
                "md5 (the ETag)",
                etag.to_string(),
                hex::encode(md5),
            ));
        }
    }
    Ok(())
}

/// What the writer saw: every byte of the partial file, hashed.
struct Done {
    len: u64,
    sha256: Oid,
    md5: Option<[u8; 16]>,
    /// `<md5 of the parts' md5s>-<parts>`, one per part size tried.
    multipart: Vec<String>,
}

/// The writer thread: rehashes the resumed prefix from disk, then appends
/// chunks in order, feeding the hash threads the very bytes it writes.
struct Sink {
    thread: JoinHandle<Result<Done, FetchError>>,
}

impl Sink {
    fn spawn(
        file: File,
        partial: Partial,
        write: Write,
        md5: (bool, Vec<u64>),
        rx: Receiver<Bytes>,
    ) -> Sink {
        let thread = named("drsd-write", move || {
            write_and_hash(file, partial, write, md5, rx)
        });
        Sink { thread }
    }

    fn finish(self) -> Result<Done, FetchError> {
        self.thread
            .join()
            .expect("the download writer does not panic")
    }
}

/// Where the writer starts, and whether whole blocks may go around the
/// page cache ([`FetchOptions::read_soon`]).
#[derive(Debug, Clone, Copy)]
struct Write {
    start: u64,
    direct: bool,
}

fn write_and_hash(
    mut file: File,
    mut partial: Partial,
    Write { start, direct }: Write,
    (want_md5, part_sizes): (bool, Vec<u64>),
    mut rx: Receiver<Bytes>,
) -> Result<Done, FetchError> {
    let path = &partial.file.shown.clone();
    let sha = Hasher::spawn::<Sha256>("drsd-sha256");
    let md5 = want_md5.then(|| Hasher::spawn::<Md5>("drsd-md5"));
    let parts: Vec<Hasher> = part_sizes
        .iter()
        .map(|size| Hasher::start("drsd-md5-parts", PartsMd5::new(*size)))
        .collect();
    let feed = |chunk: Bytes| {
        sha.send(chunk.clone());
        for p in &parts {
            p.send(chunk.clone());
        }
        if let Some(m) = &md5 {
            m.send(chunk);
        }
    };
    file.seek(SeekFrom::Start(0)).map_err(io("seek", path))?;
    let mut left = start;
    while left > 0 {
        let mut buf = vec![0u8; left.min(8 << 20) as usize];
        file.read_exact(&mut buf).map_err(io("read", path))?;
        left -= buf.len() as u64;
        feed(Bytes::from(buf));
    }
    let mut out = Appender::new(file, start, direct);
    let mut checkpoint = start + CHECKPOINT_EVERY;
    let mut first = true;
    while let Some(chunk) = rx.blocking_recv() {
        out.append(&chunk).map_err(io("write", path))?;
        feed(chunk);
        if std::mem::take(&mut first) {
            crate::failpoint::pause("download-writing");
        }
        if out.len() >= checkpoint {
            let synced = out.sync().map_err(io("write and fsync", path))?;
            partial
                .checkpoint(synced)
                .map_err(io("record the checked bytes of", path))?;
            checkpoint = out.len() + CHECKPOINT_EVERY;
        }
    }
    let len = out.finish().map_err(io("write and fsync", path))?;
    let sha256 = Oid::from_digest(sha.finish().try_into().expect("32 bytes"));
    let md5 = md5.map(|m| m.finish().try_into().expect("16 bytes"));
    let multipart = parts
        .into_iter()
        .map(|p| String::from_utf8(p.finish()).expect("hex and digits"))
        .collect();
    Ok(Done {
        len,
        sha256,
        md5,
        multipart,
    })
}

/// What a hash thread keeps adding bytes to.
trait Accumulate: Send + 'static {
    fn update(&mut self, bytes: &[u8]);
    fn finish(self) -> Vec<u8>;
}

/// A whole-content digest.
struct Whole<D>(D);

impl<D: Digest + Send + 'static> Accumulate for Whole<D> {
    fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(self) -> Vec<u8> {
        self.0.finalize().to_vec()
    }
}

/// S3's multipart ETag: the md5 of each `size`-byte part, then the md5 of
/// those digests, written `<hex>-<parts>`.
struct PartsMd5 {
    size: u64,
    part: Md5,
    in_part: u64,
    digests: Vec<u8>,
}

impl PartsMd5 {
    fn new(size: u64) -> PartsMd5 {
        PartsMd5 {
            size: size.max(1),
            part: Md5::new(),
            in_part: 0,
            digests: Vec::new(),
        }
    }
}

impl Accumulate for PartsMd5 {
    fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = ((self.size - self.in_part) as usize).min(bytes.len());
            self.part.update(&bytes[..take]);
            self.in_part += take as u64;
            bytes = &bytes[take..];
            if self.in_part == self.size {
                let done = std::mem::replace(&mut self.part, Md5::new());
                self.digests.extend_from_slice(&done.finalize());
                self.in_part = 0;
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.in_part > 0 {
            self.digests.extend_from_slice(&self.part.finalize());
        }
        let count = self.digests.len() / 16;
        format!("{}-{count}", hex::encode(Md5::digest(&self.digests))).into_bytes()
    }
}

/// A digest computed on its own thread, so sha256 and md5 run side by side.
struct Hasher {
    tx: mpsc::SyncSender<Bytes>,
    thread: JoinHandle<Vec<u8>>,
}

impl Hasher {
    fn spawn<D: Digest + Send + 'static>(name: &str) -> Hasher {
        Hasher::start(name, Whole(D::new()))
    }

    fn start(name: &str, mut acc: impl Accumulate) -> Hasher {
        let (tx, rx) = mpsc::sync_channel::<Bytes>(PIECES_AHEAD * 2);
        let thread = named(name, move || {
            for chunk in rx {
                acc.update(&chunk);
            }
            acc.finish()
        });
        Hasher { tx, thread }
    }

    fn send(&self, chunk: Bytes) {
        let _ = self.tx.send(chunk); // the thread only ends when we drop tx
    }

    fn finish(self) -> Vec<u8> {
        drop(self.tx);
        self.thread.join().expect("hash threads do not panic")
    }
}

/// A thread with a name `top` and profilers show.
fn named<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .expect("a thread can be started")
}
