#!/usr/bin/env python3
"""Mount start-up only, two encfs builds and squashfuse side by side.

    Scripts/bench/mount_start.py --bundle B --key-file K --squashfs IMG
                                 --bin DIR --baseline-bin DIR [--reps N] [--out DIR]
                                 [--classic]

Times each mount as bench.py does (command start until the first successful
stat of big.bin inside the mount, polled every 0.5 ms), the three systems
rotated each repetition, each mount unmounted before the next. Prints the
median [min-max] per system, the load average before and after. Both encfs
builds mount the same bundle: use it when the bundle format did not change.
--classic adds both builds with --transport classic (encfs-classic,
encfs-base-classic) to the rotation.
Needs root (or fuse access) and leaves no mount behind.
"""
import argparse, os, statistics, subprocess, sys, time


def mount_seconds(command, mountpoint):
    probe = os.path.join(mountpoint, "big.bin")
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                os.stat(probe)
                return time.monotonic() - started
            except OSError:
                pass
            if proc.poll() not in (None, 0):
                sys.exit(f"mount_start.py: error: {command[0]} exited {proc.returncode}")
            if time.monotonic() - started > 60:
                sys.exit(f"mount_start.py: error: {command[0]} did not answer within 60 s")
            time.sleep(0.0005)
    finally:
        proc.wait(timeout=60)
        subprocess.run(["fusermount3", "-u", mountpoint], stderr=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser()
    for name in ("--bundle", "--key-file", "--squashfs", "--bin", "--baseline-bin"):
        parser.add_argument(name, required=True)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--out", default="/var/tmp/encfs-bench-mount-start")
    parser.add_argument("--classic", action="store_true")
    args = parser.parse_args()
    systems = {
        "encfs": lambda mp: [os.path.join(args.bin, "encfs-mount"), args.bundle, mp, "--key-file", args.key_file],
        "encfs-base": lambda mp: [os.path.join(args.baseline_bin, "encfs-mount"), args.bundle, mp,
                                  "--key-file", args.key_file],
        "squashfuse": lambda mp: ["squashfuse", args.squashfs, mp],
    }
    if args.classic:
        systems["encfs-classic"] = lambda mp: systems["encfs"](mp) + ["--transport", "classic"]
        systems["encfs-base-classic"] = lambda mp: systems["encfs-base"](mp) + ["--transport", "classic"]
    print("load before:", open("/proc/loadavg").read().strip())
    seconds = {name: [] for name in systems}
    names = list(systems)
    for rep in range(args.reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            mountpoint = os.path.join(args.out, "mnt", name)
            os.makedirs(mountpoint, exist_ok=True)
            seconds[name].append(mount_seconds(systems[name](mountpoint), mountpoint))
            time.sleep(0.2)
    print("load after:", open("/proc/loadavg").read().strip())
    for name, values in seconds.items():
        print(f"{name}: {statistics.median(values) * 1000:.1f} ms "
              f"[{min(values) * 1000:.1f}-{max(values) * 1000:.1f}] ({len(values)} mounts)")


if __name__ == "__main__":
    main()
