//! What the slow disk itself completed, the same way for every system: the read and write
//! requests of the block device that holds the slow directory (`/sys/dev/block/MAJ:MIN/stat`),
//! when that device holds only the slow tier (scripts/tiers.sh gives each tier its own loop
//! device). An engine's own counters say where its reads went, but RocksDB's do not split by
//! disk, and a count kept by an engine includes reads a device model or the page cache
//! served: the device's count is the comparison that holds across engines. Owns only the
//! reading of those counters; what a figure means per operation is `results`'.

use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Requests and bytes a block device completed since it appeared (or between two
/// readings, as a difference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceIos {
    /// Read requests completed.
    pub reads: u64,
    /// Write requests completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

impl DeviceIos {
    /// The requests and bytes from `earlier` to `self` (0 where a counter went back, as
    /// after a device was replaced).
    pub fn since(&self, earlier: &DeviceIos) -> DeviceIos {
        DeviceIos {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

/// The slow directory's block device.
#[derive(Clone, Debug)]
pub struct SlowDevice {
    stat: PathBuf,
}

impl SlowDevice {
    /// The device holding `slow`, if it is not also the one holding `fast` (then its
    /// counts would mix the tiers) and its statistics are readable (Linux).
    pub fn of(fast: &Path, slow: &Path) -> Option<SlowDevice> {
        let slow_dev = std::fs::metadata(slow).ok()?.dev();
        if std::fs::metadata(fast).ok()?.dev() == slow_dev {
            return None;
        }
        let (major, minor) = split_dev(slow_dev);
        let stat = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        let device = SlowDevice { stat };
        device.read().is_some().then_some(device)
    }

    /// The device's counters now.
    pub fn read(&self) -> Option<DeviceIos> {
        parse_stat(&std::fs::read_to_string(&self.stat).ok()?)
    }
}

/// The major and minor numbers of a device number (glibc's `gnu_dev_major` and
/// `gnu_dev_minor` encoding, which Linux uses).
fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    (major, minor)
}

/// The counters of a `stat` file (Documentation/block/stat.rst): reads completed, reads
/// merged, sectors read, ..., writes completed, writes merged, sectors written, ...;
/// sectors of 512 bytes whatever the device's own.
fn parse_stat(text: &str) -> Option<DeviceIos> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 7 {
        return None;
    }
    Some(DeviceIos {
        reads: fields[0],
        read_bytes: fields[2] * 512,
        writes: fields[4],
        write_bytes: fields[6] * 512,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_requests_and_bytes() {
        let line = "    4096      12   65536     800    2048       3   32768     900        0     1000     1700\n";
        let d = parse_stat(line).unwrap();
        assert_eq!(
            d,
            DeviceIos {
                reads: 4096,
                read_bytes: 65536 * 512,
                writes: 2048,
                write_bytes: 32768 * 512,
            }
        );
        assert_eq!(parse_stat("1 2 3"), None, "too few fields");
        assert_eq!(parse_stat("1 2 x 4 5 6 7"), None, "not a number");
    }

    /// glibc's `gnu_dev_makedev`.
    fn makedev(major: u64, minor: u64) -> u64 {
        ((major & 0xffff_f000) << 32)
            | ((major & 0x0000_0fff) << 8)
            | ((minor & 0xffff_ff00) << 12)
            | (minor & 0x0000_00ff)
    }

    #[test]
    fn device_numbers_split_as_glibc_does() {
        assert_eq!(split_dev(0x0701), (7, 1), "a loop device");
        for (major, minor) in [(7, 1), (259, 65536), (8, 300), (4100, 3)] {
            assert_eq!(split_dev(makedev(major, minor)), (major, minor));
        }
    }

    #[test]
    fn one_directory_is_not_a_slow_device_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        assert!(SlowDevice::of(dir.path(), dir.path()).is_none());
    }
}
