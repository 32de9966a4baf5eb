#!/usr/bin/env bash
# Runs tierkv's fuzz targets one after the other for a bounded time each.
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default 180 s, every target)
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain. Built without a
# sanitizer: the engine and server have no unsafe code, and debug assertions plus overflow
# checks stay on. The growing corpus goes to fuzz/corpus/<target> (not committed), crashes
# to fuzz/artifacts/<target>; each target's last libFuzzer lines go to fuzz/logs/<target>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-180}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sst_table sst_damage wal_log wal_replay manifest ralt resp)
mkdir -p fuzz/logs
cargo +nightly fuzz build -s none || exit 1
for t in "${targets[@]}"; do
    case $t in
        wal_log|wal_replay) max_len=65536 ;;
        sst_table|manifest) max_len=16384 ;;
        *) max_len=4096 ;;
    esac
    mkdir -p "fuzz/corpus/$t"
    echo "== $t: ${secs}s"
    cargo +nightly fuzz run -s none "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        -print_final_stats=1 >"fuzz/logs/$t.log" 2>&1
    rc=$?
    grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|SUMMARY|panicked|Test unit written" \
        "fuzz/logs/$t.log" | sed "s/^/$t: /"
    [ $rc -eq 0 ] || echo "$t: exit code $rc (see fuzz/logs/$t.log)"
done
