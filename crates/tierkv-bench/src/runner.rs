//! The runner: opens each system's store (tierkv's or RocksDB's), loads it, replays the
//! operation plan with client threads, samples counters into a timeline, and measures
//! latencies and the final 10% of the run. Owns the order of events of a benchmark and is
//! the top of the bench's modules: what was measured is [`crate::results`], how it is
//! reported [`crate::report`]; nothing below calls back into the runner.

use hdrhistogram::Histogram;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::budget::MemoryUse;
use crate::error::{BenchError, Result};
use crate::keyfile::KeyFiles;
use crate::report;
use crate::results::{BenchResults, PhaseResult, RunMeasure, SystemResult, TimelinePoint};
use crate::scale::Config;
use crate::store::{Counters, GroupWrite, Store, StreamGet, TierDirs, TierkvStore};
use crate::systems::System;
use crate::trace::Trace;
use crate::workload::{Op, OpKind, OpPlan, ValueSource};

/// Records per write batch in the load phase.
const LOAD_BATCH: usize = 128;
/// How often the progress bar moves.
const TICK: Duration = Duration::from_millis(100);

/// Runs every configured system and writes the reports. Returns what was written.
pub fn run(cfg: &Config) -> Result<BenchResults> {
    let started = Instant::now();
    std::fs::create_dir_all(&cfg.out).map_err(|e| BenchError::io(&cfg.out, e))?;
    let mut cfg = cfg.clone();
    let plan = build_plan(&mut cfg)?;
    let cfg = &cfg;
    let values = ValueSource::new(cfg.seed, plan.max_value_size() as usize);
    let ui = Ui::new(cfg.progress);
    ui.say(format!(
        "tierkv bench: {} records loaded ({}), then {} operations ({}) with {} threads; \
         fast disk budget {}, slow disk {}; output in {}",
        plan.records(),
        report::bytes(cfg.loaded_bytes),
        plan.total_ops(),
        match &cfg.trace {
            Some(_) => cfg.workload_label(),
            None => format!("{} / {}", cfg.workload_label(), cfg.keys_label()),
        },
        cfg.threads,
        report::bytes(cfg.fd_budget),
        cfg.sd_profile,
        cfg.out.display()
    ));

    // Loaded stores shared by several systems, and how many systems still need each.
    let mut templates: HashMap<&'static str, (TierDirs, f64)> = HashMap::new();
    let mut users: HashMap<&'static str, usize> = HashMap::new();
    for s in &cfg.systems {
        if let Some(class) = s.load_class() {
            *users.entry(class).or_default() += 1;
        }
    }

    let mut results = Vec::new();
    for &system in &cfg.systems {
        let dirs = TierDirs::for_name(cfg, &system.name());
        dirs.remove()?;
        let load_seconds = match system.load_class() {
            Some(class) => {
                if !templates.contains_key(class) {
                    let tdirs = TierDirs::for_name(cfg, &format!(".load-{class}"));
                    tdirs.remove()?;
                    let label = report::load_label(cfg, system);
                    let secs = load(cfg, &plan, &values, system, &tdirs, &ui, &label)?;
                    templates.insert(class, (tdirs, secs));
                }
                let left = users.get_mut(class).map_or(0, |n| {
                    *n -= 1;
                    *n
                });
                let (tdirs, secs) = templates[class].clone();
                dirs.take_from(&tdirs, left == 0)?;
                if left == 0 {
                    tdirs.remove()?;
                    templates.remove(class);
                }
                secs
            }
            None => {
                let label = report::load_label(cfg, system);
                load(cfg, &plan, &values, system, &dirs, &ui, &label)?
            }
        };
        // The peak resident size from here to the close is this system's: the previous
        // system's freed memory goes back to the kernel first.
        crate::rss::release_free_memory();
        let peak_reset = crate::rss::reset_peak();
        let rss_before = crate::rss::read();
        let store = open_store(cfg, system, &dirs, false)?;
        let outcome = run_phase(cfg, &plan, &values, store.as_ref(), system, &ui);
        let engine_stats = store.engine_stats();
        let closed = store.close();
        let rss_after = crate::rss::read().filter(|_| peak_reset);
        let mut res = outcome?;
        closed?;
        res.load_seconds = load_seconds;
        let engine_peak = res
            .timeline
            .iter()
            .filter_map(|p| p.engine_memory_bytes)
            .max();
        let anon_peak = res.timeline.iter().filter_map(|p| p.rss_anon_bytes).max();
        res.memory = Some(MemoryUse::new(
            cfg.memory_budget.filter(|_| !system.is_rocksdb()),
            rss_before,
            rss_after,
            anon_peak,
            engine_peak,
        ));
        res.set_engine_stats(engine_stats);
        ui.say(report::summary_line(cfg, &res));
        results.push(res);
        if !cfg.keep_data {
            dirs.remove()?;
        }
    }
    for (tdirs, _) in templates.values() {
        tdirs.remove()?;
    }
    let results = BenchResults::new(cfg, results, started.elapsed().as_secs_f64());
    let table = report::write_all(&results, &cfg.out)?;
    ui.clear();
    println!("{table}");
    Ok(results)
}

/// Opens the store of any system: tierkv's, or RocksDB's behind the `rocksdb-peer` feature.
pub fn open_store(
    cfg: &Config,
    system: System,
    dirs: &TierDirs,
    loading: bool,
) -> Result<Box<dyn Store>> {
    if system.is_rocksdb() {
        #[cfg(feature = "rocksdb-peer")]
        {
            return Ok(Box::new(crate::rocksdb_peer::RocksStore::open(
                cfg, system, dirs,
            )?));
        }
        #[cfg(not(feature = "rocksdb-peer"))]
        return Err(BenchError::InvalidArgument(format!(
            "{} needs the rocksdb-peer feature",
            system.name()
        )));
    }
    Ok(Box::new(TierkvStore::open(cfg, system, dirs, loading)?))
}

/// The operation plan; for a trace or key files also fills in the record and operation
/// counts they imply.
pub(crate) fn build_plan(cfg: &mut Config) -> Result<OpPlan> {
    let value_size = u32::try_from(cfg.value_size)
        .map_err(|_| BenchError::InvalidArgument("--record-size is too large".into()))?;
    if let Some((load, run)) = &cfg.key_files {
        let keys = KeyFiles::read(load, run)?;
        cfg.records = keys.load.count();
        cfg.loaded_bytes = cfg.records.saturating_mul(cfg.record_size);
        let ops = (cfg.ops != u64::MAX).then_some(cfg.ops);
        let plan = OpPlan::key_files(Arc::new(keys), cfg.workload, ops, value_size, cfg.seed)?;
        cfg.ops = plan.total_ops();
        return Ok(plan);
    }
    match &cfg.trace {
        Some(path) => {
            let trace = Trace::read_with_load(cfg.trace_load.as_deref(), path, Some(cfg.ops))?;
            cfg.records = trace.keys.len() as u64;
            cfg.loaded_bytes = trace.load_bytes();
            let plan = OpPlan::trace(Arc::new(trace), Some(cfg.ops), cfg.seed);
            cfg.ops = plan.total_ops();
            Ok(plan)
        }
        None => Ok(OpPlan::synthetic(
            cfg.workload,
            &cfg.distribution,
            cfg.records,
            cfg.ops,
            value_size,
            cfg.seed,
        )?
        .with_key_size(cfg.key_size)),
    }
}

/// Progress bars, or plain lines when they are off or stderr is not a terminal.
struct Ui {
    multi: Option<MultiProgress>,
}

impl Ui {
    fn new(progress: bool) -> Ui {
        let multi = (progress && std::io::stderr().is_terminal())
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Ui { multi }
    }

