# Sourced by the benchmark scripts (bench.sh, bench-many.sh,
# bench-remote.sh): at the end of a run, removes what it generated and the
# next run can make again (data sets, bundles, images, caches: gigabytes in
# /var/tmp), unless the script was given --keep. Results and logs stay.

# remove_bench_artifacts TOOL DIR PATTERN...
#   Removes what each PATTERN (a name or a quoted glob, matched in DIR)
#   names in DIR, never crossing into another file system
#   (rm --one-file-system), and nothing at all while anything is still
#   mounted below DIR.
remove_bench_artifacts() {
  local tool=$1 dir=$2 pattern path removed=()
  shift 2
  [ -d "$dir" ] || return 0
  if awk -v p="$dir/" 'index($5, p) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    echo "$tool: warning: something is still mounted below $dir; generated data left in place" >&2
    return 0
  fi
  for pattern in "$@"; do
    for path in "$dir"/$pattern; do
      [ -e "$path" ] || [ -L "$path" ] || continue
      rm -rf --one-file-system -- "$path"
      removed+=("${path##*/}")
    done
  done
  if [ ${#removed[@]} -gt 0 ]; then
    echo "$tool: removed ${removed[*]} from $dir (--keep keeps them)" >&2
  fi
}
