//! The record cache alone: what it admits, what it answers (invariant 1: only the
//! newest version of the key in the very table asked about, never newer than the read),
//! how it gives space back, and that damage costs only the copy (invariant 3).

use super::*;
use crate::cache::key_hash;
use crate::key::{make_internal_key, ValueKind};

const SEGMENT: usize = 4096;
/// Bytes of a record [`offer`] makes: an 11-byte key, its trailer and 100 bytes of value.
const RECORD: usize = HEADER + 19 + 100 + TRAILER;

fn cache(dir: &std::path::Path) -> RecordCache {
    let env = Env::single(dir, false).unwrap();
    let rc = RecordCache::open(env, u64::MAX, SEGMENT).unwrap();
    rc.set_room(16 * SEGMENT as u64);
    rc
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Offers key `i`'s record of `table` at sequence `seq` (value: 100 bytes of `i`).
fn offer(rc: &RecordCache, i: u64, table: u64, seq: u64) {
    let ikey = make_internal_key(&key(i), seq, ValueKind::Value);
    rc.offer(key_hash(&key(i)), table, &ikey, &[i as u8; 100]);
}

/// Fills the cache with keys from `from` on, each read `reads` times, until it counts as
/// full (within a segment of its room).
fn fill(rc: &RecordCache, from: u64, reads: usize) -> u64 {
    let mut i = from;
    while rc.stats().bytes + (SEGMENT + RECORD) as u64 <= 16 * SEGMENT as u64 {
        for _ in 0..reads {
            offer(rc, i, 1, 1);
        }
        i += 1;
    }
    i
}

fn get(rc: &RecordCache, i: u64, table: u64, read_seq: u64) -> Option<(Bytes, Bytes)> {
    rc.get(&key(i), key_hash(&key(i)), table, read_seq)
}

#[test]
fn a_cache_with_room_admits_what_the_slow_tier_returns() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    offer(&rc, 1, 7, 5);
    let (ikey, value) = get(&rc, 1, 7, 10).expect("admitted");
    assert_eq!(
        ikey.as_ref(),
        make_internal_key(&key(1), 5, ValueKind::Value)
    );
    assert_eq!(value.as_ref(), &[1u8; 100]);
    offer(&rc, 1, 7, 5);
    let s = rc.stats();
    assert_eq!((s.offered, s.admitted, s.hits, s.entries), (2, 1, 1, 1));
}

/// TinyLFU's rule once full: a candidate displaces the oldest unread entry only when its
/// key was read from the slow tier more often lately than the entry's.
#[test]
fn a_full_cache_admits_only_keys_read_more_often_than_what_they_displace() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    let next = fill(&rc, 0, 2);
    let admitted = rc.stats().admitted;
    offer(&rc, next, 1, 1);
    offer(&rc, next, 1, 1);
    assert!(
        get(&rc, next, 1, 1).is_none(),
        "read as often as the victim: refused"
    );
    assert_eq!(rc.stats().admitted, admitted);
    offer(&rc, next, 1, 1);
    assert!(get(&rc, next, 1, 1).is_some(), "read more often: admitted");
}

/// Invariant 1: the entry answers only for the table it was read from (a table a
/// compaction wrote since has another number) and only reads at or after its version.
#[test]
fn an_entry_answers_only_its_table_and_reads_at_or_after_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    offer(&rc, 1, 7, 5);
    offer(&rc, 1, 7, 5);
    assert!(get(&rc, 1, 8, 10).is_none(), "another table");
    assert!(
        get(&rc, 1, 7, 4).is_none(),
        "a snapshot older than the entry"
    );
    assert!(get(&rc, 1, 7, 5).is_some());
    assert!(get(&rc, 2, 7, 10).is_none(), "another key");
    // The key's record in a newer table replaces the entry.
    offer(&rc, 1, 9, 6);
    assert!(get(&rc, 1, 7, 10).is_none());
    assert_eq!(get(&rc, 1, 9, 10).unwrap().1.as_ref(), &[1u8; 100]);
}

