//! Memory per key of the on-disk index and filters (F2's "about 1 byte of RAM per
//! cold key"): loads records, compacts them into the final level shape, opens every table,
//! and divides the index blocks' and bloom filters' bytes (`DbStats::memory`) by the keys.
//!
//! ```sh
//! cargo run --release -p tierkv --example index_memory -- --dir /tmp/im
//! cargo run --release -p tierkv --example index_memory -- --dir /tmp/im --key-size 8 \
//!     --value-size 100 --keys 2000000 --block-size 4096 --block-records 48
//! ```
//!
//! `--block-records N` sets `Options::block_records` (`--block-records 0`: `None`, blocks
//! cut by size only, as before that option existed). `--last-level-filters auto|always|never`
//! sets `Options::last_level_filters` (`--no-last-level-filters`: never): everything is
//! compacted into one level here, so without filters it shows the index alone; in a running
//! store the levels above the last hold about a tenth of the keys (size ratio 10) and keep
//! their filters, 0.125 B per key at 10 bits.
//!
//! Without `--keys`, it measures F2's records (8-byte keys, 100-byte values, 2M keys) and
//! tierkv's usual ones (24-byte keys, 1000-byte values, 300K keys).

use std::path::PathBuf;
use tierkv::{Db, LastLevelFilters, Options, WriteBatch, WriteOptions};

struct Case {
    keys: u64,
    key_size: usize,
    value_size: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dir = PathBuf::from("/tmp/tierkv-index-memory");
    let mut custom = Case {
        keys: 2_000_000,
        key_size: 8,
        value_size: 100,
    };
    let mut is_custom = false;
    let mut block_size = 16 << 10;
    let mut bloom_bits = 10;
    let mut block_records = Options::default().block_records;
    let mut last_level_filters = Options::default().last_level_filters;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--dir" => dir = PathBuf::from(val()?),
            "--keys" => (custom.keys, is_custom) = (val()?.parse()?, true),
            "--key-size" => (custom.key_size, is_custom) = (val()?.parse()?, true),
            "--value-size" => (custom.value_size, is_custom) = (val()?.parse()?, true),
            "--block-size" => block_size = val()?.parse()?,
            "--bloom-bits" => bloom_bits = val()?.parse()?,
            "--block-records" => block_records = Some(val()?.parse::<usize>()?).filter(|&n| n > 0),
            "--last-level-filters" => last_level_filters = val()?.parse()?,
            "--no-last-level-filters" => last_level_filters = LastLevelFilters::Never,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let cases = if is_custom {
        vec![custom]
    } else {
        vec![
            Case {
                keys: 2_000_000,
                key_size: 8,
                value_size: 100,
            },
            Case {
                keys: 300_000,
                key_size: 24,
                value_size: 1000,
            },
        ]
    };
    println!(
        "| key B | value B | keys | block size | block records | bloom bits | tables | index B/key | filter B/key | total B/key | share of data |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for c in cases {
        let table = TableShape {
            block_size,
            block_records,
            bloom_bits,
            last_level_filters,
        };
        measure(&dir, &c, &table)?;
    }
    Ok(())
}

struct TableShape {
    block_size: usize,
    block_records: Option<usize>,
    bloom_bits: u32,
    last_level_filters: LastLevelFilters,
}

fn measure(
    dir: &std::path::Path,
    c: &Case,
    t: &TableShape,
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = std::fs::remove_dir_all(dir);
    let opts = Options {
        block_size: t.block_size,
        block_records: t.block_records,
        bloom_bits_per_key: t.bloom_bits,
        last_level_filters: t.last_level_filters,
        ..Options::default()
    };
    let db = Db::open(dir, opts)?;
    let mut key = vec![0u8; c.key_size.max(8)];
    let value = vec![b'v'; c.value_size];
    let mut batch = WriteBatch::new();
    for i in 0..c.keys {
        // Hashed ids spread the keys over the key space, as YCSB's inserts do.
        let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ i;
        key[..8].copy_from_slice(&h.to_be_bytes());
        batch.put(&key, &value);
        if batch.len() == 1000 {
            db.write_opt(std::mem::take(&mut batch), &WriteOptions::default())?;
        }
    }
    db.write(batch)?;
    db.flush()?;
    db.compact_range(None, None)?;
    // Opens every table (and checks it), so the table cache holds all their indexes and
    // filters.
    db.verify_checksums()?;
    let s = db.stats();
    let m = &s.memory;
    let keys = c.keys as f64;
    let data = keys * (c.key_size + c.value_size) as f64;
    let tables: usize = s.levels.iter().map(|l| l.files).sum();
    println!(
        "| {} | {} | {} | {} | {} | {} (last level: {}) | {} | {:.3} | {:.3} | {:.3} | {:.2}% |",
        c.key_size,
        c.value_size,
        c.keys,
        t.block_size,
        t.block_records.map_or("-".to_string(), |n| n.to_string()),
        t.bloom_bits,
        t.last_level_filters.name(),
        tables,
        m.table_index_bytes as f64 / keys,
        m.table_filter_bytes as f64 / keys,
        m.tables.bytes as f64 / keys,
        100.0 * m.tables.bytes as f64 / data
    );
    db.close()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
