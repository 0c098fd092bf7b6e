#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes with libFuzzer (docs/SECURITY.md,
# "Fuzzing").
#
# usage: Scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  per target (default 600); CI runs `Scripts/fuzz.sh 30`
#   TARGET   header, index, bundle, pem, chunk-frame, index-page, serve-request
#            (default: all seven; each is a case of FuzzTarget in Sources/encfs-fuzz/)
# environment:
#   FUZZ_JOBS  targets run at once (default 1; one core each)
#   FUZZ_WORK  scratch directory for the growing corpora and logs
#              (default .build/fuzz-work; kept between runs)
#
# Builds encfs-fuzz with -sanitize=fuzzer,address into .build/fuzz (the
# normal build stays untouched), then runs each target on its seed corpus
# (Tests/Fuzz/Corpus/TARGET, made by Scripts/make-fuzz-corpus.sh) and its
# past reproducers, which must no longer crash, with the format's magic
# numbers and slot headers as a dictionary (Tests/Fuzz/Dictionaries).
# New inputs go to FUZZ_WORK/corpus/TARGET; a crash, timeout (-timeout), leak or oversized
# allocation (-malloc_limit_mb) is saved to Tests/Fuzz/Reproducers/TARGET/
# and fails the run. Fix it, keep the file: the replayer
# (`encfs-fuzz TARGET FILE`, run by FuzzReplayTests) then guards the fix.
# Tests/Fuzz/Found/TARGET keeps a minimized set of what earlier runs found
# (libFuzzer -merge=1, see docs/SECURITY.md), replayed the same way.
#
# exit codes: 0 nothing found, 1 a target found something or failed to
# run, 2 usage error
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

seconds=600
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then seconds=$1; shift; fi
all=(header index bundle pem chunk-frame index-page serve-request)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  case " ${all[*]} " in *" $t "*) ;; *) echo "fuzz.sh: error: unknown target $t (expected: ${all[*]})" >&2; exit 2 ;; esac
done
jobs_max=${FUZZ_JOBS:-1}
work=${FUZZ_WORK:-.build/fuzz-work}

# Per-target input limits: headers up to a few RSA-4096 slots, bundles a
# few chunks larger than the biggest seed, PEM up to an RSA-16384 key.
max_len() {
  case $1 in header) echo 8192 ;; index) echo 16384 ;; index-page) echo 65537 ;; bundle) echo 65536 ;; pem) echo 16384 ;; esac
}

echo "== building encfs-fuzz with libFuzzer and AddressSanitizer (.build/fuzz)"
# Release: 5–8x the executions of -Onone; Swift keeps its bounds and
# overflow traps at -O. gold crashes on the sanitizer runtime, lld does not.
build=(swift build -c release --build-path .build/fuzz --product encfs-fuzz
       -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
       -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld)
"${build[@]}"
bin="$("${build[@]}" --show-bin-path)/encfs-fuzz"

run_target() {
  local t=$1
  local corpus="$work/corpus/$t" reproducers="Tests/Fuzz/Reproducers/$t" log="$work/$t.log"
  mkdir -p "$corpus" "$reproducers"
  local inputs=("$corpus" "Tests/Fuzz/Corpus/$t")
  # Inputs kept from earlier runs and past reproducers are seeds too: they
  # must pass, and they reach deep.
  if [ -d "Tests/Fuzz/Found/$t" ]; then inputs+=("Tests/Fuzz/Found/$t"); fi
  if [ -n "$(ls -A "$reproducers")" ]; then inputs+=("$reproducers"); fi
  local status=0
  # CPU seconds (user + sys) next to the wall-clock budget: on a busy
  # machine a target gets less than a core.
  local TIMEFORMAT='%U %S'
  { time ENCFS_FUZZ_TARGET=$t "$bin" "${inputs[@]}" \
    -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -dict="Tests/Fuzz/Dictionaries/$t.dict" \
    -artifact_prefix="$reproducers/" -print_final_stats=1 >"$log" 2>&1 || status=$?; } 2>"$work/$t.time"
  echo "$status" >"$work/$t.status"
}

mkdir -p "$work"
for t in "${targets[@]}"; do
  echo "== fuzzing $t for ${seconds}s (log: $work/$t.log)"
  run_target "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
done
wait

failed=0
printf '\n%-8s %8s %8s %12s %8s %6s %7s %8s  %s\n' target seconds cpu-s executions exec/s cov ft corpus result
for t in "${targets[@]}"; do
  log="$work/$t.log"
  status=$(cat "$work/$t.status" 2>/dev/null || echo 1)
  cpu=$(awk '{ printf "%d", $1 + $2 }' "$work/$t.time" 2>/dev/null || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  # The last status line: "#N  DONE  cov: C ft: F corp: K/SIZE ...".
  line=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$line")
  corp=$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$line")
  if [ "$status" = 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(sed -nE 's/.*Test unit written to (.*)$/\1/p' "$log" | tail -n 1)
    result="FOUND (exit $status)${artifact:+: $artifact}"
  fi
  printf '%-8s %8s %8s %12s %8s %6s %7s %8s  %s\n' "$t" "$seconds" "${cpu:-?}" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
if [ $failed -ne 0 ]; then
  echo "fuzz.sh: a target found something: see its log in $work and the input in Tests/Fuzz/Reproducers/" >&2
  echo "hint: replay one input with: swift build --product encfs-fuzz && .build/debug/encfs-fuzz TARGET FILE" >&2
fi
exit $failed
