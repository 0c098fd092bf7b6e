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
for source in "$root"/docs/man/*.scd; do
  page="${source%.scd}"
  if $check; then
    # scdoc stamps each page with the day it is rendered: check with the
    # committed page's own date, so the check compares the text and does
    # not fail on the next day.
    rendered_on="$(sed -n 's/^\.TH "[^"]*" "[^"]*" "\([0-9-]*\)".*/\1/p' "$page" 2>/dev/null | head -n 1)"
    epoch="$(date -u -d "${rendered_on:-now}" +%s 2>/dev/null || date -u +%s)"
    if ! SOURCE_DATE_EPOCH="$epoch" scdoc < "$source" | cmp -s - "$page"; then
      echo "render-man.sh: error: $(basename "$page") is out of date (run Scripts/render-man.sh)" >&2
      status=1
    fi
  else
    scdoc < "$source" > "$page.tmp"
    mv "$page.tmp" "$page"
  fi
done
exit $status
