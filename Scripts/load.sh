#!/usr/bin/env bash
# Load test against one encfs mount, for SECONDS (default 60; CI runs 10):
#
#   - 16 fio jobs: 8 sequential and 8 random readers over 8 files that fio
#     itself wrote into the source before packing (verify=crc32c: every
#     block carries its offset and checksum), half with O_DIRECT so every
#     read reaches the daemon, half buffered (kernel readahead, up to 1 MiB
#     requests); block sizes 4k … 1m, several of them straddling the 64 KiB
#     chunk boundaries;
#   - 64 processes, each opening, reading and closing random small files
#     (0 … 20,000 bytes, page cache dropped before each read) and comparing
#     every byte with the source;
#   - the daemon's VmRSS sampled twice a second, VmHWM read at the end.
#
# Passes when there are zero errors and zero mismatches, the daemon's peak
# RSS stays under the limit, and afterwards the mount still serves and then
# unmounts cleanly with no error in its log. Prints the figures either way.
#
# usage: Scripts/load.sh [SECONDS]
# environment:
#   ENCFS_BIN_DIR            binaries to test (default: swift build -c release)
#   ENCFS_LOAD_DIR           where the scratch directory goes (default: $TMPDIR or /tmp)
#   ENCFS_LOAD_RSS_LIMIT_MIB peak daemon RSS allowed (default 256)
#   ENCFS_LOAD_KEEP          set: keep the scratch directory (for a failed run)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

seconds=${1:-60}
case $seconds in ''|*[!0-9]*) echo "usage: Scripts/load.sh [SECONDS]" >&2; exit 2 ;; esac
[ "$seconds" -ge 1 ] || { echo "load: error: SECONDS must be at least 1" >&2; exit 2; }
rss_limit_mib=${ENCFS_LOAD_RSS_LIMIT_MIB:-256}

for tool in fio python3 fusermount3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "load: error: $tool is missing (run Scripts/install-deps.sh)" >&2; exit 1; }
done
if [ -z "${ENCFS_BIN_DIR:-}" ]; then
  swift build -c release >/dev/null
  ENCFS_BIN_DIR=$(swift build -c release --show-bin-path)
fi
bin=$ENCFS_BIN_DIR

# Short runs use smaller files so that setup stays a few seconds.
if [ "$seconds" -lt 30 ]; then file_mib=8; small_files=600; else file_mib=32; small_files=2000; fi

work=$(mktemp -d "${ENCFS_LOAD_DIR:-${TMPDIR:-/tmp}}/encfs-load.XXXXXX")
mnt=$work/mnt
daemon=
cleanup() {
  if grep -qs " $mnt fuse" /proc/self/mounts; then
    fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
  fi
  if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then kill "$daemon" 2>/dev/null || true; fi
  if [ -n "${ENCFS_LOAD_KEEP:-}" ]; then echo "load: kept $work" >&2; else rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT
mkdir -p "$work/src/fio" "$work/src/small" "$mnt"

# --- source: fio's own verifiable files, and small files --------------------
# name:block size; file sizes are whole blocks so verification reads end clean.
layout="f0:4k f1:12k f2:16k f3:60k f4:64k f5:100k f6:128k f7:1m"
declare -A bs_of size_of
for item in $layout; do
  name=${item%%:*}
  bs=${item#*:}
  case $bs in *k) bytes=$(( ${bs%k} * 1024 )) ;; *m) bytes=$(( ${bs%m} * 1048576 )) ;; esac
  bs_of[$name]=$bs
  size_of[$name]=$(( file_mib * 1048576 / bytes * bytes ))
  (cd "$work" && fio --name="write-$name" --filename="$work/src/fio/$name" --rw=write --bs="$bs" --size="${size_of[$name]}" \
      --verify=crc32c --do_verify=0 --verify_state_save=0 --ioengine=psync --output=/dev/null)
done
python3 - "$work/src/small" "$small_files" <<'EOF'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(20240611)
edges = [0, 1, 4095, 4096, 4097, 65535, 65536, 65537]
for i in range(count):
    d = os.path.join(root, "d%02d" % (i % 25))
    os.makedirs(d, exist_ok=True)
    size = edges[i] if i < len(edges) else rng.randrange(0, 20001)
    with open(os.path.join(d, "s%05d" % i), "wb") as f:
        f.write(rng.randbytes(size))
EOF

