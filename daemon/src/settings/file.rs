//! Reading the settings file without trusting what another user could
//! have put there: it names the endpoint the daemon signs requests for and
//! the files it reads credentials from, so it is opened by
//! [`crate::trusted_file`]'s rule (the user's or root's own, not writable by
//! group or others, through no link of another user's), as is every file it
//! names that changes what drsd trusts or sends. A file that holds a secret
//! must be readable by its owner alone.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::SettingsError;
use crate::trusted_file;

/// The most a settings file may hold: a few dozen keys fit in a few KiB.
const MAX_LEN: u64 = 1 << 20;

/// The file's text and its mode bits; `None` when nothing is at `path`.
pub(super) struct FileText {
    pub text: String,
    pub mode: u32,
}

/// Reads `path` after checking who owns it and who may write it.
pub(super) fn read(path: &Path) -> Result<Option<FileText>, SettingsError> {
    let bad = |why: String| SettingsError::File {
        path: path.to_path_buf(),
        why,
    };
    let file = match trusted_file::open(path) {
        Ok(file) => file,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let mode = file
        .metadata()
        .map_err(|e| bad(format!("cannot read it: {e}")))?
        .mode()
        & 0o7777;
    let mut text = String::new();
    file.take(MAX_LEN + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(format!("cannot read it as UTF-8 text: {e}")))?;
    if text.len() as u64 > MAX_LEN {
        return Err(bad(format!("it is larger than {MAX_LEN} bytes")));
    }
    Ok(Some(FileText { text, mode }))
}

/// Refuses a file holding `secret` (a key name) that group or others may read.
pub(super) fn check_private(path: &Path, mode: u32, secret: &str) -> Result<(), SettingsError> {
    if mode & 0o077 == 0 {
        return Ok(());
    }
    Err(SettingsError::File {
        path: PathBuf::from(path),
        why: format!(
            "it holds a secret ({secret}) and group or others may read it (mode {mode:o}): \
             run `chmod 600 {}`",
            path.display()
        ),
    })
}
