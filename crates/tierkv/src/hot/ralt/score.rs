//! The access record's scoring metadata and its arithmetic: the real score now, the merge
//! rule of two records of one key, the time-invariant rank used against thresholds, and the
//! auto-tuning counter and tag (HotRAP §3.2 and Algorithm 1). Also the record's byte
//! encoding, since its length is the record's physical size.

use super::options::{ScoringMethod, COUNTER_DC, COUNTER_MAX, COUNTER_ONE};
use crate::coding::{get_varint32, get_varint64, put_varint32, put_varint64};

/// Everything RALT stores about a key besides the key itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Meta {
    /// Value length of the key's data record (HotRAP size = key len + this).
    pub value_len: u32,
    /// Time slice of the last access merged into `score`.
    pub tick: u64,
    /// Score as of `tick` (meaning depends on the scoring method).
    pub score: f64,
    /// Counter period (every R accessed bytes) of the last counter update.
    pub epoch: u64,
    /// Auto-tuning counter c in tenths, as of `epoch`.
    pub counter: u8,
    /// Auto-tuning tag t: set once the key is hit while tracked.
    pub tag: bool,
}

/// The scoring method with its constants.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scorer {
    method: ScoringMethod,
    alpha: f64,
    ln_alpha: f64,
    clock_max: f64,
    /// Rank added per time slice of a record's last access (exponential smoothing only;
    /// `RaltOptions::recency_weight`).
    recency: f64,
}

fn pow(alpha: f64, d: u64) -> f64 {
    if d <= i32::MAX as u64 {
        alpha.powi(d as i32)
    } else {
        alpha.powf(d as f64)
    }
}

impl Scorer {
    pub fn new(method: ScoringMethod, alpha: f64, recency: f64) -> Scorer {
        let clock_max = match method {
            ScoringMethod::Clock { bits } => ((1u32 << bits.min(16)) - 1) as f64,
            _ => 0.0,
        };
        Scorer {
            method,
            alpha,
            ln_alpha: alpha.ln(),
            clock_max,
            recency,
        }
    }

    /// Metadata of one access at time slice `tick`, counter period `epoch`, after
    /// `clock_bytes` bytes were accessed in total (the LRU time).
    pub fn first_access(&self, value_len: u32, tick: u64, epoch: u64, clock_bytes: u64) -> Meta {
        let score = match self.method {
            ScoringMethod::ExpSmoothing | ScoringMethod::Clock { .. } => 1.0,
            ScoringMethod::Lru => clock_bytes as f64,
        };
        Meta {
            value_len,
            tick,
            score,
            epoch,
            counter: COUNTER_DC,
            tag: false,
        }
    }

    /// Whether scores count accesses or record a time (the admission stage credits a
    /// parked access by it).
    pub fn kind(&self) -> ScoreKind {
        match self.method {
            ScoringMethod::Lru => ScoreKind::Time,
            _ => ScoreKind::Count,
        }
    }

    /// The score at time slice `t` (>= the record's tick).
    pub fn real_score(&self, m: &Meta, t: u64) -> f64 {
        let d = t.saturating_sub(m.tick);
        match self.method {
            ScoringMethod::ExpSmoothing => pow(self.alpha, d) * m.score,
            ScoringMethod::Lru => m.score,
            ScoringMethod::Clock { .. } => (m.score - d as f64).max(0.0),
        }
    }

    /// A number that orders records as their real scores at time slice `reference` do, and
    /// that keeps that order as time passes without accesses (for exponential smoothing the
    /// log of the score, since every score decays by the same factor, plus
    /// `recency_weight` per time slice of the last access: a record's last access never
    /// changes without an access, so the order still holds). Thresholds are stored as
    /// ranks, so a hot bit decided once stays right until the threshold changes.
    pub fn rank(&self, m: &Meta, reference: u64) -> f64 {
        let d = reference as f64 - m.tick as f64;
        match self.method {
            ScoringMethod::ExpSmoothing => {
                if m.score > 0.0 {
                    m.score.ln() + d * self.ln_alpha + self.recency * m.tick as f64
                } else {
                    f64::NEG_INFINITY
                }
            }
            ScoringMethod::Lru => m.score,
            ScoringMethod::Clock { .. } => m.score - d,
        }
    }

