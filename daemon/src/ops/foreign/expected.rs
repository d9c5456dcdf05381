//! What the client was told of an object before it asked (a Gen3 manifest's
//! `file_size` and `md5sum`, sent as an entry's `size` and `md5`), held
//! against what the store's HEAD or the DRS record says of it once
//! resolved: a line whose object is not the one its manifest describes is
//! refused before anything is written.
//!
//! An expected md5 the record does not state is kept with the object only
//! when its bytes will be read and hashed before its pointer names them
//! (a provisional pointer): the prefetch, or the read of a small object
//! at add-url, then refuses bytes of another md5 and the pointer is never
//! promoted. An object named by its sha256 already (the record's, or
//! `--sha256`) is checked by that when read; an md5 nobody verified is not
//! recorded beside it, where a later Indexd registration could carry it.

use super::resolve::Resolved;
use super::Refused;

/// Why a resolved object is not the one the line expected.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unexpected {
    #[error("{url}: the object holds {got} bytes, {expected} were expected (the manifest's size)")]
    Size {
        url: String,
        got: u64,
        expected: u64,
    },
    #[error("{url}: the object's md5 is {got}, {expected} was expected (the manifest's md5)")]
    Md5 {
        url: String,
        got: String,
        expected: String,
    },
}

/// The resolved lines that are what their line expected (with an expected
/// md5 kept where their bytes will be checked against it); the others go
/// to `refused`.
pub(super) fn hold_to(resolved: Vec<Resolved>, refused: &mut Vec<Refused>) -> Vec<Resolved> {
    let mut kept = Vec::with_capacity(resolved.len());
    for mut r in resolved {
        match check(&mut r) {
            Ok(()) => kept.push(r),
            Err(why) => refused.push(Refused {
                line: r.target.no,
                url: r.target.url.to_string(),
                message: why.to_string(),
            }),
        }
    }
    kept
}

/// Checks one line's object against its expected size and md5.
fn check(r: &mut Resolved) -> Result<(), Unexpected> {
    let url = || r.target.url.to_string();
    let object = &mut r.entry.object;
    if let Some(expected) = r.target.size.filter(|&s| s != object.size) {
        return Err(Unexpected::Size {
            url: url(),
            got: object.size,
            expected,
        });
    }
    let Some(expected) = &r.target.md5 else {
        return Ok(());
    };
    match &object.md5 {
        Some(said) if !said.eq_ignore_ascii_case(expected) => Err(Unexpected::Md5 {
            url: url(),
            got: said.to_ascii_lowercase(),
            expected: expected.clone(),
        }),
        Some(_) => Ok(()),
        None => {
            if object.content_oid.is_none() {
                object.md5 = Some(expected.clone());
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::foreign::plan::Target;
    use crate::ops::foreign::OidFrom;
    use crate::pool::Oid;
    use crate::registry::{Entry, ForeignObject};
    use crate::stores::ObjectUrl;

    const MD5: &str = "900150983cd24fb0d6963f7d28e17f72";

    /// A resolved line of 3 bytes whose record states `md5` (and a sha256
    /// when `named`), expecting `size` and `expected_md5`.
    fn line(
        md5: Option<&str>,
        named: bool,
        size: Option<u64>,
        expected_md5: Option<&str>,
    ) -> Resolved {
        let url = "https://h/x.bin";
        let provisional = crate::registry::provisional_oid(url, "e");
        let content = named.then(|| Oid::of(b"abc"));
        let object = ForeignObject {
            url: url.into(),
            bucket: None,
            key: None,
            version_id: None,
            etag: "e".into(),
            size: 3,
            provisional_oid: provisional,
            content_oid: content,
            drs_id: None,
            last_modified: None,
            recorded_at: 1,
            md5: md5.map(str::to_string),
            content_read: false,
        };
        Resolved {
            target: Target {
                no: 4,
                raw: url.into(),
                url: ObjectUrl::parse(url).unwrap(),
                rel: "x.bin".into(),
                sha256: None,
                size,
                md5: expected_md5.map(str::to_string),
            },
            entry: Entry {
                path: "x.bin".into(),
                oid: content.unwrap_or(provisional),
                object,
            },
            oid_from: OidFrom::Etag,
        }
    }

    fn held(r: Resolved) -> (Vec<Resolved>, Vec<Refused>) {
        let mut refused = Vec::new();
        let kept = hold_to(vec![r], &mut refused);
        (kept, refused)
    }

    #[test]
    fn an_object_of_the_expected_size_and_md5_is_kept() {
        let (kept, refused) = held(line(Some(MD5), false, Some(3), Some(MD5)));
        assert_eq!((kept.len(), refused.len()), (1, 0));
    }

    #[test]
    fn an_object_of_another_size_is_refused_by_line_naming_both_sizes() {
        let (kept, refused) = held(line(None, false, Some(4), None));
        assert!(kept.is_empty());
        assert_eq!(refused[0].line, 4);
        let said = &refused[0].message;
        assert!(
            said.contains("https://h/x.bin") && said.contains("holds 3 bytes, 4 were expected"),
            "{said}"
        );
    }

    #[test]
    fn a_record_naming_another_md5_is_refused_naming_both() {
        let other = "0123456789abcdef0123456789abcdef";
        let (kept, refused) = held(line(Some(other), false, None, Some(MD5)));
        assert!(kept.is_empty());
        let said = &refused[0].message;
        assert!(said.contains(other) && said.contains(MD5), "{said}");
    }

    #[test]
    fn an_expected_md5_is_kept_for_the_read_of_a_provisional_object_only() {
        let (kept, _) = held(line(None, false, None, Some(MD5)));
        assert_eq!(kept[0].entry.object.md5.as_deref(), Some(MD5));
        let (kept, _) = held(line(None, true, None, Some(MD5)));
        assert_eq!(kept[0].entry.object.md5, None, "never read: not recorded");
    }

    #[test]
    fn a_record_md5_in_capitals_matches_the_expected_one() {
        let (kept, _) = held(line(Some(&MD5.to_uppercase()), false, None, Some(MD5)));
        assert_eq!(kept.len(), 1);
    }
}
