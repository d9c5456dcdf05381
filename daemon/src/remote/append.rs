//! Appending a download to its partial file. Where the file system allows
//! it (Linux; ext4, XFS and btrfs do), whole blocks go through O_DIRECT: a multi-GB
//! prefetch then neither copies every byte into the page cache nor leaves
//! gigabytes dirty for the flusher threads, CPU the hashes need on a small
//! machine, and it does not push what the user works on out of the cache.
//! Elsewhere, plain writes with early writeback.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

use aligned_vec::{AVec, ConstAlign};

use crate::pool::{start_writeback, WRITEBACK_EVERY};

/// O_DIRECT wants addresses, lengths and offsets in whole logical blocks;
/// 4 KiB covers every disk in use.
const BLOCK: usize = 4096;

/// Bytes gathered before one direct write: large writes keep the disk busy
/// with few system calls.
const BATCH: usize = 8 << 20;

pub(super) struct Appender {
    /// The partial file, opened as usual: the tail that is not a whole block
    /// goes through it, and so does everything where O_DIRECT is refused.
    file: File,
    direct: Option<Direct>,
    /// Where the next byte goes.
    len: u64,
    flushed: u64,
}

/// The same file opened with O_DIRECT, and the aligned bytes waiting for it.
struct Direct {
    file: File,
    buf: AVec<u8, ConstAlign<BLOCK>>,
    /// The file offset of `buf[0]`, a whole number of blocks.
    at: u64,
}

impl Appender {
    /// Appends to `file` from `start`, which must be a whole number of
    /// blocks for the direct path to be taken, and only when `direct`
    /// allows it.
    pub fn new(file: File, start: u64, direct: bool) -> Appender {
        let direct = (direct && start % BLOCK as u64 == 0)
            .then(|| open_direct(&file))
            .flatten()
            .map(|file| Direct {
                file,
                buf: AVec::with_capacity(BLOCK, BATCH + (1 << 20)),
                at: start,
            });
        Appender {
            file,
            direct,
            len: start,
            flushed: start,
        }
    }

    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.len += bytes.len() as u64;
        match &mut self.direct {
            Some(d) => {
                d.buf.extend_from_slice(bytes);
                if d.buf.len() >= BATCH {
                    if let Err(e) = d.write_blocks() {
                        return self.fall_back(e);
                    }
                }
            }
            None => {
                self.file.write_all(bytes)?;
                // Start writeback as we go, so the final fsync finds little dirty.
                if self.len - self.flushed >= WRITEBACK_EVERY {
                    start_writeback(&self.file, self.flushed, self.len - self.flushed);
                    self.flushed = self.len;
                }
            }
        }
        Ok(())
    }

    /// Some file systems take O_DIRECT at open and refuse the writes
    /// (EINVAL): what is waiting goes the usual way, and so does the rest.
    fn fall_back(&mut self, e: io::Error) -> io::Result<()> {
        let Some(d) = self.direct.take() else {
            return Err(e);
        };
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
        write_at(&self.file, &d.buf, d.at)?;
        self.file.seek(SeekFrom::Start(self.len))?;
        self.flushed = d.at;
        Ok(())
    }

    /// Bytes appended so far, counted from the start of the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Writes the whole blocks waiting and syncs the data to disk; returns
    /// how many bytes from the start of the file are on disk (a tail short
    /// of a block may still wait, on the direct path).
    pub fn sync(&mut self) -> io::Result<u64> {
        if let Some(d) = &mut self.direct {
            if let Err(e) = d.write_blocks() {
                self.fall_back(e)?;
            }
        }
        self.file.sync_data()?;
        Ok(match &self.direct {
            Some(d) => d.at,
            None => self.len,
        })
    }

    /// Writes what is left (the last partial block the usual way) and
    /// syncs the data to disk.
    pub fn finish(mut self) -> io::Result<u64> {
        if let Some(mut d) = self.direct.take() {
            if let Err(e) = d.write_blocks() {
                self.direct = Some(d);
                self.fall_back(e)?;
            } else {
                write_at(&self.file, &d.buf, d.at)?;
            }
        }
        self.file.sync_data()?;
        Ok(self.len)
    }
}

impl Direct {
    /// Writes the whole blocks in `buf`; the rest moves to its front.
    fn write_blocks(&mut self) -> io::Result<()> {
        let whole = self.buf.len() - self.buf.len() % BLOCK;
        write_at(&self.file, &self.buf[..whole], self.at)?;
        self.at += whole as u64;
        let rest = self.buf.len() - whole;
        self.buf.copy_within(whole.., 0);
        self.buf.truncate(rest);
        Ok(())
    }
}

