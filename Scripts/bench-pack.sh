#!/usr/bin/env bash
# Pack time side by side (issues 14 and 15): mksquashfs and one or more
# encfs-pack builds on one data set, each build followed by `sync` inside the
# timing, the systems interleaved in every repetition.
#
#   Scripts/bench-pack.sh [--reps N] [--cold] [--zstd] [--out DIR] DATA [ENCFS_BIN_DIR...]
#
#   DATA           the source directory (e.g. the data set bench.sh made:
#                  /var/tmp/encfs-bench/data-full, or resources-quick)
#   ENCFS_BIN_DIR  directories with an encfs-pack binary (default: this
#                  tree's release build); e.g. Scripts/build-baseline.sh's
#   --reps N       repetitions (default 3)
#   --cold         `sync; echo 3 > drop_caches` before each build, so the
#                  source is read from disk (default: as bench.sh, the
#                  source stays in the page cache)
#   --zstd         compressed: mksquashfs -comp zstd -Xcompression-level 3
#                  against encfs-pack --compress zstd (default:
#                  mksquashfs -noI -noD -noF -noX against encfs-pack)
#   --out DIR      where the images go (default /var/tmp/encfs-bench-pack)
#
# Before each build the previous output is removed and `sync` runs outside
# the timing. Prints one line per build (seconds for the tool, and with the
# sync) with the 1-minute load average, then the medians and the ratio of
# each encfs build's median to mksquashfs's. Needs root for --cold.
#
# Exit codes: 0 done, 1 a step failed, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

reps=3 cold=0 zstd=0 out=/var/tmp/encfs-bench-pack positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) [ $# -ge 2 ] || { echo "bench-pack: error: --reps needs a number" >&2; exit 2; }; reps="$2"; shift ;;
    --cold) cold=1 ;;
    --zstd) zstd=1 ;;
    --out) [ $# -ge 2 ] || { echo "bench-pack: error: --out needs a directory" >&2; exit 2; }; out="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-pack: error: unknown option ($1)" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
case "$reps" in ''|*[!0-9]*|0) echo "bench-pack: error: --reps must be a positive number ($reps)" >&2; exit 2 ;; esac
[ ${#positional[@]} -ge 1 ] || { echo "bench-pack: error: missing DATA" >&2; echo "bench-pack: hint: see Scripts/bench-pack.sh --help" >&2; exit 2; }
data="${positional[0]}"
[ -d "$data" ] || { echo "bench-pack: error: not a directory ($data)" >&2; exit 1; }
bins=("${positional[@]:1}")
if [ ${#bins[@]} -eq 0 ]; then
  swift build -c release >&2
  bins=("$(swift build -c release --show-bin-path)")
fi
for b in "${bins[@]}"; do
  [ -x "$b/encfs-pack" ] || { echo "bench-pack: error: no encfs-pack in $b" >&2; exit 1; }
done
if [ "$cold" = 1 ] && [ "$(id -u)" -ne 0 ]; then echo "bench-pack: error: --cold needs root (drop_caches)" >&2; exit 1; fi
command -v mksquashfs >/dev/null || { echo "bench-pack: error: mksquashfs is missing (squashfs-tools)" >&2; exit 1; }

mkdir -p "$out"
key="$out/bench.key"
printf '%s\n' 5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e > "$key"
chmod 600 "$key"
trap 'rm -f "$out"/out.*' EXIT

names=(mksquashfs "${bins[@]}")
declare -A times
for rep in $(seq "$reps"); do
  for i in "${!names[@]}"; do
    rm -f "$out"/out.*
    sync
    [ "$cold" = 1 ] && echo 3 > /proc/sys/vm/drop_caches
    t0=$(date +%s.%N)
    if [ "$i" -eq 0 ]; then
      if [ "$zstd" = 1 ]; then args=(-comp zstd -Xcompression-level 3); else args=(-noI -noD -noF -noX); fi
      mksquashfs "$data" "$out/out.sq" "${args[@]}" -noappend -no-progress -quiet
    else
      args=(); [ "$zstd" = 1 ] && args=(--compress zstd)
      "${names[$i]}/encfs-pack" "$data" "$out/out.enc" --key-file "$key" --quiet "${args[@]}"
    fi
    t1=$(date +%s.%N)
    sync
    t2=$(date +%s.%N)
    total=$(echo "$t2 - $t0" | bc)
    times[$i]="${times[$i]:-} $total"
    printf '%-50s rep %d: tool %.3f s, with sync %.3f s (load %s)\n' "${names[$i]}" "$rep" \
      "$(echo "$t1 - $t0" | bc)" "$total" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
median() { printf '%s\n' $1 | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
sq=$(median "${times[0]}")
echo
echo "medians (with sync), $reps repetition(s), $([ "$cold" = 1 ] && echo "cold source" || echo "source in page cache"), $([ "$zstd" = 1 ] && echo "zstd level 3" || echo "uncompressed"):"
printf '  %-50s %.3f s\n' mksquashfs "$sq"
for i in $(seq 1 $(( ${#names[@]} - 1 ))); do
  m=$(median "${times[$i]}")
  printf '  %-50s %.3f s  (%.2fx mksquashfs)\n' "${names[$i]}/encfs-pack" "$m" "$(echo "$m / $sq" | bc -l)"
done
