//! `drsd`: the per-user daemon (`drsd serve`), and direct work on the pool
//! (`stats`, `put`, `get`, `verify`) without a daemon.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use drsd::pool::{Oid, Pool};
use drsd::{Config, Daemon, DaemonError, IoError};
use drsd_proto::{EXIT_ALREADY_RUNNING, IDLE_TIMEOUT_ENV, READY_LINE};

#[derive(Parser)]
#[command(
    version,
    about = "drsd: the per-user daemon and the pool shared by every repo on this machine",
    after_help = "Run the daemon with `drsd serve` (clients such as drsctl start it on demand, \
a systemd user unit or launchd agent is the managed path). With no subcommand, drsd prints the pool's stats."
)]
struct Cli {
    /// Pool folder [default: $XDG_DATA_HOME/drsd/pool]
    #[arg(long, env = "DRSD_POOL", global = true)]
    pool: Option<PathBuf>,
    /// Tier threshold in bytes, fixed when the pool is created [default: 131072]
    #[arg(long, global = true)]
    threshold: Option<u64>,
    #[command(flatten)]
    socket: drsd_proto::paths::SocketArg,
    /// Where the daemon keeps its registered repos [default: $XDG_STATE_HOME/drsd]
    #[arg(long, env = "DRSD_STATE_DIR", global = true)]
    state_dir: Option<PathBuf>,
    /// More log detail: -v debug, -vv trace (the daemon logs at info by default)
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground until SIGTERM, SIGINT or `drsctl shutdown`.
    /// Exits 3 when another daemon already serves the socket.
    Serve {
        /// Print "drsd ready" on standard output once the socket accepts connections
        #[arg(long)]
        ready: bool,
        /// Seconds a stopping daemon waits for requests in flight
        #[arg(long, default_value_t = 10.0)]
        drain_timeout: f64,
        /// Seconds between rescans of repos that cannot be watched
        #[arg(long, default_value_t = 30.0)]
        poll_interval: f64,
        /// Stop after this many seconds with no client connected and no
        /// prefetch running or due (0: never). Clients that start drsd on
        /// demand pass 900 unless DRSD_IDLE_TIMEOUT is set [default: never]
        #[arg(long, env = IDLE_TIMEOUT_ENV)]
        idle_timeout: Option<f64>,
    },
    /// Open or create the pool and report entries and bytes per tier (the default)
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Store a file (or standard input, `-`) and print its sha256
    Put {
        #[arg(default_value = "-")]
        file: PathBuf,
        /// Refuse the content unless it hashes to this
        #[arg(long)]
        sha256: Option<Oid>,
    },
    /// Write an entry to standard output, after checking it against its oid
    Get { oid: Oid },
    /// Re-hash every entry, name the bad ones and move them aside (exit 1 if any)
    Verify,
}

fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    if let Some(Command::Serve {
        ready,
        drain_timeout,
        poll_interval,
        idle_timeout,
    }) = cli.command
    {
        let timings = Timings {
            drain: seconds(drain_timeout)?,
            poll: seconds(poll_interval)?,
            idle: idle_timeout
                .map(seconds)
                .transpose()?
                .filter(|t| !t.is_zero()),
        };
        return serve(&cli, ready, timings);
    }
    pool_command(cli)?;
    Ok(ExitCode::SUCCESS)
}

fn seconds(value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .with_context(|| format!("{value} is not a number of seconds"))
}

/// What `drsd serve` was told about time.
struct Timings {
    drain: Duration,
    poll: Duration,
    idle: Option<Duration>,
}

fn serve(cli: &Cli, ready: bool, timings: Timings) -> Result<ExitCode> {
    drsd::logging::init(cli.verbose);
    let mut config = Config::resolve(
        cli.socket.socket.as_deref(),
        cli.pool.clone(),
        cli.state_dir.clone(),
        cli.threshold,
    )?;
    config.drain_timeout = timings.drain;
    config.poll_interval = timings.poll;
    config.idle_timeout = timings.idle;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(bind_and_serve(config, ready));
    // Blocking work cut off by the drain bound must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Err(e @ DaemonError::AlreadyRunning { .. }) => {
            eprintln!("drsd: {e}");
            Ok(ExitCode::from(EXIT_ALREADY_RUNNING as u8))
        }
        Err(e) => Err(e.into()),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

