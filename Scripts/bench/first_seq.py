#!/usr/bin/env python3
"""First sequential reads on a fresh mount, classic against uring.

  Scripts/bench/first_seq.py BINDIR REPS   (in the directory holding data.encfs and bench.key)

Per round and system (the order alternated): a fresh encfs-mount of data.encfs
(BINDIR/encfs-mount --key-file bench.key --transport T), read-ahead 1 MiB, then
three dd bs=1M of big.bin, each with the FUSE page cache dropped first; prints
MiB/s of each pass and the medians of the first, second and third passes.
Root. Whether a first read after mounting is slower than the later ones.
"""
import os, subprocess, re, sys, time, statistics
B = sys.argv[1]; reps = int(sys.argv[2])
systems = [("classic", ["--transport", "classic"]), ("uring", ["--transport", "uring"])]
def dd(p):
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
    r = subprocess.run(["dd", f"if={p}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", r.stderr, re.M)
    return int(m.group(1)) / float(m.group(2)) / 2**20
res = {n: [[], [], []] for n, _ in systems}
print("load", open("/proc/loadavg").read().split()[:3])
for r in range(reps):
    for n, a in (systems if r % 2 == 0 else systems[::-1]):
        mp = os.path.abspath(f"fm-{n}"); os.makedirs(mp, exist_ok=True)
        subprocess.run([f"{B}/encfs-mount", "data.encfs", mp, "--key-file", "bench.key"] + a, check=True)
        try:
            for _ in range(500):
                if os.path.exists(f"{mp}/big.bin"): break
                time.sleep(0.01)
            dev = os.stat(mp).st_dev
            open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb", "w").write("1024\n")
            v = [dd(f"{mp}/big.bin") for _ in range(3)]
        finally:
            subprocess.run(["fusermount3", "-u", mp])
        for i in range(3): res[n][i].append(v[i])
        print(f"  {n:8s} " + " ".join(f"{x:6.0f}" for x in v), flush=True)
for n in res: print(n, "medians first/second/third:", " ".join(f"{statistics.median(x):.0f}" for x in res[n]))
print("load", open("/proc/loadavg").read().split()[:3])
