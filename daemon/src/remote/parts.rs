//! The part size of a multipart upload, chosen per object so its `-N` ETag
//! (the md5 of the parts' md5s) can be checked against the bytes without
//! any setting.
//!
//! An ETag does not say how the object was cut. What does: the store, on
//! AWS S3, answers a `HEAD ?partNumber=1` with part 1's length and
//! `x-amz-mp-parts-count` (Ceph RGW ignores `partNumber` and answers for
//! the whole object, so its answer counts only when it names the parts
//! count); else the sizes the common tools use (the AWS CLI and boto3 cut
//! in 8 MiB, rclone in 5 MiB, others in 16, 15, 64, 32, 128 or 100 MiB;
//! past 10,000 parts the AWS tools double theirs and rclone rounds
//! `size / 10,000` up to a MiB). Only a size that cuts the object into
//! exactly N parts can give the ETag, so the count alone rules most sizes
//! out before a byte is read; the few left are all checked in the same
//! pass, each on its own hash thread.

/// S3's limit on the parts of one upload.
const MAX_PARTS: u64 = 10_000;

const MIB: u64 = 1 << 20;

/// The part sizes of the common tools, most used first.
const COMMON_MIB: [u64; 8] = [8, 5, 16, 15, 64, 32, 128, 100];

/// At most this many sizes are checked in one pass: each costs a full md5
/// of the object, on a thread of its own.
pub const MAX_CANDIDATES: usize = 3;

/// Why no part size can check a multipart ETag: the ETag is then not
/// verifiable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPartSize {
    #[error("{0} parts is not a multipart upload S3 makes")]
    NotMultipart(u64),
    #[error("an empty object has no parts to check")]
    Empty,
    /// No common tool's size, nor the configured one, cuts the object in
    /// that many parts.
    #[error("{}", none_fits(*size, *parts, *configured))]
    NoneFits {
        size: u64,
        parts: u64,
        configured: Option<u64>,
    },
}

/// The parts count of a multipart ETag `<md5>-<N>`.
pub fn parts_of(etag: &str) -> Option<u64> {
    let (_, n) = etag.trim_matches('"').split_once('-')?;
    n.parse().ok()
}

/// Whether parts of `part` bytes cut `size` bytes into exactly `parts`.
pub fn fits(size: u64, parts: u64, part: u64) -> bool {
    part > 0 && size.div_ceil(part) == parts
}

/// The part sizes to check a `-parts` ETag of a `size`-byte object with,
/// best first: `configured` (`DRSD_MULTIPART_PART_SIZE`) or the store's
/// `stated` part 1 length alone when they fit, else the common sizes that
/// fit. `Err` says why none can: the ETag is then not verifiable.
pub fn candidates(
    size: u64,
    parts: u64,
    configured: Option<u64>,
    stated: Option<u64>,
) -> Result<Vec<u64>, NoPartSize> {
    if parts == 0 || parts > MAX_PARTS {
        return Err(NoPartSize::NotMultipart(parts));
    }
    if size == 0 {
        return Err(NoPartSize::Empty);
    }
    if parts == 1 {
        return Ok(vec![size]); // one part: any size from `size` up
    }
    if let Some(one) = [configured, stated]
        .into_iter()
        .flatten()
        .find(|p| fits(size, parts, *p))
    {
        return Ok(vec![one]);
    }
    let mut found: Vec<u64> = Vec::new();
    let tools = COMMON_MIB.iter().map(|mib| grown(size, mib * MIB));
    // Past 10,000 parts of 5 MiB, rclone cuts in `size / 10,000` rounded
    // up to a MiB; below, the guess would only add a needless md5 pass.
    let rounded = (size > 5 * MIB * MAX_PARTS).then(|| size.div_ceil(parts).div_ceil(MIB) * MIB);
    for part in tools.chain(rounded) {
        if fits(size, parts, part) && !found.contains(&part) {
            found.push(part);
        }
    }
    found.truncate(MAX_CANDIDATES);
    if found.is_empty() {
        return Err(NoPartSize::NoneFits {
            size,
            parts,
            configured,
        });
    }
    Ok(found)
}

/// `part`, doubled until `size` fits in [`MAX_PARTS`] parts, as the AWS
/// tools grow their chunk size for large objects.
fn grown(size: u64, part: u64) -> u64 {
    let mut part = part;
    while size.div_ceil(part) > MAX_PARTS {
        part *= 2;
    }
    part
}

