//! `drs-hook filter-process`: the clean half of git's long-running filter
//! protocol (gitattributes(5), "Long Running Filter Process"), producing
//! exactly what git-lfs's clean produces, without storing anything.
//!
//! `drsctl clone` writes the work tree's files from the pool itself (git
//! would hold each smudged file whole in memory) and then has git refresh
//! the index with this filter, so git records the files' stat data after
//! checking their content hashes to the pointer it has. git-lfs's own clean
//! would do as well, but it also copies every file into `.git/lfs/objects`
//! on the way, which costs more than the checkout it replaces.
//!
//! Input that git-lfs takes for a pointer (under 1024 bytes, parsing as
//! one) comes back as it is, as git-lfs gives it back; empty input comes
//! back empty (git-lfs keeps empty files as empty blobs); anything else
//! comes back as the canonical pointer of its sha256 and length.
//!
//! A file the daemon stamped when it wrote it (its stamps in the file named
//! by `DRS_HOOK_STAMPS`, see [`drsd_proto::FileStamp`]) is not hashed while
//! its stat data is still the stamp's: its pointer is the stamp's. That
//! check is made when git asks for the file, after git took the stat data
//! it will record for it (git stats an entry before it cleans it): a file
//! unchanged at the check was unchanged when git took them, so the pointer
//! and the recorded stat data agree, whatever a writer does to the file
//! after (which moves its stat data, so git looks at it again).

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gix_packetline_blocking::{encode, PacketLineRef, StreamingPeekableIter};
use sha2::{Digest, Sha256};

use drsd_proto::stamp::{read_stamps, STAMPS_ENV};
use drsd_proto::{FileStamp, Oid, Pointer, MAX_POINTER_SIZE};

type Lines<R> = StreamingPeekableIter<R>;

/// The files whose pointers need no hashing while they match their stamps,
/// named relative to `top` (where git runs the filter: the work tree's top).
#[derive(Debug, Default)]
pub struct Stamped {
    top: PathBuf,
    stamps: HashMap<String, FileStamp>,
}

impl Stamped {
    /// The stamps of the file `DRS_HOOK_STAMPS` names, if it is set.
    pub fn from_env() -> Result<Stamped> {
        let stamps = match std::env::var_os(STAMPS_ENV) {
            None => HashMap::new(),
            Some(file) => read_stamps(file.as_ref())
                .with_context(|| format!("reading the stamps in {file:?} ({STAMPS_ENV})"))?,
        };
        Ok(Stamped {
            top: PathBuf::from("."),
            stamps,
        })
    }

    /// The pointer of `path` if it is a stamped file that still matches.
    fn pointer(&self, path: &str) -> Option<Pointer> {
        let stamp = self.stamps.get(path)?;
        let meta = std::fs::symlink_metadata(self.top.join(path)).ok()?;
        stamp.matches(&meta).then(|| stamp.pointer())
    }
}

/// Serves git on `input`/`output` until git closes the pipe.
pub fn run(input: impl Read, output: impl Write, stamped: &Stamped) -> Result<()> {
    let mut lines = StreamingPeekableIter::new(input, &[PacketLineRef::Flush], false);
    let mut out = BufWriter::new(output);
    handshake(&mut lines, &mut out)?;
    while let Some(request) = next_request(&mut lines)? {
        if request.command != "clean" {
            bail!(
                "git asked for {:?}: this filter only cleans",
                request.command
            );
        }
        let known = request.pathname.and_then(|p| stamped.pointer(&p));
        let cleaned = match known {
            Some(pointer) => drain(&mut lines).map(|()| pointer.to_text().into_bytes()),
            None => clean(&mut lines),
        };
        let cleaned = cleaned.context("reading the content git sent")?;
        respond(&mut out, &cleaned).context("answering git")?;
    }
    Ok(())
}

/// `git-filter-client`, `version=2`; then the capabilities, of which this
/// filter takes `clean` only.
fn handshake<R: Read>(lines: &mut Lines<R>, out: &mut impl Write) -> Result<()> {
    let hello = texts(lines).context("reading git's greeting")?;
    if hello.first().map(String::as_str) != Some("git-filter-client")
        || !hello.iter().any(|l| l == "version=2")
    {
        bail!("git greeted with {hello:?}, not a version 2 filter client");
    }
    encode::text_to_write(b"git-filter-server", &mut *out)?;
    encode::text_to_write(b"version=2", &mut *out)?;
    encode::flush_to_write(&mut *out)?;
    out.flush()?; // git waits for it before it offers its capabilities
    let offered = texts(lines).context("reading git's capabilities")?;
    if !offered.iter().any(|l| l == "capability=clean") {
        bail!("git offered {offered:?}, without clean");
    }
    encode::text_to_write(b"capability=clean", &mut *out)?;
    encode::flush_to_write(&mut *out)?;
    out.flush()?;
    Ok(())
}

