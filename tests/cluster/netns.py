"""A private network on this machine: one network namespace per host, joined by a bridge of our own.

The bridge sits in the root namespace with the first address of a private /24 (10.231.N.0/24, the first N no
interface of this machine already uses); each host is a namespace `cluster-<owner pid>-<name>` with one end
of a veth pair on the bridge and no route but its /24, so its traffic reaches the other hosts, this process
(the visitors, on the bridge's addresses) and its own loopback, nothing else. Every process is started with
`ip netns exec`, in a session of its own; what is left of a host is the set of pids in its namespace
(`ip netns pids`), which is how a host is killed outright.

Names carry the owner's pid, so a run cleans up after an earlier run that died (`cleanup_leftovers`) without
touching one that is still going, and a detached watchdog (`python -m tests.cluster.netns watch PID`) removes
a run's hosts once its owner is gone, however it ended.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "cluster-"
TMP = Path("/tmp")


def _ip(*args: str, check: bool = True) -> str:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True).stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _batch(commands: list[str], *, namespace: str = "") -> None:
    options = ["-n", namespace] if namespace else []
    subprocess.run(["ip", *options, "-batch", "-"], input="\n".join(commands) + "\n", check=True, text=True)


def namespace_pids(namespace: str) -> list[int]:
    return [int(pid) for pid in _ip("netns", "pids", namespace, check=False).split()]


def _kill_all(namespace: str) -> int:
    """SIGKILL every process of a namespace; how many there were."""
    pids = namespace_pids(namespace)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def remove_owner(owner: int) -> None:
    """Everything a run of `owner` left: its hosts' processes, namespaces, bridge and working directories."""
    namespaces = [name for name in _ip("netns", "list").split() if name.startswith(f"{PREFIX}{owner}-")]
    for namespace in namespaces:
        _kill_all(namespace)
    deadline = time.monotonic() + 10
    while any(namespace_pids(n) for n in namespaces) and time.monotonic() < deadline:
        time.sleep(0.1)
    for namespace in namespaces:
        _ip("netns", "delete", namespace, check=False)  # its end of each veth goes with it, and so the pair
    _ip("link", "delete", f"clbr{owner}", check=False)
    for directory in TMP.glob(f"{PREFIX}{owner}-*"):
        shutil.rmtree(directory, ignore_errors=True)


def cleanup_leftovers() -> list[int]:
    """Remove what runs whose owner has died left behind; the owners cleaned up."""
    owners = {int(m.group(1)) for m in re.finditer(rf"^{PREFIX}(\d+)-", _ip("netns", "list"), re.MULTILINE)}
    owners |= {int(m.group(1)) for m in re.finditer(r"\bclbr(\d+)\b", _ip("-o", "link", "show"))}
    owners |= {int(m.group(1)) for p in TMP.glob(f"{PREFIX}*-*") if (m := re.match(rf"{PREFIX}(\d+)-", p.name))}
    dead = sorted(owner for owner in owners if not _alive(owner))
    for owner in dead:
        remove_owner(owner)
    return dead


def _free_subnet() -> str:
    used = set(re.findall(r"inet 10\.231\.(\d+)\.", _ip("-4", "-o", "addr", "show")))
    for third in range(256):
        if str(third) not in used:
            return f"10.231.{third}"
    raise RuntimeError("no free 10.231.N.0/24 left")


class Network:
    """Hosts by name, each at a fixed last octet; `visitors` further addresses on the bridge for the clients."""

    def __init__(self, hosts: dict[str, int], *, visitors: range = range(0)):
        self.owner = os.getpid()
        self.hosts = dict(hosts)
        self.visitor_octets = visitors
        self.subnet = ""
        self.bridge = f"clbr{self.owner}"
        self.processes: list[subprocess.Popen] = []
        self._watchdog: subprocess.Popen | None = None

    # --- addresses ---------------------------------------------------------------------------
    def address(self, host: str) -> str:
        return f"{self.subnet}.{self.hosts[host]}"

    @property
    def gateway(self) -> str:
        """This process's own address on the bridge."""
        return f"{self.subnet}.1"

    @property
    def visitors(self) -> list[str]:
        return [f"{self.subnet}.{octet}" for octet in self.visitor_octets]

    def namespace(self, host: str) -> str:
        return f"{PREFIX}{self.owner}-{host}"

    def _veth(self, host: str) -> str:
        return f"cl{self.owner}h{list(self.hosts).index(host)}"

    # --- lifecycle ---------------------------------------------------------------------------
    def up(self) -> "Network":
        cleanup_leftovers()
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.netns", "watch", str(self.owner)],
            cwd=Path(__file__).resolve().parents[2], start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.subnet = _free_subnet()
        commands = [
            f"link add {self.bridge} type bridge",
            f"addr add {self.gateway}/24 dev {self.bridge}",
            *(f"addr add {address}/32 dev {self.bridge}" for address in self.visitors),
            f"link set {self.bridge} up",
        ]
        for host in self.hosts:
            namespace, veth = self.namespace(host), self._veth(host)
            _ip("netns", "add", namespace)
            commands += [f"link add {veth} type veth peer name eth0 netns {namespace}",
                         f"link set {veth} master {self.bridge} up"]  # fmt: skip
        _batch(commands)
        for host in self.hosts:
            _batch([f"addr add {self.address(host)}/24 dev eth0", "link set eth0 up", "link set lo up"],
                   namespace=self.namespace(host))  # fmt: skip
        return self

    def down(self) -> None:
        """Stop every process started here (SIGTERM, then SIGKILL), then whatever else is in the namespaces,
        and remove the namespaces, the bridge and the working directories."""
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        remove_owner(self.owner)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait(5)

    # --- processes -----------------------------------------------------------------------------
    def spawn(self, host: str, argv: list[str], *, env: dict, log: Path, cwd: Path | None = None) -> subprocess.Popen:
        """A process on `host`, its output appended to `log`."""
        with log.open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(host), *argv], env=env, cwd=cwd, start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def kill_host(self, host: str) -> int:
        """SIGKILL everything running on `host`, as a power cut would; how many processes that was."""
        return _kill_all(self.namespace(host))

    def cable(self, host: str, *, connected: bool) -> None:
        """Pull or plug `host`'s cable: its bridge port goes down or up, as when a switch port dies. What it
        sends is dropped: its open connections hang (nothing is reset) and new ones find no route."""
        _ip("link", "set", self._veth(host), "up" if connected else "down")


def _watch(owner: int) -> None:
    """Wait for `owner` to exit, then remove what it left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while _alive(owner):
        time.sleep(1)
    remove_owner(owner)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "watch":
        _watch(int(sys.argv[2]))
    else:
        sys.exit("usage: python -m tests.cluster.netns watch OWNER_PID")
