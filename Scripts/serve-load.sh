#!/usr/bin/env bash
# Load test of encfs-serve (issue 28), for SECONDS (default 60; the
# ServeLoadScriptTests runs 5):
#
#   - wrk, keep-alive, 4 connections per core, against a 4 KiB file and a
#     large file (8 MiB; 64 MiB with --large) at the same time;
#   - meanwhile a sampler fetches random files and random ranges of the
#     large file with curl, twice a second, and compares every byte with
#     the source;
#   - meanwhile 64 slowloris clients each send a request header one byte
#     every 2 s (kept below the connection limit, so the others are served);
#   - encfs-serve's VmRSS sampled twice a second, VmHWM read at the end.
#
# Passes when wrk reports no socket error and no non-2xx reply, every
# sample matched, and the peak RSS stays under the limit; prints the
# figures either way (one line each: requests, errors, samples, RSS).
#
# usage: Scripts/serve-load.sh [SECONDS] [--large]
# environment:
#   ENCFS_BIN_DIR             binaries to test (default .build/release)
#   ENCFS_LOAD_RSS_LIMIT_MIB  peak RSS allowed (default 64)
# Needs wrk, curl and python3 (Scripts/install-deps.sh); no root.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60 big_mib=8
for arg in "$@"; do
  case $arg in
    --large) big_mib=64 ;;
    ''|*[!0-9]*) echo "usage: Scripts/serve-load.sh [SECONDS] [--large]" >&2; exit 2 ;;
    *) seconds=$arg ;;
  esac
done
for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "serve-load.sh: error: $tool is not installed (Scripts/install-deps.sh)" >&2; exit 1; }
done
bin=${ENCFS_BIN_DIR:-.build/release}
[ -x "$bin/encfs-serve" ] || { echo "serve-load.sh: error: no $bin/encfs-serve (swift build -c release)" >&2; exit 1; }
limit_mib=${ENCFS_LOAD_RSS_LIMIT_MIB:-64}
cores=$(nproc)

work=$(mktemp -d "${TMPDIR:-/tmp}/encfs-serve-load.XXXXXX")
serve_pid= helpers=()
cleanup() {
  for pid in "${helpers[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/src/small"
head -c $((big_mib << 20)) /dev/urandom > "$work/src/big.bin"
for i in $(seq 1 100); do head -c $((RANDOM % 20000 + 1)) /dev/urandom > "$work/src/small/f$i.bin"; done
head -c 4096 /dev/urandom > "$work/src/small/4k.bin"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/key"
"$bin/encfs-pack" "$work/src" "$work/b.encfs" --key-file "$work/key" --quiet

"$bin/encfs-serve" "$work/b.encfs" --key-file "$work/key" --url-file "$work/url" > /dev/null 2> "$work/serve.log" &
serve_pid=$!
for _ in $(seq 1 200); do [ -s "$work/url" ] && break; sleep 0.1; done
[ -s "$work/url" ] || { echo "serve-load.sh: error: encfs-serve did not start: $(cat "$work/serve.log")" >&2; exit 1; }
url=$(head -n 1 "$work/url")

# RSS sampler.
( peak=0; while kill -0 "$serve_pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status" 2>/dev/null || echo 0)
    [ "${rss:-0}" -gt "$peak" ] && peak=$rss && echo "$peak" > "$work/rss-peak"
    sleep 0.5
  done ) & helpers+=($!)

# Slowloris clients: a header byte every 2 s until the end.
python3 - "$url" "$((seconds + 5))" <<'PY' > "$work/slow.out" & helpers+=($!)
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); end = time.time() + float(sys.argv[2])
held = []
for _ in range(64):
    try:
        held.append(socket.create_connection((u.hostname, u.port), timeout=5))
    except OSError:
        pass
header = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10000
i = 0
while time.time() < end and held:
    for s in list(held):
        try:
            s.sendall(header[i:i + 1])
        except OSError:
            held.remove(s)
    i += 1
    time.sleep(2)
print("slow clients still open at the end:", len(held))
PY

# Sampler: random files and ranges, compared byte for byte.
python3 - "$url" "$work/src" "$seconds" <<'PY' > "$work/samples" & helpers+=($!)
import os, random, subprocess, sys, time
url, src, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + seconds
big = open(os.path.join(src, "big.bin"), "rb").read()
ok = bad = 0
while time.time() < end:
    if random.random() < 0.5:
        name = "small/f%d.bin" % random.randint(1, 100)
        want = open(os.path.join(src, name), "rb").read()
        args = []
    else:
        name = "big.bin"
        start = random.randrange(len(big)); length = random.randint(1, 300000)
        stop = min(len(big), start + length) - 1
        want = big[start:stop + 1]
        args = ["-H", "Range: bytes=%d-%d" % (start, stop)]
    got = subprocess.run(["curl", "-sf", "--max-time", "30"] + args + [url + name], capture_output=True).stdout
    if got == want: ok += 1
    else: bad += 1
    time.sleep(0.5)
print(ok, bad)
PY
sampler=${helpers[-1]}

wrk -t "$cores" -c $((4 * cores)) -d "${seconds}s" "${url}small/4k.bin" > "$work/wrk-small" 2>&1 &
small_pid=$!
wrk -t 1 -c "$cores" -d "${seconds}s" "${url}big.bin" > "$work/wrk-big" 2>&1 || true
wait "$small_pid" || true
wait "$sampler" || true

status=0
for run in small big; do
  requests=$(awk '/requests in/ {print $1}' "$work/wrk-$run")
  errors=$(grep -E 'Socket errors|Non-2xx' "$work/wrk-$run" | tr '\n' ' ' || true)
  echo "wrk $run: ${requests:-?} requests in ${seconds} s, $(awk '/Requests\/sec/ {print $2}' "$work/wrk-$run") req/s, $(awk '/Transfer\/sec/ {print $2}' "$work/wrk-$run")/s, errors: ${errors:-none}"
  [ -n "$requests" ] || status=1
  [ -z "$errors" ] || status=1
done
read -r ok bad < "$work/samples" || { ok=0; bad=1; }
echo "samples: $ok identical, $bad different"
wait "${helpers[1]}" 2>/dev/null || true
cat "$work/slow.out"
[ "$bad" -eq 0 ] && [ "$ok" -gt 0 ] || status=1
rss_now=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
echo "encfs-serve RSS: peak sampled $(( $(cat "$work/rss-peak" 2>/dev/null || echo 0) / 1024 )) MiB, VmHWM $((hwm / 1024)) MiB, now $((rss_now / 1024)) MiB (limit $limit_mib MiB)"
[ "$hwm" -le $((limit_mib * 1024)) ] || status=1
curl -sf "${url}small/f1.bin" | cmp -s - "$work/src/small/f1.bin" || { echo "serve-load.sh: error: not serving after the load" >&2; status=1; }
kill "$serve_pid"; wait "$serve_pid" || { echo "serve-load.sh: error: encfs-serve did not exit 0" >&2; status=1; }
serve_pid=
if grep -q error "$work/serve.log"; then echo "serve-load.sh: errors in the log:" >&2; head -n 5 "$work/serve.log" >&2; status=1; fi
[ $status -eq 0 ] && echo "PASS" || echo "FAIL"
exit $status
