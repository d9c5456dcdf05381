//! The object id: a sha256 digest, as raw bytes in the pool (its keys) and
//! as 64 lowercase hex digits everywhere text is involved (LFS pointers,
//! the wire, file names). Parsing checks the form once, so code holding an
//! `Oid` never re-validates a string.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::PoolError;

/// A content oid: the sha256 of an object's bytes, the only identity the pool knows.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid([u8; 32]);

impl Oid {
    pub fn of(bytes: &[u8]) -> Oid {
        Oid(Sha256::digest(bytes).into())
    }

    pub fn from_digest(digest: [u8; 32]) -> Oid {
        Oid(digest)
    }

    /// The key bytes engines store; `None` when `key` is not 32 bytes long.
    pub fn from_key(key: &[u8]) -> Option<Oid> {
        key.try_into().ok().map(Oid)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl FromStr for Oid {
    type Err = PoolError;

    fn from_str(s: &str) -> Result<Oid, PoolError> {
        let bad = || PoolError::BadOid(s.chars().take(80).collect());
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| bad())?;
        Ok(Oid(out))
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oid({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints_and_refuses_the_rest() {
        let oid = Oid::of(b"hello");
        assert_eq!(
            oid.to_hex(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(oid.to_hex().parse::<Oid>().unwrap(), oid);
        assert!(
            "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824"
                .parse::<Oid>()
                .is_err()
        );
        assert!("abc".parse::<Oid>().is_err());
        assert!(format!("{}z", &oid.to_hex()[1..]).parse::<Oid>().is_err());
    }
}
