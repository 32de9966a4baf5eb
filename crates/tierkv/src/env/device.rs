//! The device model: makes a tier behave like a slower disk by delaying each I/O.
//!
//! Two token buckets in virtual time (one for operations, one for bytes) cap IOPS and
//! bandwidth; a fixed per-I/O latency models service time, which overlaps across concurrent
//! I/Os the way a device queue does. A short burst allowance keeps sleep granularity from
//! under-delivering the configured rate. Owns timing only; it never touches data.
//!
//! A tier's profile can change while the store is open (`Db::set_device_profile`, e.g.
//! from `none` to `gp3-max` and back): every tier keeps a model, and one whose profile is
//! `none` costs an I/O a relaxed load.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How fast a (possibly emulated) device is. `None` fields mean "unlimited".
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// Operations per second.
    pub iops: Option<u64>,
    /// Bytes per second.
    pub bandwidth: Option<u64>,
    /// Added service time of every I/O, in microseconds.
    pub latency_us: u64,
}

const MIB: u64 = 1 << 20;

impl DeviceProfile {
    /// Longest per-I/O latency [`DeviceProfile::validate`] accepts: a minute, far beyond
    /// any disk, and far from overflowing an `Instant`.
    pub const MAX_LATENCY_US: u64 = 60_000_000;

    /// No emulation: the real device's speed.
    pub fn none() -> Self {
        DeviceProfile::default()
    }

    /// AWS gp3 baseline: 3000 IOPS, 125 MiB/s.
    pub fn gp3() -> Self {
        DeviceProfile {
            iops: Some(3000),
            bandwidth: Some(125 * MIB),
            latency_us: 500,
        }
    }

    /// gp3 at its maximum (the HotRAP paper's slow disk): 10000 IOPS, 1000 MiB/s.
    pub fn gp3_max() -> Self {
        DeviceProfile {
            iops: Some(10_000),
            bandwidth: Some(1000 * MIB),
            latency_us: 500,
        }
    }

    /// A hard disk: 200 IOPS, 160 MiB/s.
    pub fn hdd() -> Self {
        DeviceProfile {
            iops: Some(200),
            bandwidth: Some(160 * MIB),
            latency_us: 4000,
        }
    }

    /// What one read costs in bytes of bandwidth: the bytes the device moves in the time
    /// its IOPS limit allows one operation (`None` when either limit is unknown). Readers
    /// weigh an extra read against extra bytes with it: gp3-max's is 100 KiB, a read
    /// costs as much as reading 100 KiB more in one.
    pub fn read_cost_bytes(&self) -> Option<u64> {
        Some(self.bandwidth? / self.iops?.max(1))
    }

    /// Checks a profile given at runtime ([`crate::Db::set_device_profile`]): a rate of 0
    /// (the parser's "unlimited" is `None`, never 0) or a latency over
    /// [`DeviceProfile::MAX_LATENCY_US`] would make the model's arithmetic divide by zero
    /// or overflow the clock.
    pub fn validate(&self) -> crate::error::Result<()> {
        if self.iops == Some(0)
            || self.bandwidth == Some(0)
            || self.latency_us > Self::MAX_LATENCY_US
        {
            return Err(crate::error::Error::InvalidArgument(format!(
                "device profile {self:?}: iops and bandwidth must be positive (None: \
                 unlimited) and latency_us at most {}",
                Self::MAX_LATENCY_US
            )));
        }
        Ok(())
    }

    /// True when the profile imposes no limit.
    pub fn is_none(&self) -> bool {
        self.iops.is_none() && self.bandwidth.is_none() && self.latency_us == 0
    }
}

impl FromStr for DeviceProfile {
    type Err = crate::error::Error;

