#!/usr/bin/env python3
"""4 KiB random reads side by side: IOPS and the daemon's CPU per read, interleaved.

  Scripts/bench/rand_cpu.py REPS SECONDS FILE NAME=KIND:BIN:SOURCE[:ARG,ARG...] ...

The systems are given as to seq_cpu.py (same KINDs and ARGs; squashfuse is
KIND `nullfuse` with BIN /usr/bin/squashfuse and SOURCE the image). Every
mount gets a 1 MiB read-ahead and the backing files are kept locked in the
page cache, as there. Then REPS times, for 1 job and then 4, the systems in
turn: fio as Scripts/bench.sh runs it (randread, bs=4k, psync, O_DIRECT,
time-based, SECONDS long) on FILE, recording IOPS and the daemon's CPU
(utime + stime of all its threads, /proc/PID/stat) per read. CHRT=N runs the
mounts at SCHED_FIFO priority N, as seq_cpu.py does. Prints every run and the
medians [min-max]. Root; needs fio.
"""
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seq_cpu import cpu_seconds, files_under, mount, parse, pin, release  # noqa: E402  (one copy of the mount logic)


def fio(path, jobs, seconds):
    """Runs fio on path; returns (IOPS, reads done)."""
    out = subprocess.run(["fio", "--name=rand4k", f"--filename={path}", "--readonly", "--rw=randread", "--bs=4k",
                          "--ioengine=psync", "--direct=1", f"--numjobs={jobs}", "--time_based",
                          f"--runtime={seconds}", "--group_reporting", "--randrepeat=1", "--invalidate=0",
                          "--output-format=json"], capture_output=True, text=True)
    if out.returncode != 0 or "{" not in out.stdout:
        sys.exit(f"rand_cpu: error: fio failed: {out.stderr.strip()}")
    read = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]["read"]
    return read["iops"], read["total_ios"]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    reps, seconds, rel = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    systems = [parse(a) for a in sys.argv[4:]]
    base = os.environ.get("MNT_BASE", "/var/tmp/rand_cpu-mnt")
    pinned = pin(sorted({f for s in systems for f in files_under(s["source"])}))
    results = {(s["name"], jobs): [] for s in systems for jobs in (1, 4)}
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]), flush=True)
    try:
        for s in systems:
            mount(s, base)
        for r in range(reps):
            for jobs in (1, 4):
                for s in systems:
                    c0 = cpu_seconds(s["pid"])
                    iops, reads = fio(os.path.join(s["mp"], rel), jobs, seconds)
                    per_read = (cpu_seconds(s["pid"]) - c0) / max(reads, 1) * 1e6
                    results[(s["name"], jobs)].append((iops, per_read))
                    print(f"{r} {jobs} job(s) {s['name']:14s} {iops:9,.0f} IOPS  daemon {per_read:6.1f} µs/read",
                          flush=True)
    finally:
        release(systems, pinned)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
    print("| system | jobs | IOPS | daemon CPU µs/read |")
    print("|---|---|---|---|")
    for jobs in (1, 4):
        for s in systems:
            rows = results[(s["name"], jobs)]
            iops, cpu = [row[0] for row in rows], [row[1] for row in rows]
            print(f"| {s['name']} | {jobs} | {statistics.median(iops):,.0f} [{min(iops):,.0f}–{max(iops):,.0f}] "
                  f"| {statistics.median(cpu):.1f} [{min(cpu):.1f}–{max(cpu):.1f}] |")


if __name__ == "__main__":
    main()