    fn say(&self, msg: String) {
        match &self.multi {
            Some(m) => {
                if m.println(&msg).is_err() {
                    eprintln!("{msg}");
                }
            }
            None => eprintln!("{msg}"),
        }
    }

    fn bar(&self, len: u64, prefix: String) -> ProgressBar {
        match &self.multi {
            Some(m) => {
                let pb = m.add(ProgressBar::new(len));
                pb.set_style(
                    ProgressStyle::with_template(
                        "{prefix:<24} [{elapsed_precise}] {bar:28.cyan/blue} {percent:>3}% {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                pb.set_prefix(prefix);
                pb
            }
            None => ProgressBar::hidden(),
        }
    }

    fn clear(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }
}

/// Loads the plan's records into a fresh store of `system` at `dirs`; returns the seconds
/// taken (including the wait for background work to settle).
fn load(
    cfg: &Config,
    plan: &OpPlan,
    values: &ValueSource,
    system: System,
    dirs: &TierDirs,
    ui: &Ui,
    label: &str,
) -> Result<f64> {
    let start = Instant::now();
    let store = open_store(cfg, system, dirs, true)?;
    let n = plan.records();
    let pb = ui.bar(n, format!("loading ({label})"));
    load_records(store.as_ref(), plan, values, &pb)?;
    pb.set_message("settling (flush and compactions)");
    store.settle()?;
    store.close()?;
    let secs = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    ui.say(format!("{label}: loaded {n} records in {secs:.1} s"));
    Ok(secs)
}

/// Writes every record of the plan's load phase, in batches.
fn load_records(
    store: &dyn Store,
    plan: &OpPlan,
    values: &ValueSource,
    pb: &ProgressBar,
) -> Result<()> {
    let n = plan.records();
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(LOAD_BATCH);
    let mut last_tick = Instant::now();
    for (id, key) in (0..n).zip(plan.load_keys()?) {
        let key = key?;
        let v = values.value(id, u64::MAX, plan.load_value_size(id) as usize);
        batch.push((key, v.to_vec()));
        if batch.len() == LOAD_BATCH || id + 1 == n {
            store.write_batch(&batch)?;
            batch.clear();
            if last_tick.elapsed() >= TICK {
                pb.set_position(id + 1);
                last_tick = Instant::now();
            }
        }
    }
    pb.set_position(n);
    Ok(())
}

/// Per-thread tallies.
struct WorkerOut {
    hist: Histogram<u64>,
    /// Latency by kind of operation, in [`OpKind::ALL`]'s order.
    by_kind: Vec<Histogram<u64>>,
    /// Latency of one-at-a-time gets that read no slow-tier file (`[0]`) and of those that
    /// did (`[1]`), by tierkv's per-thread read counts (other engines' gets all land in
    /// `[0]`; batched gets, which other threads may read for, in neither).
    gets_by_tier: [Histogram<u64>; 2],
    reads_found: u64,
    reads_missing: u64,
    writes: u64,
}

/// State shared by the client threads of one run.
struct Shared<'a> {
    plan: &'a OpPlan,
    values: &'a ValueSource,
    store: &'a dyn Store,
    next_chunk: AtomicU64,
    done: AtomicU64,
    abort: AtomicBool,
    /// Completed operations at which the final 10% begins.
    mark_ops: u64,
    mark: OnceLock<(Instant, Counters)>,
    /// When the last operation completed (the sampler may notice a little later).
    end: OnceLock<Instant>,
    total: u64,
    /// Completed-operation counts at which a phase starts, reaches its middle or ends, and
    /// when that happened, with the counters then.
    phase_marks: Vec<(u64, OnceLock<(Instant, Counters)>)>,
}

#[allow(
    clippy::expect_used,
    reason = "constant arguments hdrhistogram accepts; no input reaches this"
)]
fn new_hist() -> Histogram<u64> {
    // Nanoseconds up to an hour at 3 significant digits; the bounds are constants, valid.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).expect("3 significant digits are valid"))
}

impl<'a> Shared<'a> {
    /// The state of a run of `plan` on `store` whose final 10% begins after `mark_ops`
    /// operations, with marks at each phase's start, middle and end (`bounds`); the marks
    /// due before the first operation are taken now.
    fn new(
        plan: &'a OpPlan,
        values: &'a ValueSource,
        store: &'a dyn Store,
        mark_ops: u64,
        bounds: &[(u64, u64, u64)],
    ) -> Self {
        let mut mark_at: Vec<u64> = bounds.iter().flat_map(|&(a, m, e)| [a, m, e]).collect();
        mark_at.sort_unstable();
        mark_at.dedup();
        let sh = Shared {
            plan,
            values,
            store,
            next_chunk: AtomicU64::new(0),
            done: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            mark_ops,
            mark: OnceLock::new(),
            end: OnceLock::new(),
            total: plan.total_ops(),
            phase_marks: mark_at.iter().map(|&a| (a, OnceLock::new())).collect(),
        };
        if let Some((_, when)) = sh.phase_marks.iter().find(|(a, _)| *a == 0) {
            let _ = when.set((Instant::now(), store.counters()));
        }
        sh
    }

    /// Each phase's throughput and disk reads per operation, over the whole phase and its
    /// second half, from the marks taken at its start, middle and end (`bounds`).
    fn phase_results(&self, bounds: &[(u64, u64, u64)]) -> Vec<PhaseResult> {
        let at = |n: u64| {
            self.phase_marks
                .iter()
                .find(|(a, _)| *a == n)
                .and_then(|(_, w)| w.get())
        };
        let rate = |from: u64, to: u64| match (at(from), at(to)) {
            (Some((t1, _)), Some((t2, _))) if t2 > t1 => {
                (to - from) as f64 / (*t2 - *t1).as_secs_f64()
            }
            _ => 0.0,
        };
        let ios = |from: u64, to: u64| {
            let ((_, c1), (_, c2)) = (at(from)?, at(to)?);
            let n = c2.user_read_ios?.checked_sub(c1.user_read_ios?)?;
            (to > from).then(|| n as f64 / (to - from) as f64)
        };
        let phase = |(i, &(a, m, e)): (usize, &(u64, u64, u64))| PhaseResult {
            phase: i,
            ops: e - a,
            ops_per_sec: rate(a, e),
            second_half_ops_per_sec: rate(m, e),
            read_ios_per_op: ios(a, e),
            second_half_read_ios_per_op: ios(m, e),
            ops_to_climb: None,
            fd_hit_mid: None,
            fd_hit_end: None,
        };
        bounds.iter().enumerate().map(phase).collect()
    }

    /// Counts one completed operation and takes the snapshots due at its count.
    fn complete_one(&self) {
        let done = self.done.fetch_add(1, Relaxed) + 1;
        if done == self.mark_ops {
            let _ = self.mark.set((Instant::now(), self.store.counters()));
        }
        if done == self.total {
            let _ = self.end.set(Instant::now());
        }
        for (at, when) in &self.phase_marks {
            if done == *at {
                let _ = when.set((Instant::now(), self.store.counters()));
            }
        }
    }
}

impl WorkerOut {
    fn new() -> Self {
        WorkerOut {
            hist: new_hist(),
            by_kind: OpKind::ALL.iter().map(|_| new_hist()).collect(),
            gets_by_tier: [new_hist(), new_hist()],
            reads_found: 0,
            reads_missing: 0,
            writes: 0,
        }
    }

    /// Adds another thread's tallies.
    fn add(&mut self, other: &WorkerOut) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.hist.add(&other.hist);
        for (mine, theirs) in self.by_kind.iter_mut().zip(&other.by_kind) {
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self.gets_by_tier.iter_mut().zip(&other.gets_by_tier) {
            let _ = mine.add(theirs);
        }
        self.reads_found += other.reads_found;
        self.reads_missing += other.reads_missing;
        self.writes += other.writes;
    }