    /// Parses `none`, `gp3`, `gp3-max`, `hdd`, or a custom
    /// `custom:IOPS:MIB_PER_SEC[:LATENCY_US]` (0 means unlimited).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            crate::error::Error::InvalidArgument(format!(
                "unknown device profile {s:?}: expected none, gp3, gp3-max, hdd or custom:IOPS:MIBPS[:LATENCY_US]"
            ))
        };
        match s {
            "none" => Ok(Self::none()),
            "gp3" => Ok(Self::gp3()),
            "gp3-max" => Ok(Self::gp3_max()),
            "hdd" => Ok(Self::hdd()),
            _ => {
                let parts: Vec<&str> = s
                    .strip_prefix("custom:")
                    .ok_or_else(bad)?
                    .split(':')
                    .collect();
                if !(2..=3).contains(&parts.len()) {
                    return Err(bad());
                }
                let num = |p: &str| p.parse::<u64>().map_err(|_| bad());
                let (iops, mibps) = (num(parts[0])?, num(parts[1])?);
                let latency_us = parts.get(2).map(|p| num(p)).transpose()?.unwrap_or(0);
                Ok(DeviceProfile {
                    iops: (iops > 0).then_some(iops),
                    bandwidth: (mibps > 0).then_some(mibps * MIB),
                    latency_us,
                })
            }
        }
    }
}

/// Burst allowance: I/Os may run ahead of the steady rate by this much.
const BURST: Duration = Duration::from_millis(2);

/// The profile and the virtual-time queue it drives, changed together under one lock so a
/// reservation never mixes one profile's rates with another's queue.
struct Model {
    profile: DeviceProfile,
    ops_free_at: Instant,
    bytes_free_at: Instant,
}

/// A running device model; shared by every file of a tier. Every tier has one, an
/// unemulated tier's with the `none` profile: the profile can change while the store is
/// open ([`crate::Db::set_device_profile`]), so "no model" cannot be decided at open.
/// `emulated` mirrors `!profile.is_none()` so that the I/O of an unemulated tier costs one
/// relaxed load, no lock and no clock read.
pub struct DeviceModel {
    emulated: AtomicBool,
    model: Mutex<Model>,
}

/// Sleeps until `at` (not at all when it has passed).
pub(crate) fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        precise_timers();
        std::thread::sleep(at - now);
    }
}

