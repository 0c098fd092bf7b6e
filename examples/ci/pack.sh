#!/bin/sh
# CI step: pack the resources to the hosts' public keys and sign the bundle.
# Nothing here decrypts the bundle: the job can leak nothing that opens it.
# Its one secret is the signing key (a CI secret written to a file, made once
# with `encfs-keygen --sign -o ci.sign`): without a signature anyone who has a
# host's public key could pack a bundle that host opens; with it, hosts that
# mount with --verify-key ci.sign.pub accept only what this job made.
#   examples/ci/pack.sh RESOURCES_DIR OUT_BUNDLE SIGNING_KEY RECIPIENT.pub...
set -eu
src=$1 out=$2 sign=$3
shift 3
# One --recipient per file, each path kept whole (spaces, glob characters).
for r in "$@"; do
    set -- "$@" --recipient "$r"
    shift
done
exec "${ENCFS_BIN:+$ENCFS_BIN/}encfs-pack" "$src" "$out" --sign-key "$sign" "$@"