    /// Counts the latency of an operation of `kind` that started at `since`.
    fn record(&mut self, kind: OpKind, since: Instant) {
        let ns = (since.elapsed().as_nanos() as u64).max(1);
        self.hist.saturating_record(ns);
        if let Some(h) = OpKind::ALL
            .iter()
            .position(|k| *k == kind)
            .and_then(|i| self.by_kind.get_mut(i))
        {
            h.saturating_record(ns);
        }
    }

    fn tally(&mut self, found: Option<bool>) {
        match found {
            Some(true) => self.reads_found += 1,
            Some(false) => self.reads_missing += 1,
            None => {}
        }
    }
}

/// Runs one operation of the plan and counts it (latency from now to its end).
fn run_one(sh: &Shared, op: &Op, key: &[u8], out: &mut WorkerOut) -> Result<()> {
    run_one_since(sh, op, key, out, Instant::now())
}

/// [`run_one`], its latency counted from `t` (when it entered a stream, for an operation
/// whose read went ahead).
fn run_one_since(sh: &Shared, op: &Op, key: &[u8], out: &mut WorkerOut, t: Instant) -> Result<()> {
    let found = match op.kind {
        OpKind::Read => {
            let slow_reads = tierkv::env::thread_slow_read_count();
            let found = sh.store.get(key)?;
            let tier = usize::from(tierkv::env::thread_slow_read_count() != slow_reads);
            out.gets_by_tier[tier].saturating_record((t.elapsed().as_nanos() as u64).max(1));
            Some(found)
        }
        OpKind::Update | OpKind::Insert => {
            let value = sh.values.value(op.id, op.index, op.len as usize);
            if op.ttl_secs > 0 {
                sh.store.put_with_ttl(key, value, op.ttl_secs)?;
            } else {
                sh.store.put(key, value)?;
            }
            None
        }
        OpKind::Delete => {
            sh.store.delete(key)?;
            None
        }
        OpKind::Scan => {
            sh.store.scan(key, op.len as usize)?;
            None
        }
        OpKind::ReadModifyWrite => {
            let len = sh.plan.load_value_size(op.id) as usize;
            Some(
                sh.store
                    .read_modify_write(key, sh.values.value(op.id, op.index, len))?,
            )
        }
    };
    out.record(op.kind, t);
    if !matches!(op.kind, OpKind::Read | OpKind::Scan) {
        out.writes += 1;
    }
    out.tally(found);
    sh.complete_one();
    Ok(())
}

/// One client thread: takes chunks of the plan until none is left and runs their
/// operations in order. With `--batch N` above 1, see [`stream_worker`].
fn worker(sh: &Shared, batch: usize) -> Result<WorkerOut> {
    if batch > 1 {
        return stream_worker(sh, batch);
    }
    let mut out = WorkerOut::new();
    let mut ops = Vec::new();
    let mut key = Vec::new();
    let chunks = sh.plan.chunks();
    while !sh.abort.load(Relaxed) {
        let c = sh.next_chunk.fetch_add(1, Relaxed);
        if c >= chunks {
            break;
        }
        sh.plan.chunk_ops(c, &mut ops);
        for op in &ops {
            sh.plan.key(op.id, &mut key);
            run_one(sh, op, &key, &mut out)?;
        }
    }
    Ok(out)
}

/// A client thread with `--batch N`: its gets go through the store's streaming read
/// ([`Store::get_stream`]) with up to N in flight, its plain writes go to a group of up to
/// N committed together ([`GroupedWrites`]), and its other operations run inline as they
/// come. A write of a key with no get in flight goes ahead (it cannot change what those
/// gets answer, as F2's driver keeps reads pending while upserts go ahead), and so does a
/// write of a key in flight when the store reads each get at its entry
/// ([`Store::stream_reads_at_entry`]: the get answers the state before the write); with
/// any other store such a write, and always a scan, waits until the stream drained. A
/// read-modify-write (YCSB F) enters the stream too: its key is read ahead (bringing the
/// record's block into memory), and when that read is answered its write joins the group
/// conditioned on the key being unchanged since the read (with a store that has read
/// tokens), or the atomic read-modify-write runs; until then a get or write of its key
/// waits for the drain. So every get answers what it would have answered in order, and
/// every other operation sees the effects of the thread's earlier ones. A streamed
/// operation's latency runs from its entry to its end (a grouped write's to its group's
/// commit).
fn stream_worker(sh: &Shared, window: usize) -> Result<WorkerOut> {
    let stream = Stream::new(sh, window);
    let mut cursor = Cursor::default();
    loop {
        if let Some((op, key)) = cursor.held.take() {
            run_one(sh, &op, &key, &mut stream.out.borrow_mut())?;
        }
        cursor.exhausted = false;
        sh.store.get_stream(
            window,
            &mut || stream.next_get(&mut cursor),
            &mut |g, found| stream.answered(g, found),
        );
        if let Some(e) = stream.failed.borrow_mut().take() {
            return Err(e);
        }
        // Read-modify-writes answered while the stream drained.
        stream
            .grouped
            .borrow_mut()
            .commit(sh, &mut stream.out.borrow_mut())?;
        if cursor.exhausted && cursor.held.is_none() {
            break;
        }
    }
    Ok(stream.out.into_inner())
}

/// Where a [`stream_worker`] is in the plan.
#[derive(Default)]
struct Cursor {
    /// The operations of the chunk being run, and the next one's index.
    ops: Vec<Op>,
    pos: usize,
    /// An operation that waits for the stream to drain.
    held: Option<(Op, Vec<u8>)>,
    /// No chunk is left (or the run aborts): this stream is the last.
    exhausted: bool,
}

/// The state of a [`stream_worker`] its stream's two callbacks share: the one that feeds
/// gets in ([`Stream::next_get`]) and the one that takes their answers
/// ([`Stream::answered`]).
struct Stream<'s> {
    sh: &'s Shared<'s>,
    window: usize,
    out: RefCell<WorkerOut>,
    /// Keys of the gets in flight (a key may be in flight more than once).
    in_flight: RefCell<KeyCounts>,
    /// Keys of the read-modify-writes in flight (a subset of `in_flight`'s): a get of one
    /// waits too, as it must see the write.
    rmw_in_flight: RefCell<KeyCounts>,
    failed: RefCell<Option<BenchError>>,
    reads_at_entry: bool,
    /// Writes not yet committed, committed together.
    grouped: RefCell<GroupedWrites>,
}

impl<'s> Stream<'s> {
    fn new(sh: &'s Shared<'s>, window: usize) -> Self {
        Stream {
            sh,
            window,
            out: RefCell::new(WorkerOut::new()),
            in_flight: Default::default(),
            rmw_in_flight: Default::default(),
            failed: Default::default(),
            reads_at_entry: sh.store.stream_reads_at_entry(),
            grouped: Default::default(),
        }
    }

    /// The next operation of the plan, taking a new chunk when the cursor's is done;
    /// `None` once none is left (after committing the group: the stream drains next, and
    /// its writes need not wait for that).
    fn next_op(&self, cur: &mut Cursor) -> Option<Op> {
        let sh = self.sh;
        while cur.pos == cur.ops.len() {
            let c = sh.next_chunk.fetch_add(1, Relaxed);
            if sh.abort.load(Relaxed) || c >= sh.plan.chunks() {
                cur.exhausted = true;
                if let Err(e) = self.commit() {
                    *self.failed.borrow_mut() = Some(e);
                }
                return None;
            }
            sh.plan.chunk_ops(c, &mut cur.ops);
            cur.pos = 0;
        }
        cur.pos += 1;
        Some(cur.ops[cur.pos - 1])
    }

