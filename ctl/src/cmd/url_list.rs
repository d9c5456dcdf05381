//! `drsctl add-url --from FILE`: the list is read here, as a stream, one
//! bounded line at a time, and sent to the daemon in batches. A huge or
//! endless file (`/dev/zero`, a pipe that never ends) costs neither side more
//! than one line and one batch: the daemon never opens the file itself.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use drsd_proto::AddUrlEntry;

/// The longest line of a list (a presigned URL and a path fit many times).
pub const MAX_LINE: usize = 64 * 1024;

/// A list that cannot be read on, named by file and line.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("opening the URL list {file}: {source}")]
    Open {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the URL list {file} at line {line}: {source}")]
    Read {
        file: PathBuf,
        line: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("the URL list {file}: line {line} is longer than the {MAX_LINE}-byte line limit; nothing after it is read")]
    TooLong { file: PathBuf, line: usize },
    #[error("the URL list {file}: line {line} is not UTF-8")]
    NotText { file: PathBuf, line: usize },
}

/// `URL [PATH]` lines; blank lines and `#` comments are skipped.
pub struct UrlList {
    file: PathBuf,
    reader: Box<dyn BufRead>,
    line: usize,
}

impl UrlList {
    /// Opens `file`, or standard input for `-`.
    pub fn open(file: &Path) -> Result<UrlList, ListError> {
        let reader: Box<dyn BufRead> = if file == Path::new("-") {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            let opened = std::fs::File::open(file).map_err(|source| ListError::Open {
                file: file.to_path_buf(),
                source,
            })?;
            Box::new(BufReader::new(opened))
        };
        Ok(UrlList::from_reader(file, reader))
    }

    pub fn from_reader(file: &Path, reader: Box<dyn BufRead>) -> UrlList {
        UrlList {
            file: file.to_path_buf(),
            reader,
            line: 0,
        }
    }

    /// The next entry, numbered by its line; `None` at the end of the list.
    pub fn next_entry(&mut self) -> Result<Option<AddUrlEntry>, ListError> {
        loop {
            let Some(text) = self.next_line()? else {
                return Ok(None);
            };
            let text = text.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            let url = text.split_whitespace().next().unwrap_or_default();
            // A path may contain spaces: the rest of the line is the path.
            let rest = text[url.len()..].trim();
            return Ok(Some(AddUrlEntry {
                url: url.to_string(),
                path: (!rest.is_empty()).then(|| PathBuf::from(rest)),
                sha256: None,
                line: Some(self.line),
                size: None,
                md5: None,
            }));
        }
    }

    /// One line without its end, read no further than [`MAX_LINE`] bytes.
    fn next_line(&mut self) -> Result<Option<String>, ListError> {
        self.line += 1;
        let mut bytes = Vec::new();
        let limit = (MAX_LINE + 1) as u64;
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut bytes)
            .map_err(|source| ListError::Read {
                file: self.file.clone(),
                line: self.line,
                source,
            })?;
        if read == 0 {
            return Ok(None);
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        } else if bytes.len() > MAX_LINE {
            return Err(ListError::TooLong {
                file: self.file.clone(),
                line: self.line,
            });
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ListError::NotText {
                file: self.file.clone(),
                line: self.line,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &'static [u8]) -> UrlList {
        UrlList::from_reader(Path::new("list.txt"), Box::new(text))
    }

    #[test]
    fn entries_keep_their_line_numbers_past_comments_and_blank_lines() {
        let mut l =
            list(b"# header\n\ns3://b/k1\r\n  https://h/x.bin  dir/with space.bin \ns3://b/k2");
        let e = l.next_entry().unwrap().unwrap();
        assert_eq!(
            (e.url.as_str(), e.path, e.line),
            ("s3://b/k1", None, Some(3))
        );
        let e = l.next_entry().unwrap().unwrap();
        assert_eq!(e.url, "https://h/x.bin");
        assert_eq!(e.path, Some(PathBuf::from("dir/with space.bin")));
        assert_eq!(e.line, Some(4));
        assert_eq!(l.next_entry().unwrap().unwrap().line, Some(5));
        assert!(l.next_entry().unwrap().is_none());
    }

    #[test]
    fn an_endless_line_stops_at_the_limit_naming_file_and_line() {
        let endless = std::io::repeat(0);
        let mut l = UrlList::from_reader(
            Path::new("/dev/zero"),
            Box::new(BufReader::new(b"s3://b/k\n".chain(endless))),
        );
        assert!(l.next_entry().unwrap().is_some());
        let err = l.next_entry().unwrap_err().to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("line 2") && err.contains("65536"),
            "{err}"
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read() {
        let mut text = vec![b'x'; MAX_LINE];
        text.push(b'\n');
        let text: &'static [u8] = Box::leak(text.into_boxed_slice());
        assert_eq!(
            list(text).next_entry().unwrap().unwrap().url.len(),
            MAX_LINE
        );
    }
}
