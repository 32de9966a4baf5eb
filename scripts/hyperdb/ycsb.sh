#!/usr/bin/env bash
# HyperDB's headline experiment in its shape: YCSB A-F, 8-byte keys and 128-byte values,
# zipfian 0.99 (D: latest), 8 client threads, tierkv against rocksdb-tiered and rocksdb-fd
# in one `tierkv bench` invocation per workload (same loaded records, same operations),
# then one summary table (throughput ratios, p50/p99/p99.9 per operation type, background
# writes per tier). Needs a binary built with the RocksDB peer:
#
#   CARGO_TARGET_DIR=/tmp/rocks-target cargo build --release -p tierkv-cli --features tierkv-bench/rocksdb-peer
#   sudo scripts/tiers.sh --fast-size 4G --slow-size 4G --slow-iops 90000 --slow-bps 524288000 \
#     /var/tmp/tiers -- scripts/hyperdb/ycsb.sh OUT
#                                  # env: TIERKV, RECORDS, OPS, FD_BUDGET, MEMORY, WORKLOADS, SYSTEMS
#
# Run it inside scripts/tiers.sh (the slow disk as a SATA SSD: HyperDB's D3-S4610 reads about
# 97K IOPS and 560 MB/s): tierkv's in-engine device model cannot throttle RocksDB, so the
# kernel's limits on a loop device are the only slow disk both see. Outside tiers.sh it runs
# on the bare disk with no device model (SLOW=PROFILE sets tierkv's model, for tierkv-only
# comparisons). Defaults: 8M records (1.1 GB), 2M operations per workload, a fast disk of
# 1/8.5 of the data (128 MiB; the ratio of the issue's small run), a 128 MiB memory budget
# for every system. Summary: OUT/summary.md (scripts/hyperdb/summary.py).
set -euo pipefail
OUT=${1:?usage: scripts/hyperdb/ycsb.sh OUT}
B=${TIERKV:-/tmp/rocks-target/release/tierkv}
RECORDS=${RECORDS:-8000000}
OPS=${OPS:-2000000}
FD_BUDGET=${FD_BUDGET:-128MiB}
MEMORY=${MEMORY:-128MiB}
SLOW=${SLOW:-none}
DIRS=()
if [ -n "${TIERKV_FAST_DIR:-}" ]; then
  DIRS=(--fast-dir "$TIERKV_FAST_DIR" --slow-dir "$TIERKV_SLOW_DIR")
fi
WORKLOADS=${WORKLOADS:-"a b c d e f"}
SYSTEMS=${SYSTEMS:-tierkv,rocksdb-tiered,rocksdb-fd}
mkdir -p "$OUT"
for w in $WORKLOADS; do
  dist=zipfian
  [ "$w" = d ] && dist=latest
  [ -f "$OUT/$w/results.json" ] && { echo "== have $w"; continue; }
  echo "== YCSB $w ($(date -u +%H:%M:%S))"
  "$B" bench --workload "$w" --distribution "$dist" --key-size 8 --record-size 136 \
    --records "$RECORDS" --ops "$OPS" --threads 8 --fd-budget "$FD_BUDGET" \
    --memory-budget "$MEMORY" --slow-device "$SLOW" "${DIRS[@]}" --systems "$SYSTEMS" \
    --no-progress --out "$OUT/$w" | tail -n 4
done
python3 "$(dirname "$0")/summary.py" "$OUT" | tee "$OUT/summary.md"
