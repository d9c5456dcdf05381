//! Logs: to journald when systemd started us with its journal on our
//! standard error (`JOURNAL_STREAM`), else to standard error.
//!
//! Nothing the daemon logs carries request payloads wholesale: requests are
//! logged by method, so credentials and signed URLs that later requests carry
//! never reach the log.

use log::LevelFilter;

/// Where the logs went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    Journal,
    Stderr,
}

/// `-v` count to level: none = info, `-v` = debug, `-vv` = trace.
pub fn level(verbosity: u8) -> LevelFilter {
    match verbosity {
        0 => LevelFilter::Info,
        1 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

/// Installs the process's logger; call once.
pub fn init(verbosity: u8) -> LogTarget {
    let level = level(verbosity);
    if systemd_journal_logger::connected_to_journal() {
        if let Ok(journal) = systemd_journal_logger::JournalLog::new() {
            let journal = journal.with_syslog_identifier("drsd".to_string());
            if journal.install().is_ok() {
                log::set_max_level(level);
                return LogTarget::Journal;
            }
        }
    }
    env_logger::Builder::new()
        .filter_level(level)
        .format_target(false)
        .try_init()
        .ok();
    LogTarget::Stderr
}
