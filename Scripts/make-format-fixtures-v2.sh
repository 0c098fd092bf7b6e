#!/usr/bin/env bash
# Format version 2 part of Scripts/make-format-fixtures.sh (run that with
# "v2"; this takes the built encfs-pack, the output directory and a scratch
# directory). Writes Tests/FormatTests/Fixtures/v2/: golden.bundle (zstd
# level 3, 4 KiB chunks, a file duplicated at two paths, a file that does
# not compress), golden.key, manifest.json, and broken/ with expected.json.
#
# usage: Scripts/make-format-fixtures-v2.sh ENCFS_PACK OUT_DIR WORK_DIR
set -euo pipefail
pack="$1" out="$2" work="$3"
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/fixtures${PYTHONPATH:+:$PYTHONPATH}"

mkdir -p "$out/broken"
rm -f "$out"/golden.* "$out"/manifest.json "$out"/broken/*
# A test value, committed on purpose.
printf '%s\n' 2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfe > "$out/golden.key"

# 1. The tree and its manifest (entries in index order).
python3 - "$work/tree" "$out/manifest.json" <<'PY'
import random, sys
from fixture_tree import make_tree, write_manifest

tree, manifest_path = sys.argv[1].encode(), sys.argv[2]
rng = random.Random(2)
words = [b"function ", b"return ", b"const ", b"value", b" = ", b"{", b"}", b";\n", b"'text'", b"(x)"]
def code(n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])

app_js = code(3 * 4096 + 77)          # compresses: a chunk table with zstd chunks
entries = [
    (b"copy", "directory", 0o755, 1_700_100_001_000_000_001, None),
    (b"hello.txt", "file", 0o644, 1_700_100_002_000_000_002, b"hello, world\n"),
    (b"noise.bin", "file", 0o600, 1_700_100_003_000_000_003, rng.randbytes(4096 + 10)),  # stored raw
    (b"site", "directory", 0o750, 1_700_100_004_000_000_004, None),
    (b"copy/app.js", "file", 0o644, 1_700_100_005_000_000_005, app_js),  # the same body as site/app.js
    (b"site/app.js", "file", 0o644, 1_700_100_006_000_000_006, app_js),
    (b"site/data.json", "file", 0o640, 1_700_100_007_000_000_007, b'{"k": [' + b'1, ' * 3000 + b'1]}\n'),
    (b"site/link", "symlink", 0o777, 1_700_100_008_000_000_008, b"app.js"),
]
root_mode, root_mtime = 0o755, 1_700_100_000_000_000_000
make_tree(tree, entries, root_mode, root_mtime)
write_manifest(manifest_path, entries, root_mode, root_mtime,
               about="Expected contents of golden.bundle (format version 2), made by Scripts/make-format-fixtures.sh v2. "
                     "Entries are in index order (breadth-first, siblings by name bytes); the first is the root.",
               formatVersion=2, chunkSizeLog2=12, slots=[{"kind": "raw-key"}])
PY

# 2. The golden bundle.
# Without fragments (they came later: v2-fragments/).
"$pack" "$work/tree" "$out/golden.bundle" --key-file "$out/golden.key" --compress zstd --chunk-size 4K --fragment-size 0 --quiet

# 3. Broken copies. Positions come from the header; the first body in the
#    payload is copy/app.js (index order: copy, hello.txt, noise.bin, site,
#    copy/app.js, ...; files are written in index order), whose chunks are
#    zstd frames; hello.txt and noise.bin come before it in the payload.
python3 - "$out/golden.bundle" "$out/broken" <<'PY'
import os, sys
from fixture_tree import Golden, write_cases, write_expected

golden = Golden(sys.argv[1])
broken = sys.argv[2]
flip, setbytes, le = golden.flip, golden.setbytes, golden.le
n = len(golden.data)
H = le(12, 4)
index_start = H + le(48, 8)
# hello.txt (13 bytes, raw: 29 sealed), then noise.bin (4106 bytes, raw: 2 chunks, 4106 + 32), then copy/app.js.
app_js_start = H + (13 + 16) + (4106 + 32)

cases = [
    ("version-3.bundle", setbytes(8, (3).to_bytes(2, "little")), {"error": "unsupportedVersion", "version": 3},
     "format version 3"),
    ("unknown-method.bundle", setbytes(34, b"\x07"), {"error": "corruptHeader"}, "compression method 7"),
    ("level-0.bundle", setbytes(35, b"\x00"), {"error": "corruptHeader"}, "zstd with level 0"),
    ("method-none.bundle", setbytes(34, b"\x00\x00"), {"error": "headerAuthenticationFailed"},
     "method and level set to none: the header MAC fails"),
    ("flipped-index-byte.bundle", flip(index_start + 40), {"error": "corruptIndex"}, "a byte of the sealed index"),
    ("flipped-frame-byte.bundle", flip(app_js_start + 5),
     {"error": "corruptChunk", "read": "copy/app.js", "entry": 5, "chunk": 0},
     "a byte of chunk 0 (a zstd frame) of copy/app.js, shared with site/app.js: opens, reading it fails"),
    ("truncated.bundle", golden.data[:-1], {"error": "lengthMismatch", "expected": n, "actual": n - 1}, "last byte cut"),
]
write_expected(os.path.join(broken, "expected.json"),
               "Copies of ../golden.bundle (format version 2), each opened with ../golden.key; 'error' is the "
               "BundleError case expected (from opening, or from reading 'read' when given). "
               "Made by Scripts/make-format-fixtures.sh v2.",
               write_cases(broken, cases))
PY
ls -l "$out" "$out/broken" >&2
