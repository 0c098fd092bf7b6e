#!/usr/bin/env bash
# Renders the man pages: docs/man/NAME.N.scd (scdoc sources) → docs/man/NAME.N
# (roff, committed, so the package build needs no scdoc). Run after editing a
# page; ManPageTests fails when a committed page differs from its source.
# usage: Scripts/render-man.sh [--check]   (--check: render to a scratch
# directory and fail if any committed page is out of date)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v scdoc >/dev/null || { echo "render-man.sh: error: scdoc is not installed (apt-get install scdoc)" >&2; exit 1; }
check=false
[ "${1:-}" = "--check" ] && check=true
status=0
# The day the committed page was rendered on (scdoc stamps it in .TH), as
# SOURCE_DATE_EPOCH: a page whose text did not change renders the same.
committed_epoch() {
  local rendered_on
  rendered_on="$(sed -n 's/^\.TH "[^"]*" "[^"]*" "\([0-9-]*\)".*/\1/p' "$1" 2>/dev/null | head -n 1)"
  date -u -d "${rendered_on:-now}" +%s 2>/dev/null || date -u +%s
}
for source in "$root"/docs/man/*.scd; do
  page="${source%.scd}"
  same=false
  if [ -f "$page" ] && SOURCE_DATE_EPOCH="$(committed_epoch "$page")" scdoc < "$source" | cmp -s - "$page"; then
    same=true
  fi
  if $check; then
    # Compared with the committed page's own date: the check compares the
    # text and does not fail on the next day.
    if ! $same; then
      echo "render-man.sh: error: $(basename "$page") is out of date (run Scripts/render-man.sh)" >&2
      status=1
    fi
  elif ! $same; then
    # Only pages whose text changed are written (with today's date): the
    # others keep their date, so rendering leaves them untouched.
    scdoc < "$source" > "$page.tmp"
    mv "$page.tmp" "$page"
  fi
done
exit $status
