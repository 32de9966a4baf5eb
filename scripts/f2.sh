#!/usr/bin/env bash
# F2's larger-than-memory setup, scaled: YCSB A, B, C and F over zipfian keys with
# 8-byte keys and 100-byte values, one memory budget of 10% of the data, tierkv against
# RocksDB tiered and all-on-FD in the same run, plus tierkv with a block-only cache (what the
# adaptive KV cache adds as F2's read cache).
#
#   scripts/f2.sh [OUT_DIR] [extra tierkv bench flags...]
#
# Environment:
#   TIERKV      the tierkv binary (default: target/release/tierkv). The RocksDB systems need
#               one built with `--features tierkv-bench/rocksdb-peer`; without it, set
#               F2_SYSTEMS to tierkv systems only.
#   F2_RECORDS  records loaded (default 4,000,000: 432 MB of keys and values)
#   F2_OPS      operations per workload (default 2,000,000)
#   F2_SYSTEMS  systems (default tierkv,tierkv-blockonly,rocksdb-tiered,rocksdb-fd)
#   F2_WORKLOADS workloads (default "a b c f")
#   F2_MEMORY   memory budget in bytes (default: 10% of the keys and values)
#   F2_SD_PROFILE slow-disk model (default none: both tiers on this machine's disk, like F2's
#               one SSD; RocksDB cannot use tierkv's device model, so any other profile
#               favours RocksDB unless the run is under scripts/tiers.sh)
# Each workload writes OUT_DIR/<workload>/report.md and results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/f2}
shift || true
bin=${TIERKV:-${CARGO_TARGET_DIR:-target}/release/tierkv}
records=${F2_RECORDS:-4000000}
ops=${F2_OPS:-2000000}
systems=${F2_SYSTEMS:-tierkv,tierkv-blockonly,rocksdb-tiered,rocksdb-fd}
record_size=108
# 10% of the keys and values, and a fast disk of the same size (F2's data is ~10x RAM; the
# fast tier holds about a tenth of the data, as in every other tierkv experiment).
tenth=$((records * record_size / 10))
[ -x "$bin" ] || { echo "f2.sh: $bin not found; build it with cargo build --release -p tierkv-cli" >&2; exit 1; }
for w in ${F2_WORKLOADS:-a b c f}; do
    echo "== YCSB $w"
    "$bin" bench --workload "$w" --distribution zipfian --key-size 8 --record-size "$record_size" \
        --records "$records" --ops "$ops" --memory-budget "${F2_MEMORY:-$tenth}" --fd-budget "$tenth" \
        --slow-device "${F2_SD_PROFILE:-none}" --systems "$systems" --no-progress \
        --out "$out/$w" "$@"
done
