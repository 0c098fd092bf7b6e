#!/usr/bin/env bash
# The main job on a fresh machine: install, build, pack the bundled example
# site into an encrypted bundle, and mount it read-only so you can look at
# the plaintext.
#
#   Scripts/demo.sh            pack examples/site and mount it at demo/mnt
#   fusermount3 -u demo/mnt    unmount when done
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

Scripts/install-deps.sh
swift build -c release
bin="$(swift build -c release --show-bin-path)"

mkdir -p demo/mnt
if mountpoint -q demo/mnt; then fusermount3 -u demo/mnt; fi
if [ ! -f demo/demo.key ]; then
  # A fresh raw key for this demo only; keep it 0600 like any key file.
  (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > demo/demo.key && echo >> demo/demo.key)
fi
"$bin/encfs-pack" examples/site demo/site.bundle --key-file demo/demo.key
"$bin/encfs-mount" demo/site.bundle demo/mnt --key-file demo/demo.key

echo
echo "bundle:  demo/site.bundle ($(stat -c %s demo/site.bundle) bytes, encrypted: $(head -c 8 demo/site.bundle) ...)"
echo "mounted: demo/mnt (read-only)"
echo
ls -lR demo/mnt
echo
echo "== demo/mnt/index.html (decrypted on read)"
head -n 12 demo/mnt/index.html
echo "..."
echo
echo "open demo/mnt/index.html in a browser, or: python3 -m http.server -d demo/mnt"
echo "unmount with: fusermount3 -u demo/mnt"
