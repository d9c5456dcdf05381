//! Logs: to journald when systemd started us with its journal on our
//! standard error (`JOURNAL_STREAM`), else to standard error.
//!
//! Nothing the daemon logs carries request payloads wholesale: requests are
//! logged by method, so credentials and signed URLs that later requests carry
//! never reach the log. And whatever a line says, every URL in it passes
//! through `stores::redact_text` on its way out ([`Redacting`]): user-info
//! and signing parameters never reach the journal or `drsd.log`.

use log::{LevelFilter, Log, Metadata, Record};

use crate::stores::redact_text;

/// A logger that hands `inner` each record with the URLs in its message
/// redacted.
pub struct Redacting<L>(pub L);

impl<L: Log> Log for Redacting<L> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.0.enabled(record.metadata()) {
            return;
        }
        let text = redact_text(&record.args().to_string());
        self.0.log(
            &Record::builder()
                .args(format_args!("{text}"))
                .metadata(record.metadata().clone())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        self.0.flush();
    }
}

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
            if log::set_boxed_logger(Box::new(Redacting(journal))).is_ok() {
                log::set_max_level(level);
                return LogTarget::Journal;
            }
        }
    }
    let stderr = env_logger::Builder::new()
        .filter_level(level)
        .format_target(false)
        .build();
    if log::set_boxed_logger(Box::new(Redacting(stderr))).is_ok() {
        log::set_max_level(level);
    }
    LogTarget::Stderr
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Kept(Mutex<Vec<String>>);

    impl Log for &Kept {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &Record<'_>) {
            self.0.lock().unwrap().push(record.args().to_string());
        }
        fn flush(&self) {}
    }

    #[test]
    fn a_logged_url_loses_its_user_info_and_signature() {
        let kept = Kept::default();
        let logger = Redacting(&kept);
        let url = "http://u:s3cr3t@h/x.bam?X-Amz-Signature=abc123&part=1";
        logger.log(
            &Record::builder()
                .args(format_args!("prefetched {url}: done"))
                .level(log::Level::Info)
                .build(),
        );
        let lines = kept.0.lock().unwrap();
        assert_eq!(
            lines.as_slice(),
            ["prefetched http://REDACTED@h/x.bam?X-Amz-Signature=REDACTED&part=1: done"]
        );
    }
}
