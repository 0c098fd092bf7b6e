#!/bin/sh
# Host step: mount the bundle the CI job built, with this host's identity
# (made once with `encfs-keygen -o IDENTITY`; its IDENTITY.pub is what CI
# packs to), refusing any bundle the CI's signing key did not sign
# (VERIFY_KEY.pub is the public half of the CI's signing key).
#   examples/ci/mount.sh BUNDLE MOUNTPOINT IDENTITY VERIFY_KEY.pub
set -eu
exec "${ENCFS_BIN:+$ENCFS_BIN/}encfs-mount" "$1" "$2" --identity "$3" --verify-key "$4"
