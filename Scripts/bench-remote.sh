#!/usr/bin/env bash
# Remote-bundle benchmark (issue 12): a bundle served by nginx on loopback,
# with 0 and 20 ms of added latency (Scripts/fault-proxy.py), read through
#   encfs-local   encfs-mount of the bundle file (the reference)
#   encfs-local-classic  the same with --transport classic, the transport
#                 remote mounts are served on (not in the default set)
#   encfs-http    encfs-mount URL (range requests, ciphertext cache)
#   rclone-http   rclone mount of the plain files over rclone's http
#                 backend, --vfs-cache-mode full
#   rclone-crypt  rclone mount of an rclone crypt remote over the http
#                 backend (the closest encrypted peer), same cache mode
# Reports mount time, time to the first byte of a cold file, cold and warm
# sequential MiB/s, 4 KiB random reads per second cold and warm, and bytes
# the server sent per byte read (from nginx's access log).
#
#   Scripts/bench-remote.sh [--quick] [--reps N] [--out DIR] [--systems a,b,...]
#                           [--baseline-bin DIR] [--warm-passes N] [--keep]
#   Scripts/bench-remote.sh --fleet [--quick] [--fleet-parts LIST] [--out DIR]
#
#   --quick        a 64 MiB file instead of 512 MiB, 200 random reads
#                  instead of 1000; a few minutes on 2 cores
#   --reps N       measure every system N times, round by round, and report
#                  medians with their ranges (default 1)
#   --out DIR      work directory (default /var/tmp/encfs-bench-remote):
#                    results.json              the results (kept)
#                    nginx/                    the server's config and logs (kept)
#                    src/, www/, data-SIZE     the file, what the server serves
#                                              (bundle, plain copy, rclone crypt
#                                              tree) and their stamp
#                    cache/, cache-warm-N/     the mounts' ciphertext caches
#                    mnt/, mnt-warm-N/, key, *.conf, proxy-*.port
#                  at the end, also after a failure, all but the results and
#                  nginx/ is removed unless --keep
#   --keep         keep the data and caches: the next run with the same DIR
#                  and size reuses the data instead of making it again
#   --systems LIST a subset of encfs-local,encfs-http,rclone-http,rclone-crypt
#                  (default all four), or encfs-http-base and
#                  encfs-local-classic as well
#   --baseline-bin DIR
#                  encfs-http-base: encfs-mount URL with the encfs-mount in
#                  DIR (Scripts/build-baseline.sh REV), to compare two
#                  builds in one run
#   --fleet        instead of the above (issue 30): SigV4-signed against
#                  unsigned cold sequential reads from one nginx, and
#                  a failover to a --mirror when the first nginx stalls
#                  (the stall, MiB/s after it, a direct mount of the
#                  mirror), time to the first byte of 48 files without
#                  and with --prefetch-list; Scripts/bench/bench_fleet.py; results in
#                  DIR/fleet-results.json; --quick: 128 MiB, else 256 MiB
#   --fleet-parts LIST
#                  with --fleet, a subset of sigv4,failover,prefetch
#                  (default all three); FLEET_CONNECTIONS=N in the
#                  environment sets the prefetch part's --connections (4);
#                  FLEET_NO_PAGE_REPORTING=1 turns a virtual machine's free
#                  page reporting off during the failover part (and back)
#   --warm-passes N
#                  warm sequential reads: every system and latency of the
#                  run mounted at once (each with its own cache), the file
#                  read once through each, then N rounds of one pass per
#                  system after dropping the kernel's caches, in
#                  balanced orders (each system after each other equally
#                  often); medians, quartiles and per-round ratios
#                  (default 60 with --quick, else 10)
#
# Needs root (drop_caches, mounts); installs nginx and rclone when missing.
# Leaves no mount or server behind, also on failure or Ctrl-C.
# Exit codes: 0 done, 1 a step failed, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
quick=0
fleet=0
fleet_parts=sigv4,failover,prefetch
reps=1
baseline=
warm_passes=
keep=0
out=/var/tmp/encfs-bench-remote
systems=encfs-local,encfs-http,rclone-http,rclone-crypt
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --fleet) fleet=1 ;;
    --fleet-parts) fleet_parts=${2:?--fleet-parts needs a list}; shift ;;
    --keep) keep=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift
            [[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "bench-remote.sh: error: --reps must be a positive number" >&2; exit 2; } ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --baseline-bin) baseline=${2:?--baseline-bin needs a directory}; shift ;;
    --systems) systems=${2:?--systems needs a list}; shift ;;
    --warm-passes) warm_passes=${2:?--warm-passes needs a number}; shift
            [[ "$warm_passes" =~ ^[1-9][0-9]*$ ]] || { echo "bench-remote.sh: error: --warm-passes must be a positive number" >&2; exit 2; } ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "bench-remote.sh: error: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "bench-remote.sh: error: needs root (drop_caches, mounts)" >&2; exit 1; }
missing=()
for p in nginx rclone fuse3; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; fi
swift build -c release -Xswiftc -warnings-as-errors >/dev/null
bin=$(swift build -c release --show-bin-path)
# shellcheck source=Scripts/bench/artifacts.sh
. Scripts/bench/artifacts.sh
finish() {
  if [ "$keep" -eq 0 ]; then
    remove_bench_artifacts bench-remote.sh "$out" src www 'data-*' key cache 'cache-warm-*' mnt 'mnt-warm-*' \
      rclone.conf pack-rclone.conf 'proxy-*.port'
  fi
}
trap finish EXIT
if [ "$fleet" -eq 1 ]; then
  trap 'remove_bench_artifacts bench-remote.sh "$out" fleet-src fleet-www fleet-many fleet-list.txt fleet-list-adjacent.txt fleet-key "cache-*" "mnt-*" proxy-fleet.port' EXIT
  /usr/bin/python3 Scripts/bench/bench_fleet.py --bin "$bin" --out "$out" --quick "$quick" --parts "$fleet_parts"
  exit 0
fi
/usr/bin/python3 Scripts/bench/bench_remote.py --bin "$bin" --out "$out" --systems "$systems" --quick "$quick" --reps "$reps" \
  --baseline-bin "$baseline" ${warm_passes:+--warm-passes "$warm_passes"}
