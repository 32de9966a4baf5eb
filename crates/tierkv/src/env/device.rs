//! The device model: makes a tier behave like a slower disk by delaying each I/O.
//!
//! Two token buckets in virtual time (one for operations, one for bytes) cap IOPS and
//! bandwidth; a fixed per-I/O latency models service time, which overlaps across concurrent
//! I/Os the way a device queue does. A short burst allowance keeps sleep granularity from
//! under-delivering the configured rate. Owns timing only; it never touches data.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::str::FromStr;
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

struct Buckets {
    ops_free_at: Instant,
    bytes_free_at: Instant,
}

/// A running device model; shared by every file of a tier.
pub struct DeviceModel {
    profile: DeviceProfile,
    buckets: Mutex<Buckets>,
}

impl DeviceModel {
    /// `None` for a profile without limits.
    pub fn new(profile: DeviceProfile) -> Option<Self> {
        if profile.is_none() {
            return None;
        }
        let now = Instant::now();
        Some(DeviceModel {
            profile,
            buckets: Mutex::new(Buckets {
                ops_free_at: now,
                bytes_free_at: now,
            }),
        })
    }

    /// The profile this model enforces.
    pub fn profile(&self) -> DeviceProfile {
        self.profile
    }

    /// Blocks the caller as long as one I/O of `bytes` takes on this device.
    pub fn charge(&self, bytes: u64) {
        let done_at = self.reserve(std::iter::once(bytes));
        let now = Instant::now();
        if done_at > now {
            std::thread::sleep(done_at - now);
        }
    }

    /// Places I/Os issued together (of these sizes) in the device's queue and returns
    /// when the last is done: each takes its turn in the rate limits, but their service
    /// times overlap, as for I/Os from concurrent threads. The caller sleeps until then.
    pub fn reserve(&self, sizes: impl IntoIterator<Item = u64>) -> Instant {
        let now = Instant::now();
        let mut b = self.buckets.lock();
        let mut done = now + Duration::from_micros(self.profile.latency_us);
        // Idle time earns at most BURST of credit.
        let floor = now.checked_sub(BURST).unwrap_or(now);
        for bytes in sizes {
            if let Some(iops) = self.profile.iops {
                b.ops_free_at =
                    b.ops_free_at.max(floor) + Duration::from_secs_f64(1.0 / iops as f64);
                done = done.max(b.ops_free_at);
            }
            if let Some(bw) = self.profile.bandwidth {
                b.bytes_free_at =
                    b.bytes_free_at.max(floor) + Duration::from_secs_f64(bytes as f64 / bw as f64);
                done = done.max(b.bytes_free_at);
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    /// The model delivers its configured IOPS (loose tolerance: sleeps overshoot a little).
    #[test]
    fn delivers_configured_iops() {
        let model = DeviceModel::new(DeviceProfile {
            iops: Some(2000),
            bandwidth: None,
            latency_us: 0,
        })
        .unwrap();
        let start = Instant::now();
        let n = 400;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..n / 4).for_each(|_| model.charge(4096)));
            }
        });
        let iops = n as f64 / start.elapsed().as_secs_f64();
        assert!(
            (1400.0..=2300.0).contains(&iops),
            "delivered {iops} IOPS, want ~2000"
        );
    }

    /// I/Os issued together overlap their service time (a queue depth), unlike I/Os issued
    /// one after another, while still taking their turns in the IOPS limit.
    #[test]
    fn a_batch_overlaps_latency_but_keeps_the_iops_limit() {
        let model = DeviceModel::new(DeviceProfile {
            iops: None,
            bandwidth: None,
            latency_us: 20_000,
        })
        .unwrap();
        let start = Instant::now();
        let at = model.reserve([4096u64; 8]);
        let waited = at - start;
        assert!(
            waited < Duration::from_millis(40),
            "8 I/Os together took {waited:?}, want one latency (20 ms)"
        );
        let limited = DeviceModel::new(DeviceProfile {
            iops: Some(1000),
            bandwidth: None,
            latency_us: 0,
        })
        .unwrap();
        let start = Instant::now();
        let at = limited.reserve([4096u64; 50]);
        assert!(
            at - start >= Duration::from_millis(45),
            "50 I/Os at 1000 IOPS must take ~50 ms, took {:?}",
            at - start
        );
    }

    /// The model delivers its configured bandwidth.
    #[test]
    fn delivers_configured_bandwidth() {
        let model = DeviceModel::new(DeviceProfile {
            iops: None,
            bandwidth: Some(50 * MIB),
            latency_us: 0,
        })
        .unwrap();
        let start = Instant::now();
        for _ in 0..20 {
            model.charge(MIB);
        }
        let mibps = 20.0 / start.elapsed().as_secs_f64();
        assert!(
            (35.0..=52.0).contains(&mibps),
            "delivered {mibps} MiB/s, want ~50"
        );
    }
}
