#!/usr/bin/env python3
"""Where a 4 KiB random read's time goes: one mount, one daemon, per read.

  Scripts/bench/read_profile.py FILE [SECONDS]

FILE is a file in a FUSE mount (encfs, nullfuse, ...); its daemon is the
process that holds /dev/fuse open with the mountpoint in its argv, or
DAEMON_PID (a daemon started with a relative mountpoint). Runs
fio as Scripts/bench.sh does (randread, bs=4k, psync, O_DIRECT, 1 job;
JOBS=N for more) three times for SECONDS (default 3) each and prints, per read:

  1. IOPS and fio's latency percentiles, and system-wide wake-up counters
     (`perf stat -a`: context switches, migrations, wake-ups, IPIs);
  2. the daemon's CPU (`perf stat -e task-clock -p PID`);
  3. where the daemon's CPU goes (`perf record -a -g -e cpu-clock`): each
     sample of the daemon sorted by its stack into one row (AES-GCM, pread,
     the ring's io_uring_enter, /dev/fuse read and write, glue), the row's
     share times the daemon's CPU per read. fio's CPU per read is estimated
     from its samples against the daemon's.

Root; needs perf and fio. Keep the bundle (or backing file) in the page
cache meanwhile, or pread's row measures the disk. The machine's other load
moves every figure: interleave the systems to compare and run it more than
once (docs/PERFORMANCE.md, "Issue 15: where a 4 KiB random read's time goes").
"""
import json, os, subprocess, sys, tempfile

# First matching row wins; frames run from the leaf to the root.
ROWS = [
    ("AES-GCM (libcrypto)", lambda f: "libcrypto" in f[0]),
    ("pread: page-cache copy", lambda f: any("pread64" in x for x in f) and any("copy_to" in x or "memcpy" in x for x in f[:3])),
    ("pread: page lookup, syscall", lambda f: any("pread64" in x for x in f) or "__libc_pread" in f[0]),
    ("ring: switch and wait", lambda f: any("io_uring_enter" in x for x in f) and any("schedule" in x or "finish_task_switch" in x for x in f)),
    ("ring: commit (reply copy, reader woken)", lambda f: any("io_uring_enter" in x for x in f)
        and any(k in x for x in f for k in ("fuse_uring_commit", "fuse_uring_cmd", "fuse_request_end", "fuse_aio"))),
    ("ring: rest of io_uring_enter", lambda f: any("io_uring_enter" in x for x in f)),
    ("/dev/fuse read (request in)", lambda f: any("fuse_dev_read" in x or "fuse_dev_splice_read" in x for x in f)),
    ("/dev/fuse write (reply out, reader woken)", lambda f: any("fuse_dev_write" in x or "fuse_dev_do_write" in x for x in f)),
    ("scheduler (other)", lambda f: any("schedule" in x or "finish_task_switch" in x for x in f)),
    ("other kernel", lambda f: "kernel" in f[0]),
    ("Swift runtime", lambda f: "swift_" in f[0] or "swift::" in f[0]),
    ("libfuse", lambda f: "libfuse" in f[0]),
    ("libc (malloc, memcpy, locks)", lambda f: "libc.so" in f[0]),
    ("daemon's own code", lambda f: True),
]
WAKEUPS = ["context-switches", "cpu-migrations", "sched:sched_wakeup", "ipi:ipi_send_cpu", "irq_vectors:reschedule_entry"]


def daemon_of(path):
    mount = subprocess.run(["findmnt", "-n", "-o", "TARGET", "--target", path], capture_output=True, text=True).stdout.strip()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            fds = [os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(f"/proc/{entry}/fd")]
        except OSError:
            continue
        if mount.encode() in argv and "/dev/fuse" in fds:
            return int(entry)
    sys.exit(f"read_profile.py: error: no daemon holds /dev/fuse for {mount or path}")


