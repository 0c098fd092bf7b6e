#!/usr/bin/env python3
"""Warm sequential reads of a remote bundle against a local one, interleaved,
with the daemons' CPU time per pass (issue 12's warm target,
docs/PERFORMANCE.md, remote bundles).

    python3 Scripts/bench/remote_warm_cpu.py BIN_DIR [--baseline-bin DIR] [--other NAME=DIR]...
        [--variant NAME=[VAR=VALUE...] [OPTIONS]]... [--only LIST] [--local-args ARGS]
        [--passes N] [--keep-caches] [--record]

Uses Scripts/bench-remote.sh's data set (64 MiB file, built on first use
under /var/tmp/encfs-bench-remote-cpu) and nginx on loopback. Mounts, all
at once, each on its own mount point:
  local      encfs-mount of the bundle file (BIN_DIR; --local-args added)
  local-classic  the same with --transport classic, as remote mounts are served
  http       encfs-mount URL with a fresh cache (BIN_DIR)
  http-base  the same with the encfs-mount in --baseline-bin, when given
  http-NAME  the same with the encfs-mount in DIR, for each --other NAME=DIR
  http-NAME  encfs-mount URL (BIN_DIR) with OPTIONS added and VAR=VALUE in
             the daemon's environment, for each --variant (e.g.
             t4='--threads 4'); local-NAME: the bundle file instead
--only keeps the systems it names (and local, the reference). Reads the
file once through each (fills the caches), then N rounds (default 9): in
each, every system once, in the balanced orders of bench_remote.py (each
system right after each other equally often), each pass after dropping
the kernel's caches (--keep-caches: only the mount's own cached pages of
the file, so the daemons read their bundle or unit files from memory). A
pass's daemon CPU time (every thread's, from /proc/PID/task/*/schedstat),
context switches and CPU migrations (/proc/PID/task/*/sched) are measured
around it. Prints per system the median MiB/s and CPU ms per pass with
their ranges, and per round the ratios to `local` (every pass in
/tmp/remote-warm-passes.json): a burst of load from elsewhere touches the
systems of one round alike, and CPU time is less disturbed by it than
MiB/s; then the ratios by the system whose pass came just before. With
--record, `perf record -g` of each daemon over its passes (to
/tmp/remote-warm-NAME.data).

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


def evict_file(path):
    """Drops the kernel's cached pages of `path` (the mount's file), and
    nothing else."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def scheduling(pid):
    """Context switches and CPU migrations of every live thread of `pid`
    so far, and how many threads it has (from /proc/PID/task/*/sched)."""
    switches = migrations = threads = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{task}/sched"):
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "nr_switches":
                    switches += int(value)
                elif key == "se.nr_migrations":
                    migrations += int(value)
            threads += 1
        except (OSError, ValueError):
            pass  # the thread ended
    return switches, migrations, threads


