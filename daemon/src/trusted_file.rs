//! Opening a file whose contents change what drsd trusts or sends: the
//! settings file, the extra TLS roots (`ca_file`), the DRS bearer token
//! (`drs_token_file`), the Gen3 API key (`gen3_credentials`), the netrc
//! logins (`netrc`) and the S3 credentials file (`s3.credentials_file`).
//! Whoever can write one of them can make drsd trust their server, or hand
//! the user's data or logins to it, so each is opened through [`open`] (or
//! [`read`]), one rule for all:
//!
//! - the file itself, checked on the open descriptor (fstat: nothing can be
//!   swapped in between the check and the read), must be a regular file
//!   owned by the user or by root, that neither group nor others may write;
//! - every symbolic link on the way to it (among the path's own components
//!   and, followed as the kernel follows them, among each link's target's)
//!   must be owned by the user or by root: a link is a name for the file,
//!   and whoever owns the link chooses what it names.
//!
//! Folders on the way are not checked: one that others may write lets
//! them put another file under the name, but it fails the owner check
//! unless it is the user's or root's own. The links are checked by name
//! before the open, so a link swapped in between can only lead to a file
//! that passes the check on the descriptor. Mode bits only: an ACL granting
//! a write is not seen (drsd sets none).
//!
//! Files read at each use (the token, the Gen3 key, the netrc file) are
//! checked at each use: a file made writable later is refused from then on.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The most [`read`] takes: every file it is for is a few KiB (a CA bundle
/// a few hundred).
pub const MAX_LEN: u64 = 16 << 20;

/// How many symbolic links a path may go through, as Linux allows.
const MAX_LINKS: usize = 40;

/// Why a file was not opened. The text names neither the path (the caller's
/// error does, with what the file is for) nor anything the file holds.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot open it: {0}")]
    Io(#[from] io::Error),
    /// Opened, but another user could have changed it: what and what to do.
    #[error("{0}")]
    Refused(String),
}

impl TrustError {
    /// Nothing is at the path (some files are optional: no netrc, no login).
    pub fn is_not_found(&self) -> bool {
        matches!(self, TrustError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

fn current_uid() -> u32 {
    drsd_proto::paths::current_uid()
}

/// Whether a file or link owned by `uid` may decide what drsd trusts.
fn trusted_owner(uid: u32, me: u32) -> bool {
    uid == me || uid == 0
}

/// `path` opened for reading, after the checks of the module's notes.
pub fn open(path: &Path) -> Result<File, TrustError> {
    let me = current_uid();
    check_links(path, me)?;
    // O_NONBLOCK: a fifo planted under the name must not hang the daemon
    // before fstat says it is no regular file.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(TrustError::Refused("it is not a regular file".into()));
    }
    check_owner_and_mode(path, meta.uid(), meta.mode(), me)?;
    Ok(file)
}

/// The whole of `path` (at most [`MAX_LEN`] bytes), opened through [`open`].
pub fn read(path: &Path) -> Result<Vec<u8>, TrustError> {
    let file = open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_LEN + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(TrustError::Refused(format!(
            "it is larger than {MAX_LEN} bytes"
        )));
    }
    Ok(bytes)
}

/// The refusal for a file owned by `uid` with mode `mode`, if any.
fn check_owner_and_mode(path: &Path, uid: u32, mode: u32, me: u32) -> Result<(), TrustError> {
    let mode = mode & 0o7777;
    if !trusted_owner(uid, me) {
        return Err(TrustError::Refused(format!(
            "it is owned by uid {uid} (mode {mode:o}), neither you (uid {me}) nor root, so \
             another user could change it: replace it with a copy of your own (cp it, then mv \
             the copy over it) or, as root, run `chown {me} {}`",
            path.display()
        )));
    }
    if mode & 0o022 != 0 {
        return Err(TrustError::Refused(format!(
            "group or others may write it (owner uid {uid}, mode {mode:o}), so another user \
             could change it: run `chmod go-w {}`",
            path.display()
        )));
    }
    Ok(())
}

/// Walks `path` as the kernel resolves it, refusing at the first symbolic
/// link owned by neither the user nor root.
fn check_links(path: &Path, me: u32) -> Result<(), TrustError> {
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir()?
    };
    // What is left to walk, last component first.
    let mut left: Vec<OsString> = Vec::new();
    push_components(&mut left, path);
    let mut links = 0;
    while let Some(part) = left.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let meta = std::fs::symlink_metadata(&next)?;
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        if !trusted_owner(meta.uid(), me) {
            return Err(TrustError::Refused(format!(
                "it is reached through the symbolic link {}, owned by uid {}, neither you \
                 (uid {me}) nor root: whoever owns a link chooses the file it names; name the \
                 file itself, or replace the link with one of your own",
                next.display(),
                meta.uid()
            )));
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(TrustError::Io(io::Error::from_raw_os_error(libc::ELOOP)));
        }
        let target = std::fs::read_link(&next)?;
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        push_components(&mut left, &target);
    }
    Ok(())
}

