//! `drsd`: the per-user daemon (`drsd serve`), and direct work on the pool
//! (`stats`, `put`, `get`, `verify`) without a daemon.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use drsd::pool::{Oid, Pool};
use drsd::settings::{Key, Settings, Value};
use drsd::{Config, Daemon, DaemonError, IoError};
use drsd_proto::{EXIT_ALREADY_RUNNING, READY_LINE};

#[derive(Parser)]
#[command(
    version,
    about = "drsd: the per-user daemon and the pool shared by every repo on this machine",
    after_help = "Run the daemon with `drsd serve` (clients such as drsctl start it on demand, \
a systemd user unit or launchd agent is the managed path). With no subcommand, drsd prints the pool's stats.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// The pool for `drsd` alone (its stats)
    #[command(flatten)]
    pool: PoolArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The pool a command works on. Not global: `drsd man` has no pool.
#[derive(clap::Args, Clone)]
struct PoolArgs {
    /// Pool folder (setting `pool`, DRSD_POOL) [default: $XDG_DATA_HOME/drsd/pool]
    #[arg(long, value_name = "DIR")]
    pool: Option<PathBuf>,
    /// Tier threshold in bytes, fixed when the pool is created [default: 131072]
    #[arg(long, value_name = "BYTES")]
    threshold: Option<u64>,
    /// The settings file (DRSD_CONFIG) [default: $XDG_CONFIG_HOME/drsd/config.toml];
    /// the environment overrides it, these flags override both
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground until SIGTERM, SIGINT or `drsctl shutdown`.
    /// Exits 3 when another daemon already serves the socket.
    Serve(ServeArgs),
    /// Open or create the pool and report entries and bytes per tier (the default)
    Stats {
        #[command(flatten)]
        pool: PoolArgs,
        /// Machine-readable JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Store a file (or standard input, `-`) and print its sha256
    Put {
        #[command(flatten)]
        pool: PoolArgs,
        /// The file to store, `-` for standard input
        #[arg(default_value = "-", value_name = "FILE")]
        file: PathBuf,
        /// Refuse the content unless it hashes to this
        #[arg(long, value_name = "OID")]
        sha256: Option<Oid>,
    },
    /// Write an entry to standard output, after checking it against its oid
    Get {
        #[command(flatten)]
        pool: PoolArgs,
        /// The entry's sha256 (64 hex digits)
        #[arg(value_name = "OID")]
        oid: Oid,
    },
    /// Re-hash every entry, name the bad ones and move them aside (exit 1 if any)
    Verify {
        #[command(flatten)]
        pool: PoolArgs,
    },
    /// Write drsd's man pages (drsd.1, drsd-serve.1, ...) into DIR
    Man {
        /// The folder to write them to (e.g. ~/.local/share/man/man1)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    socket: drsd_proto::paths::SocketArg,
    /// Where the daemon keeps its registered repos (setting `state_dir`,
    /// DRSD_STATE_DIR) [default: $XDG_STATE_HOME/drsd]
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// More log detail: -v debug, -vv trace (the daemon logs at info by default)
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print "drsd ready" on standard output once the socket accepts connections
    #[arg(long)]
    ready: bool,
    /// Seconds a stopping daemon waits for requests in flight
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    drain_timeout: f64,
    /// Seconds between rescans of repos that cannot be watched
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    poll_interval: f64,
    /// Stop after this many seconds with no client connected and no
    /// prefetch running or due (0: never; setting `idle_timeout`,
    /// DRSD_IDLE_TIMEOUT). Clients that start drsd on demand pass 900
    /// unless DRSD_IDLE_TIMEOUT is set [default: never]
    #[arg(long, value_name = "SECS")]
    idle_timeout: Option<f64>,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            // One line, `drsd: ` first: a client that started this daemon
            // quotes the last such line of the log in its own error.
            eprintln!("drsd: {}", drsd_proto::one_line(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Some(Command::Serve(args)) => serve(args),
        Some(Command::Man { dir }) => {
            man(&dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(command) => {
            pool_command(command)?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            pool_command(Command::Stats {
                pool: cli.pool,
                json: false,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// drsd.1 and one page per subcommand (drsd-serve.1, ...), from the clap
/// definition so they never drift from `--help`.
fn man(dir: &std::path::Path) -> Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    println!("wrote drsd's man pages to {}", dir.display());
    Ok(())
}

/// The flags over the environment over the settings file.
fn settings(
    pool: &PoolArgs,
    state_dir: Option<&PathBuf>,
    idle: Option<Duration>,
) -> Result<Settings> {
    let mut flags = Vec::new();
    if let Some(dir) = &pool.pool {
        flags.push((Key::Pool, Value::Path(dir.clone())));
    }
    if let Some(dir) = state_dir {
        flags.push((Key::StateDir, Value::Path(dir.clone())));
    }
    if let Some(idle) = idle {
        flags.push((Key::IdleTimeout, Value::Secs(idle)));
    }
    Ok(Settings::for_daemon(pool.config.clone(), &flags)?)
}

fn seconds(value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .with_context(|| format!("{value} is not a number of seconds"))
}

fn serve(args: ServeArgs) -> Result<ExitCode> {
    let idle = args.idle_timeout.map(seconds).transpose()?;
    let settings = settings(&args.pool, args.state_dir.as_ref(), idle)?;
    drsd::logging::init(args.verbose);
    let mut config = Config::resolve(
        args.socket.socket.as_deref(),
        args.pool.threshold,
        std::sync::Arc::new(settings),
    )?;
    config.drain_timeout = seconds(args.drain_timeout)?;
    config.poll_interval = seconds(args.poll_interval)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(16)
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(bind_and_serve(config, args.ready));
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
        let _ = rustix::stdio::dup2_stdout(&null);
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

fn pool_command(command: Command) -> Result<()> {
    let (Command::Stats { pool: args, .. }
    | Command::Put { pool: args, .. }
    | Command::Get { pool: args, .. }
    | Command::Verify { pool: args }) = &command
    else {
        unreachable!("serve and man are handled in main")
    };
    let settings = settings(args, None, None)?;
    let dir = match settings.path(Key::Pool) {
        Some(dir) => dir.to_path_buf(),
        None => Pool::default_dir().context("no home folder to put the pool in; pass --pool")?,
    };
    let pool = Pool::open(&dir, args.threshold)
        .with_context(|| format!("opening the pool at {}", dir.display()))?;
    match command {
        Command::Stats { json, .. } => stats(&pool, &dir, json),
        Command::Put { file, sha256, .. } => put(&pool, &file, sha256),
        Command::Get { oid, .. } => get(&pool, &oid),
        Command::Verify { .. } => verify(&pool),
        Command::Serve(_) | Command::Man { .. } => unreachable!("handled in main"),
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
