#!/usr/bin/env bash
# A second, minimal benchmark harness (issue 15): plain commands, the options
# of the independent run the issue quotes, nothing shared with bench.py but
# the data set and the nullfuse source, to check bench.sh's method
# (docs/PERFORMANCE.md, "Method"): where the two disagree, the difference is
# in how they measure.
#
#   Scripts/bench-independent.sh [--quick] [--reps N] [--out DIR] [--systems a,b,...]
#
# Per repetition, each system in turn (the order rotated by one each
# repetition), every measurement after `sync; echo 3 > drop_caches` unless
# it says otherwise:
#   pack      rm the old image; sync; drop caches; time (build; sync): the
#             source is read from disk (bench.sh packs from the page cache)
#   mount     time from the mount command's start until `[ -e MNT/big.bin ]`
#             succeeds (bash's own stat, no fork), then the command's exit;
#             once with caches dropped (cold: binaries, libraries and the
#             image come from disk), once right after (warm)
#   seq       the image (or gocryptfs's ciphertext, or the source) cat into
#             the page cache, fresh mount (its own cache empty), dd bs=1M of
#             big.bin
#   rand1/4   the same: image cached, fresh mount, then fio --rw=randread
#             --bs=4k --ioengine=psync --direct=0 --numjobs=1|4 --time_based
#             --runtime=S over big.bin (buffered: a block read before is
#             answered from the mount's page cache, as for an application;
#             bench.sh uses --direct=1 so that every read reaches the daemon)
#   small     caches dropped, fresh mount, find small -type f | xargs cat
# Medians of N (default 3) with min-max; the 1-minute load average is printed
# with every figure. Nothing is pinned.
#
#   --quick          the quick data set (256 MiB + 5,000 files), fio 3 s, 1 repetition
#   --reps N         repetitions (default 3)
#   --out DIR        work directory (default /var/tmp/encfs-bench-independent)
#   --systems LIST   a subset of nullfuse,squashfuse,gocryptfs,encfs
#
# The data set is bench.py's (the same bytes as Scripts/bench.sh), made
# under DIR if missing. ENCFS_BIN_DIR selects the encfs binaries (default:
# swift build -c release). Needs root, fio, gocryptfs, squashfuse,
# squashfs-tools, gcc and libfuse3-dev (Scripts/bench.sh installs them).
# Leaves no mount behind, also on failure or Ctrl-C.
#
# Exit codes: 0 done, 1 a step failed, 2 usage error, 130 interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"

quick=0 reps=3 out=/var/tmp/encfs-bench-independent systems=nullfuse,squashfuse,gocryptfs,encfs
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 reps=1 ;;
    --reps) [ $# -ge 2 ] || { echo "bench-independent: error: --reps needs a number" >&2; exit 2; }; reps="$2"; shift ;;
    --out) [ $# -ge 2 ] || { echo "bench-independent: error: --out needs a directory" >&2; exit 2; }; out="$2"; shift ;;
    --systems) [ $# -ge 2 ] || { echo "bench-independent: error: --systems needs a list" >&2; exit 2; }; systems="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-independent: error: unknown argument ($1)" >&2; exit 2 ;;
  esac
  shift
done
case "$reps" in ''|*[!0-9]*|0) echo "bench-independent: error: --reps must be a positive number ($reps)" >&2; exit 2 ;; esac
IFS=, read -r -a wanted <<< "$systems"
for s in "${wanted[@]}"; do
  case "$s" in nullfuse|squashfuse|gocryptfs|encfs) ;; *) echo "bench-independent: error: unknown system ($s)" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-independent: error: must run as root (drop_caches, mounts)" >&2; exit 1; }
for tool in fio gocryptfs squashfuse mksquashfs gcc pkg-config python3 fusermount3; do
  command -v "$tool" >/dev/null || { echo "bench-independent: error: $tool is missing" >&2; echo "bench-independent: hint: Scripts/bench.sh installs the peers" >&2; exit 1; }
done

