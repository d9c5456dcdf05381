//! The one object id: a content oid, the sha256 of an object's bytes.
//!
//! It is the only identity the pool knows, the key of the registry's
//! content index, and what git-lfs pointers carry. It lives here, at the
//! protocol's root, so that clients, the wire and the daemon share one
//! type: on the wire (and in JSON anywhere) it is 64 lowercase hex digits,
//! and anything else is refused when read, not passed on as text.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid([u8; 32]);

/// Text that is not an oid; holds its first 80 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a sha256 oid (64 lowercase hex digits)")]
pub struct BadOid(pub String);

impl Oid {
    /// The oid of `bytes`: their sha256.
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
    type Err = BadOid;

    /// Lowercase only, as git-lfs writes and reads oids: an uppercase one is
    /// another spelling a pointer must not have.
    fn from_str(s: &str) -> Result<Oid, BadOid> {
        let bad = || BadOid(s.chars().take(80).collect());
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

impl serde::Serialize for Oid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Oid {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Oid, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
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

    #[test]
    fn travels_as_hex_and_a_malformed_one_is_refused_when_read() {
        let oid = Oid::of(b"hello");
        let json = serde_json::to_string(&oid).unwrap();
        assert_eq!(json, format!("\"{oid}\""));
        assert_eq!(serde_json::from_str::<Oid>(&json).unwrap(), oid);
        let err = serde_json::from_str::<Oid>("\"ABC\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a sha256 oid"), "{err}");
        assert!(serde_json::from_str::<Oid>("\"\"").is_err());
    }
}