def fio_command(path, seconds):
    return ["fio", "--name=rand4k", f"--filename={path}", "--readonly", "--rw=randread", "--bs=4k", "--ioengine=psync",
            "--direct=1", f"--numjobs={os.environ.get('JOBS', '1')}", "--time_based", f"--runtime={seconds}",
            "--group_reporting", "--randrepeat=1", "--invalidate=0", "--output-format=json"]


def fio_reads(output, seconds):
    job = json.loads(output[output.index("{"):])["jobs"][0]["read"]
    pct = job["clat_ns"]["percentile"]
    line = (f"{job['iops']:,.0f} IOPS, latency mean {job['lat_ns']['mean'] / 1000:.1f} µs, "
            f"p50 {pct['50.000000'] / 1000:.1f}, p90 {pct['90.000000'] / 1000:.1f}, p99 {pct['99.000000'] / 1000:.1f}")
    return job["iops"] * seconds, line


def perf_values(path):
    values = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0].replace(".", "", 1).isdigit():
            values[parts[2]] = float(parts[0])
    return values


def samples(script, pid):
    """Yields (is_daemon, is_fio, frames) for each sample of `perf script`."""
    head, frames = None, []
    for line in script.splitlines() + [""]:
        if line and line[0] not in " \t":
            head, frames = line.split(), []
        elif line.strip():
            parts = line.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else "")
        elif head and frames:
            yield head[1].split("/")[0] == str(pid), head[0] == "fio", frames
            head = None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path, seconds = os.path.abspath(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 3
    pid = int(os.environ["DAEMON_PID"]) if os.environ.get("DAEMON_PID") else daemon_of(path)
    work = tempfile.mkdtemp(prefix="read-profile-")
    # 1. Wake-ups, system-wide.
    run = subprocess.run(["perf", "stat", "-a", "-x,", "-o", f"{work}/wake", "-e", ",".join(WAKEUPS), "--"]
                         + fio_command(path, seconds), capture_output=True, text=True, check=True)
    reads, line = fio_reads(run.stdout, seconds)
    wake = perf_values(f"{work}/wake")
    print(f"pid {pid}; run 1: {line}")
    print("  per read: " + ", ".join(f"{name} {wake.get(name, 0) / reads:.2f}" for name in WAKEUPS))
    # 2 and 3. The daemon's CPU, and where it goes.
    stat = subprocess.Popen(["perf", "stat", "-x,", "-o", f"{work}/cpu", "-e", "task-clock", "-p", str(pid),
                             "--", "sleep", str(seconds + 0.3)])
    record = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-F", "1999", "-e", "cpu-clock",
                               "-o", f"{work}/perf.data", "--", "sleep", str(seconds + 0.3)])
    run = subprocess.run(fio_command(path, seconds), capture_output=True, text=True, check=True)
    stat.wait()
    record.wait()
    reads, line = fio_reads(run.stdout, seconds)
    daemon_us = perf_values(f"{work}/cpu")["task-clock"] * 1000 / reads
    print(f"run 2: {line}; daemon CPU {daemon_us:.2f} µs per read")
    script = subprocess.run(["perf", "script", "-i", f"{work}/perf.data", "-F", "comm,pid,tid,ip,sym,dso"],
                            capture_output=True, text=True, errors="replace").stdout
    counts, daemon, fio = {}, 0, 0
    for is_daemon, is_fio, frames in samples(script, pid):
        fio += is_fio
        if not is_daemon:
            continue
        daemon += 1
        row = next(name for name, matches in ROWS if matches(frames))
        counts[row] = counts.get(row, 0) + 1
    print(f"  daemon samples {daemon}, fio samples {fio}: fio ≈ {daemon_us * fio / max(daemon, 1):.2f} µs per read")
    print("  | where the daemon's CPU goes | share | µs per read |\n  |---|---|---|")
    for name, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"  | {name} | {100 * count / daemon:.1f} % | {daemon_us * count / daemon:.2f} |")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
