"""What a command costs with everything it starts: CPU seconds and peak memory of the whole
process tree (Python, Playwright's node driver, Chromium and its helpers, Xvfb).

Chromium's helpers (renderer, GPU, network, zygote) are orphaned when the browser exits, so the
rusage of a plain subprocess misses most of them (~3.9 CPU-s seen for a send instead of ~6.5).
Two ways to count them, the first that works here:

- a cgroup of its own around the command (cgroup v1 `cpuacct` + `memory`, or v2): the kernel
  counts every process that ever ran in it, CPU in nanoseconds, the peak charge of memory;
- else this process becomes the tree's subreaper, so every orphan is handed to it and reaped
  here, and RUSAGE_CHILDREN counts them all.

Either way the tree's memory is sampled from /proc (`PSS`: a page shared by N processes counts
1/N to each, so a shared library is counted once) every SAMPLE_SECONDS, and its peak kept.
The cgroup's own peak (`charged`) also holds the page cache the tree read in for the first
time, so it is reported beside, not instead. Linux only; imports nothing of qwenpipe's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")
PR_SET_CHILD_SUBREAPER = 36
SAMPLE_SECONDS = 0.2
LINGER_SECONDS = 30.0  # a helper still running this long after the command ended is killed
MIB = 1024 * 1024


@dataclass(frozen=True)
class Cost:
    code: int  # the command's exit code
    wall: float  # seconds
    cpu: float  # CPU seconds (user + system) of the whole tree
    pss_mib: float  # peak of the tree's summed PSS, sampled
    charged_mib: float | None  # the cgroup's peak memory charge (page cache included); None: no cgroup
    how: str  # "cgroup v1", "cgroup v2" or "subreaper"


def become_subreaper() -> None:
    """Orphans of our children are handed to this process (and counted in RUSAGE_CHILDREN)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("cannot become a subreaper (Linux only): the figures would miss Chromium's children")


# -- the cgroup ------------------------------------------------------------------------------------
class _Cgroup:
    """A cgroup of this process's own, made for one command and removed after it."""

    def __init__(self, dirs: dict[str, Path], version: int):
        self.dirs, self.version = dirs, version

    @classmethod
    def make(cls, name: str) -> _Cgroup | None:
        """None when cgroups cannot be written here (then the subreaper way counts)."""
        mine = _own_cgroups()
        if (CGROUPS / "cgroup.controllers").exists() and "" in mine:  # v2, one hierarchy
            wanted = {"unified": CGROUPS / mine[""].lstrip("/") / name}
            version = 2
        elif "cpuacct" in mine and "memory" in mine:
            wanted = {c: CGROUPS / c / mine[c].lstrip("/") / name for c in ("cpuacct", "memory")}
            version = 1
        else:
            return None
        made: dict[str, Path] = {}
        try:
            for controller, path in wanted.items():
                path.mkdir()
                made[controller] = path
        except OSError:
            cls(made, version).remove()
            return None
        return cls(made, version)

    def join(self, pid: int) -> None:
        for path in self.dirs.values():
            (path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        path = next(iter(self.dirs.values())) / "cgroup.procs"
        try:
            return [int(line) for line in path.read_text().split()]
        except OSError:
            return []

    def cpu(self) -> float:
        if self.version == 1:
            return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.dirs["unified"] / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def charged_peak(self) -> float | None:
        try:
            if self.version == 1:
                return int((self.dirs["memory"] / "memory.max_usage_in_bytes").read_text()) / MIB
            return int((self.dirs["unified"] / "memory.peak").read_text()) / MIB
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                path.rmdir()


def _own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for the v2 hierarchy)."""
    found: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="ascii") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(","):
                found[controller] = path
    return found


# -- /proc ---------------------------------------------------------------------------------------
def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def pss_mib(pids: list[int]) -> float:
    """The summed PSS of `pids` (those still running)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024


class _Sampler(threading.Thread):
    """The peak of the tree's PSS, read every SAMPLE_SECONDS until stopped."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.done = pids, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, pss_mib(self.pids()))


# -- one run ---------------------------------------------------------------------------------------
def measure(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, output: Path | None = None
) -> Cost:
    """Run `argv` in `cwd` to its end, and everything it started; its output to `output`
    (appended) or nowhere. The caller has called `become_subreaper()` once."""
    group = _Cgroup.make(f"qwenpipe-bench-{os.getpid()}-{time.monotonic_ns()}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: into the cgroup, then the command
        try:
            if group is not None:
                group.join(os.getpid())
            os.chdir(cwd)
            sink = os.open(output or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            os.execve(argv[0], argv, env if env is not None else os.environ)
        finally:
            os._exit(127)
    # Without a cgroup: every descendant of ours (the orphans are handed to us): one command at a time.
    sampler = _Sampler(group.pids if group is not None else lambda: _descendants(os.getpid()))
    sampler.start()
    code, wall = _reap(pid, group)
    sampler.done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if group is not None:
            cpu, charged, how = group.cpu(), group.charged_peak(), f"cgroup v{group.version}"
        else:
            rusage = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            cpu, charged, how = rusage, None, "subreaper"
    finally:
        if group is not None:
            group.remove()
    return Cost(code, wall - started, cpu, sampler.peak, charged, how)


def _reap(pid: int, group: _Cgroup | None) -> tuple[int, float]:
    """(exit code of `pid`, when it ended); every orphan of its tree reaped too (they are
    handed to us, the subreaper), and any still running LINGER_SECONDS after it ended killed."""
    code, ended, deadline = -1, 0.0, None
    while True:
        try:
            reaped, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break  # nothing left
        if reaped == 0:
            if deadline is not None and time.monotonic() > deadline:
                for left in group.pids() if group is not None else []:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(left, signal.SIGKILL)  # a helper of the command we started
                deadline = time.monotonic() + LINGER_SECONDS
            time.sleep(0.02)
            continue
        if reaped == pid:
            code, ended = os.waitstatus_to_exitcode(status), time.perf_counter()
            deadline = time.monotonic() + LINGER_SECONDS
    until = time.monotonic() + LINGER_SECONDS
    while group is not None and group.pids() and time.monotonic() < until:  # not ours to reap
        time.sleep(0.05)
    return code, ended