/// Segments are written to files and read back from them; a full cache drops its
/// oldest segment, keeping (copied forward) the entries read since they were written.
#[test]
fn eviction_keeps_the_entries_read_since_they_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    let records_per_segment = (SEGMENT / RECORD) as u64;
    // Keys read once fill it, 0 and 1 first; read 0 back (from its segment's file).
    let mut i = fill(&rc, 0, 1);
    assert!(rc.stats().written_bytes > 0);
    assert!(
        get(&rc, 0, 1, 1).is_some(),
        "read back from the segment's file"
    );
    // Keys read twice displace them until the first segment is evicted: key 0 (read
    // since written) survives, key 1 not.
    while rc.stats().evicted == 0 {
        offer(&rc, i, 1, 1);
        offer(&rc, i, 1, 1);
        i += 1;
    }
    let s = rc.stats();
    assert_eq!(s.kept, 1, "{s:?}");
    assert!(get(&rc, 0, 1, 1).is_some(), "read since written: kept");
    assert!(get(&rc, 1, 1, 1).is_none(), "never read: dropped");
    // Much further on, the cache stays within its room and removes what it evicts.
    let mut reads = 2;
    while i < 40 * records_per_segment {
        if i.is_multiple_of(records_per_segment) {
            reads += 1;
        }
        for _ in 0..reads.min(15) {
            offer(&rc, i, 1, 1);
        }
        i += 1;
    }
    let s = rc.stats();
    assert!(s.bytes <= 17 * SEGMENT as u64, "{s:?}");
    let files = std::fs::read_dir(dir.path()).unwrap().count() as u64;
    assert!(
        files <= 17,
        "evicted segments' files removed ({files} left)"
    );
}

/// The room shrinks as the fast levels grow: the cache drops segments at once.
#[test]
fn a_smaller_room_is_given_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    fill(&rc, 0, 1);
    rc.set_room(5 * SEGMENT as u64);
    let s = rc.stats();
    assert!(s.bytes <= 5 * SEGMENT as u64, "{s:?}");
    // With no room for a few segments nothing is admitted.
    rc.set_room(SEGMENT as u64);
    offer(&rc, 10_000, 1, 1);
    offer(&rc, 10_000, 1, 1);
    assert!(get(&rc, 10_000, 1, 1).is_none());
}

/// Invariant 3: a damaged record is a miss (the read goes on to the slow tier), counted.
#[test]
fn a_damaged_record_is_a_counted_miss() {
    let dir = tempfile::tempdir().unwrap();
    let rc = cache(dir.path());
    fill(&rc, 0, 1);
    let name = segment_file_name(1);
    let path = dir.path().join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[HEADER + 5] ^= 0xff; // the first record's key
    std::fs::write(&path, &bytes).unwrap();
    assert!(get(&rc, 0, 1, 1).is_none());
    assert_eq!(rc.stats().errors, 1);
    assert!(
        get(&rc, 1, 1, 1).is_some(),
        "the segment's other records still answer"
    );
}

#[test]
fn records_round_trip_and_name_their_table() {
    let ikey = make_internal_key(b"k", 3, ValueKind::Delete);
    let mut r = Vec::new();
    encode_record(&mut r, 42, &ikey, b"");
    assert_eq!(decode_record(&r, 42), Some(ikey.len()));
    assert_eq!(&r[HEADER..HEADER + ikey.len()], &ikey[..]);
    assert_eq!(decode_record(&r, 43), None);
    assert_eq!(decode_record(&r[..r.len() - 1], 42), None);
}

#[test]
fn opening_removes_segments_an_earlier_open_left() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("000003.rcs"), b"old").unwrap();
    std::fs::write(dir.path().join("000004.sst"), b"not ours").unwrap();
    let _rc = cache(dir.path());
    assert!(!dir.path().join("000003.rcs").exists());
    assert!(dir.path().join("000004.sst").exists());
}