def spread(values, fmt):
    values = sorted(values)
    return f"{fmt.format(statistics.median(values))} [{fmt.format(values[0])}–{fmt.format(values[-1])}]"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("--baseline-bin", default="")
    parser.add_argument("--other", action="append", default=[], metavar="NAME=DIR",
                        help="also http-NAME: encfs-mount URL with the encfs-mount in DIR")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                        help="also http-NAME: encfs-mount URL from BIN with the extra options ARGS (e.g. t4='--threads 4'); "
                             "a NAME starting with local- mounts the bundle file instead")
    parser.add_argument("--local-args", default="", metavar="ARGS",
                        help="extra options for the local mounts (e.g. '--threads 16')")
    parser.add_argument("--only", default="", metavar="LIST", help="mount only these systems (comma-separated)")
    parser.add_argument("--keep-caches", action="store_true",
                        help="do not drop the kernel's caches before each pass (every read then comes from memory)")
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
        local_args = args.local_args.split()
        systems = {
            "local": [ctx.bin + "/encfs-mount", ctx.bundle] + local_args,
            "local-classic": [ctx.bin + "/encfs-mount", ctx.bundle, "--transport", "classic"] + local_args,
            "http": [ctx.bin + "/encfs-mount", url],
        }
        if args.baseline_bin:
            systems["http-base"] = [args.baseline_bin + "/encfs-mount", url]
        for other in args.other:
            name, _, directory = other.partition("=")
            systems["http-" + name] = [directory + "/encfs-mount", url]
        environments = {}
        for variant in args.variant:
            name, _, extra = variant.partition("=")
            words = extra.split()
            # Leading NAME=VALUE words go to the daemon's environment.
            settings = {}
            while words and "=" in words[0] and not words[0].startswith("-"):
                key, _, value = words.pop(0).partition("=")
                settings[key] = value
            if name.startswith("local-"):
                systems[name] = [ctx.bin + "/encfs-mount", ctx.bundle] + words
            else:
                name = "http-" + name
                systems[name] = [ctx.bin + "/encfs-mount", url] + words
            environments[name] = settings
        if args.only:
            wanted = args.only.split(",")
            systems = {name: command for name, command in systems.items() if name in wanted or name == "local"}
        daemons = {}
        for name, command in systems.items():
            mnt, cache = os.path.join(ctx.out, "mnt-" + name), os.path.join(ctx.out, "cache-" + name)
            bench.unmount(mnt)
            subprocess.run(["rm", "-rf", cache], check=True)
            os.makedirs(cache)
            os.makedirs(mnt, exist_ok=True)
            extra = ["--cache-dir", cache] if name.startswith("http") else []
            subprocess.run(command[:2] + [mnt, "--key-file", ctx.key] + command[2:] + extra, check=True,
                           env=dict(os.environ, **environments.get(name, {})))
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
        orders = bench.balanced_orders(names)
        previous = {name: [] for name in names}
        for round_number in range(args.passes):
            order = orders[round_number % len(orders)]
            for place, name in enumerate(order):
                previous[name].append(order[place - 1] if place > 0 else "")
                path, pid = daemons[name]
                if args.keep_caches:
                    # The mount's own page cache of the file only: the
                    # daemon reads its bundle or unit files from memory.
                    evict_file(path)
                else:
                    bench.drop_caches()
                before, sched_before = cpu_seconds(pid), scheduling(pid)
                speed = bench.read_all(path)
                cpu, sched_after = (cpu_seconds(pid) - before) * 1000, scheduling(pid)
                passes[name].append((speed, cpu, sched_after[0] - sched_before[0], sched_after[1] - sched_before[1],
                                     sched_after[2]))
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
        json.dump({"passes": passes, "previous": previous}, f)
    print(f"{args.passes} rounds of warm passes over a {ctx.size >> 20} MiB file, systems interleaved; {os.cpu_count()} CPUs, "
          f"load average (1 min) {load_start:.2f} at the start, {load_end:.2f} at the end\n")
    print("| system | warm MiB/s, median [range] | daemon CPU ms per pass | MiB/s / local, per round | CPU / local, per round "
          "| context switches per pass | migrations per pass | threads |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        speeds = [p[0] for p in passes[name]]
        cpu = [p[1] for p in passes[name]]
        speed_ratio = [p[0] / l[0] for p, l in zip(passes[name], passes["local"])]
        cpu_ratio = [p[1] / l[1] for p, l in zip(passes[name], passes["local"]) if l[1] > 0]
        print(f"| {name} | {spread(speeds, '{:.0f}')} | {spread(cpu, '{:.0f}')} | {spread(speed_ratio, '{:.2f}')} "
              f"| {spread(cpu_ratio, '{:.2f}') if cpu_ratio else '-'} | {spread([p[2] for p in passes[name]], '{:.0f}')} "
              f"| {spread([p[3] for p in passes[name]], '{:.0f}')} | {passes[name][-1][4]} |")
    print("\nMiB/s / local per round, by the system whose pass came right before (first: none):\n")
    for name in names:
        by = {}
        for p, l, before in zip(passes[name], passes["local"], previous[name]):
            by.setdefault(before or "first", []).append(p[0] / l[0])
        print(f"- {name}: " + ", ".join(f"after {b} {statistics.median(v):.2f} ({len(v)})" for b, v in sorted(by.items())))


if __name__ == "__main__":
    main()
