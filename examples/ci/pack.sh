#!/bin/sh
# CI step: pack the resources to the hosts' public keys. Needs no secret:
# the CI job can leak nothing that decrypts the bundle.
#   examples/ci/pack.sh RESOURCES_DIR OUT_BUNDLE RECIPIENT.pub...
set -eu
src=$1 out=$2
shift 2
# One --recipient per file, each path kept whole (spaces, glob characters).
for r in "$@"; do
    set -- "$@" --recipient "$r"
    shift
done
exec "${ENCFS_BIN:+$ENCFS_BIN/}encfs-pack" "$src" "$out" "$@"
