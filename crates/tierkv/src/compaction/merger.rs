//! The per-entry decisions of a compaction's merge, shared by the entry-by-entry and the
//! block-aware drivers: which versions to drop (`super::stream`'s rule and the tombstones
//! that hide nothing), which output each survivor goes to (down, or kept on the fast tier by
//! `super::routing`), and when outputs are cut (between user keys only).

use super::context::{JobContext, JobOutput};
use super::output::Sink;
use super::pushdown::Pushdown;
use super::routing::HotRouter;
use super::stream::{tombstone_for, VersionStream};
use super::Compaction;
use crate::error::{Error, Result};
use crate::key::{make_internal_key, parse_internal_key, ParsedKey, ValueKind};

/// The per-entry decisions of a merge, shared by both drivers: what to drop, where each
/// survivor goes, when to cut output files.
pub(super) struct Merger<'a, 's> {
    c: &'a Compaction,
    pub(super) ctx: &'a JobContext<'a>,
    pub(super) down: &'s mut Sink,
    fast: &'s mut Sink,
    /// Preemptive pushdown: keys that may go below the output level are written there
    /// instead of to `down` (`super::pushdown`).
    pub(super) push: Option<&'s mut Pushdown>,
    out: &'s mut JobOutput,
    pub(super) router: Option<HotRouter<'a>>,
    promoted: u64,
    /// Which versions no snapshot can see.
    pub(super) versions: VersionStream,
    pub(super) keep_on_fast: bool,
    /// Scratch for the user keys of a block considered for reuse.
    pub(super) block_keys: Vec<Vec<u8>>,
}

impl<'a, 's> Merger<'a, 's> {
    pub(super) fn new(
        c: &'a Compaction,
        ctx: &'a JobContext<'a>,
        down: &'s mut Sink,
        fast: &'s mut Sink,
        out: &'s mut JobOutput,
    ) -> Result<Self> {
        Ok(Merger {
            c,
            ctx,
            down,
            fast,
            push: None,
            out,
            router: ctx.hot.as_ref().map(HotRouter::new).transpose()?,
            promoted: 0,
            versions: VersionStream::new(ctx.smallest_snapshot, ctx.now),
            keep_on_fast: false,
            block_keys: Vec::new(),
        })
    }

    fn malformed(&self) -> Error {
        Error::corruption(
            self.ctx.env.dir(self.c.output_tier),
            0,
            "compaction input holds a malformed internal key",
        )
    }

    /// A tombstone every snapshot sees, with nothing deeper to hide, can go.
    pub(super) fn dead_tombstone(&self, k: &ParsedKey<'_>) -> bool {
        k.kind == ValueKind::Delete
            && k.seq <= self.ctx.smallest_snapshot
            && self
                .ctx
                .version
                .is_base_level_for_key(self.c.output_level, k.user_key)
    }

    /// Work due before the first version of a new user key: cut outputs (only between
    /// user keys), write promoted records that sort before it, decide its retention.
    /// Calling it twice for one key changes nothing.
    pub(super) fn start_user_key(&mut self, ukey: &[u8]) -> Result<()> {
        self.down.maybe_cut(self.ctx, ukey)?;
        self.fast.maybe_cut(self.ctx, ukey)?;
        self.write_promoted_before(Some(ukey))?;
        if let Some(r) = self.router.as_mut() {
            self.keep_on_fast = r.retain(ukey)?;
        }
        Ok(())
    }

    /// Writes the promoted records that sort before `bound` (all of them when `None`) to
    /// the fast outputs.
    fn write_promoted_before(&mut self, bound: Option<&[u8]>) -> Result<()> {
        if let Some(r) = self.router.as_mut() {
            for (k, rec) in r.promotable_before(bound)? {
                match rec.deadline {
                    None => self.fast.add(
                        self.ctx,
                        &make_internal_key(&k, rec.seq, ValueKind::Value),
                        &rec.value,
                    )?,
                    // Expired records are never promoted: the slow tier's copy is this
                    // compaction's input or deeper, where the filter handles it.
                    Some(d) if d <= self.ctx.now => continue,
                    Some(d) => self.fast.add(
                        self.ctx,
                        &make_internal_key(&k, rec.seq, ValueKind::Expiring),
                        &crate::expiry::encode_expiring(d, &rec.value),
                    )?,
                }
                self.promoted += (k.len() + rec.value.len()) as u64;
            }
        }
        Ok(())
    }

    /// The next entry of the merge, in internal-key order.
    /// An expired record is handled as the tombstone it reads as (`super::stream`), and
    /// a key whose newest version has expired is never retained on the fast tier.
    pub(super) fn add_entry(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey).ok_or_else(|| self.malformed())?;
        let step = self.versions.step(&parsed, value);
        if step.new_user_key {
            self.start_user_key(parsed.user_key)?;
            if step.expired {
                self.keep_on_fast = false;
            }
        }
        let tombstone;
        let (ikey, value, parsed) = if step.expired && !step.hidden {
            self.out.expired_removed += 1;
            tombstone = tombstone_for(&parsed);
            let as_deletion = ParsedKey {
                kind: ValueKind::Delete,
                ..parsed
            };
            (&tombstone[..], &b""[..], as_deletion)
        } else {
            (ikey, value, parsed)
        };
        if step.hidden || self.dead_tombstone(&parsed) {
            self.out.entries_dropped += 1;
        } else if self.keep_on_fast {
            self.fast.add(self.ctx, ikey, value)?;
        } else {
            let pushed = match self.push.as_deref_mut() {
                Some(p) => p.route(self.ctx, ikey, value)?,
                None => false,
            };
            if !pushed {
                self.down.add(self.ctx, ikey, value)?;
            }
        }
        Ok(())
    }

    /// Writes the remaining promoted records and closes the outputs.
    pub(super) fn finish(mut self) -> Result<()> {
        self.write_promoted_before(None)?;
        self.down.finish(self.ctx)?;
        self.fast.finish(self.ctx)?;
        self.out.promoted_bytes = self.promoted;
        self.out.retained_bytes = self.fast.bytes_in - self.promoted;
        Ok(())
    }
}
