//! What recovery does with a damaged log ([`RecoveryMode`]): an option of the WAL and the
//! manifest readers (`crate::wal`), defined here so that `Options` does not import them.

/// What recovery does when a log is damaged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RecoveryMode {
    /// A damaged or incomplete tail (nothing valid after it) is the end of the log, as a
    /// crash mid-append leaves it; damage followed by valid records is corruption.
    #[default]
    TolerateTornTail,
    /// Stops at the first damage anywhere and drops everything after it (recovers a
    /// consistent prefix, possibly losing acknowledged writes).
    PointInTime,
    /// Any damage, including a torn tail, is an error.
    Strict,
}

impl std::str::FromStr for RecoveryMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tolerate-torn-tail" => Ok(RecoveryMode::TolerateTornTail),
            "point-in-time" => Ok(RecoveryMode::PointInTime),
            "strict" => Ok(RecoveryMode::Strict),
            _ => Err(format!(
                "unknown recovery mode {s:?} (expected tolerate-torn-tail, point-in-time or strict)"
            )),
        }
    }
}
