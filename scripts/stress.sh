#!/usr/bin/env bash
# The long expected-state stress run (crates/tierkv/tests/stress.rs, docs/TESTING.md):
# half the time SIGKILLs of a child store (some at the engine's kill points), half the time
# emulated power cuts in process, every option combination in turn (one or two tiers,
# promotion on or off, sorted or semi-sorted slow tier, cache modes, block sizes, LZ4, sync
# never, sometimes or always). Every key is verified against the expected state after every
# kill and power cut. The last line is a summary of counts; the exit status is 0 only when
# nothing was lost, wrong or corrupt.
#
# Usage: scripts/stress.sh --minutes N [--dir DIR] [--seed S]
#   --dir DIR   keep the stores (and a failing run's state) in DIR instead of a temp dir
#   --seed S    replay a run (each run prints its seed; TIERKV_STRESS_SEED does the same)
# Builds the test binary with --release (CARGO_TARGET_DIR is honoured).
set -uo pipefail
cd "$(dirname "$0")/.."

minutes=""
dir=""
seed="${TIERKV_STRESS_SEED:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "stress.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$minutes" in
  ''|*[!0-9.]*) echo "stress.sh: --minutes N is required (a number)" >&2; exit 2 ;;
esac
if [ -z "$seed" ]; then
  seed=$(( $(date +%s%N) % 1000000007 ))
fi
secs=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60 / 2); if (s < 1) s = 1; print s }')
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "stress.sh: seed $seed, ${minutes} min (${secs} s of kills, ${secs} s of power cuts)"
cargo test --release -q -p tierkv --test stress --no-run 2>&1 | grep -v '^$' || true

status=0
for mode in stress_kills stress_power_cuts; do
  echo "stress.sh: $mode"
  env TIERKV_STRESS_SEED="$seed" TIERKV_STRESS_DURATION_SECS="$secs" TIERKV_STRESS_ALL_COMBOS=1 \
      ${dir:+TIERKV_STRESS_DIR="$dir/$mode"} \
      cargo test --release -q -p tierkv --test stress "$mode" -- --exact --nocapture 2>&1 \
    | tee -a "$log" | grep -E '^(stress|planted|thread|seed|combo|key|  )' || true
  if ! grep -q "test result: ok" < <(tail -n 5 "$log"); then
    status=1
  fi
done

# Add up both modes' "stress counts:" lines (combinations are counted per mode: 225 for
# kills, 150 for power cuts, which always sync some writes; a long run goes round again).
awk -v seed="$seed" -v status="$status" '
  /^stress counts:/ {
    for (i = 3; i <= NF; i++) {
      split($i, kv, "=")
      if (kv[1] == "mode") { mode = kv[2] } else { sum[kv[1]] += kv[2] }
    }
    combos[mode] += 0
    for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "combos") combos[mode] += kv[2] }
  }
  END {
    bad = sum["lost"] + sum["wrong"] + sum["checksum"]
    printf "stress.sh summary: seed %s, %d s: %d operations, %d writes, %d kills (%d at kill points), %d power cuts, %d combinations (%d with kills, %d with power cuts), %d verifications, %d lost writes, %d wrong reads, %d checksum errors: %s\n",
      seed, sum["secs"], sum["ops"], sum["writes"], sum["kills"], sum["kill_points"],
      sum["power_cuts"], combos["kills"] + combos["power_cuts"], combos["kills"], combos["power_cuts"],
      sum["verifications"], sum["lost"], sum["wrong"], sum["checksum"],
      (status == 0 && bad == 0) ? "PASS" : "FAIL"
  }' "$log"
exit "$status"
