#!/usr/bin/env bash
# Regenerates Tests/FormatTests/Fixtures/v1/: the frozen golden bundle of
# format version 1, its manifest, broken copies of it, and a signed bundle
# of the same tree (the signature slot, kind 5, is part of version 1).
# With "v2", regenerates Tests/FormatTests/Fixtures/v2/ instead: a golden
# bundle of format version 2 (--compress zstd, 4 KiB chunks, a duplicated
# file), its manifest and broken copies; v1/ is left as it is.
# With "v2-paged", Tests/FormatTests/Fixtures/v2-paged/: the same tree and
# cases with the paged index encfs-pack now writes for every version 2
# bundle, plus broken pages. (v2/ holds a version 2 bundle with the flat
# index, made before the paged one existed: it is frozen; running "v2" again
# would write a paged index there.) With "v2-fragments",
# Tests/FormatTests/Fixtures/v2-fragments/: a tree of small files packed
# into fragments (header flag bit 0). With "v2-fragment-units",
# Tests/FormatTests/Fixtures/v2-fragment-units/: fragments in 16 KiB units
# of a 4 KiB-chunk bundle (header flag bits 8…15).
#
# Usage: Scripts/make-format-fixtures.sh [v1|v2|v2-paged|v2-fragments|v2-fragment-units]
#
# Run it only when the fixtures themselves must change (a new format version
# gets a new directory, v2/, and v1/ stays as it is: old bundles must keep
# opening). Every run makes a different golden.bundle (new random bundle id,
# content key, salts and file ids) from the same tree, so manifest.json is the
# same every time and broken/expected.json changes only in its lengths.
#
# Needs: swift (to build encfs-pack), python3 (standard library only), openssl, and a
# file system that keeps nanosecond mtimes.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-v1}"
case "$version" in v1|v2|v2-paged|v2-fragments|v2-fragment-units) ;;
  *) echo "usage: $0 [v1|v2|v2-paged|v2-fragments|v2-fragment-units]" >&2; exit 2 ;; esac
out="$root/Tests/FormatTests/Fixtures/$version"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

swift build --package-path "$root" --product encfs-pack >&2
# The Python parts share Scripts/fixtures/fixture_tree.py.
export PYTHONPATH="$root/Scripts/fixtures${PYTHONPATH:+:$PYTHONPATH}"
pack="$(swift build --package-path "$root" --show-bin-path)/encfs-pack"

if [ "$version" = v2-fragment-units ]; then
  exec "$root/Scripts/make-format-fixtures-v2-fragment-units.sh" "$pack" "$out" "$work"
fi
if [ "$version" = v2-fragments ]; then
  exec "$root/Scripts/make-format-fixtures-v2-fragments.sh" "$pack" "$out" "$work"
fi
if [ "$version" = v2-paged ]; then
  exec "$root/Scripts/make-format-fixtures-v2-paged.sh" "$pack" "$out" "$work"
fi
if [ "$version" = v2 ]; then
  exec "$root/Scripts/make-format-fixtures-v2.sh" "$pack" "$out" "$work"
fi

