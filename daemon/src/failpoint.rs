//! Named points where a test can have the daemon killed as `kill -9`
//! would (SIGKILL, no unwinding, no cleanup), to check what a crash at
//! that very step leaves behind. A point fires when its name is in
//! `DRSD_FAILPOINT` (comma-separated). Debug builds only (the binaries the
//! end-to-end tests drive): a release build never reads the variable.
//!
//! A point may also hold the daemon still ([`pause`]), for a test to act
//! at that very step (swap a folder under a running download, say): armed
//! by its name in `DRSD_FAILPOINT_PAUSE`, it makes `NAME.reached` in the
//! folder `DRSD_FAILPOINT_DIR` and waits until the test makes `NAME.go`
//! there (a minute at most).

/// Kills this process when `name` is armed.
pub fn hit(name: &str) {
    #[cfg(debug_assertions)]
    if armed(name) {
        log::warn!("fail point {name}: killing this process (SIGKILL)");
        // SIGKILL cannot be blocked: it ends the process before kill returns.
        let me = rustix::process::getpid();
        let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
        loop {
            std::thread::park();
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}

/// Holds this thread at `name` when armed, until the test says go.
pub fn pause(name: &str) {
    #[cfg(debug_assertions)]
    if let Some(dir) = paused_in(name) {
        log::warn!("fail point {name}: held until {name}.go is made");
        let _ = std::fs::write(dir.join(format!("{name}.reached")), b"");
        let go = dir.join(format!("{name}.go"));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !go.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}

#[cfg(debug_assertions)]
fn armed(name: &str) -> bool {
    named_in("DRSD_FAILPOINT", name)
}

/// The folder a held point signals in, when `name` is armed to hold.
#[cfg(debug_assertions)]
fn paused_in(name: &str) -> Option<std::path::PathBuf> {
    if !named_in("DRSD_FAILPOINT_PAUSE", name) {
        return None;
    }
    std::env::var_os("DRSD_FAILPOINT_DIR").map(std::path::PathBuf::from)
}

#[cfg(debug_assertions)]
fn named_in(var: &str, name: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.split(',').any(|p| p.trim() == name))
}
