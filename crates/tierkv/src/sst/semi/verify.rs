//! Verifying a semi-sorted table (`tierkv check`, `Db::verify_checksums`): every valid
//! block is read from disk and checked against its index entry (checksum, restart points,
//! entry structure, first and last key, counts), keys ascend across the valid blocks in
//! index order and no user key spans two blocks, the key list equals the valid blocks'
//! user keys, the filter admits every one of them, the properties count the entries, and
//! (version 2) the stored lookup index lists exactly the valid blocks, each with a
//! separator between it and the next. Dirty blocks are garbage and are only
//! bounds-checked (by the index decoder).

use super::layout::{check_lookup_index, BlockStats, SemiFooter};
use super::reader::read_generation;
use crate::env::{IoCause, RandomAccessFile};
use crate::error::{Error, Result};
use crate::key::{compare_internal, parse_internal_key, user_key, ValueKind};
use crate::sst::filter::may_contain;
use crate::sst::format::{parse_block, read_block_contents};
use crate::sst::TableProperties;

/// Checks the table; returns the number of entries in its valid blocks.
pub fn verify(
    file: &RandomAccessFile,
    footer: &SemiFooter,
    filter: Option<&[u8]>,
    props: &TableProperties,
    cause: IoCause,
) -> Result<u64> {
    let bad = |offset: u64, reason: String| Error::corruption(file.path(), offset, reason);
    let generation = read_generation(file, footer, cause)?;
    if let Some(h) = footer.lookup {
        let valid: Vec<_> = generation
            .blocks
            .iter()
            .take_while(|b| b.valid)
            .cloned()
            .collect();
        let coding = footer.lookup_coding();
        check_lookup_index(read_block_contents(file, h, cause)?, coding, &valid)
            .map_err(|e| bad(h.offset, e))?;
    }
    let mut keys = generation.keys.iter();
    let mut prev: Option<Vec<u8>> = None;
    let mut total = BlockStats::default();
    let mut valid = 0u64;
    for b in generation.blocks.iter().filter(|b| b.valid) {
        let at = b.handle.offset;
        valid += 1;
        let block = parse_block(read_block_contents(file, b.handle, cause)?, file, at)?;
        block.check_restarts().map_err(|e| bad(at, e.into()))?;
        let mut it = block.iter();
        it.seek_to_first().map_err(|e| bad(at, e.into()))?;
        if !it.valid() || it.key() != b.first.as_slice() {
            return Err(bad(
                at,
                "block's first key differs from its index entry".into(),
            ));
        }
        let mut stats = BlockStats::default();
        while it.valid() {
            let k = parse_internal_key(it.key())
                .ok_or_else(|| bad(at, "malformed internal key".into()))?;
            if let Some(p) = prev.as_deref() {
                if compare_internal(p, it.key()).is_ge() {
                    return Err(bad(at, "keys out of order".into()));
                }
            }
            let new_user_key = prev.as_deref().is_none_or(|p| user_key(p) != k.user_key);
            if new_user_key {
                if keys.next().map(|k| k.as_slice()) != Some(k.user_key) {
                    return Err(bad(
                        footer.keys.offset,
                        "key list differs from the valid blocks' keys".into(),
                    ));
                }
                if filter.is_some_and(|f| !may_contain(f, k.user_key)) {
                    return Err(bad(
                        footer.filter.offset,
                        "the filter denies a key the table holds".into(),
                    ));
                }
            } else if stats.entries == 0 {
                return Err(bad(at, "a user key's versions span two blocks".into()));
            }
            stats.entries += 1;
            stats.key_bytes += it.key().len() as u64;
            stats.value_bytes += it.value().len() as u64;
            match k.kind {
                ValueKind::Delete => stats.deletions += 1,
                ValueKind::Expiring => stats.expiring += 1,
                ValueKind::Value => {}
            }
            prev = Some(it.key().to_vec());
            it.next().map_err(|e| bad(at, e.into()))?;
        }
        if prev.as_deref() != Some(b.last.as_slice()) {
            return Err(bad(
                at,
                "block's last key differs from its index entry".into(),
            ));
        }
        if stats != b.stats {
            return Err(bad(at, "block's counts differ from its index entry".into()));
        }
        total.add(&stats);
    }
    if keys.next().is_some() {
        return Err(bad(
            footer.keys.offset,
            "key list holds keys no valid block has".into(),
        ));
    }
    if total.entries != props.num_entries
        || total.deletions != props.num_deletions
        || valid != props.num_data_blocks
    {
        return Err(bad(
            footer.properties.offset,
            format!(
                "properties count {} entries in {} blocks, the valid blocks hold {} in {valid}",
                props.num_entries, props.num_data_blocks, total.entries
            ),
        ));
    }
    Ok(total.entries)
}
