#!/usr/bin/env bash
# tierkv and the original HotRAP prototype side by side: the same kernel-throttled tiers
# (scripts/tiers.sh, fresh for every run), sizes, mix, key distribution and 16 client threads,
# the two systems alternating. One markdown table per cell in OUT/side-by-side.md.
#
#   sudo scripts/hotrap-side-by-side.sh [--preset authors|medium|check] [--slow gp3-max|hdd]
#        [--record-size 1024|200] [--cells ro:hotspot-5%,ro:zipfian,...] [--reps N]
#        [--systems tierkv,hotrap] [--tiers-dir DIR] [--out DIR]
#
# Needs root (tiers.sh), the prototype built by scripts/hotrap/build-hotrap.sh (HOTRAP_ROOT,
# default /tmp/hotrap) and tierkv's release binary; it says what is missing before starting.
# Presets, columns and what each figure means: scripts/hotrap/side_by_side.py and
# docs/bench/hotrap-peer.md. A run whose OUT/runs/*/result.json exists is not repeated.
set -euo pipefail
exec python3 "$(dirname "$0")/hotrap/side_by_side.py" grid "$@"
