"""Where a FUSE daemon's threads and the benchmark's readers ran, and what
else used the CPUs meanwhile (issue 15).

A 4 KiB random read through FUSE is two thread wake-ups: the reader's
request wakes a daemon thread, the reply wakes the reader. On these 2-CPU
virtual machines a wake-up on the other CPU costs far more than one on the
same CPU, and other work on the machine decides where threads run. So each
fio run is sampled: every SAMPLE_S seconds, for every thread of the daemon
and of fio, the CPU it last ran on (/proc/PID/task/TID/stat field 39) and
the CPU time it used since the last sample (utime + stime); and from
/proc/stat, the CPU time everything else on the machine used. Nothing is
pinned: this only watches.

Used by bench.py; stdlib only.
"""

import os
import threading
import time

SAMPLE_S = 0.05
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def thread_stats(pid):
    """{tid: (cpu last run on, utime + stime ticks, voluntary + involuntary switches)} of pid's threads."""
    stats = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return stats
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # After the command name: field 3 is index 0, so field N is N - 3.
            cpu, ticks = int(fields[39 - 3]), int(fields[14 - 3]) + int(fields[15 - 3])
            switches = 0
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
            stats[int(tid)] = (cpu, ticks, switches)
        except (OSError, IndexError, ValueError):
            continue
    return stats


def thread_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def allowed_cpus(pid):
    """Cpus_allowed_list of pid (a pinned daemon would show it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def busy_ticks():
    """CPU ticks spent on anything but idle and iowait, all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice;
    # guest time is already counted in user.
    return sum(fields[:8]) - fields[3] - fields[4]


def steal_ticks():
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[7] if len(fields) > 7 else 0


def fio_pids():
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == "fio":
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


class Placement:
    """Samples a daemon and fio while a workload runs (use as a context manager)."""

    def __init__(self, daemon_pid):
        self.daemon_pid = daemon_pid
        self.samples = 0
        self.same_cpu = 0
        self.daemon_cpu = {}   # cpu -> ticks
        self.fio_cpu = {}      # cpu -> ticks
        self.daemon_busy = set()
        self.daemon_switches = 0
        self.max_threads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._busy0, self._steal0, self._t0 = busy_ticks(), steal_ticks(), time.monotonic()
        self._self0 = sum(os.times()[:2])
        # The daemon's threads have run before: only what they use from here counts.
        self._previous = thread_stats(self.daemon_pid) if self.daemon_pid else {}
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.elapsed = time.monotonic() - self._t0
        self.machine_busy = (busy_ticks() - self._busy0) * TICK_S
        self.steal = (steal_ticks() - self._steal0) * TICK_S
        # The daemon's and fio's CPU as sampled (fio's last interval before
        # it exits is missed: at most SAMPLE_S per thread), and this process's.
        self.ours = (sum(self.daemon_cpu.values()) + sum(self.fio_cpu.values())) * TICK_S \
            + sum(os.times()[:2]) - self._self0
        return False

    def _run(self):
        previous = self._previous
        while not self._stop.wait(SAMPLE_S):
            daemon = thread_stats(self.daemon_pid) if self.daemon_pid else {}
            fio = {}
            for pid in fio_pids():
                fio.update(thread_stats(pid))
            self.max_threads = max(self.max_threads, len(daemon))
            busiest_daemon, busiest_fio = (None, 0), (None, 0)
            for table, into, role in ((daemon, self.daemon_cpu, "daemon"), (fio, self.fio_cpu, "fio")):
                for tid, (cpu, ticks, switches) in table.items():
                    before = previous.get(tid)
                    # A thread first seen now started during the run: all its time counts.
                    used = ticks - before[1] if before else ticks
                    if role == "daemon" and before:
                        self.daemon_switches += switches - before[2]
                    if used <= 0:
                        continue
                    into[cpu] = into.get(cpu, 0) + used
                    if role == "daemon":
                        self.daemon_busy.add(tid)
                        if used > busiest_daemon[1]:
                            busiest_daemon = (cpu, used)
                    elif used > busiest_fio[1]:
                        busiest_fio = (cpu, used)
            previous = {**daemon, **fio}
            if busiest_daemon[0] is not None and busiest_fio[0] is not None:
                self.samples += 1
                self.same_cpu += busiest_daemon[0] == busiest_fio[0]

    def summary(self):
        """A JSON-ready summary: threads, placement, and the CPUs other work took."""
        others = max(self.machine_busy - self.ours, 0.0)

        def shares(table):
            total = sum(table.values())
            return {str(cpu): round(t / total, 2) for cpu, t in sorted(table.items())} if total else {}

        return {
            "daemon_threads": thread_count(self.daemon_pid) if self.daemon_pid else None,
            "daemon_threads_max": self.max_threads or None,
            "daemon_threads_busy": len(self.daemon_busy),
            "daemon_cpus_allowed": allowed_cpus(self.daemon_pid) if self.daemon_pid else None,
            "daemon_cpu_share": shares(self.daemon_cpu),
            "fio_cpu_share": shares(self.fio_cpu),
            "daemon_cpu_s": round(sum(self.daemon_cpu.values()) * TICK_S, 2),
            "daemon_switches": self.daemon_switches,
            # Samples in which the busiest daemon thread last ran on the CPU
            # the busiest fio thread last ran on.
            "same_cpu_fraction": round(self.same_cpu / self.samples, 2) if self.samples else None,
            "elapsed_s": round(self.elapsed, 2),
            # CPUs' worth of work by everything but the daemon, fio and the
            # benchmark itself, averaged over the run: the load that competes.
            "other_load_cpus": round(others / self.elapsed, 2) if self.elapsed else None,
            "steal_cpus": round(self.steal / self.elapsed, 2) if self.elapsed else None,
        }
