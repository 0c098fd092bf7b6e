#!/usr/bin/env bash
# Side-by-side read benchmark (issue 4): plain directory, nullfuse (FUSE
# alone, no crypto), squashfuse (uncompressed image), gocryptfs -ro and encfs,
# measured in one run on one deterministic data set; optionally encfs-base,
# another build of encfs, to compare two builds.
#
#   Scripts/bench.sh [--quick] [--out DIR] [--reps N] [--systems a,b,...] [--read-ahead-kb KB]
#                    [--baseline-bin DIR] [--dataset random|resources|mixed] [--keep]
#   Scripts/bench.sh --dataset realtree|linux|TREE [--dataset ...] [--quick] [--reps N] [--systems a,b,...]
#                    [--out DIR] [--keep]
#
# Installs what is missing (Debian packages), builds the encfs release
# binaries and Scripts/bench/nullfuse.c, makes the data set under DIR
# (default /var/tmp/encfs-bench), measures, prints a markdown table and
# writes DIR/results.md and DIR/results.json. Every figure is the median
# [min-max] of N repetitions (default 3).
#
# DIR holds:
#   results.md, results.json   the results (kept)
#   logs/                      one log per mounted system (kept)
#   data-quick/, data-full/, resources-quick/, resources-full/
#                              the data set (431 MiB with --quick), with a
#                              .json stamp beside it
#   build/                     bundles, squashfs images, the gocryptfs tree,
#                              the benchmark key: several GiB
#   mnt/, bin/                 mount points, the nullfuse binary
# At the end, also after a failure, everything but the results and logs is
# removed, unless --keep.
#
#   --quick          a quarter of the data (256 MiB file, 5,000 small files),
#                    3 s fio runs instead of 10 s; under 10 minutes on 2 cores
#   --out DIR        work directory (see above)
#   --keep           keep the data set, bundles and images: the next run with
#                    the same DIR reuses the data set instead of generating it
#   --reps N         repetitions per figure (default 3)
#   --systems LIST   a subset of plain,nullfuse,squashfuse,gocryptfs,encfs,
#                    encfs-classic (encfs --transport classic),
#                    encfs-uring (encfs --transport uring),
#                    squashfuse-zstd, squashfuse-ll-zstd,
#                    squashfuse-ll-zstd-matched, encfs-zstd,
#                    encfs-zstd-matched (see --dataset), encfs-zstd-uring
#                    (encfs-zstd --transport uring; encfs-zstd-classic is
#                    another name for encfs-zstd, classic being the default),
#                    encfs-zstd-32k (encfs-zstd packed with --chunk-size 32K)
#                    (and encfs-base, encfs-zstd-base with --baseline-bin);
#                    with --dataset realtree|linux|TREE a subset of the
#                    mounts of Scripts/bench/bench_tree.py (its --help)
#   --dataset NAME   random (default: incompressible) or resources: a
#                    compressible tree like shipped resources (a SQLite
#                    database, JS/CSS/JSON/HTML/CSV/text, some media, a
#                    duplicated directory) under DIR/resources-*; or mixed: a
#                    second compressible tree made differently (text, markup
#                    and BMP images from a Zipf-distributed vocabulary,
#                    log-normal file sizes; bench.py's MixedDataSet) under
#                    DIR/mixed-*. Both compared by default as plain, encfs,
#                    encfs-zstd (--compress zstd at encfs-pack's default
#                    level; BENCH_ENCFS_ZSTD_ARGS adds arguments),
#                    squashfuse-ll-zstd (mksquashfs -comp zstd at its
#                    defaults, squashfuse_ll) and squashfuse-ll-zstd-matched
#                    (mksquashfs at encfs-pack's default level); on request
#                    squashfuse-zstd (the same image, high-level squashfuse)
#                    and encfs-zstd-matched (encfs at mksquashfs's default
#                    level). realtree: the real-tree benchmark (issue 31,
#                    Scripts/bench/bench_tree.py) on /usr/include and
#                    /usr/lib/python3.11; linux: on Debian's Linux source
#                    (linux-source-6.1, installed and unpacked into DIR);
#                    TREE: on any directory (repeatable, to rerun one tree).
#                    Each tree: encfs-zstd, mksquashfs -comp zstd and
#                    mkfs.erofs -zlz4hc images (sizes, pack times, each tool
#                    also at the other's default level), and every file read
#                    cold with 1 and 4 jobs and ls -lR through encfs-mount
#                    (classic and --transport uring),
#                    squashfuse_ll, the kernel's squashfs and EROFS (loop
#                    mounts), and the floor: a plain copy of the tree read
#                    directly and through nullfuse (opens answered, and
#                    skipped as encfs-mount skips them), with the FUSE
#                    requests per file counted (a tracepoint of recent
#                    kernels); results in DIR/tree-results.md and .json. With
#                    --quick, realtree is /usr/lib/python3.11 alone and any
#                    tree gets 1 repetition (about a minute)
#   --read-ahead-kb KB  set every FUSE mount's read-ahead (bdi read_ahead_kb,
#                    128 by default in the kernel) after mounting, to compare
#                    all systems at one read-ahead
#   --baseline-bin DIR  another build's encfs-pack and encfs-mount release
#                    binaries (Scripts/build-baseline.sh REV makes them): adds
#                    the system encfs-base, the same commands as encfs with
#                    these binaries and a bundle of its own, and a table of
#                    encfs / encfs-base ratios of medians, to show whether a
#                    change moved a figure beyond the noise; the system
#                    encfs-base-uring (the same with --transport uring, on
#                    request in --systems) gets its table against encfs-uring,
#                    and encfs-zstd-base (the same for encfs-zstd, on request)
#                    against encfs-zstd
#
# Environment: BENCH_ENCFS_PACK_ARGS (e.g. "--chunk-size 256K") and
# BENCH_ENCFS_MOUNT_ARGS are appended to the encfs-pack / encfs-mount command
# lines (encfs-base's too), to compare settings.
#
# Needs root: it installs packages, writes /proc/sys/vm/drop_caches and
# mounts. It leaves no mount behind, also on failure or Ctrl-C.
#
# Exit codes: 0 done, 1 a step failed, 2 usage error, 130 interrupted.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."
repo="$PWD"
# shellcheck source=Scripts/bench/artifacts.sh
. Scripts/bench/artifacts.sh
export PATH="/opt/swift/usr/bin:$PATH"
started=$(date +%s)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

