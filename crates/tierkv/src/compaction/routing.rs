//! HotRAP's part in a compaction from the last fast level into the slow tier (§3.5): which
//! input keys stay on the fast tier because they are hot (retention), and which hot
//! promotion-cache records the compaction writes there (promotion by compaction).

use crate::error::Result;
use crate::hot::policy::PromotionCheck;
use crate::hot::promotion::PcRecord;
use crate::hot::{HotKeys, HotTracker};
use std::collections::VecDeque;

/// HotRAP's part in a compaction from the last fast level into the slow tier.
pub struct HotRouting<'a> {
    /// The hotness tracker.
    pub tracker: &'a HotTracker,
    /// Keep hot input records on the fast tier.
    pub retention: bool,
    /// Which promotion-cache records may be promoted.
    pub check: PromotionCheck,
    /// Promotion-cache records taken for this compaction, sorted by key.
    pub promote: Vec<(bytes::Bytes, PcRecord)>,
    /// User-key range of the fast-tier inputs: only keys inside it may stay on that level
    /// (the level's other files lie outside it).
    pub lo: Vec<u8>,
    /// Upper end of that range (inclusive).
    pub hi: Vec<u8>,
}

/// Where retention learns which keys are hot.
enum HotSource {
    /// Retention is off: nothing stays.
    Off,
    /// RALT's hot keys of the range, merged with the compaction's keys (HotRAP §3.1).
    Listed(std::iter::Peekable<HotKeys>),
    /// A tracker that cannot list keys (the bloom cascade): `is_hot` per merged key.
    PerKey,
}

/// Decides, key by key, what a compaction from the last fast level into the slow tier keeps
/// on the fast tier (HotRAP §3.1): hot keys of the inputs (retention), and hot
/// promotion-cache records the inputs do not hold (promotion by compaction).
pub(super) struct HotRouter<'a> {
    hot: &'a HotRouting<'a>,
    source: HotSource,
    pending: VecDeque<(bytes::Bytes, PcRecord)>,
}

impl<'a> HotRouter<'a> {
    pub(super) fn new(hot: &'a HotRouting<'a>) -> Result<Self> {
        let source = if !hot.retention {
            HotSource::Off
        } else {
            match hot.tracker.hot_keys(&hot.lo, &hot.hi)? {
                Some(keys) => HotSource::Listed(keys.peekable()),
                None => HotSource::PerKey,
            }
        };
        Ok(HotRouter {
            hot,
            source,
            pending: hot.promote.iter().cloned().collect(),
        })
    }

    fn in_range(&self, ukey: &[u8]) -> bool {
        ukey >= self.hot.lo.as_slice() && ukey <= self.hot.hi.as_slice()
    }

    /// Skips listed hot keys below `ukey` and returns the next one (at or above it). Keys
    /// arrive in order, so nothing skipped is asked about again.
    fn next_hot_from(&mut self, ukey: &[u8]) -> Result<Option<&[u8]>> {
        let HotSource::Listed(keys) = &mut self.source else {
            return Ok(None);
        };
        loop {
            match keys.peek() {
                None => return Ok(None),
                Some(Err(_)) => {
                    return match keys.next() {
                        Some(Err(e)) => Err(e),
                        _ => Ok(None),
                    }
                }
                Some(Ok((k, _))) if k.as_slice() < ukey => {
                    keys.next();
                }
                Some(Ok(_)) => break,
            }
        }
        Ok(match keys.peek() {
            Some(Ok((k, _))) => Some(k.as_slice()),
            _ => None,
        })
    }

    /// True if `ukey` (the next user key of the merge, in order) stays on the fast tier.
    pub(super) fn retain(&mut self, ukey: &[u8]) -> Result<bool> {
        if !self.in_range(ukey) {
            return Ok(false);
        }
        match self.source {
            HotSource::Off => Ok(false),
            HotSource::PerKey => Ok(self.hot.tracker.is_hot(ukey)),
            HotSource::Listed(_) => Ok(self.next_hot_from(ukey)? == Some(ukey)),
        }
    }

    /// True if routing could treat some key of a block spanning `[first, last]` (user keys
    /// `keys`, in order) differently from "goes down": a key would be retained, or a
    /// promoted record falls inside the range. Call after `promotable_before(first)`.
    /// Consumes nothing a later `retain` of a key `>= first` needs.
    pub(super) fn touches(&mut self, first: &[u8], last: &[u8], keys: &[Vec<u8>]) -> Result<bool> {
        if self
            .pending
            .front()
            .is_some_and(|(k, _)| k.as_ref() <= last)
        {
            return Ok(true);
        }
        if last < self.hot.lo.as_slice() || first > self.hot.hi.as_slice() {
            return Ok(false);
        }
        match self.source {
            HotSource::Off => Ok(false),
            HotSource::PerKey => Ok(keys
                .iter()
                .any(|k| self.in_range(k) && self.hot.tracker.is_hot(k))),
            // Conservative: any listed hot key inside the block's range, whether or not
            // the block holds it.
            HotSource::Listed(_) => Ok(self.next_hot_from(first)?.is_some_and(|k| k <= last)),
        }
    }

    /// Promotion-cache records before `ukey` (all of them when `None`) that are hot; a
    /// record for `ukey` itself is dropped: the merge holds that version or a newer one.
    pub(super) fn promotable_before(
        &mut self,
        ukey: Option<&[u8]>,
    ) -> Result<Vec<(bytes::Bytes, PcRecord)>> {
        let mut out = Vec::new();
        while let Some((k, r)) = self.pending.pop_front() {
            match ukey {
                Some(u) if k.as_ref() > u => {
                    self.pending.push_front((k, r));
                    break;
                }
                Some(u) if k.as_ref() == u => break,
                _ => {}
            }
            if self.hot.check.admits(self.hot.tracker, &k, &r)? {
                out.push((k, r));
            }
        }
        Ok(out)
    }
}
