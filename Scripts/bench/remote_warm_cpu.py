#!/usr/bin/env python3
"""The daemon's CPU time for warm reads of a remote bundle against a local
one (issue 12's warm target, docs/PERFORMANCE.md, remote bundles).

    python3 Scripts/bench/remote_warm_cpu.py BIN_DIR [--record]

Uses Scripts/bench-remote.sh's data set (64 MiB file, built on first use
under /var/tmp/encfs-bench-remote-cpu) and nginx on loopback. For each of
`local` (encfs-mount of the bundle file, --transport classic, as remote
mounts are served) and `http` (encfs-mount URL with a fresh cache): mount,
read the file once (fills the cache), then read it 4 times, each after
dropping the kernel's caches, with `perf stat` (or, with --record,
`perf record -g`, to /tmp/remote-warm-NAME.data) attached to the daemon.
Prints each pass's MiB/s and the daemon's task-clock: CPU time is less
disturbed by other load than MiB/s on a shared machine.

Needs root and perf. Every server and mount it starts is stopped, also on
failure.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_remote as bench  # noqa: E402


class Context:
    pass


def daemon_pid():
    return subprocess.run(["pgrep", "-n", "encfs-mount"], capture_output=True, text=True, check=True).stdout.strip()


def main():
    if len(sys.argv) < 2:
        raise SystemExit("remote_warm_cpu: error: usage: remote_warm_cpu.py BIN_DIR [--record]")
    ctx = Context()
    ctx.bin, ctx.out, ctx.quick, ctx.size = sys.argv[1], "/var/tmp/encfs-bench-remote-cpu", 1, 64 << 20
    record = "--record" in sys.argv[2:]
    os.makedirs(ctx.out, exist_ok=True)
    try:
        www = bench.prepare(ctx)
        port, _ = bench.start_nginx(ctx.out, www)
        mnt, cache = os.path.join(ctx.out, "mnt"), os.path.join(ctx.out, "cache")
        systems = {
            "local": [ctx.bin + "/encfs-mount", ctx.bundle, mnt, "--key-file", ctx.key, "--transport", "classic"],
            "http": [ctx.bin + "/encfs-mount", f"http://127.0.0.1:{port}/bundle.encfs", mnt, "--key-file", ctx.key,
                     "--cache-dir", cache],
        }
        for name, command in systems.items():
            bench.unmount(mnt)
            subprocess.run(["rm", "-rf", cache], check=True)
            os.makedirs(cache)
            os.makedirs(mnt, exist_ok=True)
            subprocess.run(command, check=True)
            bench.mounts.append(mnt)
            bench.wait_for(lambda: os.path.ismount(mnt), 30, f"{name} mount")
            large = os.path.join(mnt, "large.bin")
            bench.drop_caches()
            bench.read_all(large)
            output = f"/tmp/remote-warm-{name}" + (".data" if record else ".txt")
            tool = (["perf", "record", "-g", "-F", "4000", "-e", "cpu-clock"] if record
                    else ["perf", "stat", "-e", "task-clock,context-switches"])
            perf = subprocess.Popen(tool + ["-p", daemon_pid(), "-o", output], stderr=subprocess.DEVNULL)
            time.sleep(1)  # perf attached
            speeds = []
            for _ in range(4):
                bench.drop_caches()
                speeds.append(bench.read_all(large))
            perf.send_signal(signal.SIGINT)
            perf.wait()
            print(name, "warm MiB/s:", " ".join(f"{s:.0f}" for s in speeds))
            if not record:
                print("".join(line for line in open(output) if "task-clock" in line or "context-switches" in line))
            bench.unmount(mnt)
    finally:
        for mounted in set(bench.mounts):
            bench.unmount(mounted)
        for child in bench.children:
            child.send_signal(signal.SIGTERM)
            child.wait(10)


if __name__ == "__main__":
    main()
