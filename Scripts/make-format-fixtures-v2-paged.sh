#!/usr/bin/env bash
# Format version 2 with a paged index: part of Scripts/make-format-fixtures.sh
# (run that with "v2-paged"; this takes the built encfs-pack, the output
# directory and a scratch directory). The tree, golden.key, manifest.json and
# the broken cases of version 2 are those of make-format-fixtures-v2.sh
# (encfs-pack pages the index of every version 2 bundle); this adds broken
# cases of the paged index to broken/: a damaged page other than page 0
# opens, and fails where it is first used.
#
# usage: Scripts/make-format-fixtures-v2-paged.sh ENCFS_PACK OUT_DIR WORK_DIR
set -euo pipefail
pack="$1" out="$2" work="$3"
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/fixtures${PYTHONPATH:+:$PYTHONPATH}"
here="$(cd "$(dirname "$0")" && pwd)"

"$here/make-format-fixtures-v2.sh" "$pack" "$out" "$work"

python3 - "$out/golden.bundle" "$out/broken" <<'PY'
import json, os, sys
from fixture_tree import Golden, write_cases, write_expected

golden = Golden(sys.argv[1])
broken = sys.argv[2]
flip, setbytes, le = golden.flip, golden.setbytes, golden.le
H = le(12, 4)
head = le(36, 4)  # page 0's sealed length: the index is paged
assert head > 0, "expected a paged index"
page1 = H + le(48, 8) + head

cases = [
    ("page-0-length-changed.bundle", setbytes(36, (head - 1).to_bytes(4, "little")), {"error": "headerAuthenticationFailed"},
     "header bytes 36..39 (page 0's sealed length) changed: the header MAC fails"),
    ("flipped-record-page-byte.bundle", flip(page1 + 3), {"error": "corruptIndex", "lookup": "hello.txt"},
     "a byte of record page 1: opens (only page 0 is read), the first lookup fails"),
    ("flipped-table-page-byte.bundle", flip(len(golden.data) - 1), {"error": "corruptIndex", "read": "site/app.js"},
     "the last byte of the last page, a chunk table page: opens and looks up, reading a compressed file fails"),
]
expected_path = os.path.join(broken, "expected.json")
table = json.load(open(expected_path))["cases"] + write_cases(broken, cases)
write_expected(expected_path,
               "Copies of ../golden.bundle (format version 2, paged index), each opened with ../golden.key; 'error' is "
               "the BundleError case expected (from opening, from looking up 'lookup', or from reading 'read' when "
               "given). Made by Scripts/make-format-fixtures.sh v2-paged.",
               table)
PY
ls -l "$out/broken" >&2