    /// The next get for the stream: operations before it that join the write group or
    /// run inline are done on the way. `None` ends the stream: nothing is left, an
    /// operation waits for the drain, or one failed.
    fn next_get(&self, cur: &mut Cursor) -> Option<StreamGet> {
        let sh = self.sh;
        while self.failed.borrow().is_none() {
            let op = self.next_op(cur)?;
            let mut key = Vec::new();
            sh.plan.key(op.id, &mut key);
            let waits_for_drain = match op.kind {
                OpKind::Scan => true,
                OpKind::Read => self.rmw_in_flight.borrow().contains(&key),
                _ if self.reads_at_entry => self.rmw_in_flight.borrow().contains(&key),
                _ => self.in_flight.borrow().contains(&key),
            };
            let joins = !waits_for_drain && GroupedWrites::takes(&op);
            {
                let mut grouped = self.grouped.borrow_mut();
                // An operation of a key written, a scan or an operation that waits runs
                // after the writes before it; a full or old group commits before anything
                // else.
                let commit = grouped.is_due(self.window)
                    || (!joins && (waits_for_drain || op.kind == OpKind::Scan))
                    || grouped.must_commit_before(&key, joins);
                if commit {
                    if let Err(e) = grouped.commit(sh, &mut self.out.borrow_mut()) {
                        *self.failed.borrow_mut() = Some(e);
                        return None;
                    }
                }
                if joins {
                    grouped.add(sh, op, key);
                    continue;
                }
            }
            let streamed = matches!(op.kind, OpKind::Read | OpKind::ReadModifyWrite);
            if waits_for_drain {
                if streamed {
                    // Streamed by the next stream, once this one drained.
                    cur.pos -= 1;
                } else {
                    cur.held = Some((op, key));
                }
                return None;
            }
            if streamed {
                return Some(self.enter(op, key));
            }
            if let Err(e) = run_one(sh, &op, &key, &mut self.out.borrow_mut()) {
                *self.failed.borrow_mut() = Some(e);
                return None;
            }
        }
        None
    }

    /// A get (or a read-modify-write's read) entering the stream.
    fn enter(&self, op: Op, key: Vec<u8>) -> StreamGet {
        self.in_flight.borrow_mut().enter(&key);
        let then = (op.kind == OpKind::ReadModifyWrite).then_some(op);
        if then.is_some() {
            self.rmw_in_flight.borrow_mut().enter(&key);
        }
        // Taken before the read enters, so the write can tell whether the key changed
        // after the read.
        let token = then.and_then(|_| self.sh.store.read_token());
        StreamGet {
            key,
            entered: Instant::now(),
            then,
            token,
        }
    }

    /// A get's answer: counted, or, for a read-modify-write, its write run or grouped.
    fn answered(&self, g: StreamGet, found: Result<bool>) {
        let sh = self.sh;
        // The read-modify-write runs before its key leaves the in-flight sets, while
        // every later operation of its key is still held back.
        let found = match (g.then, g.token, found) {
            // Its write joins the group; counted when the group commits.
            (Some(op), Some(token), Ok(found)) => {
                self.grouped.borrow_mut().add_rmw(sh, &g, &op, token, found);
                Ok(None)
            }
            (Some(op), None, Ok(_)) => {
                let mut out = self.out.borrow_mut();
                run_one_since(sh, &op, &g.key, &mut out, g.entered).map(|()| None)
            }
            (_, _, found) => found.map(Some),
        };
        self.in_flight.borrow_mut().leave(&g.key);
        if g.then.is_some() {
            self.rmw_in_flight.borrow_mut().leave(&g.key);
        }
        match found {
            // Recorded by `run_one_since`.
            Ok(None) => {}
            Ok(Some(found)) => {
                let mut out = self.out.borrow_mut();
                out.record(OpKind::Read, g.entered);
                out.tally(Some(found));
                sh.complete_one();
            }
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
            }
        }
    }

    fn commit(&self) -> Result<()> {
        self.grouped
            .borrow_mut()
            .commit(self.sh, &mut self.out.borrow_mut())
    }
}

/// A stream's writes, held back so that several go to the store together
/// ([`Store::write_group`]: one group commit, one WAL record, instead of one each), as a
/// client pipelining its writes gets: plain writes (updates and inserts without a TTL),
/// and the writes of read-modify-writes whose read was answered (each applies only if its
/// key was not written since its read; one that declines runs again as a plain
/// read-modify-write). A write counts as done (its latency ends) when its group commits.
/// The group commits, in order, before any later operation of a key it writes runs (so it
/// sees the writes), before a scan or an operation that waits for the drain, when
/// `window` writes wait, when the oldest has waited [`GROUPED_WRITE_WAIT`], and before
/// the stream drains. Operations of other keys go ahead meanwhile: what they answer does
/// not depend on the writes.
#[derive(Default)]
struct GroupedWrites {
    entries: Vec<GroupWrite>,
    writes: Vec<WaitingWrite>,
    /// The keys written by plain writes, and by read-modify-writes.
    keys: KeyCounts,
    rmw_keys: KeyCounts,
}

/// A write of a group, in order: when it entered, its kind and, for a read-modify-write,
/// its entry and whether its read found the key.
type WaitingWrite = (Instant, OpKind, Option<(usize, bool)>);

/// The longest a grouped write waits for others to join it.
const GROUPED_WRITE_WAIT: std::time::Duration = std::time::Duration::from_micros(200);

impl GroupedWrites {
    /// Whether `op` may join a group as a plain write. (A key written twice in one group
    /// is fine: the group applies in order, and no other operation of the key runs until
    /// it committed.)
    fn takes(op: &Op) -> bool {
        matches!(op.kind, OpKind::Update | OpKind::Insert) && op.ttl_secs == 0
    }

    /// Whether an operation of `key` must wait for the group to commit: `joins` (a plain
    /// write joining the group) need not, unless a read-modify-write of the group writes
    /// the key (it might decline and run again, after the plain write).
    fn must_commit_before(&self, key: &[u8], joins: bool) -> bool {
        self.rmw_keys.contains(key) || (!joins && self.keys.contains(key))
    }

    /// Whether the group must commit before it takes another write: `window` writes wait,
    /// or the oldest has waited [`GROUPED_WRITE_WAIT`].
    fn is_due(&self, window: usize) -> bool {
        self.writes.len() >= window
            || self
                .writes
                .first()
                .is_some_and(|(t, _, _)| t.elapsed() >= GROUPED_WRITE_WAIT)
    }

    fn add(&mut self, sh: &Shared, op: Op, key: Vec<u8>) {
        let value = sh.values.value(op.id, op.index, op.len as usize).to_vec();
        self.keys.enter(&key);
        match self.entries.last_mut() {
            Some(GroupWrite::Records(records)) => records.push((key, value)),
            _ => self.entries.push(GroupWrite::Records(vec![(key, value)])),
        }
        self.writes.push((Instant::now(), op.kind, None));
    }

    /// A read-modify-write whose read (taken after `token`) answered `found`.
    fn add_rmw(&mut self, sh: &Shared, g: &StreamGet, op: &Op, token: u64, found: bool) {
        let len = sh.plan.load_value_size(op.id) as usize;
        let value = sh.values.value(op.id, op.index, len).to_vec();
        self.rmw_keys.enter(&g.key);
        self.writes.push((
            g.entered,
            OpKind::ReadModifyWrite,
            Some((self.entries.len(), found)),
        ));
        self.entries.push(GroupWrite::IfUnchanged {
            key: g.key.clone(),
            value,
            token,
        });
    }