fn write_at(file: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, at)
}

#[cfg(target_os = "linux")]
fn open_direct(file: &File) -> Option<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // The very file open already, through its descriptor: never its path
    // again (its folder may have been swapped for a link since).
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_: &File) -> Option<File> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Odd-sized pieces across batches, a resume offset, and a tail that is
    /// not a whole block land byte for byte, on the direct path where the
    /// folder allows it and the plain one where it does not (tmpfs).
    #[test]
    fn appends_land_byte_for_byte() {
        for dir in [std::env::temp_dir(), "/var/tmp".into(), "/dev/shm".into()] {
            let Ok(dir) = tempfile::tempdir_in(&dir) else {
                continue;
            };
            let path = dir.path().join("x.part");
            let prefix = vec![9u8; 1 << 20];
            std::fs::write(&path, &prefix).unwrap();
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let mut out = Appender::new(file, prefix.len() as u64, true);
            let data: Vec<u8> = (0..(BATCH * 2 + 12_345))
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            for piece in data.chunks(777_777) {
                out.append(piece).unwrap();
            }
            assert_eq!(out.finish().unwrap(), (prefix.len() + data.len()) as u64);
            let got = std::fs::read(&path).unwrap();
            assert_eq!(
                &got[..prefix.len()],
                &prefix[..],
                "in {}",
                dir.path().display()
            );
            assert!(
                got[prefix.len()..] == data[..],
                "in {}",
                dir.path().display()
            );
        }
    }

    /// The share of `path`'s pages in the page cache (mincore(2)).
    fn cached_share(path: &Path) -> f64 {
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        let page = 4096;
        let pages = len.div_ceil(page);
        let mut resident = vec![0u8; pages];
        // SAFETY: a read-only shared mapping of `len` bytes of an open
        // file, given back before returning; mincore writes one byte per
        // page into `resident`, which holds that many.
        unsafe {
            use std::os::fd::AsRawFd;
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(at, libc::MAP_FAILED);
            assert_eq!(libc::mincore(at, len, resident.as_mut_ptr()), 0);
            libc::munmap(at, len);
        }
        resident.iter().filter(|r| **r & 1 == 1).count() as f64 / pages as f64
    }

    /// A download read again at once (for a checkout) is written through
    /// the page cache, where that read then finds it; one for later goes
    /// around it.
    #[test]
    fn a_read_soon_append_stays_in_the_page_cache_and_a_direct_one_does_not() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let data: Vec<u8> = (0..(BATCH * 2)).map(|i| (i * 13 % 251) as u8).collect();
        let cached_after = |name: &str, direct: bool| {
            let path = dir.path().join(name);
            let file = File::create(&path).unwrap();
            let mut out = Appender::new(file, 0, direct);
            for piece in data.chunks(1 << 20) {
                out.append(piece).unwrap();
            }
            assert_eq!(out.finish().unwrap(), data.len() as u64);
            cached_share(&path)
        };
        let soon = cached_after("soon.part", false);
        let later = cached_after("later.part", true);
        assert!(soon > 0.99, "read-soon bytes in the cache: {soon}");
        assert!(later < 0.01, "direct bytes in the cache: {later}");
    }

    /// A direct write the kernel refuses with EINVAL (here: an offset that
    /// is not a whole block) falls back to plain writes, losing nothing.
    #[test]
    fn a_refused_direct_write_falls_back() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("x.part");
        std::fs::write(&path, [5u8; 1000]).unwrap();
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let direct = open_direct(&file).expect("/var/tmp (ext4 here) takes O_DIRECT");
        file.seek(SeekFrom::Start(1000)).unwrap();
        let mut out = Appender {
            file,
            direct: Some(Direct {
                file: direct,
                buf: AVec::with_capacity(BLOCK, BATCH + (1 << 20)),
                at: 1000,
            }),
            len: 1000,
            flushed: 1000,
        };
        let data: Vec<u8> = (0..BATCH + 4321).map(|i| (i % 241) as u8).collect();
        for piece in data.chunks(1 << 20) {
            out.append(piece).unwrap();
        }
        assert!(out.direct.is_none(), "fell back");
        out.finish().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..1000], &[5u8; 1000][..]);
        assert!(got[1000..] == data[..]);
    }
}
