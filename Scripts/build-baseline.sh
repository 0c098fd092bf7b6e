#!/usr/bin/env bash
# Builds another revision's release binaries, to benchmark two builds side by
# side (Scripts/bench.sh --baseline-bin DIR).
#
#   Scripts/build-baseline.sh REV [DIR]
#
#   REV   a git revision of this repository (commit, branch, tag)
#   DIR   where the binaries go (default /var/tmp/encfs-baseline/REV)
#
# Checks REV out in a temporary `git worktree` (under $TMPDIR, default
# /var/tmp), builds it with `swift build -c release` exactly as bench.sh
# builds the current tree, and copies encfs-pack, encfs-mount, encfs-inspect
# and encfs-keygen into DIR, with DIR/COMMIT naming the full commit. The
# worktree is removed afterwards, also on failure or Ctrl-C. The build log
# goes to stderr; stdout gets DIR alone, so `dir=$(Scripts/build-baseline.sh
# REV)` works.
#
# Exit codes: 0 done, 1 a step failed, 2 usage error, 130 interrupted.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --) shift; positional+=("$@"); break ;;
    -*) echo "build-baseline.sh: error: unknown option ($1)" >&2; echo "build-baseline.sh: hint: see Scripts/build-baseline.sh --help" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
if [ ${#positional[@]} -lt 1 ] || [ ${#positional[@]} -gt 2 ]; then
  echo "build-baseline.sh: error: expected REV and an optional DIR" >&2
  echo "build-baseline.sh: hint: see Scripts/build-baseline.sh --help" >&2
  exit 2
fi
rev="${positional[0]}"
if ! commit="$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}")"; then
  echo "build-baseline.sh: error: unknown revision ($rev)" >&2
  exit 2
fi
dir="${positional[1]:-/var/tmp/encfs-baseline/$rev}"
case "$dir" in /*) ;; *) dir="$caller/$dir" ;; esac  # relative to where it was called from

tmp="$(mktemp -d "${TMPDIR:-/var/tmp}/encfs-baseline-build.XXXXXX")"
src="$tmp/src"
# Removes the temporary worktree (and its entry in .git/worktrees) whatever
# happened; the EXIT trap also runs after the INT/TERM one.
cleanup() {
  if [ -d "$src" ]; then
    git -C "$repo" worktree remove --force "$src" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  git -C "$repo" worktree prune 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== worktree of $rev ($commit) in $src" >&2
git -C "$repo" worktree add --detach --quiet "$src" "$commit" >&2

echo "== build (release)" >&2
swift build -c release --package-path "$src" >&2
bin="$(swift build -c release --package-path "$src" --show-bin-path)"

mkdir -p "$dir"
for tool in encfs-pack encfs-mount encfs-inspect encfs-keygen; do
  if [ ! -x "$bin/$tool" ]; then
    echo "build-baseline.sh: error: $rev did not build $tool" >&2
    exit 1
  fi
  install -m 0755 "$bin/$tool" "$dir/$tool"
done
echo "$commit" > "$dir/COMMIT"
printf '%s\n' "$dir"
