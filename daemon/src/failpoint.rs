//! Named points where a test can have the daemon killed as `kill -9`
//! would (SIGKILL, no unwinding, no cleanup), to check what a crash at
//! that very step leaves behind. A point fires when its name is in
//! `DRSD_FAILPOINT` (comma-separated). Debug builds only (the binaries the
//! end-to-end tests drive): a release build never reads the variable.

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

#[cfg(debug_assertions)]
fn armed(name: &str) -> bool {
    std::env::var("DRSD_FAILPOINT").is_ok_and(|v| v.split(',').any(|p| p.trim() == name))
}
