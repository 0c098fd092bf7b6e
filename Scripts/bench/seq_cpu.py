#!/usr/bin/env python3
"""Sequential reads side by side: throughput and CPU per GiB, interleaved.

  Scripts/bench/seq_cpu.py REPS FILE NAME=KIND:BIN:SOURCE[:ARG,ARG...] ...

KIND is `encfs` (BIN/encfs-mount SOURCE MNT ARGs, SOURCE a bundle; give the
key with ARGs, e.g. `--key-file,/path/key`), `gocryptfs` (BIN -ro -q ARGs
SOURCE MNT, SOURCE a cipher directory, e.g. ARGs `-passfile,FILE`) or
`nullfuse` (BIN SOURCE MNT
ARGs, SOURCE a directory, e.g. `-o,max_read=262144`); an ARG `ENV:K=V` sets
an environment variable for the mount command instead. FILE is the path of the
big file inside every mount (e.g. big.bin). Every mount gets a 1 MiB
read-ahead (bdi read_ahead_kb), like `Scripts/bench.sh --read-ahead-kb 1024`.
The backing files are kept locked in the page cache meanwhile (mmap + mlock in
a child process: other users' drop_caches must not send reads to disk). Then REPS times, the
systems in turn: drop FILE's FUSE page cache (POSIX_FADV_DONTNEED), read it
with `dd bs=1M`, and record MiB/s, the daemon's CPU (utime + stime of all its
threads, /proc/PID/stat) per GiB and dd's CPU per GiB; at the end each
daemon's peak RSS (VmHWM). CHRT=N runs the
mount commands (so the daemons) and dd at SCHED_FIFO priority N, which
shields them from other users' load. Prints every read and the medians [min-max]. Root.
The figures to quote next to it come from Scripts/bench.sh.
"""
import ctypes, os, re, resource, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import daemon_pid  # noqa: E402  (one copy of the /proc walk)

HZ = os.sysconf("SC_CLK_TCK")


def parse(spec):
    name, rest = spec.split("=", 1)
    parts = rest.split(":", 3)
    kind, binary, source = parts[0], parts[1], os.path.abspath(parts[2])
    args = parts[3].split(",") if len(parts) > 3 and parts[3] else []
    env = dict(a[4:].split("=", 1) for a in args if a.startswith("ENV:"))
    args = [a for a in args if not a.startswith("ENV:")]
    return {"name": name, "kind": kind, "bin": binary, "source": source, "args": args, "env": env}


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def mount(s, base):
    mp = os.path.join(base, f"mnt-{s['name']}")
    os.makedirs(mp, exist_ok=True)
    subprocess.run(["fusermount3", "-uz", mp], capture_output=True)
    if s["kind"] == "encfs":
        cmd = [f"{s['bin']}/encfs-mount", s["source"], mp] + s["args"]
    elif s["kind"] == "gocryptfs":
        cmd = [s["bin"], "-ro", "-q"] + s["args"] + [s["source"], mp]
    else:
        cmd = [s["bin"], s["source"], mp] + s["args"]
    if os.environ.get("CHRT"):
        cmd = ["chrt", "-f", os.environ["CHRT"]] + cmd
    subprocess.run(cmd, check=True, env=dict(os.environ, **s["env"]))
    for _ in range(1000):
        if os.path.ismount(mp):
            break
        time.sleep(0.01)
    dev = os.stat(mp).st_dev
    with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb", "w") as f:
        f.write("1024\n")
    s["mp"], s["pid"] = mp, daemon_pid(mp)


def files_under(path):
    if not os.path.isdir(path):
        return [path]
    return [os.path.join(root, f) for root, _, files in os.walk(path) for f in files]


def pin(paths):
    """Forks a process that keeps `paths` mapped and locked in the page cache
    (others' `drop_caches` would otherwise send the daemons' reads to disk);
    returns its pid."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(ready_w)
        os.read(ready_r, 1)  # the files are resident
        os.close(ready_r)
        return pid
    os.close(ready_r)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            continue
        fd = os.open(p, os.O_RDONLY)
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value) or libc.mlock(addr, size) != 0:
            sys.stderr.write(f"seq_cpu: warning: cannot lock {p} in memory\n")
    os.write(ready_w, b"1")
    signal.pause()
    os._exit(0)


def peak_rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def release(systems, pinned):
    """Unmounts what mount() mounted and ends the process pin() started."""
    for s in systems:
        if "mp" in s:
            subprocess.run(["fusermount3", "-u", s["mp"]])
    os.kill(pinned, signal.SIGTERM)
    os.waitpid(pinned, 0)


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def dd(path):
    cmd = ["dd", f"if={path}", "of=/dev/null", "bs=1M"]
    if os.environ.get("CHRT"):
        cmd = ["chrt", "-f", os.environ["CHRT"]] + cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", r.stderr, re.M)
    if not m:
        sys.exit(f"seq_cpu: error: dd failed: {r.stderr.strip()}")
    size = int(m.group(1))
    reader = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return size, size / float(m.group(2)) / 2**20, reader


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    reps, rel = int(sys.argv[1]), sys.argv[2]
    systems = [parse(a) for a in sys.argv[3:]]
    base = os.environ.get("MNT_BASE", "/var/tmp/seq_cpu-mnt")
    pinned = pin(sorted({f for s in systems for f in files_under(s["source"])}))
    results = {s["name"]: [] for s in systems}
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]), flush=True)
    try:
        for s in systems:
            mount(s, base)
        for r in range(reps):
            for s in systems:
                path = os.path.join(s["mp"], rel)
                drop(path)
                c0 = cpu_seconds(s["pid"])
                size, mibs, reader = dd(path)
                daemon = cpu_seconds(s["pid"]) - c0
                gib = size / 2**30
                results[s["name"]].append((mibs, daemon / gib, reader / gib))
                print(f"{r} {s['name']:14s} {mibs:6.0f} MiB/s  daemon {daemon / gib:5.2f} s/GiB  dd {reader / gib:5.2f} s/GiB",
                      flush=True)
        for s in systems:
            s["hwm"] = peak_rss_mib(s["pid"])
    finally:
        release(systems, pinned)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
    print("| system | MiB/s | daemon CPU s/GiB | dd CPU s/GiB | daemon VmHWM MiB |")
    print("|---|---|---|---|---|")
    for s in systems:
        rows = results[s["name"]]
        cols = []
        for i, fmt in ((0, "{:,.0f}"), (1, "{:.2f}"), (2, "{:.2f}")):
            v = [row[i] for row in rows]
            cols.append(f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}–{fmt.format(max(v))}]")
        print(f"| {s['name']} | " + " | ".join(cols) + f" | {s.get('hwm', 0):.1f} |")


if __name__ == "__main__":
    main()
