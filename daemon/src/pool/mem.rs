//! An in-memory kv engine: the reference the contract suite (`tests.rs`)
//! holds the other engines to, and an ephemeral pool for tests.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::backend::{Backend, Blob, MemStage, Staged};
use super::error::Result;
use crate::lock::{read, write};

/// The kv engine that keeps everything in a `BTreeMap`: the contract's
/// reference, and an ephemeral pool for tests.
#[derive(Default)]
pub struct MemEngine {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    quarantined: RwLock<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl MemEngine {
    pub fn new() -> MemEngine {
        MemEngine::default()
    }

    /// Replaces a value in place, as corruption would.
    #[cfg(test)]
    pub(crate) fn overwrite(&self, key: &[u8], value: &[u8]) {
        self.map
            .write()
            .unwrap()
            .insert(key.to_vec(), value.to_vec());
    }
}

impl Backend for MemEngine {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn has(&self, key: &[u8]) -> Result<bool> {
        Ok(read(&self.map).contains_key(key))
    }

    fn size(&self, key: &[u8]) -> Result<Option<u64>> {
        Ok(read(&self.map).get(key).map(|v| v.len() as u64))
    }

    fn get(&self, key: &[u8]) -> Result<Option<Blob>> {
        Ok(read(&self.map).get(key).cloned().map(Blob::Bytes))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut map = write(&self.map);
        if map.contains_key(key) {
            return Ok(false);
        }
        map.insert(key.to_vec(), value.to_vec());
        Ok(true)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        Ok(write(&self.map).remove(key).is_some())
    }

    fn quarantine(&self, key: &[u8]) -> Result<Option<String>> {
        let Some(value) = write(&self.map).remove(key) else {
            return Ok(None);
        };
        self.quarantined
            .write()
            .unwrap()
            .push((key.to_vec(), value));
        Ok(Some("the mem engine's quarantine list".into()))
    }

    fn list(&self) -> Result<Vec<Vec<u8>>> {
        Ok(read(&self.map).keys().cloned().collect())
    }

    fn stage(&self) -> Result<Box<dyn Staged + '_>> {
        Ok(Box::new(MemStage {
            engine: self,
            buf: Vec::new(),
        }))
    }
}
