#!/usr/bin/env python3
"""What the access policy costs (issue 11): open latency with and without
rules, and --enforce-reads throughput against the default, every variant
mounted and measured in turn within each repetition (one run, side by side).

  Scripts/bench-access.py [--reps N] [--files N] [--big-mib N] [--work DIR]
  environment: ENCFS_BIN_DIR (release binaries, required)

Prints two markdown tables: medians [min-max] and ratios of medians to the
mount without rules. Needs root (mounts, read-ahead). Every mount is
unmounted, also on failure.
"""
import argparse, os, random, shutil, statistics, subprocess, sys, time

def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--big-mib", type=int, default=256)
    ap.add_argument("--work", default="/var/tmp/encfs-bench-access")
    a = ap.parse_args()
    bins = os.environ.get("ENCFS_BIN_DIR")
    if not bins:
        sys.exit("bench-access: error: set ENCFS_BIN_DIR to the release binaries")
    work = a.work
    src, bundle, key, mnt = (os.path.join(work, n) for n in ("src", "b.encfs", "key", "mnt"))
    os.makedirs(mnt, exist_ok=True)
    if not os.path.exists(bundle):
        shutil.rmtree(src, ignore_errors=True)
        os.makedirs(os.path.join(src, "small"))
        rng = random.Random(11)
        for i in range(a.files):
            with open(os.path.join(src, "small", "f%05d" % i), "wb") as f:
                f.write(rng.randbytes(2048))
        for name in ("seq", "rand"):
            with open(os.path.join(src, name), "wb") as f:
                for _ in range(a.big_mib):
                    f.write(os.urandom(1 << 20))
        with open(key, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(key, 0o600)
        sh(os.path.join(bins, "encfs-pack"), src, bundle, "--key-file", key, "--quiet")
    python = os.path.realpath(sys.executable)
    variants = [
        ("no rules", []),
        ("--allow-uid", ["--allow-uid", str(os.getuid())]),
        ("--allow-exe", ["--allow-exe", python]),
        ("--allow-exe --allow-cgroup", ["--allow-exe", python, "--allow-cgroup", "/"]),
        ("--allow-uid --enforce-reads", ["--allow-uid", str(os.getuid()), "--enforce-reads"]),
        ("--allow-exe --enforce-reads", ["--allow-exe", python, "--enforce-reads"]),
    ]
    names = sorted(os.listdir(os.path.join(src, "small")))
    results = {v: {"open": [], "seq": [], "warm": [], "rand": []} for v, _ in variants}
    for rep in range(a.reps):
        for label, options in variants:
            sh(os.path.join(bins, "encfs-mount"), bundle, mnt, "--key-file", key, *options)
            try:
                paths = [os.path.join(mnt, "small", n) for n in names]
                for p in paths:  # entries into the kernel's cache: open alone is timed
                    os.stat(p)
                t = time.perf_counter()
                for p in paths:
                    os.close(os.open(p, os.O_RDONLY))
                results[label]["open"].append((time.perf_counter() - t) / len(paths) * 1e6)
                size = a.big_mib << 20
                for kind in ("seq", "warm"):
                    fd = os.open(os.path.join(mnt, "seq"), os.O_RDONLY)
                    t = time.perf_counter()
                    while os.read(fd, 1 << 20):
                        pass
                    results[label][kind].append(size / (time.perf_counter() - t) / (1 << 20))
                    os.close(fd)
                rng = random.Random(rep)
                fd = os.open(os.path.join(mnt, "rand"), os.O_RDONLY)
                count = 20000
                offsets = [rng.randrange(size // 4096) * 4096 for _ in range(count)]
                t = time.perf_counter()
                for off in offsets:
                    os.pread(fd, 4096, off)
                results[label]["rand"].append(count / (time.perf_counter() - t))
                os.close(fd)
            finally:
                sh("fusermount3", "-u", mnt)
    def fmt(xs, unit):
        m = statistics.median(xs)
        return "%s [%s-%s]" % (unit(m), unit(min(xs)), unit(max(xs)))
    us = lambda x: "%.1f" % x
    mib = lambda x: "{:,.0f}".format(x)
    k = lambda x: "%.1fk" % (x / 1000)
    cols = [("open+close (µs) ↓", "open", us), ("sequential, cold (MiB/s) ↑", "seq", mib),
            ("sequential, re-read (MiB/s) ↑", "warm", mib), ("4 KiB random (reads/s) ↑", "rand", k)]
    print("| mount | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for label, _ in variants:
        print("| %s | %s |" % (label, " | ".join(fmt(results[label][key], u) for _, key, u in cols)))
    print()
    print("| mount | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    base = results["no rules"]
    for label, _ in variants:
        print("| %s | %s |" % (label, " | ".join("%.2f×" % (statistics.median(results[label][key]) / statistics.median(base[key]))
                                                for _, key, _u in cols)))

if __name__ == "__main__":
    main()
