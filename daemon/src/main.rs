//! `drsd`: for now, opens (or creates) the pool and works on it directly.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use drsd::pool::{Oid, Pool};

#[derive(Parser)]
#[command(version, about = "drsd: the pool shared by every repo on this machine")]
struct Cli {
    /// Pool folder [default: $XDG_DATA_HOME/drsd/pool]
    #[arg(long, env = "DRSD_POOL", global = true)]
    pool: Option<PathBuf>,
    /// Tier threshold in bytes, fixed when the pool is created [default: 131072]
    #[arg(long, global = true)]
    threshold: Option<u64>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
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
    /// Write an entry to standard output
    Get { oid: Oid },
    /// Re-hash every entry and name the bad ones (exit 1 if any)
    Verify,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
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
        let tier = serde_json::to_value(t.tier)?;
        let tier = tier.as_str().unwrap_or("?");
        println!(
            "{tier:<6} {:<7} {:>10} {:>16}",
            t.engine, t.stats.entries, t.stats.bytes
        );
    }
    Ok(())
}

fn put(pool: &Pool, file: &PathBuf, sha256: Option<Oid>) -> Result<()> {
    let put = if file.as_os_str() == "-" {
        pool.put_stream(sha256.as_ref(), std::io::stdin().lock())?
    } else {
        pool.put_file(sha256.as_ref(), file)?
    };
    println!("{}", put.oid);
    Ok(())
}

fn get(pool: &Pool, oid: &Oid) -> Result<()> {
    let Some(blob) = pool.get(oid)? else {
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
            "bad {} ({:?}): {}",
            hex::encode(&entry.key),
            entry.tier,
            entry.problem
        );
    }
    if !bad.is_empty() {
        bail!("{} bad entries", bad.len());
    }
    println!("every entry matches its sha256");
    Ok(())
}