/// What git asks for, and of which file.
struct Request {
    command: String,
    pathname: Option<String>,
}

/// The next request's `command` and `pathname`, its other keys read past;
/// `None` when git has closed the pipe.
fn next_request<R: Read>(lines: &mut Lines<R>) -> Result<Option<Request>> {
    let keys = match texts(lines) {
        Ok(keys) if keys.is_empty() => return Ok(None),
        Ok(keys) => keys,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e).context("reading git's request"),
    };
    let key = |name: &str| {
        keys.iter()
            .find_map(|k| k.strip_prefix(name))
            .map(String::from)
    };
    match key("command=") {
        Some(command) => Ok(Some(Request {
            command,
            pathname: key("pathname="),
        })),
        None => bail!("git sent a request without a command: {keys:?}"),
    }
}

/// Reads the content past, up to its flush.
fn drain<R: Read>(lines: &mut Lines<R>) -> io::Result<()> {
    while let Some(line) = lines.read_line() {
        payload(line?)?;
    }
    lines.reset();
    Ok(())
}

/// The content, up to its flush: git-lfs's pointer for it.
fn clean<R: Read>(lines: &mut Lines<R>) -> io::Result<Vec<u8>> {
    let (mut head, mut hasher, mut size) = (Vec::new(), Sha256::new(), 0u64);
    while let Some(line) = lines.read_line() {
        let data = payload(line?)?;
        if size < MAX_POINTER_SIZE {
            let room = (MAX_POINTER_SIZE - size) as usize;
            head.extend_from_slice(&data[..data.len().min(room)]);
        }
        hasher.update(data);
        size += data.len() as u64;
    }
    lines.reset();
    if size == 0 || (size < MAX_POINTER_SIZE && Pointer::parse(&head).is_ok()) {
        return Ok(head);
    }
    let oid = Oid::from_digest(hasher.finalize().into());
    Ok(Pointer { oid, size }.to_text().into_bytes())
}

/// `status=success`, the content (a pointer: one packet), and an empty
/// list (the status stands).
fn respond(out: &mut impl Write, content: &[u8]) -> io::Result<()> {
    encode::text_to_write(b"status=success", &mut *out)?;
    encode::flush_to_write(&mut *out)?;
    if !content.is_empty() {
        encode::data_to_write(content, &mut *out)?;
    }
    encode::flush_to_write(&mut *out)?;
    encode::flush_to_write(&mut *out)?;
    out.flush()
}

/// Text lines up to a flush, each without its newline.
fn texts<R: Read>(lines: &mut Lines<R>) -> io::Result<Vec<String>> {
    let mut texts = Vec::new();
    while let Some(line) = lines.read_line() {
        let data = payload(line?)?;
        let text = String::from_utf8_lossy(data);
        texts.push(text.strip_suffix('\n').unwrap_or(&text).to_string());
    }
    lines.reset();
    Ok(texts)
}