    /// Writes the group and counts each of its writes.
    fn commit(&mut self, sh: &Shared, out: &mut WorkerOut) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let applied = sh.store.write_group(&self.entries)?;
        if applied.len() != self.entries.len() {
            return Err(BenchError::engine(
                "write group",
                format!(
                    "{} outcomes for {} writes",
                    applied.len(),
                    self.entries.len()
                ),
            ));
        }
        for (entered, kind, rmw) in self.writes.drain(..) {
            let found =
                match rmw.map(|(entry, found)| (&self.entries[entry], applied[entry], found)) {
                    None => None,
                    Some((_, true, found)) => Some(found),
                    // Its key changed since the read (another thread wrote it): read and write
                    // again, atomically.
                    Some((GroupWrite::IfUnchanged { key, value, .. }, false, _)) => {
                        Some(sh.store.read_modify_write(key, value)?)
                    }
                    // (A read-modify-write's entry is always conditional.)
                    Some((GroupWrite::Records(_), false, _)) => None,
                };
            out.record(kind, entered);
            out.writes += 1;
            out.tally(found);
            sh.complete_one();
        }
        self.entries.clear();
        self.keys.clear();
        self.rmw_keys.clear();
        Ok(())
    }
}

/// Keys counted by a 64-bit hash of their bytes (a stream's keys in flight, a write
/// group's keys): the harness asks these once or twice per operation, so they allocate
/// nothing and hash cheaply (no key copy, no SipHash), keeping the harness's own CPU per
/// operation out of what the bench measures. Two keys whose hashes collide count as one
/// key: an operation then waits for a drain, or a group commits, earlier than it had to,
/// never later, so every operation still answers what it would have answered in order.
#[derive(Default)]
struct KeyCounts(HashMap<u64, usize, std::hash::BuildHasherDefault<HashedKey>>);

impl KeyCounts {
    /// Counts one more operation of `key`.
    fn enter(&mut self, key: &[u8]) {
        *self.0.entry(key_hash(key)).or_insert(0) += 1;
    }

    /// Counts one operation of `key` fewer.
    fn leave(&mut self, key: &[u8]) {
        let h = key_hash(key);
        if let Some(n) = self.0.get_mut(&h) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&h);
            }
        }
    }

    /// Whether an operation of `key` (or of a key with the same hash) is counted.
    fn contains(&self, key: &[u8]) -> bool {
        self.0.contains_key(&key_hash(key))
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// A 64-bit hash of a key: 8-byte words folded FxHash-style, then the SplitMix64
/// finalizer so every bit of the result depends on every input bit (the hash table picks
/// buckets from the low bits and tags from the high ones).
fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hasher of [`KeyCounts`]' table: its keys are already hashes ([`key_hash`]), so
/// it passes them through.
#[derive(Default)]
struct HashedKey(u64);

impl std::hash::Hasher for HashedKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
    // Only `u64`s are hashed here; any other input still hashes, just less well.
    fn write(&mut self, bytes: &[u8]) {
        self.0 = key_hash(bytes);
    }
}

/// Each phase's start, middle and end, by completed operations.
fn phase_bounds(plan: &OpPlan) -> Vec<(u64, u64, u64)> {
    let mut bounds = Vec::new();
    let mut start = 0u64;
    for &end in plan.phase_ends() {
        bounds.push((start, start + (end - start) / 2, end));
        start = end;
    }
    bounds
}

/// Runs the plan against one open store.
fn run_phase(
    cfg: &Config,
    plan: &OpPlan,
    values: &ValueSource,
    store: &dyn Store,
    system: System,
    ui: &Ui,
) -> Result<SystemResult> {
    let total = plan.total_ops();
    let mark_ops = total - (total / 10).max(1);
    let bounds = phase_bounds(plan);
    let sh = Shared::new(plan, values, store, mark_ops, &bounds);
    let pb = ui.bar(total, format!("run {}", system.name()));
    let c0 = store.counters();
    let cpu0 = crate::rss::cpu_seconds();
    let slow_device = crate::blockdev::SlowDevice::of(&cfg.fast_root, &cfg.slow_root);
    let device0 = slow_device.as_ref().and_then(|d| d.read());
    let t0 = Instant::now();
    if mark_ops == 0 {
        let _ = sh.mark.set((t0, c0.clone()));
    }
    let mut sampler = Sampler {
        store,
        plan,
        pb: &pb,
        t0,
        interval: Duration::from_secs_f64(cfg.interval),
        last: (t0, 0, c0.clone()),
        last_cpu: cpu0,
        timeline: Vec::new(),
    };
    let outs = run_clients(cfg, &sh, &mut sampler, system);
    let t_end = sh.end.get().copied().unwrap_or_else(Instant::now);
    let cpu_end = crate::rss::cpu_seconds();
    let device_end = slow_device.as_ref().and_then(|d| d.read());
    let c_end = store.counters();
    pb.finish_and_clear();
    // A line external samplers (scripts/f2-side-by-side.sh) take as the run phase's end,
    // before the settling that follows.
    ui.say(format!(
        "{}: run phase done in {:.1} s, settling",
        system.name(),
        t_end.duration_since(t0).as_secs_f64()
    ));
    // Background work the run left behind (levels over their targets) is part of what its
    // writes cost: wait for it, so that write amplification counts it.
    let settle_start = Instant::now();
    store.settle()?;
    let settle_seconds = settle_start.elapsed().as_secs_f64();
    let c_settled = store.counters();
    let mut all = WorkerOut::new();
    for o in outs {
        all.add(&o?);
    }
    let (t_mark, c_mark) = sh.mark.get().cloned().unwrap_or((t0, c0.clone()));
    Ok(SystemResult::new(
        cfg,
        system,
        RunMeasure {
            total_ops: total,
            final_ops: total - mark_ops,
            run_seconds: t_end.duration_since(t0).as_secs_f64(),
            final_seconds: t_end.duration_since(t_mark).as_secs_f64(),
            run: c_end.since(&c0),
            final_window: c_end.since(&c_mark),
            hist: all.hist,
            by_kind: OpKind::ALL.into_iter().zip(all.by_kind).collect(),
            gets_by_tier: all.gets_by_tier,
            reads_found: all.reads_found,
            reads_missing: all.reads_missing,
            writes: all.writes,
            timeline: sampler.timeline,
            phases: sh.phase_results(&bounds),
            settled: Some(c_settled.since(&c0)),
            settle_seconds,
            cpu_seconds: cpu_end.zip(cpu0).map(|(e, s)| e - s),
            slow_device: device_end.zip(device0).map(|(e, s)| e.since(&s)),
        },
    ))
}

/// Runs `cfg.threads` client threads over `sh` while `sampler` takes the timeline;
/// returns each thread's tallies. A thread that fails stops the others.
fn run_clients(
    cfg: &Config,
    sh: &Shared,
    sampler: &mut Sampler,
    system: System,
) -> Vec<Result<WorkerOut>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|_| {
                s.spawn(|| {
                    let r = worker(sh, cfg.batch);
                    if r.is_err() {
                        sh.abort.store(true, Relaxed);
                    }
                    r
                })
            })
            .collect();
        sampler.run(sh, || handles.iter().all(|h| h.is_finished()));
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::engine(
                        &system.name(),
                        "a client thread panicked",
                    ))
                })
            })
            .collect()
    })
}

/// Takes the run's timeline while the client threads run, and moves the progress bar.
struct Sampler<'a> {
    store: &'a dyn Store,
    plan: &'a OpPlan,
    pb: &'a ProgressBar,
    /// When the run started.
    t0: Instant,
    /// Time between two points.
    interval: Duration,
    /// The previous point: when, completed operations, counters.
    last: (Instant, u64, Counters),
    /// The process's CPU seconds at the previous point.
    last_cpu: Option<f64>,
    timeline: Vec<TimelinePoint>,
}

