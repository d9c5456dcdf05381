//! A node's own folder inside the lab's shared folder (`partial-NODE`,
//! where its resumable downloads are written). The shared folder is the
//! lab group's to write, so another member can make the folder first, or
//! rename it away and leave a symbolic link in its place (to the user's
//! `~/.ssh`, say): a folder is this node's only when it is a real folder
//! (opened with `O_NOFOLLOW|O_DIRECTORY`), owned by this user, and closed to
//! everyone else (0700, set here on a folder of ours found open). Anything
//! else is refused by name, naming who made it, and nothing is written
//! into it, or removed from it: every use checks it again (gc works on the
//! checked descriptor itself, `remote::partials`).

use std::ffi::CStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};

/// Why a node's folder is not used.
#[derive(Debug, thiserror::Error)]
#[error("this node's folder {path}: {why}")]
pub struct NodeDirError {
    pub path: PathBuf,
    pub why: String,
}

/// A file in this node's folder, reached through the folder's checked
/// descriptor and its name in it, never through the folder's path again:
/// a folder renamed away and swapped for a link after the check is never
/// written into, read from or removed from through the link.
#[derive(Debug, Clone)]
pub struct NodeFile {
    /// The folder, as [`check`] opened it.
    pub dir: Arc<File>,
    /// The file's name in it (one component).
    pub name: String,
    /// The folder's path joined with the name: for messages only.
    pub shown: PathBuf,
}

impl NodeFile {
    /// `name` in the checked folder `dir` (found at `path`).
    pub fn new(dir: Arc<File>, path: &Path, name: String) -> NodeFile {
        let shown = path.join(&name);
        NodeFile { dir, name, shown }
    }

    /// The file `name` beside this one, in the same folder.
    pub fn sibling(&self, name: String) -> NodeFile {
        let shown = self.shown.with_file_name(&name);
        NodeFile {
            dir: self.dir.clone(),
            name,
            shown,
        }
    }

    /// Opens it read-only, never following a link.
    pub fn open_read(&self) -> std::io::Result<File> {
        self.open(OFlags::RDONLY, Mode::empty())
    }

    /// Opens it for reading and writing, created (mode `mode`) when missing,
    /// never following a link.
    pub fn open_rw(&self, mode: u32) -> std::io::Result<File> {
        self.open(
            OFlags::RDWR | OFlags::CREATE,
            Mode::from_bits_truncate(mode),
        )
    }

    /// Creates it, exclusively (mode `mode`), for writing.
    pub fn create_new(&self, mode: u32) -> std::io::Result<File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        self.open(flags, Mode::from_bits_truncate(mode))
    }

    fn open(&self, flags: OFlags, mode: Mode) -> std::io::Result<File> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&*self.dir, self.name.as_str(), flags, mode)?;
        Ok(File::from(fd))
    }

    /// Removes it; a missing file is no error.
    pub fn remove(&self) -> std::io::Result<()> {
        match rustix::fs::unlinkat(&*self.dir, self.name.as_str(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames it to `to`, in the same folder, over what `to` names.
    pub fn rename_to(&self, to: &NodeFile) -> std::io::Result<()> {
        rustix::fs::renameat(&*self.dir, self.name.as_str(), &*to.dir, to.name.as_str())?;
        Ok(())
    }

    /// Renames it to `name` in the open folder `into` (another folder of
    /// the same file system).
    pub fn rename_into(&self, into: &File, name: &std::ffi::OsStr) -> std::io::Result<()> {
        rustix::fs::renameat(&*self.dir, self.name.as_str(), into, name)?;
        Ok(())
    }

    /// Renames it to the path `to` (a folder of the pool's own).
    pub fn rename_to_path(&self, to: &Path) -> std::io::Result<()> {
        rustix::fs::renameat(&*self.dir, self.name.as_str(), rustix::fs::CWD, to)?;
        Ok(())
    }

    /// Hard-links the file at `from` (a path outside this folder) here.
    pub fn link_from(&self, from: &Path) -> std::io::Result<()> {
        let (cwd, dir) = (rustix::fs::CWD, &*self.dir);
        rustix::fs::linkat(cwd, from, dir, self.name.as_str(), AtFlags::empty())?;
        Ok(())
    }
}

/// A file name starting with `prefix` that no other of this process's
/// names uses: for a file created exclusively in this node's folder (a name
/// someone planted then fails the create rather than being followed).
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{:x}-{nanos:x}-{n:x}", std::process::id())
}

/// `path` as this node's own folder: created 0700 when missing, else
/// checked; the open folder, for work through its descriptor.
pub fn open(path: &Path) -> Result<File, NodeDirError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refused(path, format!("cannot create it: {e}"))),
    }
    check(path)
}

