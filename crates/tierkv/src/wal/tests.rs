//! Log round trips and damage handling (invariant 3: damage is detected, never invented;
//! a torn tail is the end of the log, damage in the middle is an error; docs/DESIGN.md).

use super::*;
use crate::env::{Env, IoCause, Tier};
use crate::error::Result;
use rand::{Rng, SeedableRng};

fn write_log(records: &[Vec<u8>]) -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::single(dir.path(), false).unwrap();
    let file = env
        .create_writable(Tier::Fast, "log", IoCause::Wal)
        .unwrap();
    let mut w = LogWriter::new(file);
    for r in records {
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    let data = std::fs::read(dir.path().join("log")).unwrap();
    (dir, data)
}

/// The records read and the dropped tail, if any.
type ReadBack = (Vec<Vec<u8>>, Option<(u64, u64)>);

fn read_all(data: Vec<u8>, mode: RecoveryMode) -> Result<ReadBack> {
    let mut r = LogReader::new(data, "log".into(), mode);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(rec);
    }
    Ok((out, r.dropped_tail()))
}

fn sample_records(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let len = match i % 4 {
                0 => 0,
                1 => rng.gen_range(1..100),
                2 => rng.gen_range(1..3 * BLOCK_SIZE),
                _ => BLOCK_SIZE - HEADER_SIZE,
            };
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

#[test]
fn round_trip_records_of_every_size_across_blocks() {
    let records = sample_records(1, 60);
    let (_d, data) = write_log(&records);
    let (got, dropped) = read_all(data, RecoveryMode::Strict).unwrap();
    assert_eq!(got, records);
    assert_eq!(dropped, None);
}

#[test]
fn every_truncation_is_a_tolerated_torn_tail_returning_a_prefix() {
    let records = sample_records(2, 12);
    let (_d, data) = write_log(&records);
    for cut in (0..data.len()).step_by(97).chain([data.len() - 1]) {
        let (got, _) = read_all(data[..cut].to_vec(), RecoveryMode::TolerateTornTail).unwrap();
        assert!(got.len() <= records.len());
        assert_eq!(&records[..got.len()], &got[..], "cut at {cut}");
        let strict = read_all(data[..cut].to_vec(), RecoveryMode::Strict);
        let complete = got.len() == records.len() || strict.is_ok();
        assert!(complete || strict.unwrap_err().is_corruption());
    }
}

#[test]
fn damage_in_the_middle_is_corruption_unless_point_in_time() {
    let records: Vec<Vec<u8>> = (0..200u32).map(|i| vec![i as u8; 500]).collect();
    let (_d, mut data) = write_log(&records);
    assert!(data.len() > 3 * BLOCK_SIZE);
    data[1000] ^= 0x40;
    let err = read_all(data.clone(), RecoveryMode::TolerateTornTail).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let (got, dropped) = read_all(data.clone(), RecoveryMode::PointInTime).unwrap();
    assert!(!got.is_empty() && got.len() < records.len());
    assert_eq!(&records[..got.len()], &got[..]);
    assert!(dropped.is_some());
    assert!(read_all(data, RecoveryMode::Strict).is_err());
}

/// A crash mid-append cuts a log short; it never damages a complete record. So damage to
/// the last complete record (its payload, checksum or length field) is corruption, not a
/// torn tail; only point-in-time recovery drops it.
#[test]
fn damage_to_the_complete_last_record_is_corruption_not_a_torn_tail() {
    let records: Vec<Vec<u8>> = (0..10u32).map(|i| vec![i as u8; 100]).collect();
    let (_d, data) = write_log(&records);
    let n = data.len();
    let last = n - 100 - HEADER_SIZE;
    // Payload, checksum, low and high length byte (growing the length past the file end).
    for (at, flip) in [(n - 3, 1u8), (last, 1), (last + 4, 0x40), (last + 5, 0x5a)] {
        let mut d = data.clone();
        d[at] ^= flip;
        let err = read_all(d.clone(), RecoveryMode::TolerateTornTail).unwrap_err();
        assert!(err.is_corruption(), "flip at {at}: {err}");
        let (got, dropped) = read_all(d, RecoveryMode::PointInTime).unwrap();
        assert_eq!(got, records[..9]);
        assert!(dropped.is_some());
    }
}

#[test]
fn trailing_zeros_are_padding_not_damage() {
    let records = sample_records(3, 5);
    let (_d, mut data) = write_log(&records);
    data.extend(std::iter::repeat_n(0u8, 5000));
    let (got, dropped) = read_all(data, RecoveryMode::Strict).unwrap();
    assert_eq!(got, records);
    assert_eq!(dropped, None);
}

#[test]
fn random_byte_flips_never_return_wrong_records() {
    let records = sample_records(4, 30);
    let (_d, data) = write_log(&records);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for _ in 0..300 {
        let mut d = data.clone();
        let i = rng.gen_range(0..d.len());
        d[i] ^= 1 << rng.gen_range(0..8);
        if let Ok((got, _)) = read_all(d, RecoveryMode::PointInTime) {
            assert_eq!(&records[..got.len()], &got[..], "flip at {i}");
        }
    }
}

#[test]
fn last_record_offset_points_at_the_record_start() {
    let records = vec![vec![1u8; 10], vec![2u8; 2 * BLOCK_SIZE], vec![3u8; 10]];
    let (_d, data) = write_log(&records);
    let mut r = LogReader::new(data, "log".into(), RecoveryMode::Strict);
    let mut offsets = Vec::new();
    while r.next_record().unwrap().is_some() {
        offsets.push(r.last_record_offset());
    }
    assert_eq!(
        offsets,
        vec![0, 17, (17 + 7 + 2 * BLOCK_SIZE + 2 * 7) as u64]
    );
}
