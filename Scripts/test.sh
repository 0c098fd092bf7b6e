#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks the layering rule,
# builds release binaries warning-free, runs every XCTest target (CryptCore
# vectors, format, and real FUSE mounts driven through the release
# binaries), then fails if any encfs mount was left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

Scripts/install-deps.sh
Scripts/check-layering.sh

echo "== release build (warnings are errors)"
swift build -c release -Xswiftc -warnings-as-errors
ENCFS_BIN_DIR="$(swift build -c release --show-bin-path)"
export ENCFS_BIN_DIR

echo "== tests"
status=0
swift test "$@" || status=$?

# Only this suite's mounts count: the mount tests work under
# $TMPDIR/encfs-mount-tests.*; other encfs mounts on the machine are not ours.
Scripts/check-mounts.sh "${TMPDIR:-/tmp}/encfs-mount-tests." || status=1
exit $status
