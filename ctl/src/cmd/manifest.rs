//! `drsctl add-url --manifest FILE [DIR]`: the JSON manifest a Gen3 data
//! portal exports (a list of `{object_id, file_name, file_size, md5sum,
//! commons_url, ...}`, the format of the Gen3 SDK's `Manifest`), read and
//! checked whole here before anything is sent: a manifest that is not
//! JSON, not a list, or has one entry drsd cannot add exactly as written
//! adds nothing, and the error names the file and the entry (counted from
//! 1). Fields drsd does not use are ignored: portals add many.
//!
//! Each entry becomes one `drs://` line: its `object_id` (a Gen3 did such
//! as `dg.XXXX/uuid`) on its commons (the entry's `commons_url`, else
//! `--commons`, else the repo's `--gen3` object remote), its pointer at
//! `DIR/file_name`, with `file_size` and the md5 as the object's expected
//! size and md5 (the daemon refuses an object that is not them, and checks
//! bytes it reads against the md5). An `object_id` that is a `drs://` URI
//! already is taken as it is.
//!
//! A file name is a name, never a path: one with `/` or `\`, `.` or `..`,
//! a control character, a leading `-` (an option to the next tool that
//! reads it), a name git keeps for itself (`.git`), or one an earlier entry
//! has, is refused here, so that no entry can reach outside `DIR` or take
//! another's place.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use drsd_proto::AddUrlEntry;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{Map, Value};

/// The largest manifest read (hundreds of thousands of a portal's entries
/// fit): a manifest is checked whole before anything is added, so it is
/// held whole, and an endless file (`/dev/zero`) stops here instead.
pub const MAX_BYTES: u64 = 256 << 20;

/// The longest object id taken (as the daemon's DRS URIs).
const MAX_ID: usize = 2048;

/// The longest file name most file systems take (`NAME_MAX`).
const MAX_NAME: usize = 255;

