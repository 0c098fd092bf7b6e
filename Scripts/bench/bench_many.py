#!/usr/bin/env python3
"""Daemon memory with many files (issue 4: RSS ≤ 64 MiB + chunk cache at 1,000,000 files).

Usage (normally through Scripts/bench-many.sh):
  bench_many.py --bin DIR --cache DIR --work DIR [--files N] [--json FILE]
                [--label TEXT] [--max-peak-mib MIB] [--reuse-bundle]

Run through Scripts/bench-many.sh, which builds the release binaries. This
script makes (or reuses) a deterministic tree of N small files, packs it with
a raw key, mounts it with encfs-mount (daemon mode), and reads the daemon's
/proc/PID/status at three points:
  mount   right after the first stat in the mount succeeds;
  find    after `find MNT -type f | wc -l` (checked against N);
  cat     after every file is read once (`find -print0 | xargs -0 cat | wc -c`,
          checked against the total size).
VmHWM is the peak resident set since the daemon started (index load
included), VmRSS the current one. Kernel memory (page cache, dentries) is
not the daemon's and is not counted. Prints a markdown table, writes JSON.

Tree: N files of 1-200 bytes, f%07d.txt, 1,000 per directory d%04d (a
second level a%03d above them past 1,000 directories); cached
under CACHE/tree-N, reused while its manifest matches.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import MiB, die, log, proc_status_mib as proc_status, unmount  # noqa: E402
import executable_page_cache  # noqa: E402

PROG = "bench-many"
BENCH_KEY = "6d" * 32  # public, benchmark-only key: the bundle holds nothing secret
PER_DIRECTORY = 1000
TREE_VERSION = 2


def relative_path(i, directories):
    d = i // PER_DIRECTORY
    name = f"d{d:04d}/f{i:07d}.txt"
    if directories > PER_DIRECTORY:
        name = f"a{d // PER_DIRECTORY:03d}/" + name
    return name


def file_size(i):
    return 1 + (i * 7919 + 13) % 200


def make_tree(cache, n):
    """The tree of n files under cache/tree-n; returns (path, total bytes)."""
    root = os.path.join(cache, f"tree-{n}")
    manifest_path = os.path.join(cache, f"tree-{n}.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
        if manifest.get("version") == TREE_VERSION and manifest.get("files") == n and os.path.isdir(root):
            return root, manifest["bytes"]
    except (OSError, ValueError):
        pass
    log(f"generating {n:,} files in {root}")
    started = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(manifest_path):
        os.unlink(manifest_path)
    directories = (n + PER_DIRECTORY - 1) // PER_DIRECTORY
    pattern = bytes(range(32, 127)) * 4  # 380 bytes: any 200 from offset < 95
    total = 0
    made = set()
    for i in range(n):
        rel = relative_path(i, directories)
        path = os.path.join(root, rel)
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        size = file_size(i)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, pattern[i % 95:i % 95 + size])
        os.close(fd)
        total += size
    with open(manifest_path, "w") as f:
        json.dump({"version": TREE_VERSION, "files": n, "bytes": total}, f)
    log(f"generated in {time.monotonic() - started:.1f} s")
    return root, total


def sh(command, *args):
    return benchlib.run(command, *args).stdout


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--bin", required=True, help="directory of the release binaries")
    parser.add_argument("--cache", required=True, help="where generated trees are kept")
    parser.add_argument("--work", required=True, help="bundle, key and mount point")
    parser.add_argument("--json", help="where to write the results (default WORK/results-N.json)")
    parser.add_argument("--label", default="", help="a note stored with the results")
    parser.add_argument("--max-peak-mib", type=float,
                        help="fail when the daemon's peak RSS (VmHWM) exceeds this many MiB")
    parser.add_argument("--reuse-bundle", action="store_true",
                        help="mount WORK/many-N.encfs as it is if it exists (pack time not measured)")
    args = parser.parse_args()
    benchlib.set_program(PROG)
    if args.files < 1:
        die("--files must be at least 1")
    for d in (args.cache, args.work):
        os.makedirs(d, exist_ok=True)
    n = args.files
    source, total_bytes = make_tree(args.cache, n)
    key = os.path.join(args.work, "bench.key")
    with open(key, "w") as f:
        f.write(BENCH_KEY + "\n")
    os.chmod(key, 0o600)
    bundle = os.path.join(args.work, f"many-{n}.encfs")
    mountpoint = os.path.join(args.work, "mnt")
    os.makedirs(mountpoint, exist_ok=True)
    if benchlib.is_mounted(mountpoint):
        unmount(mountpoint)

    if args.reuse_bundle and os.path.exists(bundle):
        log(f"reusing {bundle}")
        pack_s = None
    else:
        log(f"packing {n:,} files")
        started = time.monotonic()
        sh('"$1/encfs-pack" --quiet --key-file "$2" -- "$3" "$4" && sync', args.bin, key, source, bundle)
        pack_s = round(time.monotonic() - started, 3)
    bundle_bytes = os.path.getsize(bundle)
    # Header bytes 56..<64: the sealed index length (docs/FORMAT.md); the
    # plaintext the daemon keeps is 16 bytes (the tag) shorter.
    with open(bundle, "rb") as f:
        head = f.read(64)
    # A paged index (format v2: header bytes 36..<40 hold page 0's sealed
    # length) is stored compressed and sealed page by page: report its
    # stored bytes; the daemon keeps only the pages its cache holds.
    paged = int.from_bytes(head[36:40], "little") != 0 and int.from_bytes(head[8:10], "little") == 2
    index_bytes = int.from_bytes(head[56:64], "little") - (0 if paged else 16)
    directories = (n + PER_DIRECTORY - 1) // PER_DIRECTORY
    entries = 1 + n + directories + (directories + PER_DIRECTORY - 1) // PER_DIRECTORY if directories > PER_DIRECTORY \
        else 1 + n + directories

    results = {"files": n, "file_bytes": total_bytes, "pack_s": pack_s, "bundle_bytes": bundle_bytes,
               "entries": entries, "index_plaintext_bytes": index_bytes, "index_paged": paged,
               "label": args.label, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "machine": f"{os.cpu_count()} CPUs, {platform.release()}"}
    try:
        git = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True)
        results["commit"] = git.stdout.strip()
    except OSError:
        pass

    pid = None
    try:
        log("mounting")
        probe = os.path.join(mountpoint, relative_path(0, (n + PER_DIRECTORY - 1) // PER_DIRECTORY))
        # The same page cache for the daemon's executable whatever filled it
        # (a fresh build, a copy): its peak RSS depends on it.
        executable_page_cache.settle(os.path.join(args.bin, "encfs-mount"))
        seconds, pid = benchlib.mount([os.path.join(args.bin, "encfs-mount"), "--key-file", key, "--", bundle, mountpoint],
                                      mountpoint, probe, os.path.join(args.work, "encfs-mount.log"), "encfs-mount",
                                      timeout=300)
        results["mount_s"] = round(seconds, 3)
        if pid is None:
            die(f"cannot find the daemon serving {mountpoint}")
        results["after_mount"] = proc_status(pid)

        log("find")
        started = time.monotonic()
        listed = int(sh('find "$1" -type f | wc -l', mountpoint).strip())
        results["find_s"] = round(time.monotonic() - started, 3)
        results["find_count"] = listed
        results["after_find"] = proc_status(pid)
        if listed != n:
            die(f"find listed {listed} files, expected {n}")

        log("reading every file")
        started = time.monotonic()
        read = int(sh('cd "$1" && find . -type f -print0 | xargs -0 -n 2000 cat | wc -c', mountpoint).strip())
        results["cat_s"] = round(time.monotonic() - started, 3)
        results["cat_bytes"] = read
        results["after_cat"] = proc_status(pid)
        if read != total_bytes:
            die(f"read {read} bytes, expected {total_bytes}")
    finally:
        unmount(mountpoint, pid)

    peak = max(results[k]["VmHWM"] for k in ("after_mount", "after_find", "after_cat"))
    results["peak_mib"] = peak
    results["peak_bytes_per_file"] = round(peak * MiB / n, 1)
    results["index_bytes_per_entry"] = round(index_bytes / entries, 1)
    # Everything but the index: runtime, libraries, buffers, transient copies.
    results["peak_minus_index_mib"] = round(peak - index_bytes / MiB, 1)
    out = args.json or os.path.join(args.work, f"results-{n}.json")
    with open(out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")

    def row(name, value):
        print(f"| {name} | {value} |")
    print(f"\n### {n:,} files ({total_bytes / MiB:.1f} MiB), {results['date']}, {results.get('commit', '')} {args.label}\n")
    print("| measure | value |")
    print("|---|---|")
    row("pack (s)", "–" if pack_s is None else f"{pack_s:.2f}")
    row("bundle (MiB)", f"{bundle_bytes / MiB:.1f}")
    row("mount (s)", f"{results['mount_s']:.3f}")
    for k, what in (("after_mount", "after mount"), ("after_find", f"after find ({results['find_s']:.1f} s)"),
                    ("after_cat", f"after reading every file ({results['cat_s']:.1f} s)")):
        s = results[k]
        row(f"daemon VmHWM / VmRSS {what} (MiB)", f"{s['VmHWM']:.1f} / {s['VmRSS']:.1f}")
    row("index stored, paged (MiB; bytes per entry)" if paged else "index plaintext (MiB; bytes per entry)", f"{index_bytes / MiB:.1f}; {results['index_bytes_per_entry']:.1f} for {entries:,} entries")
    row("peak VmHWM − index (MiB)", f"{results['peak_minus_index_mib']:.1f}")
    row("peak per file (bytes)", f"{results['peak_bytes_per_file']:.0f}")
    print(f"\nresults: {out}")
    if args.max_peak_mib is not None and peak > args.max_peak_mib:
        die(f"daemon peak RSS {peak:.1f} MiB is over the limit of {args.max_peak_mib:g} MiB")


if __name__ == "__main__":
    main()
