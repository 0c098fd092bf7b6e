#!/bin/sh
# Host step: mount the bundle the CI job built, with this host's identity
# (made once with `encfs-keygen -o IDENTITY`; its IDENTITY.pub is what CI packs to).
#   examples/ci/mount.sh BUNDLE MOUNTPOINT IDENTITY
set -eu
exec "${ENCFS_BIN:+$ENCFS_BIN/}encfs-mount" "$1" "$2" --identity "$3"
