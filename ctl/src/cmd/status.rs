use std::path::Path;

use drsd_proto::{JobState, ProvisionalReport, StatusReport};
use serde::Serialize;

use crate::exit::Failure;
use crate::output::{bytes, duration, escaped, repo_table, Output};

/// The daemon's status and, run inside a repo, that repo's provisional pointers.
#[derive(Serialize)]
struct Shown {
    #[serde(flatten)]
    status: StatusReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    provisional: Option<ProvisionalReport>,
}

/// How long status waits for the repo's provisional pointers.
const PROVISIONAL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn run(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let status = client.status().await?;
    // Outside a git work tree the daemon says so, and there is nothing to list.
    let cwd = std::env::current_dir().map_err(anyhow::Error::from)?;
    // Status answers at once: a registry that hangs (a team's database with
    // a lock held on its tables) leaves this repo's pointers unlisted.
    let provisional = match tokio::time::timeout(PROVISIONAL_WAIT, client.provisional(cwd)).await {
        Ok(read) => read.ok(),
        Err(_) => {
            eprintln!(
                "drsctl: this repo's provisional pointers are not listed: the registry did not \
                 answer within {}s",
                PROVISIONAL_WAIT.as_secs()
            );
            None
        }
    };
    let shown = Shown {
        status,
        provisional,
    };
    out.show(&shown, || print(&shown));
    Ok(())
}

fn print(shown: &Shown) {
    print_status(&shown.status);
    if let Some(p) = &shown.provisional {
        print_provisional(p);
    }
}

fn print_provisional(p: &ProvisionalReport) {
    println!(
        "provisional pointers in {}: {}",
        escaped(&p.repo.display().to_string()),
        p.pointers.len()
    );
    for w in &p.pointers {
        let next = match (w.state, &w.error) {
            (JobState::Hashed, _) => "  (drsctl promote, then commit)".to_string(),
            (_, Some(why)) => format!(": {}", escaped(why)),
            _ => String::new(),
        };
        println!(
            "  {:<8} {}  {}{next}",
            w.state,
            escaped(&w.path),
            escaped(&w.url)
        );
    }
}

fn print_status(s: &StatusReport) {
    let idle = match s.idle_timeout_secs {
        Some(secs) => format!("  (stops after {} idle)", duration(secs)),
        None => String::new(),
    };
    println!(
        "drsd {}  pid {}  up {}{idle}",
        s.version,
        s.pid,
        duration(s.uptime_secs)
    );
    println!("socket  {}", s.socket.display());
    println!(
        "pool    {}  (threshold {})",
        s.pool_dir.display(),
        bytes(s.pool.threshold)
    );
    println!(
        "  {:<6} {:<8} {:>10} {:>12}",
        "tier", "engine", "entries", "bytes"
    );
    for t in &s.pool.tiers {
        println!(
            "  {:<6} {:<8} {:>10} {:>12}",
            t.tier.to_string(),
            t.engine,
            t.entries,
            bytes(t.bytes)
        );
    }
    print_engines(s);
    match s.trusted_at_their_word.is_empty() {
        true => println!("trust   no source at its word: every object shown by its bytes"),
        false => println!(
            "trust   at their word (trust_claims): {}",
            escaped(&s.trusted_at_their_word.join(", "))
        ),
    }
    for u in &s.commons_uploads {
        let record = u
            .did
            .as_deref()
            .map(|d| format!(" record {}", escaped(d)))
            .unwrap_or_default();
        println!(
            "gen3    object {} to {}: unfinished ({}){record}; the next push of it finishes it",
            u.oid,
            escaped(&u.commons),
            escaped(&u.step)
        );
    }
    let q = &s.queue;
    println!(
        "queue   {} queued, {} running, {} retrying, {} failed, {} held, {} done",
        q.queued, q.running, q.retrying, q.failed, q.held, q.done
    );
    for a in &s.queue.active {
        println!(
            "  fetching {}: {} of {} ({}/s)",
            escaped(&a.url),
            bytes(a.done),
            bytes(a.total),
            bytes(a.bytes_per_sec)
        );
    }
    for j in s.queue.open.iter().filter(|j| j.state != JobState::Running) {
        let why = j
            .error
            .as_deref()
            .map(|e| format!(": {}", escaped(e)))
            .unwrap_or_default();
        if j.state == JobState::Done {
            // A done job is listed for its note: its bytes were trusted as read.
            println!("  done, unverified {}{why}", escaped(&j.url));
        } else {
            println!(
                "  {} {} (tries {}){why}",
                j.state,
                escaped(&j.url),
                j.attempts
            );
        }
    }
    if q.failed > 0 {
        println!("  (failed jobs are not tried again: fix the cause, then drsctl promote --retry)");
    }
    println!("repos   {}", s.repos.len());
    repo_table(&s.repos);
}

/// `engines  kv postgres, large shared-dir, registry postgres`, then the
/// team's nodes when the daemon is one of a team's. Every name, host and
/// user of a node is what some member's daemon (or the member, by hand)
/// wrote in the team's database: shown escaped.
fn print_engines(s: &StatusReport) {
    let mut engines: Vec<String> = s
        .pool
        .tiers
        .iter()
        .map(|t| format!("{} {}", t.tier, t.engine))
        .collect();
    if !s.registry_engine.is_empty() {
        engines.push(format!("registry {}", s.registry_engine));
    }
    println!("engines {}", engines.join(", "));
    let Some(team) = &s.team else { return };
    println!(
        "team    {}  (this node: {})",
        escaped(&team.server),
        escaped(&team.node)
    );
    if let Some(why) = &team.unreachable {
        println!("  unreachable: {}", escaped(why));
        return;
    }
    println!("  {:<24} {:<20} {:<12} last seen", "node", "host", "user");
    for n in &team.nodes {
        println!(
            "  {:<24} {:<20} {:<12} {} ago",
            escaped(&n.name),
            escaped(&n.host),
            escaped(&n.user),
            duration(n.seen_secs_ago)
        );
    }
}
