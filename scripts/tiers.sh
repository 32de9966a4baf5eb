#!/usr/bin/env bash
# Kernel-enforced fast and slow tiers for side-by-side runs with peers that cannot use
# tierkv's in-engine device model (e.g. RocksDB).
#
# Creates two loop-device ext4 filesystems under DIR (DIR/fast and DIR/slow), throttles the
# slow one with cgroup I/O limits (cgroup v2 io.max, or v1 blkio.throttle.*), runs COMMAND
# inside that cgroup with TIERKV_FAST_DIR and TIERKV_SLOW_DIR set, and tears everything down
# afterwards (also on error or Ctrl-C).
#
# Usage:
#   scripts/tiers.sh [options] DIR -- COMMAND [ARGS...]
# Options:
#   --fast-size SIZE    size of the fast filesystem image (default 8G)
#   --slow-size SIZE    size of the slow filesystem image (default 64G)
#   --slow-iops N       read and write IOPS limit of the slow tier (default 3000, gp3)
#   --slow-bps BYTES    read and write bytes/s limit of the slow tier (default 131072000, 125 MiB/s)
# Example:
#   sudo scripts/tiers.sh /var/tmp/tiers -- sh -c \
#     'target/release/tierkv bench --slow-device none --fast-dir "$TIERKV_FAST_DIR" --slow-dir "$TIERKV_SLOW_DIR"'
set -euo pipefail

fast_size=8G slow_size=64G slow_iops=3000 slow_bps=$((125 * 1024 * 1024))
die() { echo "tiers.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --fast-size) fast_size=$2; shift 2 ;;
    --slow-size) slow_size=$2; shift 2 ;;
    --slow-iops) slow_iops=$2; shift 2 ;;
    --slow-bps) slow_bps=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    --) die "missing DIR before --" ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || die "usage: tiers.sh [options] DIR -- COMMAND [ARGS...] (see --help)"
root=$1; shift 2

# Preconditions, each with a clear explanation.
[ "$(id -u)" -eq 0 ] || die "needs root: loop devices, mounts and cgroup limits are privileged. Run it with sudo, or use tierkv's in-engine device model instead (tierkv bench --slow-device gp3)."
for tool in losetup mkfs.ext4 mount umount truncate; do
  command -v "$tool" >/dev/null || die "missing '$tool' (Debian: apt-get install util-linux e2fsprogs mount)."
done
[ -e /dev/loop-control ] || ls /dev/loop* >/dev/null 2>&1 || die "no /dev/loop* devices: this machine (or container) cannot create loop devices; try 'modprobe loop', or use the in-engine device model (--slow-device gp3)."

mkdir -p "$root"
fast_img="$root/fast.img" slow_img="$root/slow.img"
fast_mnt="$root/fast" slow_mnt="$root/slow"
fast_dev="" slow_dev="" cgroup_dir="" cg_version=""

cleanup() {
  set +e
  if [ -n "$cgroup_dir" ] && [ -d "$cgroup_dir" ]; then
    # Move ourselves out before removing the group.
    if [ "$cg_version" = 2 ]; then echo $$ > /sys/fs/cgroup/cgroup.procs 2>/dev/null
    else echo $$ > /sys/fs/cgroup/blkio/cgroup.procs 2>/dev/null; fi
    # A process of the command may still be exiting: retry for a few seconds.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      rmdir "$cgroup_dir" 2>/dev/null && break
      sleep 0.5
    done
  fi
  mountpoint -q "$fast_mnt" && umount "$fast_mnt"
  mountpoint -q "$slow_mnt" && umount "$slow_mnt"
  [ -n "$fast_dev" ] && losetup -d "$fast_dev"
  [ -n "$slow_dev" ] && losetup -d "$slow_dev"
  rm -f "$fast_img" "$slow_img"
  rmdir "$fast_mnt" "$slow_mnt" 2>/dev/null
}
trap cleanup EXIT INT TERM

truncate -s "$fast_size" "$fast_img"
truncate -s "$slow_size" "$slow_img"
fast_dev=$(losetup --find --show --direct-io=on "$fast_img") || die "losetup failed for the fast image"
slow_dev=$(losetup --find --show --direct-io=on "$slow_img") || die "losetup failed for the slow image"
mkfs.ext4 -q -F "$fast_dev"
mkfs.ext4 -q -F "$slow_dev"
mkdir -p "$fast_mnt" "$slow_mnt"
mount "$fast_dev" "$fast_mnt"
mount "$slow_dev" "$slow_mnt"
majmin=$(lsblk -ndo MAJ:MIN "$slow_dev" | tr -d ' ')

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg_version=2
  grep -qw io /sys/fs/cgroup/cgroup.controllers || die "cgroup v2 without the io controller: cannot throttle the slow tier."
  echo "+io" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  # Named by pid and time: a pid can come back while an old group is still being removed.
  cgroup_dir=/sys/fs/cgroup/tierkv-tiers-$$-$(date +%s%N)
  mkdir "$cgroup_dir"
  echo "$majmin riops=$slow_iops wiops=$slow_iops rbps=$slow_bps wbps=$slow_bps" > "$cgroup_dir/io.max"
elif [ -d /sys/fs/cgroup/blkio ]; then
  cg_version=1
  cgroup_dir=/sys/fs/cgroup/blkio/tierkv-tiers-$$-$(date +%s%N)
  mkdir "$cgroup_dir"
  echo "$majmin $slow_iops" > "$cgroup_dir/blkio.throttle.read_iops_device"
  echo "$majmin $slow_iops" > "$cgroup_dir/blkio.throttle.write_iops_device"
  echo "$majmin $slow_bps" > "$cgroup_dir/blkio.throttle.read_bps_device"
  echo "$majmin $slow_bps" > "$cgroup_dir/blkio.throttle.write_bps_device"
else
  die "no cgroup I/O controller found under /sys/fs/cgroup: cannot throttle the slow tier."
fi

echo "tiers.sh: fast tier $fast_mnt ($fast_dev), slow tier $slow_mnt ($slow_dev, $majmin) limited to $slow_iops IOPS and $slow_bps B/s (cgroup v$cg_version)" >&2
export TIERKV_FAST_DIR="$fast_mnt" TIERKV_SLOW_DIR="$slow_mnt"
set +e
( echo $BASHPID > "$cgroup_dir/cgroup.procs" && exec "$@" )
status=$?
exit $status
