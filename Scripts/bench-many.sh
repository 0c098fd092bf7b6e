#!/usr/bin/env bash
# Daemon memory with many small files (issue 4): packs a generated tree of N
# files, mounts it, and reports the daemon's peak and current RSS after
# mounting, after listing every file and after reading every file once.
#
#   Scripts/bench-many.sh [--files N] [--work DIR] [--label TEXT] [--reuse-bundle]
#                         [--max-peak-mib MIB] [--keep]
#     --files N     number of files (default 1,000,000; 100,000 takes well
#                   under a minute)
#     --work DIR    bundle, key and mount point (default $CACHE/run)
#     --reuse-bundle  mount the bundle a previous run left in WORK (the
#                   format is unchanged, so this measures the daemon only;
#                   that run needs --keep)
#     --max-peak-mib MIB  fail when the daemon's VmHWM is higher
#     --keep        keep the generated tree and the bundle for the next run
#   environment: ENCFS_BIN_DIR (release binaries; built when unset),
#                BENCH_MANY_CACHE (generated trees, default
#                /var/tmp/encfs-bench-many)
#
# Layout: CACHE/tree-N/ and CACHE/tree-N.json (the generated tree and its
# manifest); WORK/many-N.encfs, WORK/bench.key, WORK/mnt/ (the bundle, its
# public benchmark key, the mount point); WORK/results-N.json (results).
# At the end, also after a failure, the tree, the bundle, the key and the
# mount point are removed unless --keep; the results stay.
#
# Prints a markdown table and writes WORK/results-N.json. Exit 1 when a
# count or byte total is wrong or the peak is over --max-peak-mib; the
# mount is always unmounted.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

cache=${BENCH_MANY_CACHE:-/var/tmp/encfs-bench-many}
work=
files=1000000
keep=0
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --work) work=$2; shift 2 ;;
        --files) files=$2; args+=("$1" "$2"); shift 2 ;;
        --label|--json|--max-peak-mib) args+=("$1" "$2"); shift 2 ;;
        --keep) keep=1; shift ;;
        --reuse-bundle) args+=("$1"); shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-many: error: unknown option $1" >&2; exit 2 ;;
    esac
done
work=${work:-$cache/run}

if [ -z "${ENCFS_BIN_DIR:-}" ]; then
    swift build -c release >&2
    ENCFS_BIN_DIR="$(swift build -c release --show-bin-path)"
fi

mkdir -p "$work"
# shellcheck source=Scripts/bench/artifacts.sh
. Scripts/bench/artifacts.sh
# A mount left by a killed run would break the next one.
finish() {
    fusermount3 -u "$work/mnt" 2>/dev/null || true
    if [ "$keep" -eq 0 ]; then
        remove_bench_artifacts bench-many "$work" "many-$files.encfs" bench.key mnt
        remove_bench_artifacts bench-many "$cache" "tree-$files" "tree-$files.json"
    fi
}
trap finish EXIT
python3 Scripts/bench/bench_many.py --bin "$ENCFS_BIN_DIR" --cache "$cache" --work "$work" ${args[@]+"${args[@]}"}
