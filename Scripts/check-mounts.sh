#!/bin/sh
# Fails if any encfs mount is left in this mount namespace.
#
# Run after the test suite (Scripts/test.sh does): a test that leaves a
# mount behind has broken its always-unmount teardown. Lists each leftover
# mountpoint with its source and exits 1; exits 0 when there is none.
#
# usage: Scripts/check-mounts.sh [PREFIX]
#   PREFIX  only count mountpoints that start with it (e.g. "$TMPDIR/"),
#           when other encfs mounts may legitimately exist on the machine
set -eu

prefix=${1:-}

mountinfo=/proc/self/mountinfo
if [ ! -r "$mountinfo" ]; then
    echo "check-mounts: error: cannot read $mountinfo" >&2
    exit 2
fi

# mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS".
# Mountpoints escape space, tab, newline and backslash as \ooo; printed as is.
leftovers=$(awk -v prefix="$prefix" '{
    for (i = 7; i <= NF; i++) if ($i == "-") break
    if ($(i + 1) == "fuse.encfs" && index($5, prefix) == 1) print $5 "  (" $(i + 2) ")"
}' "$mountinfo")

if [ -n "$leftovers" ]; then
    echo "check-mounts: error: leftover encfs mounts:" >&2
    printf '%s\n' "$leftovers" | sed 's/^/  /' >&2
    echo "hint: fusermount3 -u MOUNTPOINT (or -uz if busy)" >&2
    exit 1
fi
exit 0
