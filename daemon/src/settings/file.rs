//! Reading the settings file without trusting what another user could
//! have put there: the file (and a symlink naming it) must be the user's
//! own and not writable by anyone else, since it names the endpoint the
//! daemon signs requests for and the files it reads credentials from; a
//! file that holds a secret must be readable by its owner alone.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::SettingsError;

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
    let me = drsd_proto::paths::current_uid();
    let link = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(format!("cannot read it: {e}"))),
    };
    if link.file_type().is_symlink() && link.uid() != me {
        return Err(bad(format!(
            "it is a symbolic link owned by uid {}, not by you (uid {me})",
            link.uid()
        )));
    }
    // Checked on the open file, not the name: nothing can be swapped in
    // between the check and the read.
    let file = File::open(path).map_err(|e| bad(format!("cannot open it: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    if meta.uid() != me {
        return Err(bad(format!(
            "it is owned by uid {}, not by you (uid {me}): another user could change your settings",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(bad(format!(
            "group or others may write it (mode {mode:o}): run `chmod 600 {}`",
            path.display()
        )));
    }
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