    /// Merges two records of one key; `newer` comes from the newer source (upper level or
    /// a later access). Scores follow the paper: with tick_i <= tick_j,
    /// score* = alpha^(tick_j - tick_i) * score_i + score_j and tick* = tick_j. Counters
    /// follow Algorithm 1 as if `newer`'s accesses were hits on an already tracked key.
    pub fn merge(&self, older: &Meta, newer: &Meta) -> Meta {
        let tick = older.tick.max(newer.tick);
        let score = match self.method {
            ScoringMethod::ExpSmoothing => {
                pow(self.alpha, tick - older.tick) * older.score
                    + pow(self.alpha, tick - newer.tick) * newer.score
            }
            ScoringMethod::Lru => older.score.max(newer.score),
            ScoringMethod::Clock { .. } => {
                (self.real_score(older, tick) + self.real_score(newer, tick)).min(self.clock_max)
            }
        };
        let epoch = older.epoch.max(newer.epoch);
        let counter = real_counter(older, epoch)
            .saturating_add(real_counter(newer, epoch))
            .min(COUNTER_MAX);
        Meta {
            value_len: newer.value_len,
            tick,
            score,
            epoch,
            counter,
            tag: true,
        }
    }
}

/// The counter at counter period `epoch`: one unit (10 tenths) less per period elapsed,
/// never below zero (the lazy form of Algorithm 1 line 12).
pub(crate) fn real_counter(m: &Meta, epoch: u64) -> u8 {
    let d = epoch.saturating_sub(m.epoch);
    if d >= (COUNTER_MAX / COUNTER_ONE + 1) as u64 {
        0
    } else {
        m.counter.saturating_sub(d as u8 * COUNTER_ONE)
    }
}

/// Stable in Algorithm 1's sense: c > 0 and t = 1.
pub(crate) fn is_stable(m: &Meta, epoch: u64) -> bool {
    m.tag && real_counter(m, epoch) > 0
}

const FLAG_TAG: u8 = 1;
const FLAG_HOT: u8 = 2;

/// Appends the encoding of a record (see docs/FORMAT.md, "RALT files").
pub(crate) fn encode_record(dst: &mut Vec<u8>, key: &[u8], m: &Meta, hot: bool) {
    put_varint32(dst, key.len() as u32);
    dst.extend_from_slice(key);
    put_varint32(dst, m.value_len);
    put_varint64(dst, m.tick);
    dst.extend_from_slice(&m.score.to_bits().to_le_bytes());
    put_varint64(dst, m.epoch);
    dst.push(m.counter);
    let mut flags = 0;
    if m.tag {
        flags |= FLAG_TAG;
    }
    if hot {
        flags |= FLAG_HOT;
    }
    dst.push(flags);
}

/// Physical size of a record: the length of its encoding.
pub(crate) fn encoded_len(key_len: usize, m: &Meta) -> usize {
    let v = |x: u64| {
        let mut n = 1;
        let mut x = x >> 7;
        while x > 0 {
            n += 1;
            x >>= 7;
        }
        n
    };
    v(key_len as u64) + key_len + v(m.value_len as u64) + v(m.tick) + 8 + v(m.epoch) + 2
}

/// Decodes one record from the front of `src`; returns key, metadata, hot bit and the bytes
/// consumed, or `None` when the bytes do not form a record.
pub(crate) fn decode_record(src: &[u8]) -> Option<(&[u8], Meta, bool, usize)> {
    let (klen, mut p) = get_varint32(src)?;
    let kend = p.checked_add(klen as usize)?;
    let key = src.get(p..kend)?;
    p = kend;
    let (value_len, n) = get_varint32(src.get(p..)?)?;
    p += n;
    let (tick, n) = get_varint64(src.get(p..)?)?;
    p += n;
    let sb: [u8; 8] = src.get(p..p + 8)?.try_into().ok()?;
    let score = f64::from_bits(u64::from_le_bytes(sb));
    p += 8;
    let (epoch, n) = get_varint64(src.get(p..)?)?;
    p += n;
    let counter = *src.get(p)?;
    let flags = *src.get(p + 1)?;
    p += 2;
    if flags & !(FLAG_TAG | FLAG_HOT) != 0 || counter > COUNTER_MAX || score.is_nan() {
        return None;
    }
    let m = Meta {
        value_len,
        tick,
        score,
        epoch,
        counter,
        tag: flags & FLAG_TAG != 0,
    };
    Some((key, m, flags & FLAG_HOT != 0, p))
}

/// What a score means, for crediting a parked access (`admit`).
pub(crate) enum ScoreKind {
    /// A sum of per-access contributions (exponential smoothing, CLOCK).
    Count,
    /// The time of the last access (LRU).
    Time,
}
