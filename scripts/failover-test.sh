#!/usr/bin/env bash
# Failover under Redis Sentinel, on loopback: a tierkv primary, two tierkv replicas and
# three redis-sentinel processes; a client writing with WAIT 1 through redis-py's Sentinel
# client; ROUNDS times the primary is killed with kill -9, Sentinel promotes a replica and
# the killed server comes back as a replica of the new primary. Fails when a write
# acknowledged by WAIT is lost, a replica differs, or a failover takes longer than
# down-after-milliseconds + 10 s. (scripts/failover/failover.py; docs/DEPLOYMENT.md)
#
# Usage: scripts/failover-test.sh [OUT_DIR]          (CI: 3 rounds)
#        ROUNDS=20 TIERKV_BIN=path/to/tierkv scripts/failover-test.sh
# Installs redis-sentinel with apt-get and redis-py with pip when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "failover-test: $*"; }
die() { echo "failover-test: FAIL: $*" >&2; exit 1; }

if ! command -v redis-sentinel >/dev/null; then
  say "installing redis-sentinel"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-sentinel >/dev/null \
    || die "redis-sentinel is not installed and apt-get install failed"
fi
python3 -c "import redis" 2>/dev/null \
  || python3 -m pip install --quiet redis 2>/dev/null \
  || python3 -m pip install --quiet --break-system-packages redis \
  || die "cannot install redis-py"

if [ -z "${TIERKV_BIN:-}" ]; then
  cargo build --release -q -p tierkv-cli
  TIERKV_BIN=${CARGO_TARGET_DIR:-target}/release/tierkv
fi
out=${1:-$(mktemp -d)}
mkdir -p "$out"
say "rounds: ${ROUNDS:-3}; servers' and sentinels' files and logs in $out"
python3 scripts/failover/failover.py --tierkv "$TIERKV_BIN" --out "$out" \
  --rounds "${ROUNDS:-3}" --down-after "${DOWN_AFTER_MS:-1000}"
