#!/usr/bin/env bash
# Lists every public declaration an application reaches through `import
# EncFS` (the EncFS module and the public part of the modules it is built
# on), one line each, from the compiler's symbol graph of the built modules.
# docs/PublicAPI.txt is the checked-in list that
# PublicAPITests compares against: a new export is a deliberate change.
#
#   Scripts/public-api.sh [BIN_DIR]            prints the list
#   Scripts/public-api.sh --check [BIN_DIR]    compares with PublicAPI.txt; prints the diff, exits 1 when they differ
#                                              (or when examples/embed does not build as an outside module)
#   Scripts/public-api.sh --update [BIN_DIR]   rewrites PublicAPI.txt
#
# Reads the modules of a release build in BIN_DIR, else $ENCFS_BIN_DIR,
# else .build/release (`swift build -c release` first).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
list="$root/docs/PublicAPI.txt"
mode=print
if [[ "${1:-}" == --check || "${1:-}" == --update ]]; then mode=$1; shift; fi
if [[ $# -gt 1 || "${1:-}" == -* ]]; then
    echo "usage: Scripts/public-api.sh [--check|--update] [BIN_DIR]" >&2
    exit 2
fi
bin=${1:-${ENCFS_BIN_DIR:-$root/.build/release}}
if [[ ! -d "$bin/Modules" ]]; then
    echo "public-api.sh: no modules in $bin/Modules: run \`swift build -c release\` first (or set ENCFS_BIN_DIR)" >&2
    exit 2
fi
extract=$(command -v swift-symbolgraph-extract || echo /opt/swift/usr/bin/swift-symbolgraph-extract)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The C modules' maps, as SwiftPM passes them to the compiler.
clang_flags=()
for map in "$root"/Sources/C*/module.modulemap; do
    clang_flags+=(-Xcc "-fmodule-map-file=$map")
done

# The modules behind EncFS hold only `package` declarations but for the
# types an application passes (byte sources, remote options): their public
# part is listed too, so that a `public` added there shows up here.
for module in EncFS EncFSCore EncFSRemote CryptCore; do
    mkdir -p "$work/$module"
    "$extract" -module-name "$module" -target "$(uname -m)-unknown-linux-gnu" \
        -I "$bin/Modules" "${clang_flags[@]}" \
        -minimum-access-level public -skip-synthesized-members \
        -output-dir "$work/$module" >"$work/$module.log" 2>&1 || {
        echo "public-api.sh: swift-symbolgraph-extract failed for $module:" >&2
        cat "$work/$module.log" >&2
        exit 2
    }
done

# One line per symbol: module, kind, path, declaration (python3, which the
# tests need anyway: Scripts/install-deps.sh).
current="$work/PublicAPI.txt"
python3 - "$work" EncFS EncFSCore EncFSRemote CryptCore <<'PY' | LC_ALL=C sort -u >"$current"
import glob, json, sys
work, modules = sys.argv[1], sys.argv[2:]
for module in modules:
    for graph in sorted(glob.glob(f"{work}/{module}/*.symbols.json")):
        for symbol in json.load(open(graph))["symbols"]:
            kind = symbol["kind"]["identifier"].removeprefix("swift.")
            path = ".".join(symbol["pathComponents"])
            declaration = "".join(f["spelling"] for f in symbol.get("declarationFragments", []))
            print(f"{module} {kind} {path}: {declaration}")
PY

case "$mode" in
    print) cat "$current" ;;
    --update) cp "$current" "$list"; echo "public-api.sh: wrote $(wc -l <"$list") declarations to ${list#"$root"/}" ;;
    --check)
        if ! diff -u --label PublicAPI.txt --label built "$list" "$current"; then
            echo "public-api.sh: the public API differs from docs/PublicAPI.txt (+ is new, - is gone);" \
                "if that is deliberate, run Scripts/public-api.sh --update and commit the list" >&2
            exit 1
        fi
        # What an application outside this package writes must build
        # against `import EncFS` alone, also with the upcoming
        # MemberImportVisibility (members need their module imported): the
        # embedding example, and LibraryTests' own ByteSource.
        swiftc=$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)
        if ! "$swiftc" -typecheck -swift-version 6 -enable-upcoming-feature MemberImportVisibility \
                -I "$bin/Modules" "${clang_flags[@]}" \
                "$root/examples/embed/main.swift" "$root/Tests/LibraryTests/Support/CountingSource.swift" >&2; then
            echo "public-api.sh: examples/embed and CountingSource.swift do not build against import EncFS alone" \
                "as a module outside this package" >&2
            exit 1
        fi ;;
esac
