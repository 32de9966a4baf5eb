#!/usr/bin/env bash
# AC-Key's phase-change experiment (AC-Key §5.3), repeated: a scan phase where caching blocks
# pays, then a skewed get phase where caching keys and values pays. Each repetition runs
# every system once, in an order rotated by one per repetition (so no system always runs
# first or last on a shared machine), and the summary gives, per system and phase, the
# median over repetitions of the throughput over the phase's second half (after the
# adaptive cache has had half the phase to converge) and of the disk reads per operation
# over the same span. Reads per operation do not depend on the machine's disk latency, so
# they compare cache configurations where throughput is too noisy to.
#
#   scripts/ac-key-phase.sh [OUT_DIR] [extra tierkv bench flags...]
#
# Environment:
#   TIERKV          the tierkv binary (default: target/release/tierkv)
#   AC_REPS         repetitions (default 3)
#   AC_SYSTEMS      systems (default: adaptive, block-only and the fixed splits that were
#                   best in earlier runs)
#   AC_SD_PROFILE   the slow disk's device model (default custom:8000:200: 8000 IOPS,
#                   200 MiB/s). Both phases are bound by slow-disk reads (scans read ~2-3
#                   blocks each, 1% of gets go to the uniform tail), and this machine's disk
#                   served the same reads at anywhere from 130 to 260 MiB/s within one run;
#                   a model just below its slowest rate makes the disk the same for every
#                   system and repetition. `none` runs on the bare disk.
# Each repetition writes OUT_DIR/rep<N>/report.md and results.json; the summary goes to
# OUT_DIR/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/ac-key-phase}
shift || true
bin=${TIERKV:-${CARGO_TARGET_DIR:-target}/release/tierkv}
reps=${AC_REPS:-3}
sd_profile=${AC_SD_PROFILE:-custom:8000:200}
IFS=, read -r -a systems <<< "${AC_SYSTEMS:-tierkv,tierkv-blockonly,tierkv-split:8:0:2,tierkv-split:5:0:5,tierkv-split:2:0:8}"
[ -x "$bin" ] || { echo "ac-key-phase.sh: $bin not found; build it with cargo build --release -p tierkv-cli" >&2; exit 1; }
n=${#systems[@]}
for ((r = 0; r < reps; r++)); do
    order=()
    for ((i = 0; i < n; i++)); do order+=("${systems[$(((i + r) % n))]}"); done
    list=$(IFS=,; echo "${order[*]}")
    echo "== repetition $((r + 1)) of $reps: $list"
    "$bin" bench --scale small --distribution phased:crates/tierkv-bench/phases/ac-key-phase-change.txt \
        --record-size 128 --slow-device "$sd_profile" --cache-size 8MiB --ops 24200000 --interval 1 \
        --systems "$list" --no-progress --out "$out/rep$((r + 1))" "$@" > /dev/null
done
python3 - "$out" "$reps" <<'EOF'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
runs = {}
for r in range(1, reps + 1):
    for s in json.load(open(f"{out}/rep{r}/results.json"))["systems"]:
        runs.setdefault(s["name"], []).append(s["phases"])
phases = max(len(p) for ps in runs.values() for p in ps)
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
rows = {}
for name, ps in runs.items():
    rows[name] = [(med([p[i]["second_half_ops_per_sec"] for p in ps]),
                   med([p[i]["second_half_read_ios_per_op"] for p in ps]),
                   [round(p[i]["second_half_ops_per_sec"]) for p in ps]) for i in range(phases)]
lines = [f"Medians over {reps} repetitions, each phase's second half: ops/s (vs the best "
         "system's median), disk reads per operation (vs the fewest), and every repetition's ops/s.", "",
         "| system | " + " | ".join(f"phase {i} ops/s | reads/op | runs" for i in range(phases)) + " |",
         "|---|" + "--:|--:|---|" * phases]
best = [(max(r[i][0] for r in rows.values()), min(r[i][1] for r in rows.values() if r[i][1] is not None))
        for i in range(phases)]
for name, r in rows.items():
    cells = []
    for i, (ops, ios, each) in enumerate(r):
        cells.append(f"{ops:,.0f} ({ops / best[i][0]:.2f}x)")
        cells.append("-" if ios is None else
                     f"{ios:.4f} ({ios / best[i][1]:.2f}x)" if best[i][1] > 0 else f"{ios:.4f}")
        cells.append(", ".join(f"{x:,}" for x in each))
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
text = "\n".join(lines) + "\n"
open(f"{out}/summary.md", "w").write(text)
print(text)
EOF