"$bin/encfs-keygen" --symmetric -o "$work/key" >/dev/null
"$bin/encfs-pack" "$work/src" "$work/bundle.encfs" --key-file "$work/key" --quiet
# The same page cache for the daemon's executable whatever filled it (a
# fresh build, a copy): its peak RSS depends on it.
python3 Scripts/bench/executable_page_cache.py "$bin/encfs-mount"
"$bin/encfs-mount" "$work/bundle.encfs" "$mnt" --key-file "$work/key" --log-file "$work/mount.log"
daemon=$(python3 - "$mnt" <<'EOF'
import os, sys
want = os.fsencode(sys.argv[1])
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
    except OSError:
        continue
    if argv and os.path.basename(argv[0]) == b"encfs-mount" and want in argv:
        print(pid)
        break
EOF
)
[ -n "$daemon" ] || { echo "load: error: no daemon serves $mnt" >&2; exit 1; }
bundle_mib=$(( $(stat -c %s "$work/bundle.encfs") / 1048576 ))
echo "load: ${seconds} s against $mnt (bundle ${bundle_mib} MiB: 8 fio files of ${file_mib} MiB, $small_files small files), daemon $daemon"

# --- the run -------------------------------------------------------------------
# RSS sampler: VmRSS (kB) twice a second while the daemon lives.
( while kill -0 "$daemon" 2>/dev/null; do
    awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status" 2>/dev/null || true
    sleep 0.5
  done ) > "$work/rss.samples" &
sampler=$!
start_rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status")

jobfile=$work/read.fio
{
  echo "[global]"
  echo "ioengine=psync"
  echo "allow_file_create=0"
  echo "verify=crc32c"
  echo "verify_state_save=0"
  echo "time_based=1"
  echo "runtime=$seconds"
  echo "invalidate=1"
  i=0
  for item in $layout $layout; do
    name=${item%%:*}
    if [ $i -lt 8 ]; then rw=read; else rw=randread; fi
    echo "[$rw-$name-$i]"
    echo "filename=$mnt/fio/$name"
    echo "rw=$rw"
    echo "bs=${bs_of[$name]}"
    echo "size=${size_of[$name]}"
    echo "direct=$(( (i + i / 8) % 2 ))"
    i=$((i + 1))
  done
} > "$jobfile"
# From the scratch directory: whatever fio leaves in its working directory stays there.
(cd "$work" && exec fio --readonly "$jobfile" --output-format=json --output="$work/fio.json") > "$work/fio.stdout" 2>&1 &
fio_pid=$!

