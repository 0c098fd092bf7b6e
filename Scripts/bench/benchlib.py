"""What the benchmark drivers share: messages, commands, caches, mounts, reads.

Imported by bench.py (Scripts/bench.sh), bench_many.py (Scripts/bench-many.sh)
and bench_remote.py (Scripts/bench-remote.sh); not a program of its own.
Standard library only. Everything here needs root where the kernel does
(drop_caches, mounting).

Each driver names itself once with set_program("bench"), so that die()
prints "bench: error: …" like the tools do.
"""

import os
import re
import signal
import subprocess
import sys
import time

MiB = 1 << 20

_program = "bench"


def set_program(name):
    """The name die() puts before its messages."""
    global _program
    _program = name


def die(message, *hints):
    """One error line and optional hint lines on stderr, then exit 1."""
    print(f"{_program}: error: {message}", file=sys.stderr)
    for hint in hints:
        print(f"{_program}: hint: {hint}", file=sys.stderr)
    sys.exit(1)


def log(message):
    """A progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(cmd, *args, **kwargs):
    """Runs cmd, a list, or a string for bash with args as $1…; dies with its
    stderr when it fails. Returns the CompletedProcess (text output)."""
    shell = isinstance(cmd, str)
    argv = ["bash", "-c", cmd, "sh", *args] if shell else list(cmd) + list(args)
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        shown = cmd if shell else " ".join(argv)
        die(f"command failed ({result.returncode}): {shown}\n{result.stderr.strip()}")
    return result


def drop_caches():
    """Writes back everything dirty, then drops the page cache, dentries and inodes."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def is_mounted(path):
    """Whether path (resolved) is a mount point in this mount namespace."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # mountinfo escapes spaces and the like as \040.
            if line.split()[4].encode().decode("unicode_escape") == path:
                return True
    return False


def daemon_pid(mountpoint):
    """The process serving mountpoint: its argv names the mountpoint and it
    holds /dev/fuse. None when there is none (or it hides its argv)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if mountpoint.encode() not in argv or b"fusermount" in argv[0]:
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}") == "/dev/fuse":
                    return int(entry)
        except OSError:
            continue
    return None


def proc_status_mib(pid, keys=("VmHWM", "VmRSS", "RssAnon", "RssFile", "VmLck")):
    """The given memory fields of /proc/PID/status in MiB; {} once pid is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = int(value.split()[0]) / 1024  # kB → MiB
    except OSError:
        return {}
    return out


def mount(command, mountpoint, probe, log_path, name, timeout=60):
    """Runs a mount command and times it as every driver reports "mount":
    from the command's start until the first successful stat of probe (a
    path inside the mount). Waits for the command to return afterwards.

    The command's stderr is appended to log_path: a file, never a pipe, so
    that a daemon which keeps the command's stderr (gocryptfs does) cannot
    block on it. Dies with the log's tail when the command fails or the
    mount does not answer within timeout seconds.

    Returns (seconds, the daemon's pid or None).
    """
    os.makedirs(mountpoint, exist_ok=True)
    if is_mounted(mountpoint):
        unmount(mountpoint)
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)

    def log_tail():
        with open(log_path, errors="replace") as f:
            return "".join(f.readlines()[-10:]).strip()

    started = time.monotonic()
    with open(log_path, "a") as log_file:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log_file)
    deadline = started + timeout
    while True:
        try:
            os.stat(probe)
            elapsed = time.monotonic() - started
            break
        except OSError:
            pass
        rc = proc.poll()
        if rc not in (None, 0):
            die(f"{name}: mount command failed ({rc}): {' '.join(command)}\n{log_tail()}")
        if time.monotonic() > deadline:
            die(f"{name}: the mount did not answer within {timeout} s")
        time.sleep(0.0005)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        die(f"{name}: the mount command did not return after mounting")
    if proc.returncode != 0:
        die(f"{name}: mount command exited {proc.returncode}: {log_tail()}")
    return elapsed, daemon_pid(mountpoint)


def unmount(mountpoint, pid=None):
    """Unmounts with fusermount3 -u, retrying while busy for about 5 s, lazily
    after that; then waits (up to 10 s) for the daemon pid, if given, to exit,
    so that the next measurement does not share the CPUs with its exit."""
    for _ in range(50):
        if not is_mounted(mountpoint):
            break
        if subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    else:
        subprocess.run(["fusermount3", "-uz", mountpoint], capture_output=True)
    if pid:
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.01)


def dd(path):
    """Reads path with dd bs=1M; returns MiB/s from dd's own byte count and time."""
    result = run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], env=dict(os.environ, LC_ALL="C"))
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", result.stderr, re.M)
    if not m:
        die(f"cannot parse dd output: {result.stderr.strip()}")
    return int(m.group(1)) / float(m.group(2)) / MiB


def read_through(path):
    """Reads path once in 1 MiB reads (no copy kept); returns MiB/s."""
    started = time.monotonic()
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            piece = f.read(MiB)
            if not piece:
                break
            total += len(piece)
    return total / MiB / (time.monotonic() - started)


def zstd_default_levels(bin_dir):
    """The zstd levels `encfs-pack --compress zstd` and `mksquashfs -comp zstd`
    use when given none, as their --help says, so that a benchmark can pack
    each at the other's default ("matched levels") and follow a change of
    either default without an edit. Returns (encfs, mksquashfs)."""
    def default(argv, pattern):
        result = subprocess.run(argv, capture_output=True, text=True)
        m = re.search(pattern, result.stdout + result.stderr)
        if not m:
            die(f"cannot find the default zstd level in `{' '.join(argv)}`")
        return int(m.group(1))
    encfs = default([os.path.join(bin_dir, "encfs-pack"), "--help"], r"zstd\[:LEVEL\] \(LEVEL 1 … 19, default (\d+)\)")
    # mksquashfs lists each compressor's options; zstd's level line follows "zstd".
    squashfs = default(["mksquashfs", "-help"], r"zstd\s+-Xcompression-level <compression-level>\s+"
                                                r"<compression-level> should be 1 \.\. 22 \(default (\d+)\)")
    return encfs, squashfs


def run_unmounting_at_exit(bench):
    """Runs bench.run(); SIGTERM unwinds like Ctrl-C (exit 130), and
    bench.unmount_all() runs however it ends, so no mount is left behind."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        bench.run()
    except KeyboardInterrupt:
        print(f"{_program}: interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        bench.unmount_all()