/// Every byte but RFC 3986's unreserved ones: the id goes into the URI as
/// one path segment, `/` included, as the daemon writes it canonically.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A manifest that cannot be added; nothing of it was.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("opening the manifest {file}: {source}")]
    Open {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the manifest {file}: {source}")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the manifest {file} is larger than {limit} bytes; split it; nothing was added")]
    TooBig { file: PathBuf, limit: u64 },
    #[error("the manifest {file} is not JSON ({source}); nothing was added")]
    NotJson {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the manifest {file} is {found}, not a JSON list of entries; nothing was added")]
    NotAList { file: PathBuf, found: &'static str },
    #[error("the manifest {file} lists no entries; nothing was added")]
    Empty { file: PathBuf },
    #[error("the manifest {file}, entry {index}{id}: {fault}; nothing was added")]
    Entry {
        file: PathBuf,
        /// Counted from 1.
        index: usize,
        /// ` (object_id "...")` when the entry has one, to find it by.
        id: String,
        fault: EntryFault,
    },
}

/// What is wrong with one entry.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryFault {
    #[error("it is {0}, not an object")]
    NotAnObject(&'static str),
    #[error("it has no {0}")]
    Missing(&'static str),
    #[error("its {field} is {found}, not a string")]
    NotAString {
        field: &'static str,
        found: &'static str,
    },
    #[error("its file_size {0} is not a number of bytes (a whole number, 0 or more)")]
    Size(String),
    #[error("its {field} {given} is not an md5 (32 hex digits)")]
    Md5 { field: &'static str, given: String },
    #[error("its md5 {md5} and md5sum {md5sum} disagree")]
    Md5s { md5: String, md5sum: String },
    #[error("its file_name {name:?} {why}")]
    Name { name: String, why: &'static str },
    #[error("its file_name {name:?} is the file_name of entry {first} too")]
    Duplicate { name: String, first: usize },
    #[error("its object_id {id:?} {why}")]
    Id { id: String, why: &'static str },
    #[error("its commons_url {url:?} {why}")]
    Commons { url: String, why: &'static str },
    #[error("it names no commons_url and no commons is known: give --commons URL, or add from a repo whose object remote is a Gen3 commons (drsctl init --gen3)")]
    NoCommons,
}

/// One entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Counted from 1.
    pub index: usize,
    /// The `drs://` URI, when the entry's id was one or it named its commons.
    uri: Option<String>,
    /// The id, to be put on the default commons when `uri` is `None`.
    id: String,
    pub file_name: String,
    pub size: Option<u64>,
    pub md5: Option<String>,
}

/// A commons as a `drs://` URI names it: `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commons(String);

impl Commons {
    /// From `https://host[:port][/path]`, `gen3+https://...` (as
    /// `.gitattributes` records it) or a bare `host[:port]` (as a
    /// manifest's `commons_url` is); `Err` says why not.
    pub fn parse(text: &str) -> Result<Commons, &'static str> {
        let text = text.trim().strip_prefix("gen3+").unwrap_or(text.trim());
        let url = match text.contains("://") {
            true => url::Url::parse(text),
            false => url::Url::parse(&format!("https://{text}")),
        }
        .map_err(|_| "is not a URL or host name")?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("is not an http(s) URL");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("holds credentials: a commons is named by its host alone");
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("names no host")?;
        Ok(match url.port() {
            Some(port) => Commons(format!("{host}:{port}")),
            None => Commons(host.to_string()),
        })
    }

    /// `host[:port]`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Reads `file` (`-`: standard input) whole, up to [`MAX_BYTES`].
pub fn read(file: &Path) -> Result<Vec<u8>, ManifestError> {
    read_up_to(file, MAX_BYTES)
}

fn read_up_to(file: &Path, limit: u64) -> Result<Vec<u8>, ManifestError> {
    let reader: Box<dyn Read> = if file == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        let opened = std::fs::File::open(file).map_err(|source| ManifestError::Open {
            file: file.to_path_buf(),
            source,
        })?;
        Box::new(opened)
    };
    let mut bytes = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ManifestError::Read {
            file: file.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(ManifestError::TooBig {
            file: file.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// Every entry of the manifest `bytes` (read from `file`), checked; the
/// first fault found refuses the whole manifest.
pub fn parse(file: &Path, bytes: &[u8]) -> Result<Vec<ManifestEntry>, ManifestError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|source| ManifestError::NotJson {
        file: file.to_path_buf(),
        source,
    })?;
    let Value::Array(list) = value else {
        return Err(ManifestError::NotAList {
            file: file.to_path_buf(),
            found: kind(&value),
        });
    };
    if list.is_empty() {
        return Err(ManifestError::Empty {
            file: file.to_path_buf(),
        });
    }
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut entries = Vec::with_capacity(list.len());
    for (i, value) in list.iter().enumerate() {
        let index = i + 1;
        let fault = |fault| entry_error(file, index, value, fault);
        let entry = entry(index, value).map_err(fault)?;
        if let Some(&first) = names.get(&entry.file_name) {
            return Err(fault(EntryFault::Duplicate {
                name: entry.file_name,
                first,
            }));
        }
        names.insert(entry.file_name.clone(), index);
        entries.push(entry);
    }
    Ok(entries)
}

/// The add-url lines of checked `entries`: each pointer at `dir/file_name`,
/// each id without a commons of its own put on `default`.
pub fn lines(
    file: &Path,
    entries: Vec<ManifestEntry>,
    dir: &Path,
    default: Option<&Commons>,
) -> Result<Vec<AddUrlEntry>, ManifestError> {
    entries
        .into_iter()
        .map(|e| {
            let url = match (e.uri, default) {
                (Some(uri), _) => uri,
                (None, Some(commons)) => on_commons(commons, &e.id),
                (None, None) => {
                    return Err(ManifestError::Entry {
                        file: file.to_path_buf(),
                        index: e.index,
                        id: shown_id(&e.id),
                        fault: EntryFault::NoCommons,
                    })
                }
            };
            Ok(AddUrlEntry {
                url,
                path: Some(dir.join(&e.file_name)),
                sha256: None,
                line: Some(e.index),
                size: e.size,
                md5: e.md5,
            })
        })
        .collect()
}

/// Whether some entry has no commons of its own (the default is needed).
pub fn needs_default(entries: &[ManifestEntry]) -> bool {
    entries.iter().any(|e| e.uri.is_none())
}

/// `drs://host[:port]/<id, one encoded segment>`.
fn on_commons(commons: &Commons, id: &str) -> String {
    format!(
        "drs://{}/{}",
        commons.as_str(),
        utf8_percent_encode(id, NOT_UNRESERVED)
    )
}

fn entry_error(file: &Path, index: usize, value: &Value, fault: EntryFault) -> ManifestError {
    let id = match value.get("object_id").and_then(Value::as_str) {
        Some(id) => shown_id(id),
        None => String::new(),
    };
    ManifestError::Entry {
        file: file.to_path_buf(),
        index,
        id,
        fault,
    }
}

/// ` (object_id "...")`, shortened and escaped: the id may be hostile.
fn shown_id(id: &str) -> String {
    let short: String = id.chars().take(100).collect();
    format!(" (object_id {short:?})")
}

/// One entry checked (all but duplicates, which need the others).
fn entry(index: usize, value: &Value) -> Result<ManifestEntry, EntryFault> {
    let Value::Object(fields) = value else {
        return Err(EntryFault::NotAnObject(kind(value)));
    };
    let id = string(fields, "object_id")?.ok_or(EntryFault::Missing("object_id"))?;
    check_id(id)?;
    let file_name = string(fields, "file_name")?.ok_or(EntryFault::Missing("file_name"))?;
    check_name(file_name)?;
    let uri = match (is_drs_uri(id), string(fields, "commons_url")?) {
        (true, _) => Some(id.to_string()),
        (false, Some(url)) => {
            let commons = Commons::parse(url).map_err(|why| EntryFault::Commons {
                url: url.chars().take(100).collect(),
                why,
            })?;
            Some(on_commons(&commons, id))
        }
        (false, None) => None,
    };
    Ok(ManifestEntry {
        index,
        uri,
        id: id.to_string(),
        file_name: file_name.to_string(),
        size: size(fields)?,
        md5: md5(fields)?,
    })
}

/// A string field; absent or `null` is `None`, anything else an error.
fn string<'a>(
    fields: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, EntryFault> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(EntryFault::NotAString {
            field,
            found: kind(other),
        }),
    }
}

/// `file_size`: a whole number of bytes, 0 or more; absent or `null` is
/// not known.
fn size(fields: &Map<String, Value>) -> Result<Option<u64>, EntryFault> {
    match fields.get("file_size") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => {
            let shown: String = other.to_string().chars().take(40).collect();
            Err(EntryFault::Size(shown))
        }
    }
}

/// `md5sum` (the Gen3 SDK's name) or `md5`, lowercase; both must agree.
fn md5(fields: &Map<String, Value>) -> Result<Option<String>, EntryFault> {
    let one = |field| -> Result<Option<String>, EntryFault> {
        let Some(text) = string(fields, field)? else {
            return Ok(None);
        };
        let lower = text.to_ascii_lowercase();
        match lower.len() == 32 && lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            true => Ok(Some(lower)),
            false => Err(EntryFault::Md5 {
                field,
                given: format!("{:?}", text.chars().take(40).collect::<String>()),
            }),
        }
    };
    match (one("md5sum")?, one("md5")?) {
        (Some(md5sum), Some(md5)) if md5sum != md5 => Err(EntryFault::Md5s { md5, md5sum }),
        (md5sum, md5) => Ok(md5sum.or(md5)),
    }
}

fn is_drs_uri(id: &str) -> bool {
    id.get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case("drs://"))
}

/// An id is a name printed in reports and logs: no blanks or control
/// characters, not empty, not endless. The daemon checks the rest.
fn check_id(id: &str) -> Result<(), EntryFault> {
    let why = if id.is_empty() {
        "is empty"
    } else if id.len() > MAX_ID {
        "is longer than 2048 bytes"
    } else if id.chars().any(|c| c.is_control() || c.is_whitespace()) {
        "holds a blank or control character"
    } else {
        return Ok(());
    };
    Err(EntryFault::Id {
        id: id.chars().take(100).collect(),
        why,
    })
}

/// A file name that is one name in `DIR`, taken as written (see the
/// module's notes).
fn check_name(name: &str) -> Result<(), EntryFault> {
    let why = if name.is_empty() {
        "is empty"
    } else if name == "." || name == ".." {
        "is not a file name"
    } else if name.contains(['/', '\\']) {
        "holds a `/` or `\\`: a manifest's file names are names, not paths"
    } else if name.chars().any(char::is_control) {
        "holds a control character"
    } else if name.starts_with('-') {
        "starts with `-`, which a command would read as an option"
    } else if name.len() > MAX_NAME {
        "is longer than 255 bytes"
    } else if is_git_name(name) {
        "is git's own folder"
    } else {
        return Ok(());
    };
    Err(EntryFault::Name {
        name: name.chars().take(100).collect(),
        why,
    })
}

/// `.git` in any case, with trailing dots or spaces, or its short name
/// `git~1`, as git itself refuses (`core.protectNTFS`, `core.protectHFS`).
fn is_git_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let name = name.trim_end_matches(['.', ' ']);
    name == ".git" || name == "git~1"
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
