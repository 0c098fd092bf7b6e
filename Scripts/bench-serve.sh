#!/usr/bin/env bash
# encfs-serve benchmark (issue 28): the same files served on loopback by
#   encfs-serve          the bundle, decrypted per request (no FUSE)
#   nginx-plain          nginx over the plaintext directory (the ceiling:
#                        sendfile, no crypto)
#   nginx-mount          nginx over an encfs-mount of the bundle
# with wrk (keep-alive; 1 and 4 connections per core) on a 4 KiB file:
# requests/s and p99 latency; a large file read cold with curl (MiB/s,
# the median of three GETs, each after dropping the page cache),
# beside `cat` of the same file from the encfs mount; encfs-serve's peak
# RSS (VmHWM) after everything.
#
#   Scripts/bench-serve.sh [--quick] [--long] [--out DIR]
#
#   --quick     a 64 MiB large file instead of 1 GiB, 5 s per wrk run
#               instead of 15 s (about a minute on 2 cores)
#   --long      then 60 s of wrk against the small and the large file with
#               a byte-for-byte check of responses after it, and slowloris
#               clients (200 half-sent requests) held open meanwhile
#   --out DIR   work directory (default /var/tmp/encfs-bench-serve); the
#               data is kept there for the next run, results.md is written
#
# Needs root (the mount), nginx, wrk, curl, python3 and a release build
# (swift build -c release). Prints a Markdown table (docs/PERFORMANCE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 long=0 out=/var/tmp/encfs-bench-serve
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --long) long=1 ;;
    --out) out=$2; shift ;;
    *) echo "bench-serve.sh: error: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for tool in nginx wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "bench-serve.sh: error: $tool is not installed (Scripts/install-deps.sh)" >&2; exit 1; }
done
bin=${ENCFS_BIN_DIR:-.build/release}
[ -x "$bin/encfs-serve" ] || { echo "bench-serve.sh: error: no $bin/encfs-serve (swift build -c release)" >&2; exit 1; }
if [ $quick -eq 1 ]; then big_mib=64; seconds=5; else big_mib=1024; seconds=15; fi
cores=$(nproc)

mkdir -p "$out/src/small" "$out/mnt" "$out/nginx"
serve_pid= nginx_started=0
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
  [ $nginx_started -eq 1 ] && nginx -c "$out/nginx/nginx.conf" -s stop 2>/dev/null || true
  mountpoint -q "$out/mnt" && fusermount3 -u "$out/mnt" || true
}
trap cleanup EXIT

# Data: 200 files of 4 KiB and one large file (kept between runs).
if [ ! -f "$out/src/big-$big_mib.bin" ]; then
  rm -f "$out"/src/big-*.bin
  head -c $((big_mib << 20)) /dev/urandom > "$out/src/big-$big_mib.bin"
  for i in $(seq 1 200); do head -c 4096 /dev/urandom > "$out/src/small/f$i.bin"; done
  rm -f "$out/b.encfs"
fi
[ -f "$out/key" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$out/key"
[ -f "$out/b.encfs" ] || "$bin/encfs-pack" "$out/src" "$out/b.encfs" --key-file "$out/key" --quiet

"$bin/encfs-mount" "$out/b.encfs" "$out/mnt" --key-file "$out/key"
# The URL file of an earlier run would otherwise be read as this one's.
rm -f "$out/url"
"$bin/encfs-serve" "$out/b.encfs" --key-file "$out/key" --max-request-rate 0 --url-file "$out/url" > /dev/null 2> "$out/serve.log" &
serve_pid=$!
for _ in $(seq 1 100); do [ -s "$out/url" ] && break; sleep 0.1; done
serve_url=$(head -n 1 "$out/url")

ports=$(python3 -c 'import socket
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
plain_port=$(sed -n 1p <<<"$ports") mount_port=$(sed -n 2p <<<"$ports")
cat > "$out/nginx/nginx.conf" <<CONF
user root;
worker_processes $cores;
pid $out/nginx/nginx.pid;
error_log $out/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$plain_port; root $out/src; }
  server { listen 127.0.0.1:$mount_port; root $out/mnt; }
}
CONF
nginx -c "$out/nginx/nginx.conf"
nginx_started=1