fn none_fits(size: u64, parts: u64, configured: Option<u64>) -> String {
    let low = size.div_ceil(parts);
    let high = (size - 1) / (parts - 1);
    let mut why = format!(
        "{parts} parts of {size} bytes need parts of {low}..={high} bytes, \
         which no common tool's size (5, 8, 15, 16, 32, 64, 100, 128 MiB) is"
    );
    if let Some(c) = configured {
        why.push_str(&format!(
            ", nor DRSD_MULTIPART_PART_SIZE ({c} bytes, {} parts)",
            size.div_ceil(c.max(1))
        ));
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_count_is_read_from_a_multipart_etag_only() {
        assert_eq!(
            parts_of("\"900150983cd24fb0d6963f7d28e17f72-205\""),
            Some(205)
        );
        assert_eq!(parts_of("900150983cd24fb0d6963f7d28e17f72"), None);
        assert_eq!(parts_of("5f0-1a"), None);
    }

    #[test]
    fn an_aws_cli_upload_is_cut_in_8_mib() {
        // 1 GiB in 8 MiB parts: 128 of them; 5 MiB would give 205.
        assert_eq!(candidates(1 << 30, 128, None, None), Ok(vec![8 * MIB]));
        assert_eq!(candidates(20 * MIB + 7, 3, None, None), Ok(vec![8 * MIB]));
    }

    #[test]
    fn an_rclone_upload_is_cut_in_5_mib() {
        assert_eq!(candidates(1 << 30, 205, None, None), Ok(vec![5 * MIB]));
        assert_eq!(candidates(12 * MIB + 1, 3, None, None), Ok(vec![5 * MIB]));
    }

    #[test]
    fn every_size_that_fits_is_checked_best_first() {
        // 10 MiB in 2 parts: 8 MiB (8 + 2) and 5 MiB (5 + 5) both fit.
        assert_eq!(
            candidates(10 * MIB, 2, None, None),
            Ok(vec![8 * MIB, 5 * MIB])
        );
        assert_eq!(
            candidates(30 * MIB, 2, None, None),
            Ok(vec![16 * MIB, 15 * MIB])
        );
        assert_eq!(
            candidates(120 * MIB, 2, None, None),
            Ok(vec![64 * MIB, 100 * MIB])
        );
    }

    #[test]
    fn a_setting_or_the_store_is_taken_alone_when_it_fits_and_ignored_when_not() {
        let size = 10 * MIB;
        assert_eq!(candidates(size, 2, Some(6 * MIB), None), Ok(vec![6 * MIB]));
        assert_eq!(candidates(size, 2, None, Some(7 * MIB)), Ok(vec![7 * MIB]));
        // RGW ignores partNumber: the whole object's length is no part 1.
        assert_eq!(
            candidates(size, 2, Some(64 * MIB), Some(size)),
            Ok(vec![8 * MIB, 5 * MIB])
        );
    }

    #[test]
    fn large_objects_follow_the_tools_growth_past_10000_parts() {
        // 100 GiB: 8 MiB would make 12,800 parts; the AWS CLI uses 16 MiB.
        let size = 100u64 << 30;
        assert_eq!(candidates(size, 6400, None, None), Ok(vec![16 * MIB]));
        // rclone: size / 10,000 rounded up to a MiB (11 MiB here).
        let part = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
        let got = candidates(size, size.div_ceil(part), None, None).unwrap();
        assert!(got.contains(&part), "{got:?}");
    }

    #[test]
    fn a_count_no_size_fits_is_not_verifiable_and_says_why() {
        // 20 MiB in 15 parts needs parts of about 1.4 MiB: no tool's size.
        let why = candidates(20 * MIB, 15, Some(8 * MIB), None)
            .unwrap_err()
            .to_string();
        assert!(why.contains("15 parts"), "{why}");
        assert!(
            why.contains("DRSD_MULTIPART_PART_SIZE (8388608 bytes, 3 parts)"),
            "{why}"
        );
        assert!(candidates(0, 2, None, None).is_err());
        assert!(candidates(MIB, 10_001, None, None).is_err());
    }

    #[test]
    fn one_part_is_the_whole_object() {
        assert_eq!(candidates(3 * MIB, 1, None, None), Ok(vec![3 * MIB]));
    }
}