impl Sampler<'_> {
    /// Samples every interval until `finished` says every client thread is done, then
    /// takes the last point.
    fn run(&mut self, sh: &Shared, finished: impl Fn() -> bool) {
        let mut next_point = self.t0 + self.interval;
        loop {
            let finished = finished();
            let now = match (finished, sh.end.get()) {
                (true, Some(&end)) => end.max(self.last.0),
                _ => Instant::now(),
            };
            let done = sh.done.load(Relaxed);
            self.pb.set_position(done);
            if now >= next_point || finished {
                self.point(now, done, finished);
                next_point += self.interval;
                while next_point <= now {
                    next_point += self.interval;
                }
            }
            if finished {
                break;
            }
            let wait = next_point
                .saturating_duration_since(Instant::now())
                .min(TICK);
            std::thread::sleep(wait);
        }
    }

    /// The point of the interval since the last one, ending `now` with `done` operations
    /// completed (none for an empty interval, except while the run goes on).
    fn point(&mut self, now: Instant, done: u64, finished: bool) {
        let c = self.store.counters();
        let cpu = crate::rss::cpu_seconds();
        let (t, n, ref c_last) = self.last;
        let dt = now.duration_since(t).as_secs_f64();
        if dt > 1e-3 && (done > n || !finished) {
            let mut p = TimelinePoint::between(
                now.duration_since(self.t0).as_secs_f64(),
                dt,
                done - n,
                &c.since(c_last),
                self.plan.phase_of(done.saturating_sub(1)),
            );
            if let Some(r) = crate::rss::read() {
                (p.rss_bytes, p.rss_anon_bytes) = (Some(r.current), Some(r.anon));
            }
            p.cpu_cores = cpu.zip(self.last_cpu).map(|(now, then)| (now - then) / dt);
            self.pb.set_message(format!(
                "{:>9.0} ops/s  FD hit {}",
                p.ops_per_sec,
                p.fd_hit_rate
                    .map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0))
            ));
            self.timeline.push(p);
        }
        self.last = (now, done, c);
        self.last_cpu = cpu;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::BenchArgs;
    use crate::distribution::DistSpec;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// An in-memory store: exercises the runner without the engine. Keys in the first half
    /// of the key space count as fast-disk hits.
    #[derive(Default)]
    struct MemStore {
        map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
        fd: AtomicU64,
        sd: AtomicU64,
        written: AtomicU64,
        /// Streams run, the gets they carried, and the most gets in flight at once.
        streams: AtomicU64,
        streamed: AtomicU64,
        most_in_flight: AtomicU64,
        /// Keys of the gets waiting in a stream, and writes made to one of them meanwhile.
        waiting: Mutex<Vec<Vec<u8>>>,
        writes_to_waiting: AtomicU64,
        /// Read each streamed get when it enters (as tierkv's stream does) instead of when
        /// it is answered.
        reads_at_entry: bool,
        /// Batches and groups written (reset after the load) and the writes they held.
        batches: AtomicU64,
        batched: AtomicU64,
        /// Writes so far, and the last write of each key.
        seq: AtomicU64,
        written_at: Mutex<HashMap<Vec<u8>, u64>>,
    }

    impl MemStore {
        fn note_write(&self, key: &[u8]) {
            if self.waiting.lock().unwrap().iter().any(|k| k == key) {
                self.writes_to_waiting.fetch_add(1, Relaxed);
            }
        }
    }

    impl Store for MemStore {
        /// A stream that keeps gets in flight until its window is full and answers the
        /// newest first, each read only when answered (or, with `reads_at_entry`, when it
        /// entered): a worker that let a write of an in-flight key go ahead of a get that
        /// reads late, or lost or repeated a get, would change the counts.
        fn get_stream(
            &self,
            window: usize,
            next: &mut dyn FnMut() -> Option<StreamGet>,
            done: &mut dyn FnMut(StreamGet, Result<bool>),
        ) {
            self.streams.fetch_add(1, Relaxed);
            let mut waiting: Vec<(StreamGet, Option<Result<bool>>)> = Vec::new();
            let mut ended = false;
            loop {
                while !ended && waiting.len() < window {
                    match next() {
                        Some(g) => {
                            self.waiting.lock().unwrap().push(g.key.clone());
                            let read = self.reads_at_entry.then(|| self.get(&g.key));
                            waiting.push((g, read));
                        }
                        None => ended = true,
                    }
                }
                self.most_in_flight.fetch_max(waiting.len() as u64, Relaxed);
                let Some((g, read)) = waiting.pop() else {
                    return;
                };
                self.streamed.fetch_add(1, Relaxed);
                {
                    let mut w = self.waiting.lock().unwrap();
                    if let Some(at) = w.iter().position(|k| *k == g.key) {
                        w.swap_remove(at);
                    }
                }
                let found = read.unwrap_or_else(|| self.get(&g.key));
                done(g, found);
            }
        }
        fn stream_reads_at_entry(&self) -> bool {
            self.reads_at_entry
        }
        /// With `reads_at_entry`: the number of writes so far, and a conditional write
        /// applies only if its key's last write came no later.
        fn read_token(&self) -> Option<u64> {
            self.reads_at_entry.then(|| self.seq.load(Relaxed))
        }
        fn write_group(&self, group: &[GroupWrite]) -> Result<Vec<bool>> {
            self.batches.fetch_add(1, Relaxed);
            group
                .iter()
                .map(|w| match w {
                    GroupWrite::Records(records) => {
                        self.batched.fetch_add(records.len() as u64, Relaxed);
                        for (k, v) in records {
                            self.put(k, v)?;
                        }
                        Ok(true)
                    }
                    GroupWrite::IfUnchanged { key, value, token } => {
                        self.batched.fetch_add(1, Relaxed);
                        let last = self.written_at.lock().unwrap().get(key).copied();
                        if last.is_some_and(|at| at > *token) {
                            return Ok(false);
                        }
                        self.put(key, value)?;
                        Ok(true)
                    }
                })
                .collect()
        }
        fn get(&self, key: &[u8]) -> Result<bool> {
            let found = self.map.lock().unwrap().contains_key(key);
            if found {
                let c = if key[4] < b'5' { &self.fd } else { &self.sd };
                c.fetch_add(1, Relaxed);
            }
            Ok(found)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            self.note_write(key);
            let at = self.seq.fetch_add(1, Relaxed) + 1;
            self.written_at.lock().unwrap().insert(key.to_vec(), at);
            self.written.fetch_add(value.len() as u64, Relaxed);
            self.map
                .lock()
                .unwrap()
                .insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn delete(&self, key: &[u8]) -> Result<()> {
            self.note_write(key);
            self.map.lock().unwrap().remove(key);
            Ok(())
        }
        fn scan(&self, from: &[u8], limit: usize) -> Result<usize> {
            Ok(self
                .map
                .lock()
                .unwrap()
                .range(from.to_vec()..)
                .take(limit)
                .count())
        }
        fn write_batch(&self, records: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
            self.batches.fetch_add(1, Relaxed);
            self.batched.fetch_add(records.len() as u64, Relaxed);
            for (k, v) in records {
                self.put(k, v)?;
            }
            Ok(())
        }
        fn settle(&self) -> Result<()> {
            Ok(())
        }
        fn counters(&self) -> Counters {
            Counters {
                gets_fd: self.fd.load(Relaxed),
                gets_sd: self.sd.load(Relaxed),
                fd_write_bytes: Some(self.written.load(Relaxed)),
                // Every get found counts as one disk read; scans read nothing.
                user_read_ios: Some(self.fd.load(Relaxed) + self.sd.load(Relaxed)),
                ..Default::default()
            }
        }
        fn engine_stats(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn close(self: Box<Self>) -> Result<()> {
            Ok(())
        }
    }

    fn config(workload: &str) -> Config {
        Config::from_args(&BenchArgs {
            scale: "smoke".into(),
            workload: Some(workload.into()),
            records: Some(2000),
            ops: Some(5000),
            threads: Some(4),
            out: "unused".into(),
            no_progress: true,
            ..Default::default()
        })
        .unwrap()
    }

    /// Loads the plan's records into a fresh in-memory store and runs its operations.
    fn load_and_run(cfg: &Config, plan: &OpPlan, values: &ValueSource) -> (MemStore, SystemResult) {
        load_and_run_in(MemStore::default(), cfg, plan, values)
    }

    fn load_and_run_in(
        store: MemStore,
        cfg: &Config,
        plan: &OpPlan,
        values: &ValueSource,
    ) -> (MemStore, SystemResult) {
        load_records(&store, plan, values, &ProgressBar::hidden()).unwrap();
        store.batches.store(0, Relaxed);
        store.batched.store(0, Relaxed);
        let r = run_phase(cfg, plan, values, &store, System::Tierkv, &Ui::new(false)).unwrap();
        (store, r)
    }

    /// How many reads of `plan` can miss when `threads` clients run it with one chunk each
    /// at a time (`worker`), derived from the plan alone. Nothing deletes or expires in a
    /// synthetic plan and loading ends before the run, so a read (a get, or a
    /// read-modify-write's read) misses only if its key's insert has not run yet. A read
    /// is issued only for an id loaded or inserted before it in the plan, so inserts of the
    /// read's own chunk already ran (the same thread, in order) and the insert lies in an
    /// earlier chunk. When a thread runs chunk `c`, every earlier chunk has been taken, and
    /// the unfinished ones are held by the other threads, one each: at most `threads - 1`
    /// chunks, a set that only shrinks while `c` runs (chunks taken later come after `c`).
    /// So at most the reads of `c` whose key an unfinished chunk inserts miss: at most the
    /// `threads - 1` largest counts of `c`'s reads by the earlier chunk inserting their key.
    /// A read of a key inserted later in the plan (none is, by the rule above) could always
    /// miss, and is counted as such.
    fn reads_that_may_race(plan: &OpPlan, threads: usize) -> u64 {
        let mut ops = Vec::new();
        // The plan index of each id's insert (ids the run inserts).
        let mut inserted_at: HashMap<u64, u64> = HashMap::new();
        for c in 0..plan.chunks() {
            plan.chunk_ops(c, &mut ops);
            for op in ops.iter().filter(|op| op.kind == OpKind::Insert) {
                inserted_at.insert(op.id, op.index);
            }
        }
        let chunk_of = |index: u64| index / crate::workload::CHUNK;
        let mut may_race = 0;
        for c in 0..plan.chunks() {
            plan.chunk_ops(c, &mut ops);
            // This chunk's reads of keys an earlier chunk inserts, by that chunk.
            let mut by_chunk: HashMap<u64, u64> = HashMap::new();
            for op in &ops {
                if !matches!(op.kind, OpKind::Read | OpKind::ReadModifyWrite) {
                    continue;
                }
                match inserted_at.get(&op.id) {
                    Some(&at) if at > op.index => may_race += 1,
                    Some(&at) if chunk_of(at) < c => {
                        *by_chunk.entry(chunk_of(at)).or_default() += 1
                    }
                    // Loaded, or inserted earlier in this chunk.
                    _ => {}
                }
            }
            let mut counts: Vec<u64> = by_chunk.into_values().collect();
            counts.sort_unstable_by(|a, b| b.cmp(a));
            may_race += counts.iter().take(threads.saturating_sub(1)).sum::<u64>();
        }
        may_race
    }

    /// Every workload loads and runs through the runner: every operation counted, a
    /// timeline, ordered percentiles, every insert stored, and reads that race ahead of
    /// another thread's insert no more often than the plan allows.
    #[test]
    fn loads_and_runs_every_workload() {
        for w in ["ro", "rw", "uh", "e", "f"] {
            let cfg = config(w);
            let plan = OpPlan::synthetic(
                cfg.workload,
                &DistSpec::parse("hotspot-5%").unwrap(),
                cfg.records,
                cfg.ops,
                100,
                cfg.seed,
            )
            .unwrap();
            let values = ValueSource::new(1, 100);
            let (store, r) = load_and_run(&cfg, &plan, &values);
            assert_eq!(r.ops, 5000, "{w}");
            assert!(r.throughput_ops > 0.0, "{w}");
            assert!(!r.timeline.is_empty(), "{w}");
            assert!(r.p50_us <= r.p99_us && r.p99_us <= r.p999_us, "{w}");
            let expected_inserts = plan.inserts();
            assert_eq!(
                store.map.lock().unwrap().len() as u64,
                2000 + expected_inserts,
                "{w}"
            );
            if w != "e" {
                // Reads only address loaded or already inserted records, but with several
                // threads a read may race ahead of another thread's insert of its key: no
                // more reads miss than the plan lets race (`reads_that_may_race`).
                assert_eq!(
                    cfg.batch, 1,
                    "the bound assumes one chunk per thread at a time"
                );
                let may_race = reads_that_may_race(&plan, cfg.threads);
                assert!(
                    r.reads_missing <= may_race,
                    "{w}: {} reads missed, the plan lets {may_race} race: {r:?}",
                    r.reads_missing
                );
                let hit = r.fd_hit_rate_run.unwrap();
                assert!((0.0..=1.0).contains(&hit), "{w}");
            } else {
                assert_eq!(r.fd_hit_rate, None);
                assert!(r.unavailable.contains(&"fd_hit_rate"));
            }
        }
    }

    #[test]
    fn phases_report_their_own_reads_per_operation() {
        let cfg = config("ro");
        let spec = crate::distribution::parse_phases(
            "2000 hotspot-5% ro\n3000 uniform scan\n",
            std::path::Path::new("test"),
        )
        .unwrap();
        let plan =
            OpPlan::synthetic(cfg.workload, &spec, cfg.records, cfg.ops, 100, cfg.seed).unwrap();
        let values = ValueSource::new(1, 100);
        let (_, r) = load_and_run(&cfg, &plan, &values);
        assert_eq!(r.phases.len(), 2);
        // Gets: one read each. Scans: none. Threads complete operations out of plan order,
        // so the snapshot at a phase boundary may miss a few gets or include a few scans.
        let gets = &r.phases[0];
        assert_eq!(gets.ops, 2000);
        for x in [gets.read_ios_per_op, gets.second_half_read_ios_per_op] {
            let x = x.unwrap();
            assert!((0.95..=1.05).contains(&x), "{x}");
        }
        let scans = &r.phases[1];
        assert!(scans.second_half_read_ios_per_op.unwrap() < 0.05);
        assert!(scans.read_ios_per_op.unwrap() < 0.05);
    }

    /// The stream's in-flight counts and a group's key sets, kept by key hash: a key
    /// counted twice stays until it left twice, other keys are not counted, and the hash
    /// spreads 8-byte keys that differ in one byte (the table would degrade, not fail,
    /// otherwise, so the spread is checked directly).
    #[test]
    fn key_counts_count_each_key_until_it_left() {
        let mut c = KeyCounts::default();
        c.enter(b"user1");
        c.enter(b"user1");
        c.enter(b"user2");
        assert!(c.contains(b"user1") && c.contains(b"user2"));
        assert!(!c.contains(b"user3") && !c.contains(b"user"));
        c.leave(b"user1");
        assert!(c.contains(b"user1"), "entered twice, left once");
        c.leave(b"user1");
        assert!(!c.contains(b"user1"));
        c.leave(b"user1");
        assert!(!c.contains(b"user1"), "an extra leave does not go negative");
        c.clear();
        assert!(!c.contains(b"user2"));
        let hashes: std::collections::HashSet<u64> = (0..=255u8)
            .flat_map(|b| {
                (0..8).map(move |i| {
                    let mut k = [0u8; 8];
                    k[i] = b;
                    key_hash(&k)
                })
            })
            .collect();
        assert_eq!(hashes.len(), 255 * 8 + 1, "distinct keys, distinct hashes");
        let low_bits: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 0xff).collect();
        assert!(low_bits.len() > 200, "low bits spread: {}", low_bits.len());
    }

    #[test]
    fn replays_f2_key_files() {
        // The load phase inserts exactly the load file's keys (8 bytes, 100-byte values); the
        // run phase addresses the run file's keys, all of which were loaded.
        let dir = tempfile::tempdir().unwrap();
        let load: Vec<u64> = (0..500u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let run: Vec<u64> = (0..3000usize).map(|i| load[(i * 7) % 97]).collect();
        let write = |name: &str, keys: &[u64]| {
            let p = dir.path().join(name);
            let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
            std::fs::write(&p, bytes).unwrap();
            p
        };
        for w in ["c", "a", "f"] {
            let mut cfg = Config::from_args(&BenchArgs {
                scale: "smoke".into(),
                workload: Some(w.into()),
                load_keys: Some(write("load.dat", &load)),
                run_keys: Some(write("run.dat", &run)),
                threads: Some(3),
                out: "unused".into(),
                no_progress: true,
                ..Default::default()
            })
            .unwrap();
            let plan = build_plan(&mut cfg).unwrap();
            assert_eq!((cfg.records, cfg.ops), (500, 3000), "{w}");
            let values = ValueSource::new(cfg.seed, plan.max_value_size() as usize);
            let (store, r) = load_and_run(&cfg, &plan, &values);
            let map = store.map.into_inner().unwrap();
            let want: std::collections::BTreeSet<Vec<u8>> =
                load.iter().map(|k| k.to_le_bytes().to_vec()).collect();
            assert_eq!(
                map.keys()
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>(),
                want
            );
            assert!(map.values().all(|v| v.len() == 100), "{w}");
            assert_eq!(r.ops, 3000, "{w}");
            assert_eq!(r.reads_missing, 0, "{w}: every run key was loaded");
            match w {
                // Every operation reads: gets, or read-modify-writes (half of F, by the mix).
                "c" | "f" => assert_eq!(r.reads_found, 3000, "{w}"),
                // Half reads, half updates, by the seeded mix.
                _ => assert!((1200..1800).contains(&r.reads_found), "{w}: {r:?}"),
            }
        }
        // A bad file stops the run with an error naming it.
        let mut cfg = Config::from_args(&BenchArgs {
            scale: "smoke".into(),
            workload: Some("c".into()),
            load_keys: Some(write("load.dat", &load)),
            run_keys: Some(dir.path().join("missing.dat")),
            out: "unused".into(),
            ..Default::default()
        })
        .unwrap();
        let e = build_plan(&mut cfg).unwrap_err().to_string();
        assert!(e.contains("missing.dat"), "{e}");
    }

    #[test]
    fn same_plan_same_writes() {
        // Two runs of the same plan with different thread counts write the same final state.
        let finals: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = [1usize, 3]
            .iter()
            .map(|&threads| {
                let mut cfg = config("uh");
                cfg.threads = threads;
                let plan =
                    OpPlan::synthetic(cfg.workload, &DistSpec::Uniform, 500, 3000, 50, 9).unwrap();
                let values = ValueSource::new(9, 50);
                let (store, _) = load_and_run(&cfg, &plan, &values);
                store.map.into_inner().unwrap()
            })
            .collect();
        // Updates to the same key from different chunks may land in either order, so compare
        // key sets and sizes rather than bytes.
        assert_eq!(
            finals[0].keys().collect::<Vec<_>>(),
            finals[1].keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn batched_gets_do_the_same_operations() {
        // --batch only changes how gets are issued: one thread's stream, pipelined or not,
        // leaves the same final state and finds the same records; up to N gets are in
        // flight (and the window fills), never past a write of their key (the final state
        // or the found counts would differ if a get were reordered around a write to its
        // key: reads of inserted keys would miss). Writes of other keys go ahead inline,
        // so in a and f (half writes) the window still fills up. With a store that reads a
        // get when it enters, writes of its key go ahead too, and still change nothing.
        for (w, reads_at_entry) in [
            ("a", false),
            ("d", false),
            ("f", false),
            ("e", false),
            ("a", true),
            ("d", true),
            ("f", true),
        ] {
            let runs: Vec<(MemStore, SystemResult, u64)> = [1usize, 8]
                .iter()
                .map(|&batch| {
                    let mut cfg = config(w);
                    cfg.threads = 1;
                    cfg.batch = batch;
                    let plan = OpPlan::synthetic(
                        cfg.workload,
                        &DistSpec::parse("zipfian").unwrap(),
                        cfg.records,
                        cfg.ops,
                        100,
                        cfg.seed,
                    )
                    .unwrap();
                    let values = ValueSource::new(cfg.seed, plan.max_value_size() as usize);
                    let mut ops = Vec::new();
                    let mut gets = 0u64;
                    for c in 0..plan.chunks() {
                        plan.chunk_ops(c, &mut ops);
                        // Read-modify-writes stream their reads too.
                        gets += ops
                            .iter()
                            .filter(|op| matches!(op.kind, OpKind::Read | OpKind::ReadModifyWrite))
                            .count() as u64;
                    }
                    let store = MemStore {
                        reads_at_entry,
                        ..Default::default()
                    };
                    let (store, result) = load_and_run_in(store, &cfg, &plan, &values);
                    (store, result, gets)
                })
                .collect();
            let (plain, batched) = (&runs[0], &runs[1]);
            assert_eq!(plain.1.ops, batched.1.ops, "{w}");
            assert_eq!(
                (plain.1.reads_found, plain.1.reads_missing),
                (batched.1.reads_found, batched.1.reads_missing),
                "{w}"
            );
            assert_eq!(
                *plain.0.map.lock().unwrap(),
                *batched.0.map.lock().unwrap(),
                "{w}"
            );
            assert_eq!(
                plain.0.streams.load(Relaxed),
                0,
                "{w}: batch 1 never streams"
            );
            let (streamed, most) = (
                batched.0.streamed.load(Relaxed),
                batched.0.most_in_flight.load(Relaxed),
            );
            match w {
                // Scans and inserts only: no gets to stream in e.
                "e" => assert_eq!(streamed, 0, "{w}"),
                _ => {
                    assert_eq!(
                        streamed, batched.2,
                        "{w}: every get and read-modify-write went through the stream, once"
                    );
                    assert_eq!(most, 8, "{w}: up to 8 gets in flight, never more");
                    let went_ahead = batched.0.writes_to_waiting.load(Relaxed);
                    if !reads_at_entry {
                        assert_eq!(
                            went_ahead, 0,
                            "{w}: a write of a key with a get in flight went ahead of the get"
                        );
                    } else if w == "a" {
                        assert!(went_ahead > 0, "{w}: writes of keys in flight wait");
                    }
                    // Plain writes went out in groups, and so did f's read-modify-writes
                    // with a store that takes read tokens; one at a time, none did.
                    let (batches, records) = (
                        batched.0.batches.load(Relaxed),
                        batched.0.batched.load(Relaxed),
                    );
                    assert_eq!(plain.0.batches.load(Relaxed), 0, "{w}");
                    if w != "f" || reads_at_entry {
                        assert!(batches * 2 < records, "{w}: {batches} batches of {records}");
                    }
                }
            }
        }
        // Several threads: the same operation counts and key set.
        let mut cfg = config("c");
        cfg.batch = 16;
        let plan = OpPlan::synthetic(cfg.workload, &DistSpec::Uniform, 2000, 5000, 50, 3).unwrap();
        let values = ValueSource::new(3, 50);
        let (store, r) = load_and_run(&cfg, &plan, &values);
        assert_eq!(r.ops, 5000);
        assert_eq!(r.reads_found, 5000);
        // Every get went through a stream.
        assert_eq!(store.streamed.load(Relaxed), 5000);
        assert!(store.most_in_flight.load(Relaxed) <= 16);
    }
}