mkdir -p "$out/broken"
rm -f "$out"/golden.* "$out"/signed.* "$out"/manifest.json "$out"/broken/*

# The secrets are test values, committed on purpose.
printf '%s\n' 8f4e2c1a9b7d6e5f00112233445566778899aabbccddeeff0f1e2d3c4b5a6978 > "$out/golden.key"
printf '%s\n' 'golden bundle v1 test passphrase' > "$out/golden.passphrase"
# An Ed25519 signing key (openssl genpkey -algorithm ed25519), fixed so the
# signer of signed.bundle stays the same from one run to the next.
printf '%s\n' '-----BEGIN PRIVATE KEY-----' 'MC4CAQAwBQYDK2VwBCIEIFAccgRXZRjYkTthIDe0u3lE90zA7s/keluP5GaQ+M4e' \
    '-----END PRIVATE KEY-----' > "$out/signed.sign"
openssl pkey -in "$out/signed.sign" -pubout -out "$out/signed.sign.pub"

# 1. The source tree and its manifest (entries in index order: breadth-first,
#    siblings sorted by name bytes).
python3 - "$work/tree" "$out/manifest.json" <<'PY'
import sys
from fixture_tree import make_tree, write_manifest

tree, manifest_path = sys.argv[1].encode(), sys.argv[2]

def pattern(n, seed):
    return bytes((i * 7 + seed + i // 251) % 256 for i in range(n))

# (path, kind, mode, mtime in ns, content or symlink target)
entries = [
    (b"a-multichunk.bin", "file", 0o644, 1_700_000_001_123_456_789, pattern(4096 + 904, 1)),
    (b"dir", "directory", 0o750, 1_700_000_002_000_000_001, None),
    (b"empty", "file", 0o600, 1_700_000_003_999_999_999, b""),
    (b"exec.sh", "file", 0o755, 1_700_000_004_500_000_000, b"#!/bin/sh\necho golden\n"),
    (b"hello.txt", "file", 0o644, 1_700_000_005_000_000_005, b"hello, world\n"),
    (b"link", "symlink", 0o777, 1_700_000_006_600_000_000, b"hello.txt"),
    (b"dir/nested.txt", "file", 0o640, 1_700_000_007_070_000_000, b"nested file\n"),
    (b"dir/\xff\xfe-not-utf8.bin", "file", 0o600, 1_700_000_008_000_800_000, pattern(100, 2)),
]
root_mode, root_mtime = 0o755, 1_700_000_000_100_000_000
make_tree(tree, entries, root_mode, root_mtime)
write_manifest(manifest_path, entries, root_mode, root_mtime,
               about="Expected contents of golden.bundle, made by Scripts/make-format-fixtures.sh. "
                     "Entries are in index order (breadth-first, siblings by name bytes); the first is the root.",
               formatVersion=1, chunkSizeLog2=12,
               slots=[{"kind": "raw-key"}, {"kind": "passphrase", "logN": 14, "r": 8, "p": 1}])
PY

# 2. The golden bundle: a raw-key slot, then a passphrase slot at N = 2^14.
"$pack" "$work/tree" "$out/golden.bundle" --key-file "$out/golden.key" \
    --passphrase-file "$out/golden.passphrase" --chunk-size 4K --scrypt-log-n 14 --quiet

# 3. Broken copies, each with the error opening (or reading) it must give.
python3 - "$out/golden.bundle" "$out/broken" <<'PY'
import os, random, sys
from fixture_tree import Golden, write_cases, write_expected

golden = Golden(sys.argv[1])
broken = sys.argv[2]
flip, setbytes, le = golden.flip, golden.setbytes, golden.le
n = len(golden.data)
H = le(12, 4)                       # header length
raw_slot_body = 64 + 4              # slot 1 is the raw-key slot
index_start = H + le(48, 8)         # index offset within the payload
chunk_1 = H + 0 + (4096 + 16)       # a-multichunk.bin: first file, payload offset 0

cases = [
    ("empty.bundle", b"", {"error": "notABundle"}, "an empty file"),
    ("garbage.bundle", random.Random(1).randbytes(512), {"error": "notABundle"}, "512 random bytes"),
    ("bad-magic.bundle", flip(0, 0x20), {"error": "notABundle"}, "magic starts with 'e'"),
    ("version-99.bundle", setbytes(8, (99).to_bytes(2, "little")), {"error": "unsupportedVersion", "version": 99},
     "format version 99"),
    ("reserved-byte.bundle", setbytes(34, b"\x01"), {"error": "corruptHeader"}, "reserved header byte 34 set"),
    ("flipped-wrapped-key.bundle", flip(raw_slot_body + 8 + 16 + 5), {"error": "corruptHeader"},
     "a byte of the raw-key slot's wrapped key: the key id matches, the unwrap fails"),
    ("flipped-header-mac.bundle", flip(H - 1), {"error": "headerAuthenticationFailed"}, "last byte of the header MAC"),
    ("flipped-index-byte.bundle", flip(index_start + 40), {"error": "corruptIndex"}, "a byte of the sealed index"),
    ("flipped-chunk-byte.bundle", flip(chunk_1 + 10),
     {"error": "corruptChunk", "read": "a-multichunk.bin", "entry": 1, "chunk": 1},
     "a byte of chunk 1 of a-multichunk.bin: opens, reading that chunk fails"),
    ("truncated.bundle", golden.data[:-1], {"error": "lengthMismatch", "expected": n, "actual": n - 1}, "last byte cut"),
    ("truncated-middle.bundle", golden.data[:H + (n - H) // 2],
     {"error": "lengthMismatch", "expected": n, "actual": H + (n - H) // 2}, "cut in the middle of the payload"),
    ("appended-byte.bundle", golden.data + b"\x00", {"error": "lengthMismatch", "expected": n, "actual": n + 1},
     "one zero byte appended"),
]
write_expected(os.path.join(broken, "expected.json"),
               "Copies of ../golden.bundle, each opened with ../golden.key; 'error' is the BundleError "
               "case expected (from opening, or from reading 'read' when given). "
               "Made by Scripts/make-format-fixtures.sh.",
               write_cases(broken, cases))
PY

# 4. The same tree signed: a raw-key slot (golden.key), then the signature.
"$pack" "$work/tree" "$out/signed.bundle" --key-file "$out/golden.key" --sign-key "$out/signed.sign" \
    --chunk-size 4K --quiet

ls -l "$out" "$out/broken" >&2