python3 - "$work/src/small" "$mnt/small" "$seconds" 64 > "$work/small.result" 2>&1 <<'EOF' &
import hashlib, os, random, sys, time
src, mnt, seconds, procs = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
files = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
want = {p: hashlib.sha256(open(os.path.join(src, p), "rb").read()).digest() for p in files}
deadline = time.monotonic() + seconds
children = []
for n in range(procs):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rng = random.Random(n)
        ops = size = errors = mismatches = 0
        notes = []
        while time.monotonic() < deadline:
            p = rng.choice(files)
            try:
                fd = os.open(os.path.join(mnt, p), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    parts = []
                    while True:
                        b = os.read(fd, rng.choice([1, 100, 4096, 65536, 1 << 20]))
                        if not b:
                            break
                        parts.append(b)
                finally:
                    os.close(fd)
                data = b"".join(parts)
                ops += 1
                size += len(data)
                if hashlib.sha256(data).digest() != want[p]:
                    mismatches += 1
                    if len(notes) < 3: notes.append("mismatch %s (%d bytes)" % (p, len(data)))
            except OSError as e:
                errors += 1
                if len(notes) < 3: notes.append("%s: %s" % (p, e))
        os.write(w, ("%d %d %d %d %s\n" % (ops, size, errors, mismatches, "|".join(notes))).encode())
        os._exit(0)
    os.close(w)
    children.append((pid, r))
totals = [0, 0, 0, 0]
notes = []
for pid, r in children:
    line = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        line += b
    os.waitpid(pid, 0)
    fields = line.decode().rstrip("\n").split(" ", 4)
    if len(fields) < 4:
        totals[2] += 1
        notes.append("worker %d reported nothing" % pid)
        continue
    for i in range(4):
        totals[i] += int(fields[i])
    if len(fields) == 5 and fields[4]:
        notes += fields[4].split("|")
print("%d %d %d %d" % tuple(totals))
for note in notes[:10]:
    print(note)
EOF
small_pid=$!

fio_status=0; wait "$fio_pid" || fio_status=$?
small_status=0; wait "$small_pid" || small_status=$?

# --- after the run: still serving? -----------------------------------------------
failures=()
after_rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
threads=$(awk '/^Threads:/ {print $2}' "/proc/$daemon/status" 2>/dev/null || echo 0)
if ! cmp -s "$work/src/fio/f3" "$mnt/fio/f3"; then failures+=("after the run, fio/f3 does not read back"); fi
if ! cmp -s "$work/src/small/d00/s00000" "$mnt/small/d00/s00000"; then failures+=("after the run, a small file does not read back"); fi
if ! stat "$mnt/small" >/dev/null 2>&1; then failures+=("after the run, stat fails"); fi
if fusermount3 -u "$mnt"; then
  for _ in $(seq 1 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$daemon" 2>/dev/null; then failures+=("the daemon still runs after the unmount"); fi
else
  failures+=("fusermount3 -u failed")
fi
wait "$sampler" 2>/dev/null || true
max_rss=$(sort -n "$work/rss.samples" | tail -n 1)
max_rss=${max_rss:-0}
error_lines=$(grep -vc " info: " "$work/mount.log" || true)
tail -n 1 "$work/mount.log" | grep -q "info: unmounted" || failures+=("the log does not end with 'unmounted'")
[ "$error_lines" -eq 0 ] || failures+=("$error_lines error or warning lines in the daemon log: $(grep -v ' info: ' "$work/mount.log" | head -n 3)")

# fio: per-job errors, reads and bytes from its JSON report.
fio_summary=$(python3 - "$work/fio.json" <<'EOF'
import json, sys
try:
    text = open(sys.argv[1]).read()
    report = json.loads(text[text.index("{"):])
except Exception as e:
    print("0 0 0 1 cannot-read-fio-report:%s" % type(e).__name__)
    sys.exit(0)
ios = size = errors = 0
for job in report["jobs"]:
    ios += job["read"]["total_ios"]
    size += job["read"]["io_bytes"]
    if job["error"]:
        errors += 1
print(ios, size, len(report["jobs"]), errors, "-")
EOF
)
read -r fio_ios fio_bytes fio_jobs fio_errors _ <<<"$fio_summary"
[ "$fio_status" -eq 0 ] || failures+=("fio exited $fio_status: $(grep -E 'verify|err=' "$work/fio.stdout" | head -n 3 || true)")
[ "$fio_jobs" -eq 16 ] || failures+=("fio reported $fio_jobs jobs, not 16")
[ "$fio_errors" -eq 0 ] || failures+=("$fio_errors fio jobs failed (verify or I/O errors)")

read -r small_ops small_bytes small_errors small_mismatches < <(head -n 1 "$work/small.result") || true
small_ops=${small_ops:-0}; small_bytes=${small_bytes:-0}; small_errors=${small_errors:-1}; small_mismatches=${small_mismatches:-0}
[ "$small_status" -eq 0 ] || failures+=("the small-file checker exited $small_status: $(tail -n 3 "$work/small.result")")
[ "$small_errors" -eq 0 ] || failures+=("$small_errors small-file reads failed: $(sed -n 2,4p "$work/small.result" | tr '\n' ' ')")
[ "$small_mismatches" -eq 0 ] || failures+=("$small_mismatches small files read back wrong: $(sed -n 2,4p "$work/small.result" | tr '\n' ' ')")
[ "$fio_ios" -gt 0 ] || failures+=("fio did no reads")
[ "$small_ops" -gt 0 ] || failures+=("the small-file checker did no reads")
(( hwm < rss_limit_mib * 1024 )) || failures+=("daemon VmHWM ${hwm} kB is over the ${rss_limit_mib} MiB limit")

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "  fio:         $fio_ios reads in $fio_jobs jobs, $(mib "$fio_bytes") MiB, $fio_errors failed jobs (crc32c verify on every block)"
echo "  small files: $small_ops open/read/close by 64 processes, $(mib "$small_bytes") MiB, $small_errors errors, $small_mismatches mismatches"
echo "  daemon:      VmRSS $(mib $((start_rss * 1024))) MiB before, max $(mib $((max_rss * 1024))) MiB sampled, $(mib $((after_rss * 1024))) MiB after; VmHWM $(mib $((hwm * 1024))) MiB (limit $rss_limit_mib MiB); $threads threads"
echo "  after:       $( [ ${#failures[@]} -eq 0 ] && echo "served reads, unmounted cleanly, no error in the log" || echo "see below")"
if [ ${#failures[@]} -gt 0 ]; then
  for f in "${failures[@]}"; do echo "load: FAILED: $f" >&2; done
  exit 1
fi
echo "load: ok"
