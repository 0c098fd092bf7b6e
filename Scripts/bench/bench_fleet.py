#!/usr/bin/env python3
"""Fleet benchmark (issue 30), run by Scripts/bench-remote.sh --fleet:

  sigv4     cold sequential MiB/s of one file through encfs-mount from the
            same nginx, unsigned (http://) and signed (s3://, AWS Signature
            V4, path-style; nginx checks no signature), interleaved, medians
            of FLEET_REPETITIONS (5); and a bound noise cannot swamp: one
            signature's CPU time (encfs-sigv4-bench) times the requests per
            second of the unsigned read
  failover  a sequential read from nginx A (behind Scripts/fault-proxy.py)
            with --mirror nginx B; A stalls after a third of the file:
            the longest gap between two 1 MiB reads (the stall), MiB/s from
            its end on and 16 MiB later (FLEET_STEADY_SKIP_MIB), each
            against a cold direct mount of B over the same bytes, B
            mounted with A as its mirror, nothing failing, and B direct
            pausing as long as the stall at the same place (the pause
            without the failover); the daemon's CPU per MiB of each; the
            servers' files stay in the page cache; interleaved,
            medians of FLEET_REPETITIONS (5); FLEET_BASELINE_BIN=DIR adds
            another build's failover to each repetition; FLEET_FAULT (the
            proxy's fault, default 'mode=stall&after=1000'); FLEET_TRACE=1
            logs B's requests (end time, duration, range, connection) to
            DIR/trace-*.log; FLEET_NO_PAGE_REPORTING=1 turns the virtual
            machine's free page reporting off for the part, and back on
  prefetch  480 files of 256 KiB behind the proxy adding 20 ms per response,
            every tenth one a start-up file: time from the mount's return
            to the first 4 KiB of each of those 48 read, in a shuffled
            order, without and with --prefetch-list naming them, and with
            the list once it was fetched (-settled: the floor); then the
            same for 48 files side by side (-adjacent)

Usage: bench_fleet.py --bin DIR --out DIR --quick 0|1 [--parts sigv4,failover,prefetch]
"""
import argparse
import contextlib
import json
import random
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import MiB, die, log  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    die(f"nothing listens on port {port}")


def nginx(out, name, root):
    prefix = os.path.join(out, name)
    os.makedirs(prefix, exist_ok=True)
    port = free_port()
    conf = os.path.join(prefix, "nginx.conf")
    # FLEET_TRACE=1: each request's end time, duration and range, for
    # profiling (prefix/access.log).
    access_log = (f"log_format trace '$msec $request_time $http_range $connection'; access_log {prefix}/access.log trace;"
                  if os.environ.get("FLEET_TRACE") else "access_log off;")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; daemon off; master_process off; error_log {prefix}/error.log; pid {prefix}/nginx.pid;
