#!/usr/bin/env bash
# What the lock machinery costs a mount, beside another build: sequential
# and 4 KiB random reads on fresh mounts (cold page cache), and open+close
# of one cached file, for the default mount and each protection class.
#
#   Scripts/bench-lock.sh --baseline-bin DIR [--reps N]
#
#   --baseline-bin DIR  another build's release binaries
#                       (Scripts/build-baseline.sh REV makes them)
#   --reps N            repetitions, interleaved (default 5)
#
# Works in /var/tmp/encfs-bench-lock (a 128 MiB random file, packed once);
# unmounts what it mounts. Needs root (the read-ahead), python3 and
# fusermount3. Prints medians and every repetition.
#
# Exit codes: 0 done, 1 a step failed, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
baseline=
reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline-bin) [ $# -ge 2 ] || { echo "bench-lock.sh: error: --baseline-bin needs a directory" >&2; exit 2; }; baseline="$2"; shift ;;
    --reps) [ $# -ge 2 ] || { echo "bench-lock.sh: error: --reps needs a number" >&2; exit 2; }; reps="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-lock.sh: error: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$baseline" ] || { echo "bench-lock.sh: error: --baseline-bin DIR is required" >&2; exit 2; }
swift build -c release -Xswiftc -warnings-as-errors >&2
bin="$(swift build -c release --show-bin-path)"
work=/var/tmp/encfs-bench-lock
mkdir -p "$work/src" "$work/mnt"
cd "$work"
[ -f src/big ] || head -c 134217728 /dev/urandom > src/big
[ -f key ] || "$bin/encfs-keygen" --symmetric -o key
[ -f b.encfs ] || "$bin/encfs-pack" src b.encfs --key-file key --quiet
trap 'fusermount3 -u "$work/mnt" 2>/dev/null || true' EXIT
python3 - "$baseline" "$bin" "$reps" <<'PY'
import os, random, statistics, subprocess, sys, time
base, mine, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
configs = [('baseline', base, []), ('this build', mine, []),
           ('this build, complete', mine, ['--protection', 'complete']),
           ('this build, unless-open', mine, ['--protection', 'unless-open'])]
def mounted(binary, extra, measure):
    subprocess.run([binary + '/encfs-mount', 'b.encfs', 'mnt', '--key-file', 'key'] + extra, check=True)
    try: return measure()
    finally:
        subprocess.run(['fusermount3', '-u', 'mnt'], check=True)
        time.sleep(0.2)
def sequential():
    fd, n, t = os.open('mnt/big', os.O_RDONLY), 0, time.perf_counter()
    while (piece := os.read(fd, 1 << 20)): n += len(piece)
    os.close(fd)
    return n / (time.perf_counter() - t) / 2**20
def random4k():
    fd = os.open('mnt/big', os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    pick = random.Random(7)
    offsets = [pick.randrange((128 << 20) // 4096) * 4096 for _ in range(6000)]
    t = time.perf_counter()
    for offset in offsets: os.pread(fd, 4096, offset)
    os.close(fd)
    return len(offsets) / (time.perf_counter() - t)
def opens():
    os.stat('mnt/big')
    t = time.perf_counter()
    for _ in range(3000): os.close(os.open('mnt/big', os.O_RDONLY))
    return (time.perf_counter() - t) / 3000 * 1e6
results = {}
for _ in range(reps):
    for name, binary, extra in configs:
        row = results.setdefault(name, {'sequential MiB/s': [], '4 KiB random reads/s': [], 'open+close µs': []})
        row['sequential MiB/s'].append(mounted(binary, extra, sequential))
        row['4 KiB random reads/s'].append(mounted(binary, extra, random4k))
        row['open+close µs'].append(mounted(binary, extra, opens))
for name, row in results.items():
    print(name + ': ' + '; '.join('%s %.1f [%s]' % (k, statistics.median(v), ' '.join('%.0f' % x for x in v))
                                  for k, v in row.items()))
PY
