use std::path::Path;
use std::time::{Duration, Instant};

use drsd_proto::{Client, Reply};

use crate::exit::Failure;
use crate::output::Output;

/// How long to wait for the daemon to exit: its default drain bound and some.
const GONE_WITHIN: Duration = Duration::from_secs(15);

/// Asks the daemon to stop (never starts one) and waits until its process
/// has exited, so a new daemon can start right after.
pub async fn run(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = Client::connect(socket, super::CLIENT).await?;
    let pid = client.server_pid();
    client.shutdown().await?;
    drop(client);
    let deadline = Instant::now() + GONE_WITHIN;
    while alive(pid) {
        if Instant::now() > deadline {
            let why = format!("drsd (pid {pid}) is still running {GONE_WITHIN:?} after shutdown");
            return Err(anyhow::anyhow!(why).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out.show(&Reply::Done, || {
        println!("drsd (pid {pid}) on {} stopped", socket.display())
    });
    Ok(())
}

/// Whether process `pid` still runs. An exited daemon that nobody has reaped
/// yet (an autostarted one's parent is gone; init reaps it when it gets to
/// it) is a zombie: it holds nothing any more, so it counts as gone.
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    if rustix::process::test_kill_process(pid).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) state ...": the state follows the last ')'.
        Ok(stat) => !matches!(
            stat.rsplit(')')
                .next()
                .map(str::trim_start)
                .and_then(|s| s.chars().next()),
            Some('Z' | 'X')
        ),
        Err(_) => true, // no /proc (macOS): kill's answer stands
    }
}
