#!/usr/bin/env python3
"""Driver of Scripts/bench-remote.sh (read that file for what is measured).

Usage (normally through Scripts/bench-remote.sh):
  bench_remote.py --bin DIR --out DIR --systems a,b,... [--quick 0|1] [--reps N]
                  [--baseline-bin DIR] [--warm-passes N]

Every server and mount it starts is stopped in `finally`, also on Ctrl-C.
Figures are single runs: compare systems within one run, not across runs;
the load average printed with the table says how busy the machine was.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import drop_caches  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
children = []
mounts = []


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise SystemExit(f"bench-remote: error: {what} did not happen within {seconds} s")


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def start_nginx(out, root):
    prefix = os.path.join(out, "nginx")
    os.makedirs(prefix, exist_ok=True)
    port = free_port()
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 2; daemon off; master_process on; pid {prefix}/pid; error_log {prefix}/error.log;
events {{ worker_connections 1024; }}
http {{ log_format bytes '$body_bytes_sent'; access_log {prefix}/access.log bytes; keepalive_requests 100000;
  client_body_temp_path {prefix}/b; proxy_temp_path {prefix}/p; fastcgi_temp_path {prefix}/f;
  uwsgi_temp_path {prefix}/u; scgi_temp_path {prefix}/s; sendfile on;
  server {{ listen 127.0.0.1:{port}; root {root}; autoindex on; }} }}
""")
    children.append(subprocess.Popen(["/usr/sbin/nginx", "-p", prefix, "-c", conf], stderr=subprocess.DEVNULL))
    wait_for(lambda: accepts(port), 10, "nginx start")
    return port, os.path.join(prefix, "access.log")


