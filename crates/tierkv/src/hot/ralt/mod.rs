//! STUB (not committed): the RALT API as specified to its developer.
#![allow(missing_docs, unused)]
use crate::env::Env;
use crate::Result;
use std::sync::Arc;
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ScoringMethod {
    #[default]
    ExpSmoothing,
    Lru,
    Clock {
        bits: u8,
    },
}
#[derive(Clone, Debug, Default)]
pub struct RaltOptions {
    pub fd_budget: u64,
    pub alpha: f64,
    pub gamma: f64,
    pub beta: f64,
    pub hot_set_limit: Option<u64>,
    pub physical_limit: Option<u64>,
    pub auto_tune: bool,
    pub buffer_bytes: usize,
    pub bloom_bits_per_key: usize,
    pub scoring: ScoringMethod,
}
impl RaltOptions {
    pub fn validate(&self) -> Result<()> {
        Ok(())
    }
}
pub struct Ralt;
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RaltStats {
    pub hot_set_size: u64,
    pub hot_set_limit: u64,
    pub physical_size: u64,
    pub physical_limit: u64,
    pub tracked_keys: u64,
    pub memory_bytes: u64,
    pub accesses: u64,
    pub evictions: u64,
    pub tick: u64,
}
impl Ralt {
    pub fn open(env: Arc<Env>, opts: RaltOptions) -> Result<Ralt> {
        todo!()
    }
    pub fn record_access(&self, key: &[u8], value_len: u32) -> Result<()> {
        todo!()
    }
    pub fn is_hot(&self, key: &[u8]) -> bool {
        todo!()
    }
    pub fn range_hot_size(&self, lo: &[u8], hi: &[u8]) -> u64 {
        todo!()
    }
    pub fn hot_keys(
        &self,
        lo: &[u8],
        hi: &[u8],
    ) -> Result<Box<dyn Iterator<Item = Result<(Vec<u8>, u32)>> + Send>> {
        todo!()
    }
    pub fn flush(&self) -> Result<()> {
        todo!()
    }
    pub fn maintenance(&self) -> Result<bool> {
        todo!()
    }
    pub fn needs_maintenance(&self) -> bool {
        todo!()
    }
    pub fn stats(&self) -> RaltStats {
        todo!()
    }
}
