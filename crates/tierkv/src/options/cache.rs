//! The cache's settings: how the budget is split between AC-Key's KV, KP and block caches
//! ([`CacheMode`]) and HAC's tuning ([`CacheOptions`]). Defined here, below the cache, so
//! that `Options` names them without importing the cache; `crate::cache` applies them.

use std::fmt;
use std::str::FromStr;

/// How the cache budget is split between the KV, KP and block caches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheMode {
    /// AC-Key: all three components, sized online by HAC (the default).
    Adaptive,
    /// Only the block cache (RocksDB's default; tierkv before AC-Key).
    BlockOnly,
    /// Only a KV cache: every looked-up key is cached with its value; no blocks.
    KvOnly,
    /// Only a KP cache: every looked-up key is cached with a pointer; no blocks.
    KpOnly,
    /// Fixed shares of the budget (normalised to their sum); with both KV and KP shares a
    /// key enters KP first and moves to KV on its second hit.
    Split {
        /// KV share.
        kv: f64,
        /// KP share.
        kp: f64,
        /// Block share.
        block: f64,
    },
}

impl CacheMode {
    /// Fixed fractions (kv, kp, block) summing to 1, or `None` for adaptive.
    pub fn fixed_shares(&self) -> Option<[f64; 3]> {
        let raw = match *self {
            CacheMode::Adaptive => return None,
            CacheMode::BlockOnly => [0.0, 0.0, 1.0],
            CacheMode::KvOnly => [1.0, 0.0, 0.0],
            CacheMode::KpOnly => [0.0, 1.0, 0.0],
            CacheMode::Split { kv, kp, block } => [kv, kp, block],
        };
        let sum: f64 = raw.iter().sum();
        Some(if sum > 0.0 {
            raw.map(|x| x / sum)
        } else {
            [0.0, 0.0, 1.0]
        })
    }

    /// True when point lookups use the KV/KP caches.
    pub fn has_point(&self) -> bool {
        self.fixed_shares().is_none_or(|s| s[0] > 0.0 || s[1] > 0.0)
    }

    /// True when blocks are cached.
    pub fn has_block(&self) -> bool {
        self.fixed_shares().is_none_or(|s| s[2] > 0.0)
    }
}

impl fmt::Display for CacheMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheMode::Adaptive => write!(f, "adaptive"),
            CacheMode::BlockOnly => write!(f, "block"),
            CacheMode::KvOnly => write!(f, "kv"),
            CacheMode::KpOnly => write!(f, "kp"),
            CacheMode::Split { kv, kp, block } => write!(f, "split:{kv}:{kp}:{block}"),
        }
    }
}

impl FromStr for CacheMode {
    type Err = crate::error::Error;

    /// `adaptive`, `block`, `kv`, `kp` or `split:KV:KP:BLOCK` (shares, e.g. `split:8:2:0`).
    fn from_str(s: &str) -> crate::error::Result<Self> {
        let bad =
            |m: String| crate::error::Error::InvalidArgument(format!("cache mode {s:?}: {m}"));
        match s.trim().to_ascii_lowercase().as_str() {
            "adaptive" => Ok(CacheMode::Adaptive),
            "block" | "block-only" | "blockonly" => Ok(CacheMode::BlockOnly),
            "kv" | "kv-only" | "kvonly" => Ok(CacheMode::KvOnly),
            "kp" | "kp-only" | "kponly" => Ok(CacheMode::KpOnly),
            other => {
                let Some(rest) = other.strip_prefix("split:") else {
                    return Err(bad(
                        "expected adaptive, block, kv, kp or split:KV:KP:BLOCK".into()
                    ));
                };
                let parts: Vec<&str> = rest.split(':').collect();
                if parts.len() != 3 {
                    return Err(bad("split takes three shares, KV:KP:BLOCK".into()));
                }
                let mut v = [0.0f64; 3];
                for (x, p) in v.iter_mut().zip(&parts) {
                    *x = p
                        .parse()
                        .ok()
                        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| bad(format!("share {p:?} is not a number >= 0")))?;
                }
                if v.iter().sum::<f64>() <= 0.0 {
                    return Err(bad("the shares add up to zero".into()));
                }
                Ok(CacheMode::Split {
                    kv: v[0],
                    kp: v[1],
                    block: v[2],
                })
            }
        }
    }
}

/// Cache settings. The budget itself is [`crate::Options::cache_size`].
#[derive(Clone, Debug, PartialEq)]
pub struct CacheOptions {
    /// How the budget is split (default adaptive).
    pub mode: CacheMode,
    /// E-ARC's learning rate k, bytes squared per I/O: a ghost hit on an entry of
    /// efficiency E moves its boundary by k·E bytes (default 100 000, as in the paper).
    pub learning_rate: f64,
    /// Ghost turn-off threshold theta: the ghosts go off when no component's hit ratio
    /// changes by this much (absolute) between windows, and on again when one does
    /// (default 0.05).
    pub ghost_turnoff: f64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            mode: CacheMode::Adaptive,
            learning_rate: 100_000.0,
            ghost_turnoff: 0.05,
        }
    }
}