async fn bind_and_serve(config: Config, ready: bool) -> Result<(), DaemonError> {
    let daemon = Daemon::bind(config).await?;
    // Handlers first: a SIGTERM right after "ready" must drain, not kill.
    let stop = stop_signal()
        .map_err(|e| IoError::new("install signal handlers for", daemon.socket(), e))?;
    if ready {
        announce_ready();
    }
    daemon.serve(stop).await
}

/// Tells the starting client we accept connections, then lets go of its
/// pipe so nothing the daemon does later can block on it.
fn announce_ready() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{READY_LINE}").and_then(|()| out.flush());
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto standard output with a descriptor we own.
        unsafe { libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO) };
    }
}

/// Resolves on SIGTERM (systemd, launchd, kill) or SIGINT (Ctrl-C); the
/// handlers are installed before this returns.
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => log::info!("SIGTERM: draining"),
            _ = int.recv() => log::info!("SIGINT: draining"),
        }
    })
}

fn pool_command(cli: Cli) -> Result<()> {
    let dir = match cli.pool {
        Some(dir) => dir,
        None => Pool::default_dir().context("no home folder to put the pool in; pass --pool")?,
    };
    let pool = Pool::open(&dir, cli.threshold)
        .with_context(|| format!("opening the pool at {}", dir.display()))?;
    match cli.command.unwrap_or(Command::Stats { json: false }) {
        Command::Stats { json } => stats(&pool, &dir, json),
        Command::Put { file, sha256 } => put(&pool, &file, sha256),
        Command::Get { oid } => get(&pool, &oid),
        Command::Verify => verify(&pool),
        Command::Serve { .. } => unreachable!("serve is handled in main"),
    }
}

fn stats(pool: &Pool, dir: &std::path::Path, json: bool) -> Result<()> {
    let stats = pool.stats()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    println!("pool       {}", dir.display());
    println!("threshold  {} bytes", stats.threshold);
    println!(
        "{:<6} {:<7} {:>10} {:>16}",
        "tier", "engine", "entries", "bytes"
    );
    for t in &stats.tiers {
        println!(
            "{:<6} {:<7} {:>10} {:>16}",
            t.tier, t.engine, t.stats.entries, t.stats.bytes
        );
    }
    Ok(())
}

fn put(pool: &Pool, file: &std::path::Path, sha256: Option<Oid>) -> Result<()> {
    let put = if file.as_os_str() == "-" {
        pool.put_stream(sha256.as_ref(), std::io::stdin().lock())?
    } else {
        pool.put_file(sha256.as_ref(), file)?
    };
    println!("{}", put.oid);
    Ok(())
}

/// Checked against `oid` before the first byte goes out: a corrupt entry is
/// moved aside and nothing is written.
fn get(pool: &Pool, oid: &Oid) -> Result<()> {
    let Some(blob) = pool.get_verified(oid)? else {
        bail!("the pool has no entry {oid}");
    };
    let mut out = std::io::stdout().lock();
    std::io::copy(&mut blob.into_reader(), &mut out).context("writing to standard output")?;
    out.flush()?;
    Ok(())
}

fn verify(pool: &Pool) -> Result<()> {
    let bad = pool.verify()?;
    for entry in &bad {
        println!(
            "bad {} ({:?}): {}; {}",
            hex::encode(&entry.key),
            entry.tier,
            entry.problem,
            match &entry.quarantined {
                Some(place) => format!("moved aside to {place}"),
                None => "gone before it could be moved aside".into(),
            }
        );
    }
    if !bad.is_empty() {
        bail!("{} bad entries, moved out of the pool", bad.len());
    }
    println!("every entry matches its sha256");
    Ok(())
}
