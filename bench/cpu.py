"""CPU time of processes, read from ``/proc``: the one place the benchmark reads it.

Rates move by 2-5x when other work shares the machine's cores; the CPU seconds a broker spends on
a fixed amount of data barely do (issue 33). :class:`PhaseCpu` reads the CPU time of a set of
processes (the brokers of the system under test) when a measured phase starts and when it ends;
:func:`seconds_per_gb` turns the difference into CPU seconds per GB of payload moved.

A process's CPU time here is utime + stime of all its threads plus cutime + cstime, the time of
the children it has waited for, and, through :func:`tree_times`, that of its live descendants:
a broker that hands work to child processes (or a SQL server whose Spark JVM is its child) is
charged for all of it, also for a child that exits within the phase once it is reaped.

:func:`sched_times` reads what CPU time cannot show: how long a process's threads were ready to
run but waited for a core (``schedstat``). Scenario 5 reports it for its client processes: on a
machine whose cores the producer, the consumer and the broker share, it says whether the
consumer fell behind waiting for its broker or for a CPU.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import TracebackType
from typing import Iterable, Protocol

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuTimes:
    """User and system CPU seconds."""
    user: float = 0.0
    system: float = 0.0

    @property
    def total(self) -> float:
        return self.user + self.system

    def __add__(self, other: "CpuTimes") -> "CpuTimes":
        return CpuTimes(self.user + other.user, self.system + other.system)

    def __sub__(self, other: "CpuTimes") -> "CpuTimes":
        return CpuTimes(self.user - other.user, self.system - other.system)


def parse_stat(stat: str) -> tuple[int, CpuTimes]:
    """(parent pid, CPU times) of a ``/proc/<pid>/stat`` line. The command name, in parentheses,
    may hold spaces and parentheses itself, so fields are counted from the last ``)``; utime,
    stime, cutime and cstime are fields 14-17 of proc(5), in clock ticks."""
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return int(fields[1]), CpuTimes((utime + cutime) / CLK_TCK, (stime + cstime) / CLK_TCK)


def cpu_times(pid: int) -> CpuTimes:
    """CPU times of one process (all its threads and its reaped children); OSError once it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return parse_stat(f.read())[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime (+ reaped children's) of one process in seconds; OSError once it is gone."""
    return cpu_times(pid).total


def _all_processes() -> dict[int, tuple[int, CpuTimes]]:
    """pid -> (parent pid, CPU times) of every process this user can see."""
    found: dict[int, tuple[int, CpuTimes]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                found[int(entry)] = parse_stat(f.read())
        except (OSError, ValueError, IndexError):
            continue                    # gone between listdir and open, or not readable
    return found


def descendants_sum(root: int, processes: dict[int, tuple[int, CpuTimes]]) -> CpuTimes | None:
    """CPU times of ``root`` and every descendant in ``processes`` (pid -> (parent, times)),
    None when ``root`` is not there."""
    if root not in processes:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    total, todo = CpuTimes(), [root]
    while todo:
        pid = todo.pop()
        total += processes[pid][1]
        todo += children.get(pid, [])
    return total


def tree_times(root: int) -> CpuTimes | None:
    """CPU times of ``root`` and its live descendants; None when ``root`` is gone."""
    return descendants_sum(root, _all_processes())


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of ``root`` and every live descendant; 0 when ``root`` is gone."""
    got = tree_times(root)
    return got.total if got is not None else 0.0


def seconds_per_gb(cpu_s: float, payload_bytes: float) -> float:
    """CPU seconds per GB (10^9 bytes) of payload; the payload must not be empty."""
    if payload_bytes <= 0:
        raise ValueError(f"no payload to divide {cpu_s:.3f} CPU s by ({payload_bytes} bytes)")
    return cpu_s / (payload_bytes / 1e9)


@dataclass
class PhaseCpu:
    """The CPU time a set of processes (each with its descendants) used over a phase: read when
    the ``with`` block starts and when it ends. A process that is gone at either end makes the
    figure unknown, so that raises RuntimeError rather than undercounting."""
    pids: Iterable[int]
    start: dict[int, CpuTimes] = field(default_factory=dict)
    used: dict[int, CpuTimes] = field(default_factory=dict)

    def _read(self) -> dict[int, CpuTimes]:
        processes = _all_processes()
        got: dict[int, CpuTimes] = {}
        for pid in self.pids:
            times = descendants_sum(pid, processes)
            if times is None:
                raise RuntimeError(f"process {pid} is gone: its CPU time over the phase is unknown")
            got[pid] = times
        return got

    def __post_init__(self) -> None:
        self.pids = tuple(self.pids)
        if not self.pids:
            raise ValueError("no processes to measure")

    def __enter__(self) -> "PhaseCpu":
        self.start = self._read()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            end = self._read()
            self.used = {pid: end[pid] - self.start[pid] for pid in self.start}

    @property
    def total(self) -> CpuTimes:
        """The CPU times of every process summed, once the phase is over."""
        if not self.used:
            raise RuntimeError("the phase has not ended")
        out = CpuTimes()
        for times in self.used.values():
            out += times
        return out

    def per_gb(self, payload_bytes: float) -> float:
        """The processes' CPU seconds (user + system) per GB of ``payload_bytes`` moved."""
        return seconds_per_gb(self.total.total, payload_bytes)


@dataclass(frozen=True)
class SchedTimes:
    """Seconds the threads of a process ran on a CPU and seconds they were runnable but waited
    for one (the scheduler's run queue), from ``/proc/<pid>/task/<tid>/schedstat``."""
    run: float = 0.0
    wait: float = 0.0

    def __sub__(self, other: "SchedTimes") -> "SchedTimes":
        return SchedTimes(self.run - other.run, self.wait - other.wait)

    @property
    def wait_per_run(self) -> float:
        """Seconds waited for a CPU per second run: 0 on an idle machine; above 1 the process
        spent more time waiting for a core than using one."""
        return self.wait / self.run if self.run > 0 else 0.0


def parse_schedstat(text: str) -> SchedTimes:
    """A ``schedstat`` line: nanoseconds on a CPU, nanoseconds waiting on a run queue, timeslices."""
    run_ns, wait_ns = (int(f) for f in text.split()[:2])
    return SchedTimes(run_ns / 1e9, wait_ns / 1e9)


def sched_times(pid: int) -> SchedTimes | None:
    """Run and run-queue wait time of every live thread of ``pid`` summed; None when the process
    is gone or the kernel keeps no schedstat (``CONFIG_SCHED_INFO``). Threads that ended are not
    counted: measure processes whose threads live through the phase (clients mid-run)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, seen = SchedTimes(), False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                got = parse_schedstat(f.read())
        except (OSError, ValueError):
            continue                    # the thread ended meanwhile, or no schedstat
        total = SchedTimes(total.run + got.run, total.wait + got.wait)
        seen = True
    return total if seen else None


class HasPid(Protocol):
    @property
    def pid(self) -> int | None: ...


def pids_of(processes: Iterable[HasPid]) -> list[int]:
    """The pids of running processes (a system's brokers); RuntimeError if one has none."""
    pids = []
    for p in processes:
        if p.pid is None:
            raise RuntimeError(f"{p!r} has no process")
        pids.append(p.pid)
    return pids


def thread_sched_times(pid: int) -> dict[int, tuple[str, SchedTimes]]:
    """Each live thread of ``pid``: its name (``comm``, e.g. librdkafka's ``rdk:broker1``) and
    its run and run-queue wait time; {} when the process is gone or keeps no schedstat."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    out: dict[int, tuple[str, SchedTimes]] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = (name, parse_schedstat(f.read()))
        except (OSError, ValueError):
            continue                    # the thread ended meanwhile, or no schedstat
    return out
