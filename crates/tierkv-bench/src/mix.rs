//! Operation mixes: the names `--workload` and phase files accept (YCSB A-F, HotRAP's
//! RO/RW/WH/UH, scans only) and the share of each operation type. Plain names with no
//! dependency on the rest of the bench, so `distribution` (a phase's mix), `workload` (the
//! plan) and `scale` (the configuration) can all use them; what a mix generates lives in
//! [`crate::workload`].

use std::str::FromStr;

use crate::error::{BenchError, Result};

/// An operation mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// 100% reads (HotRAP RO).
    Ro,
    /// 75% reads, 25% inserts (HotRAP RW).
    Rw,
    /// 50% reads, 50% inserts (HotRAP WH).
    Wh,
    /// 50% reads, 50% updates (HotRAP UH).
    Uh,
    /// YCSB A: 50% reads, 50% updates.
    A,
    /// YCSB B: 95% reads, 5% updates.
    B,
    /// YCSB C: 100% reads.
    C,
    /// YCSB D: 95% reads, 5% inserts, reading the latest records.
    D,
    /// YCSB E: 95% short scans, 5% inserts.
    E,
    /// YCSB F: 50% reads, 50% read-modify-writes.
    F,
    /// 100% short scans (a phase of AC-Key's phase-change experiment).
    Scan,
}

/// Shares of each operation type (they add up to 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mix {
    /// Point reads.
    pub read: f64,
    /// Overwrites of existing records.
    pub update: f64,
    /// New records.
    pub insert: f64,
    /// Short range scans.
    pub scan: f64,
    /// Read-modify-writes of one key (atomic where the engine has it, else a get then a put).
    pub rmw: f64,
}

impl FromStr for Workload {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "ro" => Workload::Ro,
            "rw" => Workload::Rw,
            "wh" => Workload::Wh,
            "uh" => Workload::Uh,
            "a" => Workload::A,
            "b" => Workload::B,
            "c" => Workload::C,
            "d" => Workload::D,
            "e" => Workload::E,
            "f" => Workload::F,
            "scan" => Workload::Scan,
            _ => {
                return Err(BenchError::InvalidArgument(format!(
                    "unknown workload {s:?}: expected ro, rw, wh, uh, a, b, c, d, e, f or scan"
                )))
            }
        })
    }
}

impl Workload {
    /// The mix of operation types.
    pub fn mix(self) -> Mix {
        let m = |read, update, insert, scan, rmw| Mix {
            read,
            update,
            insert,
            scan,
            rmw,
        };
        match self {
            Workload::Ro | Workload::C => m(1.0, 0.0, 0.0, 0.0, 0.0),
            Workload::Rw => m(0.75, 0.0, 0.25, 0.0, 0.0),
            Workload::Wh => m(0.5, 0.0, 0.5, 0.0, 0.0),
            Workload::Uh | Workload::A => m(0.5, 0.5, 0.0, 0.0, 0.0),
            Workload::B => m(0.95, 0.05, 0.0, 0.0, 0.0),
            Workload::D => m(0.95, 0.0, 0.05, 0.0, 0.0),
            Workload::E => m(0.0, 0.0, 0.05, 0.95, 0.0),
            Workload::F => m(0.5, 0.0, 0.0, 0.0, 0.5),
            Workload::Scan => m(0.0, 0.0, 0.0, 1.0, 0.0),
        }
    }

    /// Lower-case name as accepted by `--workload`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Ro => "ro",
            Workload::Rw => "rw",
            Workload::Wh => "wh",
            Workload::Uh => "uh",
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
            Workload::Scan => "scan",
        }
    }
}