mkdir -p "$out/build" "$out/mnt"
out="$(cd "$out" && pwd)"
cleanup() {
  local mp
  for mp in "$out"/mnt/*; do
    if grep -q " $mp " /proc/self/mounts 2>/dev/null; then fusermount3 -u "$mp" 2>/dev/null || fusermount3 -uz "$mp" || true; fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${ENCFS_BIN_DIR:-}" ]; then
  swift build -c release >&2
  ENCFS_BIN_DIR=$(swift build -c release --show-bin-path)
fi
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
gcc -O2 -o "$out/build/nullfuse" Scripts/bench/nullfuse.c $(pkg-config --cflags --libs fuse3) -lpthread
python3 - "$out" "$quick" "$repo" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3] + "/Scripts/bench")
import bench
bench.DataSet(sys.argv[1], sys.argv[2] == "1", sys.argv[3]).ensure()
EOF
data="$out/data-$([ "$quick" = 1 ] && echo quick || echo full)"
fio_s=$([ "$quick" = 1 ] && echo 3 || echo 10)
key="$out/build/bench.key" pass="$out/build/gocryptfs.pass"
printf '%s\n' 5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e > "$key"
printf 'pw\n' > "$pass"
chmod 600 "$key" "$pass"

now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

image() {  # the file or directory a system reads from
  case "$1" in
    nullfuse) echo "$data" ;; squashfuse) echo "$out/build/data.squashfs" ;;
    gocryptfs) echo "$out/build/gocryptfs" ;; encfs) echo "$out/build/data.encfs" ;;
  esac
}
build() {
  local img; img=$(image "$1")
  case "$1" in
    squashfuse) mksquashfs "$data" "$img" -noI -noD -noF -noX -noappend -no-progress -quiet ;;
    encfs) "$ENCFS_BIN_DIR/encfs-pack" "$data" "$img" --key-file "$key" --quiet ;;
    gocryptfs)
      mkdir -p "$img" "$out/mnt/gocryptfs-rw"
      gocryptfs -init -q -scryptn 10 -passfile "$pass" "$img"
      gocryptfs -q -passfile "$pass" "$img" "$out/mnt/gocryptfs-rw"
      cp -a "$data/." "$out/mnt/gocryptfs-rw/"
      fusermount3 -u "$out/mnt/gocryptfs-rw" ;;
  esac
}
mount_it() {
  local mp="$out/mnt/$1" img; img=$(image "$1")
  case "$1" in
    nullfuse) "$out/build/nullfuse" "$data" "$mp" ;;
    squashfuse) squashfuse "$img" "$mp" ;;
    gocryptfs) gocryptfs -ro -q -passfile "$pass" "$img" "$mp" ;;
    encfs) "$ENCFS_BIN_DIR/encfs-mount" "$img" "$mp" --key-file "$key" ;;
  esac
}
unmount_it() {
  local mp="$out/mnt/$1" i
  for i in $(seq 50); do
    grep -q " $mp " /proc/self/mounts || return 0
    fusermount3 -u "$mp" 2>/dev/null && return 0
    sleep 0.1
  done
  fusermount3 -uz "$mp"
}
backing() {  # the file holding big.bin's bytes
  case "$1" in
    nullfuse) echo "$data/big.bin" ;;
    gocryptfs) find "$(image gocryptfs)" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2- ;;
    *) image "$1" ;;
  esac
}

# Seconds from the mount command's start to the first successful stat of big.bin.
timed_mount() {
  local mp="$out/mnt/$1" t0 t1 i=0
  mkdir -p "$mp"
  t0=$(now)
  mount_it "$1" &
  local cmd=$!
  until [ -e "$mp/big.bin" ]; do
    i=$((i + 1))
    if [ $((i % 1000)) -eq 0 ] && ! kill -0 "$cmd" 2>/dev/null && ! [ -e "$mp/big.bin" ]; then
      wait "$cmd" || true
      [ -e "$mp/big.bin" ] || { echo "bench-independent: error: $1 did not mount" >&2; exit 1; }
    fi
  done
  t1=$(now)
  wait "$cmd"
  echo "$t1 - $t0" | bc
}
fio_iops() {  # file jobs
  fio --name=rand4k --filename="$1" --readonly --rw=randread --bs=4k --ioengine=psync --direct=0 \
    --numjobs="$2" --time_based --runtime="$fio_s" --group_reporting --output-format=json 2>/dev/null \
    | python3 -c 'import json,sys; t=sys.stdin.read(); print(round(json.loads(t[t.index("{"):])["jobs"][0]["read"]["iops"]))'
}

declare -A results
record() { results[$1.$2]="${results[$1.$2]:-} $3"; printf '  %-10s %-6s %12s   (load %s)\n' "$1" "$2" "$3" "$(load)" >&2; }

log "work dir $out, data $data, $reps repetition(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${wanted[@]}"; do
  [ "$s" = nullfuse ] || [ -e "$(image "$s")" ] || { log "building $s once"; build "$s"; }
done
started_load=$(load)
for rep in $(seq "$reps"); do
  n=${#wanted[@]}; turn=$(( (rep - 1) % n ))
  order=("${wanted[@]:$turn}" "${wanted[@]:0:$turn}")
  log "repetition $rep/$reps: ${order[*]}"
  for s in "${order[@]}"; do
    mp="$out/mnt/$s"
    if [ "$s" != nullfuse ]; then
      rm -rf "$(image "$s")"; drop
      t0=$(now); build "$s"; sync; t1=$(now)
      record "$s" pack "$(echo "$t1 - $t0" | bc)"
    fi
    drop; record "$s" mount "$(timed_mount "$s")"; unmount_it "$s"
    record "$s" mountwarm "$(timed_mount "$s")"; unmount_it "$s"
    cat "$(backing "$s")" > /dev/null
    timed_mount "$s" > /dev/null
    record "$s" seq "$(LC_ALL=C dd if="$mp/big.bin" of=/dev/null bs=1M 2>&1 \
      | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "copied,") printf "%d", $1 / 1048576 / $(i + 1) }')"
    unmount_it "$s"
    for jobs in 1 4; do
      cat "$(backing "$s")" > /dev/null
      timed_mount "$s" > /dev/null
      record "$s" "rand$jobs" "$(fio_iops "$mp/big.bin" "$jobs")"
      unmount_it "$s"
    done
    drop; timed_mount "$s" > /dev/null
    files=$(find "$data/small" -type f | wc -l)
    t0=$(now); (cd "$mp" && find small -type f -print0 | xargs -0 cat > /dev/null); t1=$(now)
    record "$s" small "$(echo "$files / ($t1 - $t0)" | bc)"
    unmount_it "$s"
  done
done

stat_of() {  # "v1 v2 ..." -> "median [min-max]"
  python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; f=(lambda x: f"{x:.3f}" if x < 100 else f"{x:,.0f}"); print(f"{f(statistics.median(v))} [{f(min(v))}-{f(max(v))}]" if v else "–")' $1
}
echo
echo "## bench-independent ($([ "$quick" = 1 ] && echo quick || echo full)), $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$repo" describe --always --dirty)"
echo
echo "load average (1 min) at start $started_load, at end $(load); $(nproc) CPUs; $reps repetition(s), median [min-max]; fio ${fio_s} s, --direct=0, image cached, fresh mount"
echo
echo "| system | seq, image cached, FUSE cold (MiB/s) | 4 KiB random, 1 job (IOPS) | 4 KiB random, 4 jobs (IOPS) | small files, cold (files/s) | mount, cold (s) | mount, warm (s) | pack incl. sync, cold source (s) |"
echo "|---|---|---|---|---|---|---|---|"
for s in "${wanted[@]}"; do
  row="| $s"
  for m in seq rand1 rand4 small mount mountwarm pack; do row="$row | $(stat_of "${results[$s.$m]:-}")"; done
  echo "$row |"
done