def start_proxy(out, upstream, latency_ms):
    port_file = os.path.join(out, f"proxy-{latency_ms}.port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    children.append(subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "Scripts/fault-proxy.py"), "0", str(upstream), port_file]))
    wait_for(lambda: os.path.exists(port_file), 10, "proxy start")
    port = int(open(port_file).read())
    urllib.request.urlopen(f"http://127.0.0.1:{port}/__proxy/set?mode=pass&latency_ms={latency_ms}").read()
    return port


def served_bytes(log):
    try:
        return sum(int(line) for line in open(log) if line.strip().isdigit())
    except FileNotFoundError:
        return 0


def unmount(mnt):
    benchlib.unmount(mnt)


def mount(system, ctx, base_url, mnt, cache):
    """Mounts system at mnt with an empty cache; returns the seconds from
    the command's start until large.bin could be stat'ed, as bench.py times
    a mount."""
    unmount(mnt)
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    if system == "encfs-local":
        command = [ctx.bin + "/encfs-mount", ctx.bundle, mnt, "--key-file", ctx.key]
    elif system == "encfs-local-classic":
        # The transport remote mounts are served on: compares the remote
        # layer alone, apart from how FUSE requests are carried.
        command = [ctx.bin + "/encfs-mount", ctx.bundle, mnt, "--key-file", ctx.key, "--transport", "classic"]
    elif system in ("encfs-http", "encfs-http-base"):
        binary = ctx.bin if system == "encfs-http" else ctx.baseline_bin
        command = [binary + "/encfs-mount", base_url + "/bundle.encfs", mnt, "--key-file", ctx.key, "--cache-dir", cache]
    else:
        config = os.path.join(ctx.out, "rclone.conf")
        with open(config, "w") as f:
            f.write(f"[plain]\ntype = http\nurl = {base_url}/plain/\n\n[web]\ntype = http\nurl = {base_url}/crypt/\n\n"
                    f"[sec]\ntype = crypt\nremote = web:\npassword = {ctx.rclone_password}\n")
        remote = "plain:" if system == "rclone-http" else "sec:"
        command = ["rclone", "mount", remote, mnt, "--config", config, "--vfs-cache-mode", "full", "--cache-dir", cache,
                   "--read-only", "--daemon", "--dir-cache-time", "1000h"]
    mounts.append(mnt)
    seconds, _ = benchlib.mount(command, mnt, os.path.join(mnt, "large.bin"),
                                os.path.join(ctx.out, "logs", f"{system}.log"), system)
    return seconds


read_all = benchlib.read_through


def random_reads(path, offsets):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        start = time.monotonic()
        for offset in offsets:
            os.pread(fd, 4096, offset)
        return len(offsets) / (time.monotonic() - start)
    finally:
        os.close(fd)


def measure(system, latency, ctx, base_url):
    mnt, cache = os.path.join(ctx.out, "mnt"), os.path.join(ctx.out, "cache")
    drop_caches()
    before = served_bytes(ctx.access_log)
    mount_seconds = mount(system, ctx, base_url, mnt, cache)
    large = os.path.join(mnt, "large.bin")
    # A byte in the middle: the file's first bytes may have come with the
    # mount's first request.
    start = time.monotonic()
    with open(large, "rb", buffering=0) as f:
        os.pread(f.fileno(), 1, ctx.size // 2)
    first_byte = time.monotonic() - start
    drop_caches()
    cold = read_all(large)
    transferred = served_bytes(ctx.access_log) - before
    # Random reads: a fresh mount and an empty cache for the cold figure.
    mount(system, ctx, base_url, mnt, cache)
    rng = random.Random(7)
    offsets = [rng.randrange(0, ctx.size - 4096) & ~4095 for _ in range(ctx.random_reads)]
    drop_caches()
    cold_iops = random_reads(large, offsets)
    drop_caches()
    warm_iops = random_reads(large, offsets)
    unmount(mnt)
    per_byte = transferred / ctx.size if not system.startswith("encfs-local") else float("nan")
    return dict(system=system, latency=latency, mount_s=mount_seconds, first_byte_ms=first_byte * 1000,
                cold_mibs=cold, cold_iops=cold_iops, warm_iops=warm_iops, bytes_per_byte=per_byte)


def prepare(ctx):
    src, www = os.path.join(ctx.out, "src"), os.path.join(ctx.out, "www")
    marker = os.path.join(ctx.out, f"data-{ctx.size}")
    ctx.key = os.path.join(ctx.out, "key")
    ctx.bundle = os.path.join(www, "bundle.encfs")
    ctx.rclone_password = subprocess.run(["rclone", "obscure", "encfs-bench"], check=True, capture_output=True, text=True).stdout.strip()
    if os.path.exists(marker):
        return www
    shutil.rmtree(ctx.out, ignore_errors=True)
    os.makedirs(os.path.join(src), exist_ok=True)
    os.makedirs(os.path.join(www, "plain"), exist_ok=True)
    rng = random.Random(1)
    with open(os.path.join(src, "large.bin"), "wb") as f:
        for _ in range(ctx.size >> 20):
            f.write(rng.randbytes(1 << 20))
    with open(ctx.key, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    sh(ctx.bin + "/encfs-pack", src, ctx.bundle, "--key-file", ctx.key, "--quiet")
    shutil.copy(os.path.join(src, "large.bin"), os.path.join(www, "plain", "large.bin"))
    config = os.path.join(ctx.out, "pack-rclone.conf")
    with open(config, "w") as f:
        f.write(f"[sec]\ntype = crypt\nremote = {www}/crypt\npassword = {ctx.rclone_password}\n")
    sh("rclone", "copy", src, "sec:", "--config", config)
    open(marker, "w").close()
    return www


def balanced_orders(items):
    """Orders of `items` for successive rounds, cycled through: each item
    comes at each place, and right after each other item, equally often (a
    Williams design; twice as many orders for an odd count).

    Why not the same order rotated each round: then every item always
    follows the same one (encfs-http always came right after encfs-local),
    so whatever a pass leaves behind for the next one (the kernel's caches
    just dropped, a daemon's threads still winding down) fell on the same
    pair in every round."""
    n = len(items)
    if n < 2:
        return [list(items)]
    sequence, low, high = [0], 1, n - 1
    while len(sequence) < n:
        sequence.append(low if len(sequence) % 2 else high)
        if len(sequence) % 2 == 0:
            low += 1
        else:
            high -= 1
    orders = [[items[(s + shift) % n] for s in sequence] for shift in range(n)]
    if n % 2:
        orders += [order[::-1] for order in orders]
    return orders


def measure_warm(ctx, runs, urls):
    """Warm sequential reads of every (system, latency) of the run, each
    mounted on its own mount point with its own cache at once, the file
    read once to fill the caches, then ``ctx.warm_passes`` rounds: in each,
    every system once, each pass after dropping the kernel's caches, in
    the orders of ``balanced_orders``.

    Why not one pass per system inside each round of ``measure``: on a
    shared 2-CPU machine a 64 MiB pass lasts 55–145 ms, and a burst of
    load from elsewhere during it moved the reference (encfs-local) by
    2.7× between rounds; passes of every system side by side, many of
    them, let each round's ratios and the medians see the same load.

    Returns {(system, latency): [MiB/s of each round]}.
    """
    mounted = {}
    for index, (system, latency) in enumerate(runs):
        mnt, cache = os.path.join(ctx.out, f"mnt-warm-{index}"), os.path.join(ctx.out, f"cache-warm-{index}")
        mount(system, ctx, urls[latency], mnt, cache)
        large = os.path.join(mnt, "large.bin")
        read_all(large)
        mounted[(system, latency)] = large
    passes = {key: [] for key in mounted}
    orders = balanced_orders(list(mounted))
    for round_number in range(ctx.warm_passes):
        for key in orders[round_number % len(orders)]:
            drop_caches()
            passes[key].append(read_all(mounted[key]))
    for path in mounted.values():
        unmount(os.path.dirname(path))
    return passes


METRICS = ("mount_s", "first_byte_ms", "cold_mibs", "warm_mibs", "cold_iops", "warm_iops", "bytes_per_byte")


def summarize(results, warm):
    """Per (system, latency): the median of each metric over the repetitions
    (warm: over the rounds of ``measure_warm``) and its range, in the order
    the runs came."""
    groups = {}
    for r in results:
        groups.setdefault((r["system"], r["latency"]), []).append(r)
    rows = []
    for (system, latency), runs in groups.items():
        row = dict(system=system, latency=latency, runs=len(runs))
        for m in METRICS:
            values = sorted(warm.get((system, latency), [float("nan")]) if m == "warm_mibs" else [r[m] for r in runs])
            row[m] = statistics.median(values)
            row[m + "_range"] = (values[0], values[-1])
        rows.append(row)
    return rows


def print_table(rows, load_start, load_end, ctx):
    print(f"file {ctx.size >> 20} MiB, {ctx.random_reads} random 4 KiB reads; one run, {ctx.reps} repetition(s) "
          f"interleaved (medians below), warm seq over {ctx.warm_passes} rounds of every system mounted at once; "
          f"{os.cpu_count()} CPUs, load average (1 min) {load_start:.2f} at the start, {load_end:.2f} at the end\n")
    formats = dict(mount_s="{:.2f}", first_byte_ms="{:.1f}", cold_mibs="{:.0f}", warm_mibs="{:.0f}", cold_iops="{:.0f}",
                   warm_iops="{:.0f}", bytes_per_byte="{:.3f}")

    def cell(r, m, ranged):
        value = r[m]
        if value != value:  # NaN: not measured (the local bundle sends nothing)
            return "-"
        text = formats[m].format(value)
        low, high = r[m + "_range"]
        if ranged and low != high:
            text += f" ({formats[m].format(low)}–{formats[m].format(high)})"
        return text

    header = ("| system | added latency, ms | mount, s | first byte, ms | cold seq, MiB/s | warm seq, MiB/s "
              "| 4K random cold, reads/s | 4K random warm, reads/s | bytes sent per byte read |")
    for ranged in ([False, True] if ctx.reps > 1 or ctx.warm_passes > 1 else [False]):
        if ranged:
            print("\nranges (lowest–highest of the repetitions; warm seq: of the warm rounds):\n")
        print(header)
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            latency = "-" if r["system"].startswith("encfs-local") else str(r["latency"])
            print(f"| {r['system']} | {latency} | " + " | ".join(cell(r, m, ranged) for m in METRICS) + " |")


def middle_half(values):
    """The first and third quartiles of sorted `values`: single warm
    rounds on a shared machine scatter widely (load moved single passes by
    2.7×: docs/PERFORMANCE.md, remote bundles), so the range says little
    and the quartiles say where most rounds fell."""
    if len(values) < 4:
        return "-"
    quartiles = statistics.quantiles(values, n=4)
    return f"{quartiles[0]:.2f}–{quartiles[2]:.2f}"


def print_ratios(results, warm):
    """The issue's targets as ratios within each round (a system against
    the reference measured minutes apart, not across the whole run; warm:
    within each round of ``measure_warm``, seconds apart)."""
    def find(system, latency, rep):
        return next((r for r in results if r["system"] == system and r["latency"] == latency and r["rep"] == rep), None)

    def warm_ratios(system, latency, reference):
        ours, theirs = warm.get((system, latency), []), warm.get((reference, 0), [])
        return [a / b for a, b in zip(ours, theirs) if b > 0]

    lines = []
    for system in ("encfs-http", "encfs-http-base"):
        for metric, reference, label in (("cold_mibs", "encfs-local", "cold seq / encfs-local"),
                                         ("warm_mibs", "encfs-local", "warm seq / encfs-local"),
                                         ("cold_mibs", "encfs-local-classic", "cold seq / encfs-local-classic"),
                                         ("warm_mibs", "encfs-local-classic", "warm seq / encfs-local-classic"),
                                         ("cold_mibs", "rclone-crypt", "cold seq / rclone-crypt")):
            for latency in (0, 20):
                ratios = warm_ratios(system, latency, reference) if metric == "warm_mibs" else []
                for r in results if metric != "warm_mibs" else []:
                    if r["system"] != system or r["latency"] != latency:
                        continue
                    other = find(reference, 0 if reference.startswith("encfs-local") else latency, r["rep"])
                    if other and other[metric] > 0:
                        ratios.append(r[metric] / other[metric])
                if ratios:
                    ratios.sort()
                    lines.append(f"| {system} | {latency} | {label} | {statistics.median(ratios):.2f} "
                                 f"| {middle_half(ratios)} | {ratios[0]:.2f}–{ratios[-1]:.2f} | {len(ratios)} |")
    if lines:
        print("\nratios within each round (middle half: the rounds between the quartiles):\n")
        print("| system | added latency, ms | ratio | median | middle half | range | rounds |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--systems", required=True)
    parser.add_argument("--quick", type=int, default=0)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--baseline-bin", default="")
    parser.add_argument("--warm-passes", type=int, default=None)
    ctx = parser.parse_args()
    benchlib.set_program("bench-remote")
    if "encfs-http-base" in ctx.systems.split(",") and not ctx.baseline_bin:
        raise SystemExit("bench-remote: error: encfs-http-base needs --baseline-bin DIR")
    ctx.size = (64 if ctx.quick else 512) << 20
    ctx.random_reads = 200 if ctx.quick else 1000
    if ctx.warm_passes is None:
        ctx.warm_passes = 60 if ctx.quick else 10
    os.makedirs(ctx.out, exist_ok=True)
    results = []
    warm = {}
    load_start = os.getloadavg()[0]
    try:
        www = prepare(ctx)
        port, ctx.access_log = start_nginx(ctx.out, www)
        proxy = start_proxy(ctx.out, port, 20)
        # Repetitions outermost: every system is measured once per round,
        # so a burst of load from elsewhere touches all of them alike.
        for rep in range(ctx.reps):
            for system in ctx.systems.split(","):
                for latency in ([0] if system.startswith("encfs-local") else [0, 20]):
                    url = f"http://127.0.0.1:{port if latency == 0 else proxy}"
                    results.append(dict(measure(system, latency, ctx, url), rep=rep))
                    print(json.dumps(results[-1]), file=sys.stderr)
        runs = list(dict.fromkeys((r["system"], r["latency"]) for r in results))
        warm = measure_warm(ctx, runs, {0: f"http://127.0.0.1:{port}", 20: f"http://127.0.0.1:{proxy}"})
        print(json.dumps({f"{system} {latency}": passes for (system, latency), passes in warm.items()}), file=sys.stderr)
    finally:
        for mnt in set(mounts):
            unmount(mnt)
        for child in children:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
    print_table(summarize(results, warm), load_start, os.getloadavg()[0], ctx)
    print_ratios(results, warm)
    with open(os.path.join(ctx.out, "results.json"), "w") as f:
        json.dump(dict(rounds=results, warm={f"{system} {latency}": passes for (system, latency), passes in warm.items()}),
                  f, indent=1)


if __name__ == "__main__":
    main()