/// Puts `path`'s components on `left`, so that its first is popped first.
fn push_components(left: &mut Vec<OsString>, path: &Path) {
    let parts = path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_os_string()),
        Component::ParentDir => Some("..".into()),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    });
    let parts: Vec<OsString> = parts.collect();
    left.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A uid that is neither the test's nor root's: `nobody`.
    const OTHER: u32 = 65534;

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
    }

    fn refused(path: &Path) -> String {
        match read(path) {
            Err(e @ TrustError::Refused(_)) => e.to_string(),
            other => panic!("{} was not refused: {other:?}", path.display()),
        }
    }

    #[test]
    fn the_users_own_file_that_only_the_user_may_write_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, b"t").unwrap();
        for mode in [0o600, 0o644, 0o400] {
            set_mode(&path, mode);
            assert_eq!(read(&path).unwrap(), b"t");
        }
        // A link of the user's own, to it, absolute or relative.
        let abs = dir.path().join("abs");
        std::os::unix::fs::symlink(&path, &abs).unwrap();
        let rel = dir.path().join("sub/rel");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("../abs", &rel).unwrap();
        assert_eq!(read(&rel).unwrap(), b"t");
    }

    #[test]
    fn a_file_group_or_others_may_write_is_refused_naming_it_its_mode_and_the_chmod() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("netrc");
        std::fs::write(&path, b"machine h login u password p").unwrap();
        for mode in [0o666, 0o620, 0o602] {
            set_mode(&path, mode);
            let err = refused(&path);
            assert!(err.contains(&format!("mode {mode:o}")), "{err}");
            assert!(
                err.contains(&format!("chmod go-w {}", path.display())),
                "{err}"
            );
            assert!(!err.contains("password"), "{err}");
        }
    }

    #[test]
    fn a_file_of_another_user_or_a_link_of_another_user_is_refused() {
        if current_uid() != 0 {
            // Making a file another user's takes root; the rule is the same
            // comparison the root run checks.
            eprintln!("not root: another user's file cannot be made here, skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, b"pem").unwrap();
        set_mode(&path, 0o644);
        chown(&path, OTHER);
        let err = refused(&path);
        assert!(
            err.contains(&format!("owned by uid {OTHER}")) && err.contains("chown 0"),
            "{err}"
        );

        // The user's own file, through another user's link: refused, at
        // the end of the path or on the way.
        chown(&path, 0);
        let link = dir.path().join("link.pem");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        chown(&link, OTHER);
        let err = refused(&link);
        assert!(
            err.contains(&link.display().to_string()) && err.contains("symbolic link"),
            "{err}"
        );
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink(dir.path(), sub.join("up")).unwrap();
        chown(&sub.join("up"), OTHER);
        let err = refused(&sub.join("up/ca.pem"));
        assert!(err.contains("up"), "{err}");
        // ... and through a link of the user's own that leads through it.
        let own = dir.path().join("own");
        std::os::unix::fs::symlink("sub/up/ca.pem", &own).unwrap();
        let _ = refused(&own);
        assert_eq!(read(&path).unwrap(), b"pem");
    }

    #[test]
    fn a_missing_file_is_not_found_and_a_fifo_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join("none")).unwrap_err().is_not_found());
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(refused(&fifo).contains("not a regular file"));
    }
}
