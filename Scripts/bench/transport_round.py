#!/usr/bin/env python3
"""Transport rounds: several encfs builds or options side by side, interleaved.

  Scripts/bench/transport_round.py REPS BUNDLE KEYFILE NAME=BINDIR[:ARG,ARG...] ...

Mounts BUNDLE once per NAME (BINDIR/encfs-mount BUNDLE MNT --key-file KEYFILE
ARGs, e.g. `uring=.build/release:--transport,uring`, `base=/var/tmp/encfs-baseline/REV`),
sets each mount's read-ahead to 1 MiB, then REPS times, the systems in turn:
drops the big file's FUSE page cache (POSIX_FADV_DONTNEED), reads big.bin with
dd bs=1M (sequential, FUSE cache cold, bundle cached), then fio 4 KiB random
reads (O_DIRECT, psync) with 1 and 4 jobs for SECS seconds (env, default 3).
Prints medians and ratios to the first system; VERBOSE=1 prints each run with
the CPU ticks of each daemon thread (name:ticks). Root; the bundle must hold
big.bin at its top. For quick looks while changing the transport; the figures
to quote come from Scripts/bench.sh.
"""
import os, sys, subprocess, time, json, statistics, re
reps = int(sys.argv[1])
BUNDLE, KEY = os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
D = os.path.dirname(BUNDLE)
sys.argv[2:] = sys.argv[4:]
secs = os.environ.get("SECS", "3")
systems = []
for spec in sys.argv[2:]:
    name, rest = spec.split("=", 1)
    binp, _, args = rest.partition(":")
    env, argl = {}, []
    for a in (args.split(",") if args else []):
        if a.startswith("ENV:"): k, v = a[4:].split("="); env[k] = v
        else: argl.append(a)
    systems.append((name, binp, argl, f"{D}/mnt-{name}", env))
def pid_of(mp):
    for e in os.listdir("/proc"):
        if not e.isdigit(): continue
        try:
            argv = open(f"/proc/{e}/cmdline","rb").read().split(b"\0")
            if mp.encode() in argv and any(os.readlink(f"/proc/{e}/fd/{f}") == "/dev/fuse" for f in os.listdir(f"/proc/{e}/fd")): return int(e)
        except OSError: pass
def ticks(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            st = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
            out[t] = (open(f"/proc/{pid}/task/{t}/comm").read().strip(), int(st[11]) + int(st[12]))
        except OSError: pass
    return out
def busy(t0, t1): return " ".join(f"{t1[k][0].replace('encfs-','')}:{t1[k][1]-t0[k][1]}" for k in sorted(t1, key=lambda k: -(t1[k][1]-t0.get(k,("",0))[1])) if k in t0 and t1[k][1]-t0[k][1] > 0)
def mount(binp, args, mp, env):
    os.makedirs(mp, exist_ok=True)
    subprocess.run(["fusermount3", "-uz", mp], capture_output=True)
    subprocess.run([f"{binp}/encfs-mount", BUNDLE, mp, "--key-file", KEY] + args, check=True, env=dict(os.environ, **env))
    for _ in range(1000):
        if os.path.exists(f"{mp}/big.bin"): break
        time.sleep(0.01)
    dev = os.stat(mp).st_dev
    with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb", "w") as f: f.write("1024\n")
    return pid_of(mp)
def drop(path):
    fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def dd(path):
    r = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", r.stderr, re.M)
    return int(m.group(1)) / float(m.group(2)) / 2**20
def fio(path, jobs):
    out = subprocess.run(["fio", "--name=r", f"--filename={path}", "--readonly", "--rw=randread", "--bs=4k", "--ioengine=psync", "--direct=1",
          f"--numjobs={jobs}", "--time_based", f"--runtime={secs}", "--group_reporting", "--randrepeat=1", "--invalidate=0", "--output-format=json"], capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["iops"]
with open(BUNDLE, "rb") as f:
    while f.read(1 << 20): pass
pids = {s[0]: mount(s[1], s[2], s[3], s[4]) for s in systems}
keys = ["seq", "r1", "r4"]
res = {s[0]: {k: [] for k in keys} for s in systems}
print("load", open("/proc/loadavg").read().split()[:3], flush=True)
try:
    for r in range(reps):
        for s in systems:
            p = f"{s[3]}/big.bin"; pid = pids[s[0]]
            drop(p); t0 = ticks(pid); v = dd(p); t1 = ticks(pid); res[s[0]]["seq"].append(v); b0 = busy(t0, t1)
            v1 = fio(p, 1); t2 = ticks(pid); res[s[0]]["r1"].append(v1); b1 = busy(t1, t2)
            v4 = fio(p, 4); t3 = ticks(pid); res[s[0]]["r4"].append(v4); b4 = busy(t2, t3)
            if os.environ.get("VERBOSE"): print(f"  {s[0]:8s} seq {v:5.0f} [{b0}]  r1 {v1:6.0f} [{b1}]  r4 {v4:6.0f} [{b4}]", flush=True)
finally:
    for s in systems: subprocess.run(["fusermount3", "-u", s[3]])
b = systems[0][0]
for k in keys:
    base = statistics.median(res[b][k])
    print(k, "  ".join(f"{n} {statistics.median(res[n][k]):.0f} ({statistics.median(res[n][k])/base:.2f}x)" for n in res))
print("load", open("/proc/loadavg").read().split()[:3])