declare -A base=([encfs-serve]="$serve_url" [nginx-plain]="http://127.0.0.1:$plain_port/" [nginx-mount]="http://127.0.0.1:$mount_port/")
systems=(encfs-serve nginx-plain nginx-mount)

# wrk's requests/s and p99 (in ms) for URL with C connections.
measure() {
  local url=$1 connections=$2 text rps p99
  text=$(wrk -t "$(( connections < cores ? connections : cores ))" -c "$connections" -d "${seconds}s" --latency "$url")
  grep -q 'Non-2xx\|Socket errors' <<<"$text" && { echo "bench-serve.sh: error: wrk saw errors: $text" >&2; exit 1; }
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$text")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub("us","",v); v/=1000} else if (v ~ /ms$/) {sub("ms","",v)} else if (v ~ /s$/) {sub("s","",v); v*=1000}; print v}' <<<"$text")
  echo "$rps $p99"
}
# MiB/s of the large file, cold: the median of three GETs, each after
# dropping the page cache (the bundle's ciphertext, the plaintext file and
# a mount's cached pages alike), so that every system and `cat` of the
# mount start from the same state.
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
median3() { sort -n | sed -n 2p; }
throughput() {
  for _ in 1 2 3; do
    cold
    curl -s -o /dev/null -w '%{speed_download}\n' "$1" | awk '{printf "%.0f\n", $1 / 1048576}'
  done | median3
}
cat_throughput() {
  for _ in 1 2 3; do
    cold
    start=$(date +%s.%N); cat "$1" > /dev/null; end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v m="$big_mib" 'BEGIN {printf "%.0f\n", m / (e - s)}'
  done | median3
}

{
  echo "| system | 4 KiB req/s, $cores conn | p99 ms | 4 KiB req/s, $((4 * cores)) conn | p99 ms | $big_mib MiB file, MiB/s |"
  echo "|---|---|---|---|---|---|"
  for system in "${systems[@]}"; do
    read -r r1 p1 < <(measure "${base[$system]}small/f1.bin" "$cores")
    read -r r4 p4 < <(measure "${base[$system]}small/f1.bin" $((4 * cores)))
    mibs=$(throughput "${base[$system]}big-$big_mib.bin")
    echo "| $system | $r1 | $p1 | $r4 | $p4 | $mibs |"
  done
  echo "| encfs-mount + cat | | | | | $(cat_throughput "$out/mnt/big-$big_mib.bin") |"
  echo
  echo "encfs-serve peak RSS: $(awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$serve_pid/status")"
} | tee "$out/results.md"

if [ $long -eq 1 ]; then
  echo "== long: 60 s of wrk on the small and the large file, 200 slowloris clients held open"
  python3 - "$serve_url" <<'PY' &
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
held = []
for _ in range(200):
    try:
        s = socket.create_connection((u.hostname, u.port)); s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n"); held.append(s)
    except OSError:
        pass
time.sleep(70)
PY
  slow=$!
  wrk -t "$cores" -c $((4 * cores)) -d 60s "${serve_url}small/f1.bin" | grep -E 'Requests/sec|errors|Non-2xx' || true
  wrk -t "$cores" -c "$cores" -d 60s "${serve_url}big-$big_mib.bin" | grep -E 'Transfer/sec|errors|Non-2xx' || true
  curl -s "${serve_url}small/f7.bin" | cmp - "$out/src/small/f7.bin"
  curl -s "${serve_url}big-$big_mib.bin" | cmp - "$out/src/big-$big_mib.bin"
  kill "$slow" 2>/dev/null || true
  echo "bytes identical after load; encfs-serve peak RSS: $(awk '/VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$serve_pid/status")"
fi
