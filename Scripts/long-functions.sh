#!/usr/bin/env bash
# Lists the functions (func, init, deinit, subscript; closures and
# accessors are not counted) longer than 80 lines in Sources/ whose
# comment block directly above does not say why, with the marker
#   // Long because: <one honest line>
# (STYLE.md: no function over ~80 lines without a comment saying why).
# A length counts every line from the declaration to its closing brace;
# braces in comments and string literals do not count.
#
# LONG_LIMIT=N changes the limit (to look for the next candidates).
#
# usage: Scripts/long-functions.sh           list every unexplained long function in Sources/
#        Scripts/long-functions.sh --check   exit 1 if one sits under an enforced directory
#                                            (ENFORCED below); the others are reported only
#        Scripts/long-functions.sh --all     also list the explained ones
set -euo pipefail
cd "$(dirname "$0")/.."
# Enforced by --check: all of Sources/ (every directory is clean).
ENFORCED="Sources"
mode="${1:-}"
case "$mode" in ""|--check|--all) ;; *) echo "usage: $0 [--check|--all]" >&2; exit 2 ;; esac
# shellcheck disable=SC2086
enforced=$(ls -d $ENFORCED)
python3 - "$mode" $enforced <<'PY'
import os, re, sys

LIMIT = int(os.environ.get("LONG_LIMIT", "80"))
MARKER = "// Long because:"
mode, enforced = sys.argv[1], [d.rstrip("/") + "/" for d in sys.argv[2:]]

def code_only(text):
    """The text with comments and string contents blanked (newlines kept),
    so that braces and keywords are only the code's."""
    out, i, n = [], 0, len(text)
    # A stack of contexts: "code" (with the paren depth of an interpolation,
    # or None at top level), or a string: ('"', hashes) / ('"""', hashes).
    stack = [("code", None)]
    while i < n:
        kind, arg = stack[-1]
        c = text[i]
        if kind == "code":
            if text.startswith("//", i):
                j = text.find("\n", i)
                j = n if j < 0 else j
                out.append(" " * (j - i)); i = j; continue
            if text.startswith("/*", i):
                depth, j = 1, i + 2
                while j < n and depth:
                    if text.startswith("/*", j): depth += 1; j += 2
                    elif text.startswith("*/", j): depth -= 1; j += 2
                    else: j += 1
                out.append("".join(ch if ch == "\n" else " " for ch in text[i:j])); i = j; continue
            m = re.match(r'(#*)("""|")', text[i:i + 12]) if c in '"#' else None
            if m:
                hashes, quote = len(m.group(1)), m.group(2)
                out.append(" " * len(m.group(0))); i += len(m.group(0))
                stack.append((quote, hashes)); continue
            if arg is not None:
                if c == "(":
                    stack[-1] = ("code", arg + 1)
                elif c == ")":
                    if arg == 0:
                        stack.pop(); out.append(" "); i += 1; continue
                    stack[-1] = ("code", arg - 1)
            out.append(c); i += 1; continue
        # In a string.
        quote, hashes = kind, arg
        close = quote + "#" * hashes
        if text.startswith(close, i):
            out.append(" " * len(close)); i += len(close); stack.pop(); continue
        escape = "\\" + "#" * hashes
        if text.startswith(escape, i):
            k = i + len(escape)
            if k < n and text[k] == "(":
                out.append(" " * (k + 1 - i)); i = k + 1; stack.append(("code", 0)); continue
            out.append(" " * (k + 1 - i) if k < n and text[k] != "\n" else " " * (k - i)); i = k + 1 if k < n and text[k] != "\n" else k; continue
        out.append(c if c == "\n" else " "); i += 1
    return "".join(out)

DECL = re.compile(r'(?<![.\w])(func\s+[^\s(<]+|init[?!]?(?=\s*[(<])|deinit\b|subscript(?=\s*[(<]))')
STOP = re.compile(r'(?<![.\w])(func|var|let|case|init|deinit|subscript|class|struct|enum|protocol|extension|typealias)\b')

def functions(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    lines = text.split("\n")
    code = code_only(text)
    starts = [0]
    for line in code.split("\n"): starts.append(starts[-1] + len(line) + 1)
    def line_of(pos):
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= pos: lo = mid
            else: hi = mid - 1
        return lo
    for m in DECL.finditer(code):
        # The body: the first "{" outside parentheses and brackets before
        # anything that ends a declaration without one (a requirement).
        depth, j, body = 0, m.end(), None
        while j < len(code):
            c = code[j]
            if c in "([<" and c != "<": depth += 1
            elif c in ")]": depth -= 1
            elif depth == 0 and c == "{": body = j; break
            elif depth == 0 and c == "}": break
            elif depth == 0 and c == "\n":
                rest = code[j + 1:j + 200].lstrip()
                if STOP.match(rest) or rest.startswith("@") or rest.startswith("}"): break
            j += 1
        if body is None: continue
        braces, k = 0, body
        while k < len(code):
            if code[k] == "{": braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0: break
            k += 1
        first, last = line_of(m.start()), line_of(k)
        count = last - first + 1
        if count <= LIMIT: continue
        # The comment block and attributes directly above, and the
        # declaration's own leading modifiers on its line.
        above, r = [], first - 1
        while r >= 0 and (lines[r].strip().startswith("//") or lines[r].strip().startswith("@")):
            above.append(lines[r]); r -= 1
        explained = any(MARKER in l for l in above)
        yield first + 1, m.group(0).split()[-1], count, explained

bad = 0
for root, dirs, files in os.walk("Sources"):
    dirs.sort()
    for name in sorted(files):
        if not name.endswith(".swift"): continue
        path = os.path.join(root, name)
        enforce = any((path + "/").startswith(d) or path.startswith(d) for d in enforced)
        for line, fname, count, explained in functions(path):
            if explained and mode != "--all": continue
            tag = "explained" if explained else ("error" if mode == "--check" and enforce else "note")
            print(f"long-functions: {tag}: {path}:{line}: {fname} is {count} lines"
                  + ("" if explained else f" without a '{MARKER}' comment"), file=sys.stderr if not explained else sys.stdout)
            if not explained and enforce: bad = 1
sys.exit(bad if mode == "--check" else 0)
PY