thread_local! {
    static PRECISE_TIMERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A device's completion wakes the thread waiting on it when the I/O ends; a timer standing
/// in for it may fire as late as the thread's timer slack (50 us by default for a normal
/// thread: a tenth of `gp3-max`'s 500 us, added to every emulated I/O). A thread's first
/// sleep in the model sets its slack to 1 ns. Where the kernel refuses, the model is as
/// coarse as before.
fn precise_timers() {
    PRECISE_TIMERS.with(|set| {
        if !set.get() {
            #[cfg(target_os = "linux")]
            let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
            set.set(true);
        }
    });
}

impl DeviceModel {
    /// A model enforcing `profile` (nothing at all when it is [`DeviceProfile::none`]).
    pub fn new(profile: DeviceProfile) -> Self {
        Self::starting_at(profile, Instant::now())
    }

    /// [`DeviceModel::new`], idle since `start`: tests build the model at a known instant so
    /// that the schedule [`DeviceModel::reserve_at`] computes is exact.
    fn starting_at(profile: DeviceProfile, start: Instant) -> Self {
        DeviceModel {
            emulated: AtomicBool::new(!profile.is_none()),
            model: Mutex::new(Model {
                profile,
                ops_free_at: start,
                bytes_free_at: start,
            }),
        }
    }

    /// The profile this model enforces now (an unemulated tier's without the lock: the
    /// scans ask per seek).
    pub fn profile(&self) -> DeviceProfile {
        if !self.is_emulated() {
            return DeviceProfile::none();
        }
        self.model.lock().profile
    }

    /// True when the profile imposes a limit (I/Os are delayed).
    pub fn is_emulated(&self) -> bool {
        self.emulated.load(Ordering::Relaxed)
    }

    /// Enforces `profile` from now on. The new profile starts idle: I/Os already placed in
    /// the queue keep the time they were given, later ones are scheduled by the new rates
    /// only (a backlog built under a slow profile does not hold up a faster one).
    pub fn set_profile(&self, profile: DeviceProfile) {
        self.set_profile_at(profile, Instant::now());
    }

    /// [`DeviceModel::set_profile`] at `now` (tests drive the schedule with explicit
    /// instants, as with [`DeviceModel::reserve_at`]).
    fn set_profile_at(&self, profile: DeviceProfile, now: Instant) {
        let mut m = self.model.lock();
        *m = Model {
            profile,
            ops_free_at: now,
            bytes_free_at: now,
        };
        // Under the lock: two concurrent changes leave the flag agreeing with the profile
        // that won.
        self.emulated.store(!profile.is_none(), Ordering::Relaxed);
    }

    /// Runs `io`, one I/O of `bytes`, and blocks the caller until the device would have
    /// finished it. The model's latency is the emulated device's whole service time, and
    /// the real disk under it works within that time: the I/O is placed in the queue when
    /// it starts, as for the reads a [`super::ReadSession`] keeps in flight, so a read of
    /// an emulated 500 us disk takes 500 us and not the real read's time more.
    pub fn timed<T>(&self, bytes: u64, io: impl FnOnce() -> T) -> T {
        let done_at = self.reserve(std::iter::once(bytes));
        let out = io();
        if let Some(at) = done_at {
            sleep_until(at);
        }
        out
    }

    /// Blocks the caller as long as one I/O of `bytes`, already done, takes on this device
    /// from now: for an I/O whose size is known only once it is done (a whole file's read).
    pub fn charge(&self, bytes: u64) {
        if let Some(at) = self.reserve(std::iter::once(bytes)) {
            sleep_until(at);
        }
    }

    /// Places I/Os issued together (of these sizes) in the device's queue and returns
    /// when the last is done: each takes its turn in the rate limits, but their service
    /// times overlap, as for I/Os from concurrent threads. The caller sleeps until then.
    /// `None` when the tier is not emulated (nothing to wait for).
    pub fn reserve(&self, sizes: impl IntoIterator<Item = u64>) -> Option<Instant> {
        if !self.is_emulated() {
            return None;
        }
        Some(self.reserve_at(Instant::now(), sizes))
    }

    /// [`DeviceModel::reserve`] for I/Os issued at `now`, emulated or not (`now` itself
    /// when the profile imposes nothing). The schedule depends only on `now` and the
    /// earlier reservations, never on the clock, so tests check it exactly by passing the
    /// instants themselves.
    fn reserve_at(&self, now: Instant, sizes: impl IntoIterator<Item = u64>) -> Instant {
        let mut m = self.model.lock();
        let profile = m.profile;
        let mut done = now + Duration::from_micros(profile.latency_us);
        // Idle time earns at most BURST of credit.
        let floor = now.checked_sub(BURST).unwrap_or(now);
        for bytes in sizes {
            if let Some(iops) = profile.iops {
                m.ops_free_at =
                    m.ops_free_at.max(floor) + Duration::from_secs_f64(1.0 / iops as f64);
                done = done.max(m.ops_free_at);
            }
            if let Some(bw) = profile.bandwidth {
                m.bytes_free_at =
                    m.bytes_free_at.max(floor) + Duration::from_secs_f64(bytes as f64 / bw as f64);
                done = done.max(m.bytes_free_at);
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's sleeps stand in for a device's completions, which have no timer slack:
    /// a thread that slept in the model has a slack of 1 ns (50 us before, the default).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_sleeping_in_the_model_has_no_timer_slack() {
        std::thread::spawn(|| {
            sleep_until(Instant::now() + Duration::from_millis(1));
            assert_eq!(rustix::thread::current_timer_slack().unwrap(), 1);
        })
        .join()
        .unwrap();
    }

    /// Invariant: an emulated I/O's service time runs from its start, so the real disk's own
    /// time is spent within the model's latency and not added to it (the single read then
    /// costs what a read a `ReadSession` keeps in flight costs). The I/O must find itself
    /// already placed in the device's queue when it runs.
    #[test]
    fn an_io_is_queued_before_it_runs() {
        let profile = DeviceProfile {
            iops: Some(50),
            bandwidth: None,
            latency_us: 0,
        };
        let start = Instant::now();
        let model = DeviceModel::starting_at(profile, start);
        let queued_while_running = model.timed(4096, || model.model.lock().ops_free_at != start);
        assert!(
            queued_while_running,
            "the I/O ran before the model reserved its time"
        );
    }

    #[test]
    fn parses_profiles() {
        assert_eq!("gp3".parse::<DeviceProfile>().unwrap().iops, Some(3000));
        let c: DeviceProfile = "custom:500:10:100".parse().unwrap();
        assert_eq!(
            (c.iops, c.bandwidth, c.latency_us),
            (Some(500), Some(10 * MIB), 100)
        );
        assert!("custom:1".parse::<DeviceProfile>().is_err());
        assert!("ssd".parse::<DeviceProfile>().is_err());
        assert!("none".parse::<DeviceProfile>().unwrap().is_none());
        for ok in [
            "none",
            "gp3",
            "gp3-max",
            "hdd",
            "custom:100:1:0",
            "custom:0:0:60000000",
        ] {
            assert!(
                ok.parse::<DeviceProfile>().unwrap().validate().is_ok(),
                "{ok}"
            );
        }
        let bad = |p: DeviceProfile| p.validate().is_err();
        assert!(bad(DeviceProfile {
            iops: Some(0),
            ..DeviceProfile::none()
        }));
        assert!(bad(DeviceProfile {
            bandwidth: Some(0),
            ..DeviceProfile::none()
        }));
        assert!(bad(DeviceProfile {
            latency_us: DeviceProfile::MAX_LATENCY_US + 1,
            ..DeviceProfile::none()
        }));
    }

    /// Wall-clock-free checks of the schedule: each model starts idle at `T0` and is
    /// driven with explicit instants through `reserve_at`, so every expected instant is
    /// exact (to the nanosecond rounding of `Duration::from_secs_f64`, hence `close`).
    fn model_at(
        t0: Instant,
        iops: Option<u64>,
        bandwidth: Option<u64>,
        latency_us: u64,
    ) -> DeviceModel {
        DeviceModel::starting_at(
            DeviceProfile {
                iops,
                bandwidth,
                latency_us,
            },
            t0,
        )
    }

    /// `at` is `t0 + want`, give or take a microsecond of float rounding.
    fn close(at: Instant, t0: Instant, want: Duration) -> bool {
        let got = at - t0;
        got.max(want) - got.min(want) <= Duration::from_micros(1)
    }

    /// Closed-loop clients, as threads calling `charge` are: each of `clients` issues
    /// `per_client` I/Os of `bytes`, the next one when the previous is done (the instant
    /// `charge` sleeps until). Clients take turns in the order of their next issue time.
    /// Returns when the last I/O is done.
    fn run_clients(
        model: &DeviceModel,
        t0: Instant,
        clients: usize,
        per_client: usize,
        bytes: u64,
    ) -> Instant {
        let mut next = vec![(t0, per_client); clients];
        let mut last = t0;
        while let Some(c) = (0..clients)
            .filter(|&c| next[c].1 > 0)
            .min_by_key(|&c| next[c].0)
        {
            let done = model.reserve_at(next[c].0, [bytes]);
            assert!(
                done >= next[c].0,
                "an I/O is never done before it is issued"
            );
            next[c] = (done, next[c].1 - 1);
            last = last.max(done);
        }
        last
    }

    /// The IOPS limit holds exactly: 400 I/Os from 4 closed-loop clients at 2000 IOPS take
    /// 400 / 2000 s from an idle start, not less (the clients together never exceed the
    /// rate) and not more (the model never idles while one waits).
    #[test]
    fn delivers_configured_iops() {
        let t0 = Instant::now();
        let model = model_at(t0, Some(2000), None, 0);
        let done = run_clients(&model, t0, 4, 100, 4096);
        assert!(
            close(done, t0, Duration::from_millis(200)),
            "400 I/Os at 2000 IOPS done after {:?}, want 200 ms",
            done - t0
        );
    }

    /// I/Os issued together overlap their service time (a queue depth), unlike I/Os issued
    /// one after another, while still taking their turns in the IOPS limit; idle time earns
    /// at most `BURST` of credit against that limit.
    #[test]
    fn a_batch_overlaps_latency_but_keeps_the_iops_limit() {
        let t0 = Instant::now();
        let latency = Duration::from_millis(20);
        let model = model_at(t0, None, None, 20_000);
        let together = model.reserve_at(t0, [4096u64; 8]);
        assert!(
            close(together, t0, latency),
            "8 I/Os together took {:?}, want one latency (20 ms)",
            together - t0
        );
        let serial = model_at(t0, None, None, 20_000);
        let mut at = t0;
        for _ in 0..8 {
            at = serial.reserve_at(at, [4096]);
        }
        assert!(
            close(at, t0, 8 * latency),
            "8 I/Os one after another took {:?}, want 8 latencies",
            at - t0
        );
        let limited = model_at(t0, Some(1000), None, 0);
        let batch = limited.reserve_at(t0, [4096u64; 50]);
        assert!(
            close(batch, t0, Duration::from_millis(50)),
            "50 I/Os at 1000 IOPS from an idle start took {:?}, want 50 ms",
            batch - t0
        );
        // Long idle: the next batch runs ahead of the rate by BURST, no more.
        let later = t0 + Duration::from_secs(10);
        let batch = limited.reserve_at(later, [4096u64; 50]);
        assert!(
            close(batch, later, Duration::from_millis(50) - BURST),
            "50 I/Os after a long idle took {:?}, want 50 ms less the burst",
            batch - later
        );
        // Latency and the rate limit: done when the later of the two says so.
        let both = model_at(t0, Some(1000), None, 20_000);
        assert!(close(both.reserve_at(t0, [4096u64; 5]), t0, latency));
        assert!(close(
            both.reserve_at(t0, [4096u64; 25]),
            t0,
            Duration::from_millis(30)
        ));
    }

    /// A profile set while the tier is in use: from `none` (no delay, and `reserve` does
    /// not even take the lock) to a slow custom one (its rates from the change on) and
    /// back; a new profile starts idle, not behind the old one's backlog.
    #[test]
    fn the_profile_changes_at_runtime() {
        let t0 = Instant::now();
        let model = DeviceModel::starting_at(DeviceProfile::none(), t0);
        assert!(!model.is_emulated());
        assert!(model.reserve([4096]).is_none());
        assert_eq!(model.reserve_at(t0, [4096u64; 10]), t0);
        // custom:100:1:0: 100 IOPS and 1 MiB/s; a 4 KiB read takes 10 ms (the IOPS
        // limit; its bytes take 3.9 ms).
        let slow: DeviceProfile = "custom:100:1:0".parse().unwrap();
        model.set_profile_at(slow, t0);
        assert!(model.is_emulated());
        assert_eq!(model.profile(), slow);
        let mut at = t0;
        for _ in 0..10 {
            at = model.reserve_at(at, [4096]);
        }
        assert!(
            close(at, t0, Duration::from_millis(100)),
            "10 reads at 100 IOPS took {:?}, want 100 ms",
            at - t0
        );
        // A backlog of a second under the slow profile...
        let backlog = model.reserve_at(at, [4096u64; 100]);
        assert!(close(backlog, t0, Duration::from_millis(1100)));
        // ...does not hold up gp3-max, set at `at`: one read takes its latency.
        model.set_profile_at(DeviceProfile::gp3_max(), at);
        assert!(close(
            model.reserve_at(at, [4096]),
            at,
            Duration::from_micros(500)
        ));
        // Back to none: no delay at all.
        model.set_profile_at(DeviceProfile::none(), at);
        assert!(!model.is_emulated() && model.profile().is_none());
        assert!(model.reserve([4096]).is_none());
        assert_eq!(model.reserve_at(at, [4096u64; 100]), at);
    }

    /// The bandwidth limit holds exactly: 20 MiB read one MiB at a time by one client at
    /// 50 MiB/s take 400 ms; I/Os count against bandwidth by their size, not their number.
    #[test]
    fn delivers_configured_bandwidth() {
        let t0 = Instant::now();
        let model = model_at(t0, None, Some(50 * MIB), 0);
        let done = run_clients(&model, t0, 1, 20, MIB);
        assert!(
            close(done, t0, Duration::from_millis(400)),
            "20 MiB at 50 MiB/s took {:?}, want 400 ms",
            done - t0
        );
        let small = model_at(t0, None, Some(50 * MIB), 0);
        let done = small.reserve_at(t0, [MIB / 4; 4]);
        assert!(
            close(done, t0, Duration::from_millis(20)),
            "four quarter-MiB I/Os took {:?}, want one MiB's 20 ms",
            done - t0
        );
    }
}