fn payload(
    line: Result<PacketLineRef<'_>, gix_packetline_blocking::decode::Error>,
) -> io::Result<&[u8]> {
    match line {
        Ok(PacketLineRef::Data(data)) => Ok(data),
        Ok(other) => Err(io::Error::other(format!("unexpected {other:?} from git"))),
        Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &mut Vec<u8>, line: &str) {
        encode::text_to_write(line.as_bytes(), out).unwrap();
    }

    fn flush(out: &mut Vec<u8>) {
        encode::flush_to_write(out).unwrap();
    }

    /// What git sends: the greeting, the capabilities, then one clean
    /// request per content.
    fn git_sends(contents: &[&[u8]]) -> Vec<u8> {
        let mut input = Vec::new();
        text(&mut input, "git-filter-client");
        text(&mut input, "version=2");
        flush(&mut input);
        for cap in ["capability=clean", "capability=smudge", "capability=delay"] {
            text(&mut input, cap);
        }
        flush(&mut input);
        for (i, content) in contents.iter().enumerate() {
            text(&mut input, "command=clean");
            text(&mut input, &format!("pathname=f{i}.bin"));
            flush(&mut input);
            for chunk in content.chunks(65516) {
                encode::data_to_write(chunk, &mut input).unwrap();
            }
            flush(&mut input);
        }
        input
    }

    /// The payloads of `output` between flushes, flushes as `None`.
    fn packets(output: &[u8]) -> Vec<Option<Vec<u8>>> {
        let mut lines = StreamingPeekableIter::new(output, &[], false);
        let mut packets = Vec::new();
        while let Some(line) = lines.read_line() {
            let line = match line {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                line => line.unwrap().unwrap(),
            };
            packets.push(match line {
                PacketLineRef::Data(d) => Some(d.to_vec()),
                PacketLineRef::Flush => None,
                other => panic!("{other:?}"),
            });
        }
        packets
    }

    #[test]
    fn content_is_cleaned_to_its_pointer_and_pointers_and_empty_files_pass_as_they_are() {
        let big = vec![7u8; 200_000];
        let pointer = Pointer {
            oid: Oid::of(&big),
            size: big.len() as u64,
        };
        // Not canonical (CRLF), but a pointer to git-lfs: kept byte for byte.
        let crlf = pointer.to_text().replace('\n', "\r\n");
        let mut output = Vec::new();
        run(
            &git_sends(&[&big, crlf.as_bytes(), b""])[..],
            &mut output,
            &Stamped::default(),
        )
        .unwrap();
        let line = |s: &str| Some(format!("{s}\n").into_bytes());
        let answer = |content: Option<Vec<u8>>| {
            let mut a = vec![line("status=success"), None];
            a.extend(content.map(Some));
            a.extend([None, None]);
            a
        };
        let mut expected = vec![line("git-filter-server"), line("version=2"), None];
        expected.extend([line("capability=clean"), None]);
        expected.extend(answer(Some(pointer.to_text().into_bytes())));
        expected.extend(answer(Some(crlf.into_bytes())));
        expected.extend(answer(None));
        assert_eq!(packets(&output), expected);
    }

    #[test]
    fn a_stamped_file_is_answered_from_its_stamp_until_it_is_written_again() {
        let top = tempfile::tempdir().unwrap();
        let on_disk = vec![1u8; 300_000];
        std::fs::write(top.path().join("f0.bin"), &on_disk).unwrap();
        let stamped_pointer = Pointer {
            oid: Oid::of(&on_disk),
            size: on_disk.len() as u64,
        };
        let meta = std::fs::symlink_metadata(top.path().join("f0.bin")).unwrap();
        let stamp = FileStamp::new("f0.bin".into(), &stamped_pointer, &meta);
        let stamped = Stamped {
            top: top.path().to_path_buf(),
            stamps: HashMap::from([("f0.bin".to_string(), stamp)]),
        };
        // git's copy of the content differs from the file: only a filter
        // that believes the stamp answers with the stamp's pointer.
        let sent = vec![2u8; 300_000];
        let sent_pointer = Pointer {
            oid: Oid::of(&sent),
            size: sent.len() as u64,
        };
        let answers = |stamped: &Stamped| {
            let mut output = Vec::new();
            run(&git_sends(&[&sent])[..], &mut output, stamped).unwrap();
            packets(&output)
        };
        let has = |packets: &[Option<Vec<u8>>], p: &Pointer| {
            packets.contains(&Some(p.to_text().into_bytes()))
        };
        assert!(has(&answers(&stamped), &stamped_pointer));

        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(top.path().join("f0.bin"), &sent).unwrap();
        let after = answers(&stamped);
        assert!(has(&after, &sent_pointer), "a file written since is hashed");
        assert!(!has(&after, &stamped_pointer));
    }

    #[test]
    fn a_smudge_request_is_refused_by_name() {
        let mut input = git_sends(&[]);
        text(&mut input, "command=smudge");
        text(&mut input, "pathname=x.bin");
        flush(&mut input);
        let err = run(&input[..], Vec::new(), &Stamped::default()).unwrap_err();
        assert!(err.to_string().contains("smudge"), "{err}");
    }

    #[test]
    fn a_client_that_is_not_git_version_2_is_refused() {
        let mut input = Vec::new();
        text(&mut input, "git-filter-client");
        text(&mut input, "version=1");
        flush(&mut input);
        let err = run(&input[..], Vec::new(), &Stamped::default()).unwrap_err();
        assert!(err.to_string().contains("version 2"), "{err}");
    }
}