/// `path` opened as this node's own folder, without creating it.
pub fn check(path: &Path) -> Result<File, NodeDirError> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| not_a_folder(path, e))?;
    let meta = dir
        .metadata()
        .map_err(|e| refused(path, format!("cannot stat it: {e}")))?;
    let me = drsd_proto::paths::current_uid();
    if meta.uid() != me {
        return Err(refused(
            path,
            format!(
                "it was made by {}, not by you ({}): another member of the lab may have \
                 planted it to read or redirect your downloads; nothing was written to it. \
                 Have it removed (its owner, or root), then start again",
                who(meta.uid()),
                who(me)
            ),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        // Ours but open to others (made by hand, or by an older drsd):
        // closed, on the descriptor (never through a name).
        dir.set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| {
                refused(
                    path,
                    format!("it has mode {mode:o} and chmod 700 failed: {e}"),
                )
            })?;
    }
    Ok(dir)
}

/// The refusal for a path that did not open as a folder.
fn not_a_folder(path: &Path, e: std::io::Error) -> NodeDirError {
    let link = std::fs::symlink_metadata(path).ok();
    match link {
        Some(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            refused(
                path,
                format!(
                    "it is a symbolic link (to {target}, made by {}), not a folder: another \
                     member of the lab may have put it there to redirect your downloads; \
                     nothing was written through it. Remove the link, then start again",
                    who(meta.uid())
                ),
            )
        }
        Some(meta) if !meta.is_dir() => refused(
            path,
            format!(
                "it is not a folder (made by {}); remove it",
                who(meta.uid())
            ),
        ),
        _ => refused(path, format!("cannot open it: {e}")),
    }
}

fn refused(path: &Path, why: String) -> NodeDirError {
    NodeDirError {
        path: path.to_path_buf(),
        why,
    }
}

/// `uid 1001 (bob)`, or `uid 1001` when the system knows no name for it.
pub fn who(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

pub(super) fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: `passwd` is plain data (integers and pointers): all zeroes
    // is a valid value, which getpwuid_r then fills.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to memory of ours, sized as given; the name
    // is read only when getpwuid_r says it filled `pwd` from `buf`.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated by getpwuid_r.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_folder_is_made_0700_and_an_open_one_of_ours_is_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("partial-n");
        open(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        open(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn a_symbolic_link_in_its_place_is_refused_naming_it_and_nothing_goes_through() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("ssh");
        std::fs::create_dir(&elsewhere).unwrap();
        let dir = tmp.path().join("partial-n");
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let err = open(&dir).unwrap_err().to_string();
        assert!(
            err.contains("symbolic link")
                && err.contains(&elsewhere.display().to_string())
                && err.contains(&dir.display().to_string())
                && err.contains(&format!("uid {}", drsd_proto::paths::current_uid())),
            "{err}"
        );
        assert!(std::fs::symlink_metadata(&dir)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_folder_another_user_made_is_refused_naming_its_owner() {
        if drsd_proto::paths::current_uid() != 0 {
            panic!("this test gives a folder to another uid: run it as root (CI does)");
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("partial-n");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::lchown(&dir, Some(65534), None).unwrap();
        let err = open(&dir).unwrap_err().to_string();
        assert!(err.contains("uid 65534"), "{err}");
        assert!(err.contains(&dir.display().to_string()), "{err}");
    }
}
