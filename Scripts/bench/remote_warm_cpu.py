#!/usr/bin/env python3
"""Warm sequential reads of a remote bundle against a local one, interleaved,
with the daemons' CPU time per pass (issue 12's warm target,
docs/PERFORMANCE.md, remote bundles).

    python3 Scripts/bench/remote_warm_cpu.py BIN_DIR [--baseline-bin DIR] [--other NAME=DIR]... [--passes N] [--record]

Uses Scripts/bench-remote.sh's data set (64 MiB file, built on first use
under /var/tmp/encfs-bench-remote-cpu) and nginx on loopback. Mounts, all
at once, each on its own mount point:
  local      encfs-mount of the bundle file (BIN_DIR)
  local-classic  the same with --transport classic, as remote mounts are served
  http       encfs-mount URL with a fresh cache (BIN_DIR)
  http-base  the same with the encfs-mount in --baseline-bin, when given
  http-NAME  the same with the encfs-mount in DIR, for each --other NAME=DIR
reads the file once through each (fills the caches), then N rounds (default
9): in each, every system once, in an order rotated from round to round,
each pass after dropping the kernel's caches. A pass's daemon CPU time
(every thread's, from /proc/PID/task/*/schedstat) is measured around it.
Prints per system the median MiB/s and CPU ms per pass with their ranges,
and per round the ratios to `local` (every pass in
/tmp/remote-warm-passes.json): a burst of load from elsewhere
touches the systems of one round alike, and CPU time is less disturbed by
it than MiB/s. With --record, `perf record -g` of each daemon over its
passes (to /tmp/remote-warm-NAME.data).

Needs root (and perf for --record). Every server and mount it starts is
stopped, also on failure.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_remote as bench  # noqa: E402
from bench import daemon_pid  # noqa: E402  (one copy of the /proc walk)


class Context:
    pass


def daemon_of(mnt):
    """The pid of the daemon serving `mnt` (bench.py's /proc walk)."""
    pid = daemon_pid(mnt)
    if pid is None:
        raise SystemExit(f"remote_warm_cpu: error: no encfs-mount serves {mnt}")
    return pid


def cpu_seconds(pid):
    """Time on a CPU of every live thread of `pid`, in seconds (the first
    field of each thread's schedstat, in nanoseconds: /proc/PID/stat counts
    in clock ticks, 10 ms, too coarse for a pass of 50 ms)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # the thread ended
    return total / 1e9


def spread(values, fmt):
    values = sorted(values)
    return f"{fmt.format(statistics.median(values))} [{fmt.format(values[0])}–{fmt.format(values[-1])}]"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--baseline-bin", default="")
    parser.add_argument("--other", action="append", default=[], metavar="NAME=DIR",
                        help="also http-NAME: encfs-mount URL with the encfs-mount in DIR")
    parser.add_argument("--passes", type=int, default=9)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    ctx = Context()
    ctx.bin, ctx.out, ctx.quick, ctx.size = args.bin, "/var/tmp/encfs-bench-remote-cpu", 1, 64 << 20
    os.makedirs(ctx.out, exist_ok=True)
    recorders = []
    try:
        www = bench.prepare(ctx)
        port, _ = bench.start_nginx(ctx.out, www)
        url = f"http://127.0.0.1:{port}/bundle.encfs"
        systems = {
            "local": [ctx.bin + "/encfs-mount", ctx.bundle],
            "local-classic": [ctx.bin + "/encfs-mount", ctx.bundle, "--transport", "classic"],
            "http": [ctx.bin + "/encfs-mount", url],
        }
        if args.baseline_bin:
            systems["http-base"] = [args.baseline_bin + "/encfs-mount", url]
        for other in args.other:
            name, _, directory = other.partition("=")
            systems["http-" + name] = [directory + "/encfs-mount", url]
        daemons = {}
        for name, command in systems.items():
            mnt, cache = os.path.join(ctx.out, "mnt-" + name), os.path.join(ctx.out, "cache-" + name)
            bench.unmount(mnt)
            subprocess.run(["rm", "-rf", cache], check=True)
            os.makedirs(cache)
            os.makedirs(mnt, exist_ok=True)
            extra = ["--cache-dir", cache] if name.startswith("http") else []
            subprocess.run(command[:2] + [mnt, "--key-file", ctx.key] + command[2:] + extra, check=True)
            bench.mounts.append(mnt)
            bench.wait_for(lambda: os.path.ismount(mnt), 30, f"{name} mount")
            daemons[name] = (os.path.join(mnt, "large.bin"), daemon_of(mnt))
            bench.drop_caches()
            bench.read_all(daemons[name][0])
        if args.record:
            for name, (_, pid) in daemons.items():
                recorders.append(subprocess.Popen(["perf", "record", "-g", "-F", "2000", "-e", "cpu-clock", "-p", str(pid),
                                                   "-o", f"/tmp/remote-warm-{name}.data"], stderr=subprocess.DEVNULL))
            time.sleep(1)  # perf attached
        names = list(daemons)
        passes = {name: [] for name in names}
        load_start = os.getloadavg()[0]
        for round_number in range(args.passes):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                path, pid = daemons[name]
                bench.drop_caches()
                before = cpu_seconds(pid)
                speed = bench.read_all(path)
                passes[name].append((speed, (cpu_seconds(pid) - before) * 1000))
        load_end = os.getloadavg()[0]
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
        for mounted in set(bench.mounts):
            bench.unmount(mounted)
        for child in bench.children:
            child.send_signal(signal.SIGTERM)
            child.wait(10)
    with open("/tmp/remote-warm-passes.json", "w") as f:
        json.dump(passes, f)
    print(f"{args.passes} rounds of warm passes over a {ctx.size >> 20} MiB file, systems interleaved; {os.cpu_count()} CPUs, "
          f"load average (1 min) {load_start:.2f} at the start, {load_end:.2f} at the end\n")
    print("| system | warm MiB/s, median [range] | daemon CPU ms per pass | MiB/s / local, per round | CPU / local, per round |")
    print("|---|---|---|---|---|")
    for name in names:
        speeds = [s for s, _ in passes[name]]
        cpu = [c for _, c in passes[name]]
        speed_ratio = [s / l for (s, _), (l, _) in zip(passes[name], passes["local"])]
        cpu_ratio = [c / l for (_, c), (_, l) in zip(passes[name], passes["local"]) if l > 0]
        print(f"| {name} | {spread(speeds, '{:.0f}')} | {spread(cpu, '{:.0f}')} | {spread(speed_ratio, '{:.2f}')} "
              f"| {spread(cpu_ratio, '{:.2f}') if cpu_ratio else '-'} |")


if __name__ == "__main__":
    main()
