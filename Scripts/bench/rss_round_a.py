#!/usr/bin/env python3
"""Replays bench.py's round A on one encfs build and says where its peak RSS is.

Usage: rss_round_a.py --bin DIR --bundle FILE --key-file FILE --out DIR
           [--page-cache as-is|drop|settle] [--label NAME] [-- encfs-mount args]

Round A as bench.py runs it: the bundle read into the page cache, a fresh
mount, read_ahead_kb 1024 on the mount's bdi, dd bs=1M twice, fio 4 KiB
random reads (O_DIRECT, psync, 3 s) with 1 then 4 jobs. Then it prints the
daemon's VmHWM, RssAnon / RssFile, the resident text of encfs-mount and how
much of it sits in large folios (/proc/PID/pagemap + /proc/kpageflags), and
writes OUT/LABEL-N.json with /proc/PID/smaps, status and every thread's CPU
time, for a diff of two builds per mapping.
--page-cache: leave the executable's page cache as it is, drop it first
(the exec then faults it in), or settle it as bench.py does before round A.
Needs root (drop, kpageflags, bdi); unmounts what it mounted.
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time

from bench import Bench, daemon_pid

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


def text_folios(pid):
    """Pages of the encfs-mount r-xp mapping that are resident, and how many of them are in large folios."""
    with open(f"/proc/{pid}/maps") as f:
        ranges = [[int(x, 16) for x in line.split()[0].split("-")] for line in f
                  if line.rstrip().endswith("/encfs-mount") and " r-xp " in line]
    resident = large = 0
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
        for low, high in ranges:
            for address in range(low, high, PAGE):
                pagemap.seek(address // PAGE * 8)
                entry = struct.unpack("<Q", pagemap.read(8))[0]
                if not entry >> 63 & 1:
                    continue
                resident += 1
                flags.seek((entry & ((1 << 55) - 1)) * 8)
                bits = struct.unpack("<Q", flags.read(8))[0]
                large += bool(bits >> 15 & 1 or bits >> 16 & 1)  # compound head or tail
    return resident, large


def threads(pid):
    """Every thread: name and CPU ticks used."""
    found = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found.append({"tid": int(tid), "name": stat[stat.index("(") + 1:stat.rindex(")")],
                      "ticks": int(fields[11]) + int(fields[12])})
    return found


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", default="encfs")
    parser.add_argument("--page-cache", choices=["as-is", "drop", "settle"], default="as-is")
    parser.add_argument("mount_args", nargs="*")
    args = parser.parse_args()
    exe = os.path.join(args.bin, "encfs-mount")
    mountpoint = os.path.join(args.out, f"mnt-{args.label}")
    os.makedirs(mountpoint, exist_ok=True)
    Bench.cat(args.bundle)
    if args.page_cache == "drop":
        drop(exe)
    elif args.page_cache == "settle":
        Bench.settle_executable(type("System", (), {"mount_command": lambda self: [exe]})())
    subprocess.run([exe, args.bundle, mountpoint, "--key-file", args.key_file] + args.mount_args, check=True)
    pid = daemon_pid(mountpoint)
    try:
        big = os.path.join(mountpoint, "big.bin")
        device = os.stat(mountpoint).st_dev
        with open(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb", "w") as f:
            f.write("1024\n")
        for _ in range(2):
            Bench.dd(big)
        iops = []
        for jobs in (1, 4):
            result = subprocess.run(["fio", "--name=rand4k", f"--filename={big}", "--readonly", "--rw=randread",
                                     "--bs=4k", "--ioengine=psync", "--direct=1", f"--numjobs={jobs}",
                                     "--time_based", "--runtime=3", "--group_reporting", "--randrepeat=1",
                                     "--invalidate=0", "--output-format=json"],
                                    capture_output=True, text=True, check=True)
            iops.append(json.loads(result.stdout[result.stdout.index("{"):])["jobs"][0]["read"]["iops"])
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        with open(f"/proc/{pid}/smaps") as f:
            smaps = f.read()
        resident, large = text_folios(pid)
        record = {"label": args.label, "page_cache": args.page_cache, "mount_args": args.mount_args, "iops": iops,
                  "text_pages": resident, "text_pages_in_large_folios": large, "threads": threads(pid),
                  "status": status, "smaps": smaps}
    finally:
        subprocess.run(["fusermount3", "-u", mountpoint])
        deadline = time.monotonic() + 10
        while pid and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.01)
    n = len([name for name in os.listdir(args.out) if re.fullmatch(re.escape(args.label) + r"-\d+\.json", name)])
    with open(os.path.join(args.out, f"{args.label}-{n}.json"), "w") as f:
        json.dump(record, f, indent=1)
    fields = dict(line.split(":", 1) for line in status.splitlines())
    print(f"{args.label} ({args.page_cache}): VmHWM {fields['VmHWM'].strip()}, RssAnon {fields['RssAnon'].strip()}, "
          f"RssFile {fields['RssFile'].strip()}; encfs-mount text {resident * PAGE // 1024} kB resident, "
          f"{large * PAGE // 1024} kB of it in large folios; threads {fields['Threads'].strip()}; "
          f"IOPS {iops[0]:,.0f} / {iops[1]:,.0f}")


if __name__ == "__main__":
    sys.exit(main())