events {{ worker_connections 256; }}
http {{ {access_log} client_body_temp_path {prefix}/body; proxy_temp_path {prefix}/proxy;
fastcgi_temp_path {prefix}/fastcgi; uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi; keepalive_requests 100000;
server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", prefix, "-c", conf], stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def mount(bin_dir, out, name, address, key, extra):
    mnt = os.path.join(out, "mnt-" + name)
    cache = os.path.join(out, "cache-" + name)
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, mode=0o700)
    cmd = [f"{bin_dir}/encfs-mount", address, mnt, "--key-file", key, "--cache-dir", cache] + extra
    _, pid = benchlib.mount(cmd, mnt, os.path.join(mnt, "big.bin"), os.path.join(out, name + ".log"), name)
    return mnt, pid


def daemon_cpu(pid):
    """The daemon's CPU seconds so far (user and system), 0 unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def read_trace(path, pid=None, drop=True, pause_at=None, pause_s=0.0):
    """One cold pass in 1 MiB reads: [(monotonic time, bytes read by
    then, the daemon's CPU seconds by then (with pid))], the open first.
    drop=False leaves the page cache alone: a new mount's pages are cold
    anyway, and the servers' files then stay in memory, so that their
    disk's variance stays out of a comparison of two mounts. pause_at:
    sleep pause_s seconds once that many bytes were read (the failover's
    stall without a failover)."""
    if drop:
        benchlib.drop_caches()
    trace = [(time.monotonic(), 0, daemon_cpu(pid) if pid else 0.0)]
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            piece = f.read(MiB)
            total += len(piece)
            if pause_at is not None and total == pause_at:
                time.sleep(pause_s)
            trace.append((time.monotonic(), total, daemon_cpu(pid) if pid else 0.0))
            if not piece:
                break
    return trace


def longest_gap(trace):
    """The longest time between two reads: seconds, the offset its read
    ended at, and the index of that point in the trace."""
    best = (0.0, 0, 0)
    for i in range(1, len(trace)):
        gap = trace[i][0] - trace[i - 1][0]
        if gap > best[0]:
            best = (gap, trace[i][1], i)
    return best


def rate(trace, offset):
    """MiB/s from the read that ended at `offset` (0: the open) to the end."""
    start = next(point for point in trace if point[1] >= offset)
    return (trace[-1][1] - start[1]) / MiB / max(trace[-1][0] - start[0], 1e-9)


def cpu_per_mib(trace, offset):
    """The daemon's CPU milliseconds per MiB read from `offset` to the end."""
    start = next(point for point in trace if point[1] >= offset)
    return (trace[-1][2] - start[2]) * 1000 / max((trace[-1][1] - start[1]) / MiB, 1e-9)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", type=int, default=1)
    parser.add_argument("--parts", default="sigv4,failover,prefetch")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    benchlib.set_program("bench-remote.sh --fleet")
    out = args.out
    os.makedirs(out, exist_ok=True)
    size = (128 if args.quick else 256) * MiB
    src = os.path.join(out, "fleet-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "big.bin"), "wb") as f:
        f.write(os.urandom(size))
    # FLEET_SECOND=1: a second file, read cold right after the failover's
    # (and after the direct mount's): the mirror serving long after the
    # stall, before the first backoff ends.
    if os.environ.get("FLEET_SECOND") and "failover" in parts:
        with open(os.path.join(src, "second.bin"), "wb") as f:
            f.write(os.urandom(size // 2))
    key = os.path.join(out, "fleet-key")
    with open(key, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    www = os.path.join(out, "fleet-www")
    os.makedirs(www, exist_ok=True)
    bundle = os.path.join(www, "bundle.encfs")
    benchlib.run([f"{args.bin}/encfs-pack", src, bundle, "--key-file", key, "--quiet"])
    results = {"size_mib": size // MiB}
    processes = []
    try:
        # SigV4 against unsigned: the same nginx (which checks no
        # signature: what is measured is the client's signing), the bundle
        # also at BUCKET/KEY for path-style s3:// requests.
        os.makedirs(os.path.join(www, "fleet", "app"), exist_ok=True)
        os.link(bundle, os.path.join(www, "fleet", "app", "bundle.encfs"))
        a, port_a = nginx(out, "nginx-a", www)
        processes.append(a)
        os.environ.update(AWS_ACCESS_KEY_ID="AKIABENCHMARK", AWS_SECRET_ACCESS_KEY="bench/secret/key",
                          AWS_SESSION_TOKEN="bench-session-token")
        if "sigv4" in parts:
            sigv4_part(args, out, key, port_a, results)
        # Failover: A behind the proxy stalls after a third; B serves.
        b, port_b = nginx(out, "nginx-b", www)
        processes.append(b)
        port_file = os.path.join(out, "proxy-fleet.port")
        proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "Scripts/fault-proxy.py"), "0", str(port_a), port_file],
                                 stderr=subprocess.DEVNULL)
        processes.append(proxy)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.monotonic() > deadline:
                die("the fault proxy did not start")
            time.sleep(0.05)
        proxy_port = int(open(port_file).read())
        timeout = 4
        if "failover" in parts:
            with page_reporting_off(os.environ.get("FLEET_NO_PAGE_REPORTING") == "1", results):
                failover_part(args, out, key, size, timeout, port_b, proxy_port, results)
        if "prefetch" in parts:
            prefetch_part(args, out, key, www, proxy_port, results)
    finally:
        for proc in processes:
            proc.kill()
            proc.wait()
    with open(os.path.join(out, "fleet-results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results, indent=1))


def sigv4_part(args, out, key, port_a, results):
    """What signing costs, two ways. (a) A bound noise cannot swamp: the
    CPU time of one signature (encfs-sigv4-bench) times the requests per
    second of the unsigned cold read (one per fetch unit), as a share of
    each second of the read. (b) Side by side: unsigned http:// and
    s3:// from the same nginx, interleaved, FLEET_REPETITIONS times;
    medians, and the median of each pair's ratio."""
    repetitions = int(os.environ.get("FLEET_REPETITIONS", "5"))
    fetch_mib = 4  # --fetch-size's default: one request per 4 MiB unit
    speeds = {"unsigned": [], "sigv4": []}
    for _ in range(repetitions):
        for name, address, extra in [("unsigned", f"http://127.0.0.1:{port_a}/bundle.encfs", []),
                                     ("sigv4", "s3://fleet/app/bundle.encfs", ["--s3-endpoint", f"http://127.0.0.1:{port_a}"])]:
            mnt, pid = mount(args.bin, out, name, address, key, extra)
            speeds[name].append(rate(read_trace(os.path.join(mnt, "big.bin")), 0))
            benchlib.unmount(mnt, pid)
    ratios = [signed / unsigned for signed, unsigned in zip(speeds["sigv4"], speeds["unsigned"])]
    timing = subprocess.run([f"{args.bin}/encfs-sigv4-bench", "20000"], capture_output=True, text=True, check=True).stdout.split()
    sign_ns = int(timing[2])
    unsigned = median(speeds["unsigned"])
    requests = unsigned / fetch_mib
    bound = sign_ns * 1e-9 * requests
    results.update({"sigv4_repetitions": repetitions, "unsigned_cold_mibs": round(unsigned, 1),
                    "sigv4_cold_mibs": round(median(speeds["sigv4"]), 1), "sigv4_ratio_median": round(median(ratios), 3),
                    "sigv4_runs": {name: [round(v, 1) for v in values] for name, values in speeds.items()},
                    "sigv4_sign_ns": sign_ns, "sigv4_requests_per_s": round(requests, 1),
                    "sigv4_cpu_share_bound": round(bound, 5),
                    "sigv4_cpu_share_bound_64k_units": round(sign_ns * 1e-9 * unsigned * 16, 4)})
    log(f"sigv4: cold sequential, median of {repetitions} interleaved: unsigned {unsigned:.0f} MiB/s, "
        f"signed {median(speeds['sigv4']):.0f} (pairs' median ratio {median(ratios):.2f}; runs {results['sigv4_runs']})")
    log(f"sigv4: one signature {sign_ns / 1000:.1f} us of CPU; {requests:.0f} requests/s at {unsigned:.0f} MiB/s "
        f"in {fetch_mib} MiB units: at most {bound * 100:.3f} % of each second "
        f"({results['sigv4_cpu_share_bound_64k_units'] * 100:.2f} % with --fetch-size 64K)")


PAGE_REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"


@contextlib.contextmanager
def page_reporting_off(wanted, results):
    """FLEET_NO_PAGE_REPORTING=1: on a virtual machine that reports free
    memory to its host (virtio-balloon free page reporting), none is
    reported while the failover part runs (the order is set above the
    largest a free block can have), and the setting is put back after,
    also on failure. Such a host reclaims memory free for 2 s, and every
    page touched after a pause that long costs a host fault: a stall, or
    any pause, then costs the reads after it, failover or not
    (docs/PERFORMANCE.md, "Known limits")."""
    results["page_reporting"] = "off" if wanted else "as the machine has it"
    if not wanted:
        yield
        return
    try:
        with open(PAGE_REPORTING_ORDER) as f:
            before = f.read().strip()
    except OSError:
        die("FLEET_NO_PAGE_REPORTING=1: this machine has no free page reporting to turn off")
    with open(PAGE_REPORTING_ORDER, "w") as f:
        f.write("11\n")
    try:
        yield
    finally:
        with open(PAGE_REPORTING_ORDER, "w") as f:
            f.write(before + "\n")


def failover_part(args, out, key, size, timeout, port_b, proxy_port, results):
    """Failover runs interleaved with direct mounts of the mirror (B), so
    both see the same machine state; medians over the repetitions.
    "after" starts when the stall ends (the read that waited returns):
    it includes the units in flight at A fetched again from B; "steady"
    starts STEADY_SKIP_MIB later (those units behind). Each is compared
    with the direct run's rate over the same bytes of the file."""
    repetitions = int(os.environ.get("FLEET_REPETITIONS", "5"))
    # Another build's binaries (FLEET_BASELINE_BIN, e.g. main's), failing
    # over in the same repetitions: before and after under one load.
    baseline = os.environ.get("FLEET_BASELINE_BIN")
    # What A does after a third: stall (the default), or e.g.
    # FLEET_FAULT='mode=status&code=503' (fails at once: no stall).
    fault = os.environ.get("FLEET_FAULT", "mode=stall&after=1000")
    steady_skip = int(os.environ.get("FLEET_STEADY_SKIP_MIB", "16")) * MiB
    units = size // (4 * MiB)
    skip = max(1, units // 3)
    mirror = f"http://127.0.0.1:{port_b}/bundle.encfs"
    runs = []
    b_log = os.path.join(out, "nginx-b", "access.log")

    def keep_trace(name):
        """FLEET_TRACE: B's log lines since the last call, to out/trace-NAME.log."""
        if not os.environ.get("FLEET_TRACE"):
            return
        with open(b_log) as f:
            f.seek(keep_trace.offset)
            lines = f.read()
            keep_trace.offset = f.tell()
        with open(os.path.join(out, f"trace-{name}.log"), "w") as f:
            f.write(lines)
    keep_trace.offset = os.path.getsize(b_log) if os.path.exists(b_log) else 0
    second = os.environ.get("FLEET_SECOND")
    for repetition in range(repetitions):
        traces = {}

        def run_direct():
            mnt, pid = mount(args.bin, out, "direct-b", mirror, key, ["--net-timeout", str(timeout)])
            traces["direct"] = read_trace(os.path.join(mnt, "big.bin"), pid, drop=False)
            traces["direct_second"] = read_trace(os.path.join(mnt, "second.bin"), pid, drop=False) if second else None
            benchlib.unmount(mnt, pid)
            keep_trace(f"direct-{repetition}")

        def run_paused():
            # B direct, idle as long as the failover's stall where A
            # stalls: what the pause alone does to the rate after it. On a
            # virtual machine that hands free memory back to its host
            # (virtio-balloon free page reporting, after 2 s free) the
            # pages touched after any pause that long cost a host fault
            # each (docs/PERFORMANCE.md, "A fleet").
            mnt, pid = mount(args.bin, out, "paused-b", mirror, key, ["--net-timeout", str(timeout)])
            traces["paused"] = read_trace(os.path.join(mnt, "big.bin"), pid, drop=False, pause_at=skip * 4 * MiB,
                                          pause_s=timeout / 2)
            benchlib.unmount(mnt, pid)
            keep_trace(f"paused-{repetition}")

        def run_mirrored():
            # B with A as its mirror, nothing failing: what serving with
            # mirrors costs by itself, over the same bytes.
            mnt, pid = mount(args.bin, out, "mirrored-b", mirror, key,
                             ["--net-timeout", str(timeout), "--mirror", f"http://127.0.0.1:{proxy_port}/bundle.encfs"])
            traces["mirrored"] = read_trace(os.path.join(mnt, "big.bin"), pid, drop=False)
            benchlib.unmount(mnt, pid)
            keep_trace(f"mirrored-{repetition}")

        def run_failover():
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/reset", timeout=10).read()
            mnt, pid = mount(args.bin, out, "failover", f"http://127.0.0.1:{proxy_port}/bundle.encfs", key,
                             ["--net-timeout", str(timeout), "--mirror", mirror])
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/set?{fault}&skip={skip}", timeout=10).read()
            traces["failover"] = read_trace(os.path.join(mnt, "big.bin"), pid, drop=False)
            traces["failover_second"] = read_trace(os.path.join(mnt, "second.bin"), pid, drop=False) if second else None
            traces["status"] = subprocess.run([f"{args.bin}/encfs-ctl", mnt, "status", "--json"], capture_output=True,
                                              text=True).stdout
            benchlib.unmount(mnt, pid)
            keep_trace(f"failover-{repetition}")

        # The order turns with each repetition: no kind always runs first
        # (or last) after the machine did something else.
        kinds = [run_direct, run_mirrored, run_failover, run_paused]
        for kind in kinds[repetition % 4:] + kinds[:repetition % 4]:
            kind()
        direct, mirrored, failover = traces["direct"], traces["mirrored"], traces["failover"]
        direct_second, failover_second, status = traces["direct_second"], traces["failover_second"], traces["status"]
        gap, offset, index = longest_gap(failover)
        paused = traces["paused"]
        _, paused_offset, _ = longest_gap(paused)
        if baseline:
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/reset", timeout=10).read()
            mnt, pid = mount(baseline, out, "failover-baseline", f"http://127.0.0.1:{proxy_port}/bundle.encfs", key,
                             ["--net-timeout", str(timeout), "--mirror", mirror])
            urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/set?{fault}&skip={skip}",
                                   timeout=10).read()
            before = read_trace(os.path.join(mnt, "big.bin"), pid, drop=False)
            benchlib.unmount(mnt, pid)
            before_gap, before_offset, _ = longest_gap(before)
        # Every later wait of more than 50 ms: a second stall (a unit in
        # flight at A that waited for its abandonment) shows here.
        later = [(round(failover[i][0] - failover[i - 1][0], 3), failover[i][1] // MiB)
                 for i in range(index + 1, len(failover)) if failover[i][0] - failover[i - 1][0] > 0.05]
        run = {"gap_s": round(gap, 2), "stall_end_mib": offset // MiB,
               "after_mibs": rate(failover, offset), "direct_after_mibs": rate(direct, offset),
               "steady_mibs": rate(failover, offset + steady_skip), "direct_steady_mibs": rate(direct, offset + steady_skip),
               "mirrored_after_mibs": rate(mirrored, offset),
               "overall_mibs": rate(failover, 0), "direct_overall_mibs": rate(direct, 0), "later_waits": later,
               "cpu_ms_per_mib": cpu_per_mib(failover, offset), "direct_cpu_ms_per_mib": cpu_per_mib(direct, offset),
               "mirrored_cpu_ms_per_mib": cpu_per_mib(mirrored, offset),
               "paused_after_mibs": rate(paused, paused_offset), "paused_cpu_ms_per_mib": cpu_per_mib(paused, paused_offset)}
        try:
            run["sources"] = [{k: source.get(k) for k in ("state", "bytes", "errors")}
                              for source in json.loads(status).get("sources", [])]
        except ValueError:
            pass
        run["after_ratio"] = run["after_mibs"] / run["direct_after_mibs"]
        run["steady_ratio"] = run["steady_mibs"] / run["direct_steady_mibs"]
        run["mirrored_ratio"] = run["mirrored_after_mibs"] / run["direct_after_mibs"]
        run["cpu_ratio"] = run["cpu_ms_per_mib"] / max(run["direct_cpu_ms_per_mib"], 1e-9)
        run["paused_ratio"] = run["after_mibs"] / run["paused_after_mibs"]
        if second:
            run["second_mibs"] = rate(failover_second, 0)
            run["direct_second_mibs"] = rate(direct_second, 0)
            run["second_ratio"] = run["second_mibs"] / run["direct_second_mibs"]
        if baseline:
            run["baseline_gap_s"] = round(before_gap, 2)
            run["baseline_after_mibs"] = rate(before, before_offset)
            run["baseline_after_ratio"] = run["baseline_after_mibs"] / rate(direct, before_offset)
        runs.append(run)
        log(f"failover {repetition + 1}/{repetitions}: stall {gap:.2f} s ending at {offset // MiB} MiB; from its end "
            f"{run['after_mibs']:.0f} MiB/s against {run['direct_after_mibs']:.0f} direct ({run['after_ratio']:.2f}x); "
            f"{steady_skip // MiB} MiB later {run['steady_mibs']:.0f} against {run['direct_steady_mibs']:.0f} "
            f"({run['steady_ratio']:.2f}x); B with a mirror, nothing failing, {run['mirrored_after_mibs']:.0f} "
            f"({run['mirrored_ratio']:.2f}x); daemon CPU per MiB after it {run['cpu_ms_per_mib']:.2f} ms against "
            f"{run['direct_cpu_ms_per_mib']:.2f} direct; B direct after the same pause {run['paused_after_mibs']:.0f} "
            f"({run['paused_ratio']:.2f}x), {run['paused_cpu_ms_per_mib']:.2f} ms/MiB; "
            + (f"baseline build: stall {run['baseline_gap_s']:.2f} s, after it {run['baseline_after_mibs']:.0f} "
               f"({run['baseline_after_ratio']:.2f}x); " if baseline else "")
            + (f"second file after it {run['second_mibs']:.0f} against {run['direct_second_mibs']:.0f} "
               f"({run['second_ratio']:.2f}x); " if second else "")
            + f"later waits (s, MiB) {later}; sources {run.get('sources')}")
    summary = {key: round(median([run[key] for run in runs]), 2)
               for key in ("gap_s", "after_mibs", "direct_after_mibs", "after_ratio", "steady_mibs", "direct_steady_mibs",
                           "steady_ratio", "mirrored_after_mibs", "mirrored_ratio", "overall_mibs", "direct_overall_mibs",
                           "cpu_ms_per_mib", "direct_cpu_ms_per_mib", "mirrored_cpu_ms_per_mib", "cpu_ratio",
                           "paused_after_mibs", "paused_cpu_ms_per_mib", "paused_ratio")
               + (("baseline_gap_s", "baseline_after_mibs", "baseline_after_ratio") if baseline else ())
               + (("second_mibs", "direct_second_mibs", "second_ratio") if os.environ.get("FLEET_SECOND") else ())}
    results.update({"net_timeout_s": timeout, "failover_repetitions": repetitions, "failover_median": summary,
                    "failover_runs": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in run.items()} for run in runs],
                    # The names earlier runs reported, now medians.
                    "failover_longest_gap_s": summary["gap_s"], "after_failover_mibs": summary["after_mibs"],
                    "direct_mirror_cold_mibs": summary["direct_overall_mibs"], "failover_cold_mibs": summary["overall_mibs"]})
    log(f"failover, median of {repetitions}: stall {summary['gap_s']:.2f} s (--net-timeout {timeout}); after it "
        f"{summary['after_mibs']:.0f} MiB/s, direct mirror over the same bytes {summary['direct_after_mibs']:.0f} "
        f"(median ratio {summary['after_ratio']:.2f}x); steady {summary['steady_ratio']:.2f}x; "
        f"B with a mirror, nothing failing, {summary['mirrored_ratio']:.2f}x; the daemon's CPU per MiB after it "
        f"{summary['cpu_ms_per_mib']:.2f} ms against {summary['direct_cpu_ms_per_mib']:.2f} direct "
        f"(median ratio {summary['cpu_ratio']:.2f}x; B with a mirror {summary['mirrored_cpu_ms_per_mib']:.2f}); "
        f"B direct after a pause as long as the stall {summary['paused_after_mibs']:.0f} MiB/s, "
        f"{summary['paused_cpu_ms_per_mib']:.2f} ms/MiB (failover against it: median ratio {summary['paused_ratio']:.2f}x)"
        + (f"; baseline build after it {summary['baseline_after_ratio']:.2f}x" if baseline else ""))


def prefetch_part(args, out, key, www, proxy_port, results):
    # Prefetch list: many small start-up files, 20 ms per response.
    many = os.path.join(out, "fleet-many")
    os.makedirs(many, exist_ok=True)
    every = [f"lib{i:03d}.so" for i in range(480)]
    names = every[::10]
    random.Random(30).shuffle(names)
    for name in every:
        with open(os.path.join(many, name), "wb") as f:
            f.write(os.urandom(256 << 10))
    benchlib.run([f"{args.bin}/encfs-pack", many, os.path.join(www, "many.encfs"), "--key-file", key, "--quiet"])
    # And 48 files side by side (one directory's start-up files): the
    # list's ranges coalesced into few requests.
    adjacent = every[200:248]
    random.Random(31).shuffle(adjacent)
    listing = os.path.join(out, "fleet-list.txt")
    with open(listing, "w") as f:
        f.write("\n".join(names) + "\n")
    adjacent_listing = os.path.join(out, "fleet-list-adjacent.txt")
    with open(adjacent_listing, "w") as f:
        f.write("\n".join(adjacent) + "\n")
    urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/reset", timeout=10).read()
    urllib.request.urlopen(f"http://127.0.0.1:{proxy_port}/__proxy/set?mode=pass&latency_ms=20", timeout=10).read()
    fetch_size = os.environ.get("FLEET_FETCH_SIZE", "4M")
    results["prefetch_fetch_size"] = fetch_size
    connections = os.environ.get("FLEET_CONNECTIONS", "4")
    results["prefetch_connections"] = int(connections)
    # with-list-settled: the same reads 5 s after the mount, the list
    # fetched by then: the floor (FUSE and the cache, no network).
    for name, extra, names in [("without-list", [], names), ("with-list", ["--prefetch-list", listing], names),
                               ("with-list-settled", ["--prefetch-list", listing], names),
                               ("without-list-adjacent", [], adjacent),
                               ("with-list-adjacent", ["--prefetch-list", adjacent_listing], adjacent)]:
        mnt = os.path.join(out, "mnt-" + name)
        cache = os.path.join(out, "cache-" + name)
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache, mode=0o700)
        cmd = [f"{args.bin}/encfs-mount", f"http://127.0.0.1:{proxy_port}/many.encfs", mnt, "--key-file", key,
               "--cache-dir", cache, "--fetch-size", fetch_size, "--connections", connections] + extra
        benchlib.mount(cmd, mnt, os.path.join(mnt, names[0]), os.path.join(out, name + ".log"), name)
        if name.endswith("-settled"):
            time.sleep(5)
        started = time.monotonic()
        for file in names:
            fd = os.open(os.path.join(mnt, file), os.O_RDONLY)
            os.pread(fd, 4096, 0)
            os.close(fd)
        elapsed = time.monotonic() - started
        benchlib.unmount(mnt, benchlib.daemon_pid(mnt))
        results[f"first_bytes_{name.replace('-', '_')}_s"] = round(elapsed, 3)
        log(f"{name}: first 4 KiB of all {len(names)} files {elapsed * 1000:.0f} ms after the mount returned")


if __name__ == "__main__":
    main()
