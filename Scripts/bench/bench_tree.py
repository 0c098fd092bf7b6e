#!/usr/bin/env python3
"""Real-tree benchmark (issue 31): encfs against squashfs and EROFS on real directory trees.

Usage (normally through Scripts/bench.sh --dataset realtree|linux|TREE, which
installs the peers, builds the release binaries and unmounts whatever is
left if this script dies):
  bench_tree.py --out DIR --bin DIR --nullfuse BIN --tree PATH [--tree PATH ...] [--reps N] [--systems a,b,...]

For each tree, in one run, side by side:
  images    encfs-zstd (`encfs-pack --compress zstd`, its defaults),
            encfs-zstd-matched (`--compress zstd:L`, L = mksquashfs's default
            level), squashfs (`mksquashfs -comp zstd`, its defaults),
            squashfs-matched (`-Xcompression-level E`, E = encfs-pack's
            default level), erofs (`mkfs.erofs -zlz4hc`: Debian 12's
            erofs-utils 1.5 has lz4 and lz4hc only, no zstd); each built
            once per repetition, timed with a `sync` inside the timing (the
            previous build removed and a `sync` before it), size = image
            bytes;
  mounts    encfs (encfs-mount of encfs-zstd), encfs-uring (the same with
            --transport uring), squashfuse_ll and the kernel's
            squashfs (of the squashfs image, loop mount), the kernel's EROFS
            (loop mount); and the floor without crypto or compression: the
            tree copied as plain files into OUT/tree-build/ (the bundles'
            file system), read directly (plain-dir) and through
            Scripts/bench/nullfuse.c, a FUSE passthrough configured like
            encfs-mount (max_read 256 KiB as encfs-mount sets it): nullfuse
            answers every open (OPEN and RELEASE per file, as libfuse's
            passthrough examples do), nullfuse-skip-open answers opens
            ENOSYS as encfs-mount does (NULLFUSE_SKIP_OPEN=1: then neither
            is sent). A cold read of thousands of plain files is bound by
            the backing file system's own cold lookups and reads, which a
            packed image avoids; so the tree is also copied into a tmpfs of
            our own (OUT/tree-build/memory, which drop_caches leaves
            alone), read directly (plain-memory) and through
            nullfuse-skip-open (nullfuse-memory): the FUSE interface's own
            cost, with a backing store at page-cache speed.
--systems picks a subset of the mounts (default: all; the images are built
all the same, their table needs them).
Each repetition runs every mount in turn (the order reversed every other
repetition and rotated every two, as bench.py does) through:
  read 1    `sync; echo 3 > drop_caches` (the images' page cache too), a
            fresh mount, then every regular file read once with one reader
            (`xargs -0 -n 256 cat` over the file list, made from the source
            tree beforehand, so no directory walk is timed);
  read 4    the same with four readers (`xargs -0 -n 64 -P 4 cat`);
  ls -lR    drop_caches, a fresh mount, `ls -lR MNT` (cold), then again on
            the same mount (warm).
  daemon CPU  the FUSE daemon's user + system CPU time over the read
            (from its /proc/PID/stat before unmounting; mount start-up
            included, kernel threads' work not).
  requests  after the timed repetitions, one more cold 1-job read per FUSE
            mount, untimed, counting the requests the kernel sends that
            connection by opcode (the fuse:fuse_request_send tracepoint, in
            a tracefs instance of its own filtered on the connection).
Writes OUT/tree-results.md and OUT/tree-results.json; a tree's images live in
OUT/tree-build/ and go at the end (bench.sh removes them unless --keep).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import benchlib
from benchlib import MiB, die, drop_caches, log, run

PROG = "bench"
BENCH_KEY = "5e" * 32  # the same public, benchmark-only key as bench.py's

# Images: name → how it is built. Mounts: name → the image it mounts and how.
IMAGES = ["encfs-zstd", "encfs-zstd-matched", "squashfs", "squashfs-matched", "erofs"]
# encfs-uring: the same bundle over FUSE-over-io_uring (--transport uring), which costs the daemon less CPU per
# request than the default /dev/fuse transport (docs/PERFORMANCE.md, "Known limits", issue 31).
# plain-dir, nullfuse, nullfuse-skip-open: the tree as plain files (PLAIN), no crypto, no compression: what the
# kernel's page cache and FUSE cost alone (docs/PERFORMANCE.md, "Cold reads of many small files: the FUSE floor").
# plain-memory, nullfuse-memory: the same in a tmpfs (MEMORY).
PLAIN, MEMORY = "plain", "memory"
MOUNTS = {"encfs": "encfs-zstd", "encfs-uring": "encfs-zstd", "squashfuse_ll": "squashfs",
          "kernel-squashfs": "squashfs", "kernel-erofs": "erofs",
          "nullfuse": PLAIN, "nullfuse-skip-open": PLAIN, "plain-dir": PLAIN,
          "nullfuse-memory": MEMORY, "plain-memory": MEMORY}
# The mounts served by a daemon over FUSE, whose requests are counted.
FUSE_MOUNTS = ["encfs", "encfs-uring", "squashfuse_ll", "nullfuse", "nullfuse-skip-open", "nullfuse-memory"]
# The plain trees, read where they lie.
DIRECT = ["plain-dir", "plain-memory"]
# encfs-mount's max_read (MountContext.maximumRead), given to nullfuse too.
ENCFS_MAX_READ = 256 << 10
TRACEFS = "/sys/kernel/tracing"


def run_discarding(argv, cwd=None):
    """Runs argv with its output sent to /dev/null (never buffered here: it is the whole tree); dies with its
    stderr when it fails, so a file that cannot be read fails the run."""
    result = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        die(f"command failed ({result.returncode}): {' '.join(argv)}\n"
            f"{result.stderr.decode(errors='replace').strip()[-2000:]}")


class RequestCounter:
    """Counts, by opcode, the requests the kernel sends one FUSE connection while it lives.

    A tracefs instance of its own (the global trace buffer is left alone), with the fuse:fuse_request_send
    tracepoint filtered on the connection (the mount's device number in the kernel's dev_t encoding); the events
    are read and counted at the end, so the buffer holds them all, or the count dies.
    """

    def __init__(self, mountpoint):
        st = os.stat(mountpoint)
        connection = (os.major(st.st_dev) << 20) | os.minor(st.st_dev)  # the kernel's MKDEV
        self.instance = os.path.join(TRACEFS, "instances", f"encfs-bench-tree-{os.getpid()}")
        os.mkdir(self.instance)
        self.event = os.path.join(self.instance, "events", "fuse", "fuse_request_send")
        try:
            self.write("buffer_size_kb", "65536")  # per CPU: about a million events
            self.write(os.path.join(self.event, "filter"), f"connection == {connection}")
            self.write(os.path.join(self.event, "enable"), "1")
        except OSError:
            self.close()
            raise

    @staticmethod
    def available():
        """Whether the kernel has the tracepoint (recent kernels only) and tracefs is mounted."""
        return os.path.isdir(os.path.join(TRACEFS, "events", "fuse", "fuse_request_send"))

    def write(self, path, text):
        with open(os.path.join(self.instance, path), "w") as f:
            f.write(text + "\n")

    def counts(self):
        """Stops counting; {opcode name: requests}. Dies if the buffer overflowed."""
        self.write(os.path.join(self.event, "enable"), "0")
        per_cpu = os.path.join(self.instance, "per_cpu")
        for cpu in os.listdir(per_cpu):
            with open(os.path.join(per_cpu, cpu, "stats")) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key.strip() == "overrun" and int(value) != 0:
                        die(f"request counting lost {int(value)} events on {cpu}: enlarge buffer_size_kb")
        counts = {}
        with open(os.path.join(self.instance, "trace")) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                # "... fuse_request_send: connection 40 req 2 opcode 1 (FUSE_LOOKUP) len 50"
                _, found, rest = line.partition(" opcode ")
                if found:
                    op = rest.split("(", 1)[1].split(")", 1)[0]
                    counts[op] = counts.get(op, 0) + 1
        return counts

    def close(self):
        try:
            self.write(os.path.join(self.event, "enable"), "0")
        finally:
            os.rmdir(self.instance)


class TreeBench:
    """One run over several trees; each tree measured on its own, its systems side by side."""

    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        self.build = os.path.join(self.out, "tree-build")
        self.key_file = os.path.join(self.build, "bench.key")
        self.levels = benchlib.zstd_default_levels(args.bin)
        self.memory = os.path.join(self.build, "memory")  # a tmpfs mount point
        self.systems = [n for n in MOUNTS if n in args.systems]
        self.mounted = set()
        self.results = {}

    # ------------------------------------------------------------ images

    def image_path(self, name):
        if name == MEMORY:
            return os.path.join(self.memory, "tree")
        return os.path.join(self.build, f"tree.{name}")

    def pack_command(self, name, tree):
        encfs_level, squashfs_level = self.levels
        image = self.image_path(name)
        pack = os.path.join(self.args.bin, "encfs-pack")
        if name == "encfs-zstd":
            return [pack, tree, image, "--key-file", self.key_file, "--quiet", "--compress", "zstd"]
        if name == "encfs-zstd-matched":
            return [pack, tree, image, "--key-file", self.key_file, "--quiet", "--compress", f"zstd:{squashfs_level}"]
        if name == "squashfs":
            return ["mksquashfs", tree, image, "-comp", "zstd", "-noappend", "-no-progress", "-quiet"]
        if name == "squashfs-matched":
            return ["mksquashfs", tree, image, "-comp", "zstd", "-Xcompression-level", str(encfs_level),
                    "-noappend", "-no-progress", "-quiet"]
        if name == "erofs":
            return ["mkfs.erofs", "--quiet", "-zlz4hc", image, tree]
        raise AssertionError(f"internal error: unknown image {name}")

    def pack(self, name, tree):
        """Builds one image; returns (seconds including a sync, bytes)."""
        image = self.image_path(name)
        if os.path.exists(image):
            os.unlink(image)
        os.sync()
        started = time.monotonic()
        run(self.pack_command(name, tree))
        os.sync()
        return time.monotonic() - started, os.path.getsize(image)

    def copy_plain(self, tree):
        """The tree as plain files beside the images and in a tmpfs, for the mounts that read them, fresh for each
        tree."""
        for image in sorted({MOUNTS[n] for n in self.systems} & {PLAIN, MEMORY}):
            if image == MEMORY and not benchlib.is_mounted(self.memory):
                os.makedirs(self.memory, exist_ok=True)
                run(["mount", "-t", "tmpfs", "-o", "mode=0755", "encfs-bench-tree", self.memory])
            plain = self.image_path(image)
            if os.path.exists(plain):
                run(["rm", "-rf", plain])
            run(["cp", "-a", tree, plain])

    # ------------------------------------------------------------ mounts

    def mountpoint(self, name):
        if name in DIRECT:
            return self.image_path(MOUNTS[name])
        return os.path.join(self.out, "mnt", f"tree-{name}")

    def mount(self, name):
        """Mounts name fresh; returns the daemon's pid (None for the kernel's file systems and the plain trees)."""
        if name in DIRECT:
            return None
        mp = self.mountpoint(name)
        os.makedirs(mp, exist_ok=True)
        if benchlib.is_mounted(mp):
            self.unmount(name)
        image = self.image_path(MOUNTS[name])
        self.mounted.add(name)
        if name.startswith("encfs"):
            # Real trees hold absolute symlinks (python3.11's sitecustomize.py → /etc): served as stored, as
            # squashfs and EROFS serve them.
            command = [os.path.join(self.args.bin, "encfs-mount"), image, mp, "--key-file", self.key_file,
                       "--allow-external-symlinks"] + (["--transport", "uring"] if name == "encfs-uring" else [])
        elif name == "squashfuse_ll":
            command = ["squashfuse_ll", image, mp]
        elif name.startswith("nullfuse"):
            # nullfuse needs -o max_read and NULLFUSE_MAX_READ together (its header); env(1) execs it, so its argv,
            # which daemon_pid looks for, is nullfuse's own.
            command = ["env", f"NULLFUSE_MAX_READ={ENCFS_MAX_READ}",
                       f"NULLFUSE_SKIP_OPEN={0 if name == 'nullfuse' else 1}",
                       self.args.nullfuse, image, mp, "-o", f"max_read={ENCFS_MAX_READ}"]
        else:
            # -o loop: mount(8) sets up a loop device and frees it at unmount (autoclear).
            fstype = "squashfs" if name == "kernel-squashfs" else "erofs"
            run(["mount", "-t", fstype, "-o", "loop,ro", image, mp])
            return None
        _, pid = benchlib.mount(command, mp, mp, os.path.join(self.out, "logs", f"tree-{name}.log"), name)
        # The mount point answers stat before and after mounting: wait for the mount itself.
        deadline = time.monotonic() + 30
        while not benchlib.is_mounted(mp):
            if time.monotonic() > deadline:
                die(f"{name}: {mp} is not mounted 30 s after the mount command")
            time.sleep(0.01)
        return pid or benchlib.daemon_pid(mp)

    def unmount(self, name, pid=None):
        if name in DIRECT:
            return
        mp = self.mountpoint(name)
        if name.startswith("kernel-"):
            for _ in range(50):
                if not benchlib.is_mounted(mp) or subprocess.run(["umount", mp], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            else:
                subprocess.run(["umount", "-l", mp], capture_output=True)
        else:
            benchlib.unmount(mp, pid)
        self.mounted.discard(name)

    def unmount_all(self):
        for name in list(self.mounted):
            self.unmount(name)
        if benchlib.is_mounted(self.memory):
            subprocess.run(["umount", self.memory], capture_output=True)

    # ------------------------------------------------------------ workloads

    @staticmethod
    def cpu_seconds(pid):
        """A process's user + system CPU time so far (/proc/PID/stat); None without a daemon."""
        if not pid:
            return None
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def read_all(self, name, file_list, jobs, counter=None):
        """Cold: drop_caches, a fresh mount, every file read once by `jobs` readers; (seconds, the daemon's CPU
        seconds or None). With counter, a RequestCounter class: the requests of the read instead, by opcode."""
        drop_caches()
        pid = self.mount(name)
        counting = counter(self.mountpoint(name)) if counter else None
        per_call = 256 if jobs == 1 else 64
        try:
            started = time.monotonic()
            run_discarding(["xargs", "-0", "-a", file_list, "-n", str(per_call), "-P", str(jobs), "cat"],
                           cwd=self.mountpoint(name))
            elapsed = time.monotonic() - started
            cpu = self.cpu_seconds(pid)
            counts = counting.counts() if counting else None
        finally:
            if counting:
                counting.close()
            self.unmount(name, pid)
        return counts if counter else (elapsed, cpu)

    def list_tree(self, name):
        """drop_caches, a fresh mount, `ls -lR` twice; (cold seconds, warm seconds)."""
        drop_caches()
        pid = self.mount(name)
        times = []
        for _ in range(2):
            started = time.monotonic()
            run_discarding(["ls", "-lR", self.mountpoint(name)])
            times.append(time.monotonic() - started)
        self.unmount(name, pid)
        return times[0], times[1]

    # ------------------------------------------------------------ run

    @staticmethod
    def turn_order(items, rep):
        """Reversed every other repetition, rotated by one every two (bench.py's Bench.turn_order)."""
        turn = (rep // 2) % max(len(items), 1)
        order = items[turn:] + items[:turn]
        return order[::-1] if rep % 2 else order

    def tree_stats(self, tree, file_list):
        files, dirs, links, total, sizes = 0, 0, 0, 0, []
        with open(file_list, "wb") as out:
            for dirpath, dirnames, filenames in os.walk(tree):
                dirnames.sort()
                dirs += len(dirnames)
                for name in sorted(filenames):
                    path = os.path.join(dirpath, name)
                    st = os.lstat(path)
                    if os.path.islink(path):
                        links += 1
                    elif os.path.isfile(path):
                        files += 1
                        total += st.st_size
                        sizes.append(st.st_size)
                        out.write(os.path.relpath(path, tree).encode() + b"\0")
        return {"files": files, "directories": dirs, "symlinks": links, "bytes": total,
                "median_file_bytes": statistics.median(sizes) if sizes else 0}

    def run_tree(self, tree):
        log(f"tree {tree}")
        file_list = os.path.join(self.build, "files.list")
        stats = self.tree_stats(tree, file_list)
        log(f"  {stats['files']:,} files, {stats['directories']:,} directories, {stats['bytes'] / MiB:,.1f} MiB")
        raw = {"pack_s": {n: [] for n in IMAGES}, "size_bytes": {n: [] for n in IMAGES},
               "read1_s": {n: [] for n in self.systems}, "read4_s": {n: [] for n in self.systems},
               "read1_cpu_s": {n: [] for n in self.fuse_systems()}, "read4_cpu_s": {n: [] for n in self.fuse_systems()},
               "ls_cold_s": {n: [] for n in self.systems}, "ls_warm_s": {n: [] for n in self.systems}}
        loads = []
        for rep in range(self.args.reps):
            log(f"  pack, repetition {rep + 1}/{self.args.reps}")
            for name in self.turn_order(IMAGES, rep):
                seconds, size = self.pack(name, tree)
                raw["pack_s"][name].append(seconds)
                raw["size_bytes"][name].append(size)
                log(f"    {name}: {seconds:.2f} s, {size / MiB:,.2f} MiB")
        self.copy_plain(tree)
        for rep in range(self.args.reps):
            log(f"  reads and listing, repetition {rep + 1}/{self.args.reps}")
            loads.append(os.getloadavg()[0])
            for name in self.turn_order(self.systems, rep):
                r1, cpu1 = self.read_all(name, file_list, 1)
                r4, cpu4 = self.read_all(name, file_list, 4)
                cold, warm = self.list_tree(name)
                raw["read1_s"][name].append(r1)
                raw["read4_s"][name].append(r4)
                if name in FUSE_MOUNTS:
                    raw["read1_cpu_s"][name].append(cpu1)
                    raw["read4_cpu_s"][name].append(cpu4)
                raw["ls_cold_s"][name].append(cold)
                raw["ls_warm_s"][name].append(warm)
                log(f"    {name}: read 1 job {r1:.2f} s, 4 jobs {r4:.2f} s, ls -lR {cold:.3f} s cold, {warm:.3f} s warm")
        loads.append(os.getloadavg()[0])
        requests = {}
        if RequestCounter.available():
            log("  requests per file (one more cold 1-job read per FUSE mount, untimed)")
        else:
            log(f"  requests not counted: no fuse:fuse_request_send tracepoint in {TRACEFS}")
        for name in self.fuse_systems() if RequestCounter.available() else []:
            counts = self.read_all(name, file_list, 1, counter=RequestCounter)
            requests[name] = {op: n / stats["files"] for op, n in sorted(counts.items())}
            log(f"    {name}: " + ", ".join(f"{op} {v:.2f}" for op, v in requests[name].items()))
        summary = {metric: {name: self.summary(values) for name, values in by_name.items()}
                   for metric, by_name in raw.items()}
        self.results[tree] = {"tree": stats, "summary": summary, "requests_per_file": requests, "load_1min": loads}

    def fuse_systems(self):
        return [n for n in self.systems if n in FUSE_MOUNTS]

    @staticmethod
    def summary(values):
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "reps": values}

    def run(self):
        started = time.monotonic()
        os.makedirs(self.build, exist_ok=True)
        os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
        with open(self.key_file, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(BENCH_KEY + "\n")
        for tree in self.args.tree:
            self.run_tree(tree)
        self.elapsed = time.monotonic() - started
        self.report()

    # ------------------------------------------------------------ report

    def versions(self):
        def first_line(argv):
            r = subprocess.run(argv, capture_output=True, text=True)
            text = (r.stdout + r.stderr).strip()
            return text.splitlines()[0] if text else "unknown"
        def package(name):
            return first_line(["dpkg-query", "-W", "-f=${Version}", name])
        return {"encfs": first_line(["git", "-C", os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                     "describe", "--always", "--dirty", "--abbrev=12"]),
                "squashfs-tools": package("squashfs-tools"), "squashfuse": package("squashfuse"),
                "erofs-utils": package("erofs-utils"), "kernel": platform.release(), "nproc": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def report(self):
        versions = self.versions()
        doc = {"versions": versions, "zstd_default_levels": {"encfs": self.levels[0], "mksquashfs": self.levels[1]},
               "reps": self.args.reps, "trees": self.results, "elapsed_s": round(self.elapsed, 1)}
        with open(os.path.join(self.out, "tree-results.json"), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        markdown = self.markdown(versions)
        with open(os.path.join(self.out, "tree-results.md"), "w") as f:
            f.write(markdown)
        print(markdown)

    def requests_table(self, result, files):
        """FUSE requests per file and daemon CPU per file, one row per FUSE mount."""
        s, requests = result["summary"], result["requests_per_file"]
        if not requests:
            return "FUSE requests per file: not counted (no fuse:fuse_request_send tracepoint in this kernel).\n"
        shown = ["FUSE_LOOKUP", "FUSE_GETATTR", "FUSE_OPEN", "FUSE_READ", "FUSE_FLUSH", "FUSE_RELEASE"]
        lines = ["Cold read all, 1 job: FUSE requests the kernel sent, per file (one untimed read), and the daemon's "
                 "CPU per file (median of the timed reads):\n",
                 "| mount | " + " | ".join(op.removeprefix("FUSE_") for op in shown) +
                 " | other | total | daemon CPU, 1 job (µs/file) | 4 jobs (µs/file) |",
                 "|---" * (len(shown) + 5) + "|"]
        for name in self.fuse_systems():
            per_file = requests[name]
            other = sum(v for op, v in per_file.items() if op not in shown)
            cells = [name] + [f"{per_file.get(op, 0):.2f}" for op in shown]
            cells += [f"{other:.2f}", f"{sum(per_file.values()):.2f}"]
            cells += [f"{s[m][name]['median'] / files * 1e6:.0f}" for m in ("read1_cpu_s", "read4_cpu_s")]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def markdown(self, versions):
        encfs_level, squashfs_level = self.levels
        lines = ["## encfs on real trees\n",
                 f"- {versions['date']}; encfs {versions['encfs']}; {versions['nproc']} CPUs, kernel {versions['kernel']}; "
                 f"squashfs-tools {versions['squashfs-tools']}, squashfuse {versions['squashfuse']}, "
                 f"erofs-utils {versions['erofs-utils']} (lz4hc: it has no zstd)",
                 f"- {self.args.reps} repetitions: median [min-max]; zstd levels: encfs-zstd {encfs_level} "
                 f"(encfs-pack's default), squashfs {squashfs_level} (mksquashfs's default); the -matched images "
                 f"use the other tool's default",
                 ""]
        for tree, result in self.results.items():
            s, t = result["summary"], result["tree"]
            loads = result["load_1min"]
            lines.append(f"### {tree}: {t['files']:,} files, {t['directories']:,} directories, {t['symlinks']:,} "
                         f"symlinks, {t['bytes'] / MiB:,.1f} MiB (median file {t['median_file_bytes'] / 1024:,.1f} KiB); "
                         f"load average {min(loads):.1f}-{max(loads):.1f}\n")
            lines.append("| image | size (MiB) | size / squashfs | pack incl. sync (s) | pack / mksquashfs |")
            lines.append("|---|---|---|---|---|")
            for name in IMAGES:
                size, pack = s["size_bytes"][name], s["pack_s"][name]
                lines.append(f"| {name} | {size['median'] / MiB:,.2f} | "
                             f"{size['median'] / s['size_bytes']['squashfs']['median']:.3f}× | "
                             f"{pack['median']:.2f} [{pack['min']:.2f}-{pack['max']:.2f}] | "
                             f"{pack['median'] / s['pack_s']['squashfs']['median']:.2f}× |")
            lines.append("")
            lines.append("| mount | read all, 1 job (s) | read all, 4 jobs (s) | ls -lR cold (s) | ls -lR warm (s) |")
            lines.append("|---|---|---|---|---|")
            for name in self.systems:
                cells = [name]
                for metric in ("read1_s", "read4_s", "ls_cold_s", "ls_warm_s"):
                    v = s[metric][name]
                    cells.append(f"{v['median']:.3f} [{v['min']:.3f}-{v['max']:.3f}]")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            lines.append(self.requests_table(result, t["files"]))

            def ratio(metric, a, b):
                return s[metric][a]["median"] / s[metric][b]["median"]

            lines.append("Issue 31's targets (ratios of medians, encfs at its defaults), and the same ratios for "
                         "other mounts:\n")
            lines.append("| target | ratio | |")
            lines.append("|---|---|---|")
            size_r = s["size_bytes"]["encfs-zstd"]["median"] / s["size_bytes"]["squashfs"]["median"]
            pack_r = ratio("pack_s", "encfs-zstd", "squashfs")
            lines.append(f"| size ≤ 0.95× squashfs | {size_r:.3f}× | {'met' if size_r <= 0.95 else 'missed'} |")
            lines.append(f"| pack ≤ 0.5× mksquashfs | {pack_r:.2f}× | {'met' if pack_r <= 0.5 else 'missed'} |")
            # (what, metric, mount, reference, target or None for "for reference"); a row whose mounts were not
            # run (--systems) is left out.
            rows = [("read all cold, 1 job ≤ 1.0× kernel squashfs", "read1_s", "encfs", "kernel-squashfs", 1.0),
                    ("read all cold, 4 jobs ≤ 1.0× kernel EROFS", "read4_s", "encfs", "kernel-erofs", 1.0),
                    ("ls -lR cold ≤ 1.5× kernel EROFS", "ls_cold_s", "encfs", "kernel-erofs", 1.5)]
            for other in ("encfs-uring", "nullfuse-skip-open", "nullfuse-memory", "plain-dir", "plain-memory"):
                rows += [(f"({other}) read all cold, 1 job, / kernel squashfs", "read1_s", other, "kernel-squashfs",
                          None),
                         (f"({other}) read all cold, 4 jobs, / kernel EROFS", "read4_s", other, "kernel-erofs", None)]
            rows.append(("(encfs) read all cold, 1 job, / squashfuse_ll", "read1_s", "encfs", "squashfuse_ll", None))
            for what, metric, name, ref, target in rows:
                if name in self.systems and ref in self.systems:
                    r = ratio(metric, name, ref)
                    verdict = "" if target is None else ("met" if r <= target else "missed")
                    lines.append(f"| {what} | {r:.2f}× | {verdict} |")
            lines.append("")
        lines.append(f"Benchmark time: {self.elapsed / 60:.1f} min. Method: Scripts/bench/bench_tree.py's docstring.")
        return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--bin", required=True, help="directory of the encfs release binaries")
    parser.add_argument("--nullfuse", required=True, help="the compiled Scripts/bench/nullfuse.c")
    parser.add_argument("--tree", action="append", required=True, help="a directory to pack and read (repeatable)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--systems", default=",".join(MOUNTS),
                        help="a subset of the mounts, comma-separated: " + ",".join(MOUNTS) + " (default: all)")
    args = parser.parse_args()
    benchlib.set_program(PROG)
    if args.reps < 1:
        die("--reps must be at least 1")
    args.systems = [n for n in args.systems.split(",") if n]
    for name in args.systems:
        if name not in MOUNTS:
            die(f"unknown system ({name})", f"--systems takes {','.join(MOUNTS)}")
    if not args.systems:
        die("--systems is empty")
    if os.geteuid() != 0:
        die("must run as root (drop_caches, mounts)")
    for tree in args.tree:
        if not os.path.isdir(tree):
            die(f"not a directory ({tree})")
    args.tree = [os.path.abspath(t) for t in args.tree]
    benchlib.run_unmounting_at_exit(TreeBench(args))


if __name__ == "__main__":
    main()
