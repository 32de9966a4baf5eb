//! The dirty-block span reads of one merge into semi-sorted tables, kept in flight
//! (`super::semi_plan::DirtyBlocks` decides what each span holds and when it starts).
//! A span read of a slow disk costs a full device latency (0.5 ms on `gp3-max`); read one
//! at a time, a merge that dirties thousands of blocks held a background thread for
//! seconds while L0 and flushes waited. Spans are read through the env's pipelined
//! reads (`ReadSession`: io_uring, or on this thread without a ring), whose device model
//! overlaps the latencies of reads in flight as a device queue does, so several spans
//! started together cost about one latency, not one each.
//!
//! Owns: the session, the spans started and not yet released, and their outcomes. A
//! failed read is kept and returned by the next [`SpanReads::wait`] (whatever span that
//! waits for), so any read error the merge sees fails the merge; a span still in flight
//! when the merge ends is dropped with the session (which reaps it first).

use crate::env::{IoCause, ReadSession};
use crate::error::{Error, Result};
use crate::sst::Table;
use bytes::Bytes;
use std::sync::Arc;

/// One span read: where it lies and, once read, its bytes.
struct Span {
    id: usize,
    offset: u64,
    /// The last block (an index into the merge's block list) the span holds: once the
    /// merge is past it, the span is released.
    last_block: usize,
    /// `None` while the read is in flight.
    data: Option<Bytes>,
}

/// What the span reads of one merge did (tests, logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct SpanReadStats {
    /// Span reads started.
    pub(super) started: u64,
    /// Times the merge had to wait for a span read to come back.
    pub(super) waits: u64,
    /// Microseconds the merge waited for span reads, in all.
    pub(super) wait_micros: u64,
    /// Waits for a span read started after the last such wait ended (the first wait
    /// included): each may last up to one device latency. Any other wait is for a span
    /// that was in flight during that wait, so it only waits out the rest of a latency
    /// already waited for. Counted from the order of starts and waits, not from time:
    /// tests check how many latencies the merge waits one after another with it.
    pub(super) rounds: u64,
    /// The most span reads in flight at once.
    pub(super) most_in_flight: usize,
}

/// The span reads in flight (or read and not yet passed) of one merge.
pub(super) struct SpanReads {
    io: ReadSession<Arc<Table>>,
    /// Spans started and not released, in start order.
    spans: Vec<Span>,
    next_id: usize,
    /// Spans from this id on were started after the last wait counted in
    /// [`SpanReadStats::rounds`] ended.
    fresh_from: usize,
    /// The first read that failed, for the next wait.
    failed: Option<Error>,
    out: Vec<(usize, Result<Vec<u8>>)>,
    stats: SpanReadStats,
}

impl SpanReads {
    pub(super) fn new() -> SpanReads {
        SpanReads {
            io: ReadSession::new(),
            spans: Vec::new(),
            next_id: 0,
            fresh_from: 0,
            failed: None,
            out: Vec::new(),
            stats: SpanReadStats::default(),
        }
    }

    /// What the reads did so far.
    pub(super) fn stats(&self) -> SpanReadStats {
        self.stats
    }

    /// Spans held: in flight, or read and not yet passed.
    pub(super) fn held(&self) -> usize {
        self.spans.len()
    }

    /// Starts reading `len` bytes at `offset` of `table`, holding blocks up to
    /// `last_block`; returns the span's id. The read goes to the disk with the next
    /// [`SpanReads::wait`] (or at once without a ring).
    pub(super) fn start(
        &mut self,
        table: Arc<Table>,
        offset: u64,
        len: usize,
        last_block: usize,
    ) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        self.io.start(table, offset, len, IoCause::Compaction, id);
        self.spans.push(Span {
            id,
            offset,
            last_block,
            data: None,
        });
        self.stats.started += 1;
        let reading = self.spans.iter().filter(|s| s.data.is_none()).count();
        self.stats.most_in_flight = self.stats.most_in_flight.max(reading);
        id
    }

    /// Releases the spans read whose blocks all lie before block `next` (the merge is
    /// past them); a span still in flight is released when it comes back.
    pub(super) fn release_before(&mut self, next: usize) {
        self.spans
            .retain(|s| s.data.is_none() || s.last_block >= next);
    }

    /// Waits until span `id` is read; returns its file offset and bytes. Spans read
    /// whose blocks all lie before block `at` (the one the merge needs now) are
    /// released. `Ok(None)`: no such span is held (the caller reads the block on its
    /// own). Fails with the first read that failed, this span's or another's.
    pub(super) fn wait(&mut self, id: usize, at: usize) -> Result<Option<(u64, Bytes)>> {
        let mut waited: Option<std::time::Instant> = None;
        let r = self.wait_inner(id, at, &mut waited);
        if let Some(since) = waited {
            self.stats.waits += 1;
            self.stats.wait_micros += since.elapsed().as_micros() as u64;
            if id >= self.fresh_from {
                self.stats.rounds += 1;
                self.fresh_from = self.next_id;
            }
        }
        r
    }

    fn wait_inner(
        &mut self,
        id: usize,
        at: usize,
        waited: &mut Option<std::time::Instant>,
    ) -> Result<Option<(u64, Bytes)>> {
        loop {
            // Submits what was started since the last turn; delivers what is done.
            self.io.turn(waited.is_some(), &mut self.out);
            for (tag, data) in self.out.drain(..) {
                let Some(at) = self.spans.iter().position(|s| s.id == tag) else {
                    continue;
                };
                match data {
                    Ok(d) => self.spans[at].data = Some(Bytes::from(d)),
                    Err(e) => {
                        self.spans.remove(at);
                        self.failed.get_or_insert(e);
                    }
                }
            }
            self.release_before(at);
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            match self.spans.iter().find(|s| s.id == id) {
                None => return Ok(None),
                Some(Span {
                    offset,
                    data: Some(d),
                    ..
                }) => return Ok(Some((*offset, d.clone()))),
                Some(_) if self.io.in_flight() == 0 => {
                    // Cannot happen (a held span in flight is in the session): the caller
                    // reads it on its own rather than wait for nothing.
                    self.spans.retain(|s| s.id != id);
                    return Ok(None);
                }
                Some(_) => {
                    waited.get_or_insert_with(std::time::Instant::now);
                }
            }
        }
    }
}