quick=()
keep=0
out=/var/tmp/encfs-bench
baseline=
systems=
extra=()
trees=()
reps=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --keep) keep=1 ;;
    --out) [ $# -ge 2 ] || { echo "bench.sh: error: --out needs a directory" >&2; exit 2; }; out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    --baseline-bin) [ $# -ge 2 ] || { echo "bench.sh: error: --baseline-bin needs a directory" >&2; exit 2; }; baseline="$2"; shift ;;
    --baseline-bin=*) baseline="${1#--baseline-bin=}" ;;
    --dataset) [ $# -ge 2 ] || { echo "bench.sh: error: --dataset needs a value" >&2; exit 2; }
      case "$2" in
        random|resources|mixed) extra+=(--dataset "$2") ;;
        realtree) trees+=(/usr/include /usr/lib/python3.11) ;;
        linux) trees+=(linux) ;;
        *) if [ -d "$2" ]; then trees+=("$(cd "$2" && pwd)"); else
             echo "bench.sh: error: --dataset is random, resources, mixed, realtree, linux or a directory ($2)" >&2; exit 2; fi ;;
      esac
      shift ;;
    --systems) [ $# -ge 2 ] || { echo "bench.sh: error: $1 needs a value" >&2; exit 2; }; systems="$2"; shift ;;
    --reps) [ $# -ge 2 ] || { echo "bench.sh: error: $1 needs a value" >&2; exit 2; }
      reps="$2"; extra+=("$1" "$2"); shift ;;
    --read-ahead-kb)
      [ $# -ge 2 ] || { echo "bench.sh: error: $1 needs a value" >&2; exit 2; }
      extra+=("$1" "$2"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: error: unknown argument ($1)" >&2; echo "bench.sh: hint: see Scripts/bench.sh --help" >&2; exit 2 ;;
  esac
  shift
done

# Checked before the build, which takes minutes. A relative DIR is taken from
# where bench.sh was called.
if [ -n "$baseline" ]; then
  case "$baseline" in /*) ;; *) baseline="$caller/$baseline" ;; esac
  for tool in encfs-pack encfs-mount; do
    if [ ! -f "$baseline/$tool" ] || [ ! -x "$baseline/$tool" ]; then
      echo "bench.sh: error: --baseline-bin has no $tool ($baseline)" >&2
      echo "bench.sh: hint: build one with Scripts/build-baseline.sh REV" >&2
      exit 2
    fi
  done
  baseline="$(cd "$baseline" && pwd)"
  extra+=(--baseline-bin "$baseline")
elif [[ ",$systems," == *,encfs-base,* || ",$systems," == *,encfs-zstd-base,* ]]; then
  echo "bench.sh: error: --systems encfs-base and encfs-zstd-base need --baseline-bin DIR" >&2
  exit 2
fi
if [ ${#trees[@]} -gt 0 ] && { [ -n "$baseline" ] || [ ${#extra[@]} -gt $(( ${reps:+2} + 0 )) ]; }; then
  echo "bench.sh: error: --dataset realtree, linux or TREE takes only --quick, --reps, --systems, --out and --keep" >&2
  exit 2
fi
if [ ${#trees[@]} -gt 0 ] && [ -n "$systems" ]; then
  # bench_tree.py's mounts, checked here rather than after the build.
  python3 -B -c 'import sys; sys.path.insert(0, "Scripts/bench"); from bench_tree import MOUNTS
bad = [s for s in sys.argv[1].split(",") if s not in MOUNTS]
bad and sys.exit("bench.sh: error: unknown system (%s)\nbench.sh: hint: --systems takes %s" % (bad[0], ",".join(MOUNTS)))' "$systems" || exit 2
fi
[ -z "$systems" ] || extra+=(--systems "$systems")

if [ "$(id -u)" -ne 0 ]; then
  echo "bench.sh: error: must run as root (apt-get, drop_caches, mounts)" >&2
  exit 1
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# Unmounts everything mounted below $out, deepest first: the safety net
# behind bench.py's own cleanup, for a crash, a kill or Ctrl-C.
cleanup() {
  local mp
  while IFS= read -r mp; do
    [ -n "$mp" ] || continue
    mp="$(printf '%b' "$mp")"  # mountinfo escapes spaces and the like as \040
    fusermount3 -u "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
    echo "bench.sh: unmounted $mp" >&2
  done < <(awk -v p="$out/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  if [ "$keep" -eq 0 ]; then
    remove_bench_artifacts bench.sh "$out" build mnt bin data-quick data-quick.json data-full data-full.json \
      resources-quick resources-quick.json resources-full resources-full.json \
      mixed-quick mixed-quick.json mixed-full mixed-full.json tree-build linux-source-6.1
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== dependencies" >&2
Scripts/install-deps.sh
peers=(gocryptfs squashfuse squashfs-tools fio gcc pkg-config libfuse3-dev openssl python3)
# The real-tree runs: kernel EROFS images (mkfs.erofs), python3.11's tree.
[ ${#trees[@]} -eq 0 ] || peers+=(erofs-utils python3.11 xz-utils)
[[ " ${trees[*]} " != *" linux "* ]] || peers+=(linux-source-6.1)
missing=()
for p in "${peers[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "== build (release)" >&2
swift build -c release >&2
bin="$(swift build -c release --show-bin-path)"
mkdir -p "$out/bin"
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
gcc -O2 -Wall -Wextra -o "$out/bin/nullfuse" Scripts/bench/nullfuse.c $(pkg-config --cflags --libs fuse3) -lpthread

if [ ${#trees[@]} -gt 0 ]; then
  # Debian's Linux source: unpacked once into DIR (kept with --keep).
  for i in "${!trees[@]}"; do
    [ "${trees[$i]}" = linux ] || continue
    if [ ! -d "$out/linux-source-6.1" ]; then
      echo "== unpacking /usr/src/linux-source-6.1.tar.xz into $out" >&2
      tar -C "$out" -xJf /usr/src/linux-source-6.1.tar.xz
    fi
    trees[$i]="$out/linux-source-6.1"
  done
  # realtree's short mode: one tree, one repetition (about a minute).
  if [ ${#quick[@]} -gt 0 ]; then
    [ "${trees[*]}" != "/usr/include /usr/lib/python3.11" ] || trees=(/usr/lib/python3.11)
    [ -n "$reps" ] || reps=1
  fi
  modprobe -q loop 2>/dev/null || true
  modprobe -q squashfs 2>/dev/null || true
  modprobe -q erofs 2>/dev/null || true
  tree_args=()
  for t in "${trees[@]}"; do tree_args+=(--tree "$t"); done
  echo "== real trees (work dir $out)" >&2
  python3 Scripts/bench/bench_tree.py --out "$out" --bin "$bin" --nullfuse "$out/bin/nullfuse" ${reps:+--reps "$reps"} \
    ${systems:+--systems "$systems"} "${tree_args[@]}"
  echo "bench.sh: results in $out/tree-results.md and $out/tree-results.json; total $(( $(date +%s) - started )) s" >&2
  exit 0
fi

echo "== benchmark (work dir $out)" >&2
python3 Scripts/bench/bench.py --out "$out" --bin "$bin" --nullfuse "$out/bin/nullfuse" --repo "$repo" \
  "${quick[@]}" "${extra[@]}"
echo "bench.sh: results in $out/results.md and $out/results.json; total $(( $(date +%s) - started )) s" >&2
