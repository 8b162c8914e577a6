"""A multi-node Slurm cluster on this one machine: Linux network namespaces as nodes, Debian's slurm-wlm and munge.

Layout (``NAME`` is the cluster's name, ``iobo`` by default)::

    netns NAME-ctl     hostname ctl,   10.77.0.1/24 on the bridge br0: slurmctld, and where the
                       "login" commands run (sbatch, squeue, iobo tune: :meth:`Cluster.command`)
    netns NAME-node1   hostname node1, 10.77.0.11/24 on eth0 (a veth whose peer is a port of br0): slurmd -N node1
    netns NAME-node2   hostname node2, 10.77.0.12/24 ...
    netns NAME-node3   hostname node3, 10.77.0.13/24 ...

Every address exists only on links inside these namespaces (the bridge lives in NAME-ctl, both ends of each
veth are created directly inside namespaces); nothing is added to the root namespace, and no other address is
ever contacted. Each node has its own hostname (a UTS namespace per daemon, ``unshare --uts``) and its own
``/etc/hosts`` (``/etc/netns/<netns>/hosts`` bound over it in a mount namespace of its own; entered with
``nsenter --net``, not ``ip netns exec``, whose fresh /sys lacks the cgroup mount slurmd wants), listing the cluster's hosts so
that MPICH's hydra proxies find ``mpiexec``'s host by name.

Shared: the file system (namespaces separate the network, not the mounts: every node sees the same /tmp,
/dev/shm and this checkout, as nodes of a real cluster see a shared file system) and one ``munged`` (its
Unix socket in the cluster's directory, reachable from every namespace). No cgroups (``proctrack/linuxproc``,
``task/none``), no accounting database: it runs in a container without systemd, as root.

    python tests/support/cluster.py up       # idempotent: a running healthy cluster is left as it is
    python tests/support/cluster.py run -- sinfo
    python tests/support/cluster.py down     # kills every daemon and job, deletes the namespaces, checks
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PARTITION = "debug"
CPUS_PER_NODE = 2
SUBNET = "10.77.0"
CONTROLLER = ("ctl", f"{SUBNET}.1")
TOOLS = ("ip", "nsenter", "unshare", "mount", "runuser", "munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel",
         "sinfo", "mpiexec.mpich")


DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")


class ClusterUnavailable(Exception):
    """The cluster cannot start (or stop cleanly) here; the message names the step, the command and its output."""


def _which(tool: str) -> str | None:
    return shutil.which(tool) or next((p for p in (f"/usr/sbin/{tool}", f"/sbin/{tool}") if os.path.exists(p)), None)


@dataclass(frozen=True)
class Cluster:
    """A cluster named ``name`` of ``nodes`` compute nodes, its files under ``base`` (default /tmp/NAME-cluster)."""

    name: str = "iobo"
    nodes: int = 3
    base: Path | None = None

    def __post_init__(self) -> None:
        if self.base is None:
            object.__setattr__(self, "base", Path(f"/tmp/{self.name}-cluster"))
        if not 1 <= self.nodes <= 100:
            raise ClusterUnavailable(f"nodes must be 1..100; got {self.nodes}")

    # --- names -----------------------------------------------------------------------------------------------
    @property
    def hosts(self) -> list[tuple[str, str]]:
        """(hostname, address) of the compute nodes."""
        return [(f"node{i}", f"{SUBNET}.{10 + i}") for i in range(1, self.nodes + 1)]

    def netns(self, host: str) -> str:
        return f"{self.name}-{host}"

    @property
    def conf(self) -> Path:
        return self.base / "slurm.conf"

    @property
    def controller_address(self) -> str:
        return CONTROLLER[1]

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def on(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run on ``host`` ("ctl" or "nodeN"): in its network namespace, with its hostname."""
        netns = self.netns(host)
        return ["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts", "--mount", "--propagation", "private",
                "sh", "-c", f'hostname "$0" && mount --bind /etc/netns/{netns}/hosts /etc/hosts && exec "$@"',
                host, *argv]

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run on the controller ("login") host: where sbatch, squeue and the tuner reach slurmctld."""
        return self.on(CONTROLLER[0], argv)

    def run(self, argv: list[str], timeout_s: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``argv`` on the controller host with ``$SLURM_CONF`` set; returns the finished process."""
        done = subprocess.run(self.command(argv), capture_output=True, text=True, timeout=timeout_s, env=self.env())
        if check and done.returncode != 0:
            raise ClusterUnavailable(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    # --- start -----------------------------------------------------------------------------------------------
    def up(self) -> "Cluster":
        """Start the cluster, or leave it as it is when it already runs with every node idle (idempotent).

        A half-started or broken cluster of this name is torn down first. Raises :class:`ClusterUnavailable`
        naming the step that failed.
        """
        self._check_prerequisites()
        if self.healthy():
            return self
        self.down(check=False)
        try:
            self.base.mkdir(parents=True)
            os.chmod(self.base, 0o755)
            for sub in ("log", "run", "state", "work", *(f"spool/{host}" for host, _ in self.hosts)):
                (self.base / sub).mkdir(parents=True)
            os.chmod(self.base / "work", 0o1777)
            self._make_network()
            self._start_munge()
            self._write_conf()
            self._daemon(CONTROLLER[0], ["slurmctld", "-f", str(self.conf)], "slurmctld")
            for host, _ in self.hosts:
                self._daemon(host, ["slurmd", "-N", host, "-f", str(self.conf)], f"slurmd on {host}")
            self.wait_idle()
            (self.base / "cluster.json").write_text(json.dumps(
                {"name": self.name, "nodes": self.nodes, "conf": str(self.conf), "hosts": self.hosts}))
        except BaseException:
            self.down(check=False)
            raise
        return self

    def healthy(self) -> bool:
        """True when this cluster's state file exists and sinfo shows every node idle or allocated."""
        if not (self.base / "cluster.json").exists() or not self._netns_exists(self.netns(CONTROLLER[0])):
            return False
        try:
            states = self.node_states()
        except (ClusterUnavailable, subprocess.TimeoutExpired):
            return False
        return len(states) == self.nodes and all(s.rstrip("*") in ("idle", "mixed", "allocated")
                                                 for s in states.values())

    def _check_prerequisites(self) -> None:
        missing = [tool for tool in TOOLS if _which(tool) is None]
        if missing:
            raise ClusterUnavailable(f"{', '.join(missing)} not found: apt-get install iproute2 util-linux "
                                     f"slurm-wlm munge mpich")
        if os.geteuid() != 0:
            raise ClusterUnavailable("the cluster must be started as root (network namespaces, slurmd)")
        if not Path("/etc/munge/munge.key").exists():
            raise ClusterUnavailable("/etc/munge/munge.key is missing: apt-get install munge creates it")
        probe = f"{self.name}-probe"
        done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterUnavailable(f"ip netns add is not permitted here: {done.stderr.strip()}")
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
        done = subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterUnavailable(f"unshare --uts --mount (a hostname and /etc/hosts per node) is not permitted here: "
                                     f"{done.stderr.strip()}")

    def _ip(self, *args: str, what: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterUnavailable(f"{what}: ip {' '.join(args)} failed: {done.stderr.strip()}")

    def _make_network(self) -> None:
        ctl = self.netns(CONTROLLER[0])
        hosts_file = "127.0.0.1 localhost\n" + "".join(
            f"{address} {host}\n" for host, address in [CONTROLLER, *self.hosts])
        for host, _ in [CONTROLLER, *self.hosts]:
            self._ip("netns", "add", self.netns(host), what=f"namespace of {host}")
            etc = Path("/etc/netns") / self.netns(host)
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_file)
            self._ip("-n", self.netns(host), "link", "set", "lo", "up", what=f"loopback of {host}")
        self._ip("-n", ctl, "link", "add", "br0", "type", "bridge", what="bridge")
        self._ip("-n", ctl, "addr", "add", f"{CONTROLLER[1]}/24", "dev", "br0", what="controller address")
        self._ip("-n", ctl, "link", "set", "br0", "up", what="bridge up")
        for host, address in self.hosts:
            self._ip("-n", ctl, "link", "add", f"v-{host}", "type", "veth", "peer", "name", "eth0",
                     "netns", self.netns(host), what=f"veth to {host}")
            self._ip("-n", ctl, "link", "set", f"v-{host}", "master", "br0", "up", what=f"bridge port of {host}")
            self._ip("-n", self.netns(host), "addr", "add", f"{address}/24", "dev", "eth0", what=f"address of {host}")
            self._ip("-n", self.netns(host), "link", "set", "eth0", "up", what=f"link of {host}")

    def _start_munge(self) -> None:
        munge_dir = self.base / "munge"
        munge_dir.mkdir()
        user = pwd.getpwnam("munge")
        os.chown(munge_dir, user.pw_uid, user.pw_gid)
        self._checked(["runuser", "-u", "munge", "--", _which("munged"), f"--socket={munge_dir}/munge.sock",
                       f"--pid-file={munge_dir}/munged.pid", f"--log-file={munge_dir}/munged.log",
                       f"--seed-file={munge_dir}/munge.seed", "--key-file=/etc/munge/munge.key"], "munged")

    def _daemon(self, host: str, argv: list[str], what: str) -> None:
        argv = [_which(argv[0]), *argv[1:]]
        self._checked(self.on(host, argv), what)

    def _checked(self, command: list[str], what: str) -> None:
        """Run a daemon's start ``command``, in a clean environment (a daemon keeps nothing of its caller's)."""
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "SLURM_CONF": str(self.conf)}
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        if done.returncode != 0:
            raise ClusterUnavailable(f"{what} failed ({done.returncode}): {done.stderr.strip()}{self.logs()}")

    def _write_conf(self) -> None:
        b = self.base
        nodes = "".join(f"NodeName={host} NodeAddr={address} NodeHostname={host} CPUs={CPUS_PER_NODE} "
                        f"State=UNKNOWN\n" for host, address in self.hosts)
        self.conf.write_text(f"""\
ClusterName={self.name}
SlurmctldHost={CONTROLLER[0]}({CONTROLLER[1]})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={b}/munge/munge.sock,cred_expire=30
CredType=cred/munge
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool/%n
SlurmctldPidFile={b}/run/slurmctld.pid
SlurmdPidFile={b}/run/slurmd-%n.pid
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=20
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
{nodes}PartitionName={PARTITION} Nodes=node[1-{self.nodes}] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")

    def node_states(self) -> dict[str, str]:
        """node name -> Slurm state (``idle``, ``alloc``, ``down*``...), from sinfo on the controller host."""
        done = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout_s=20)
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def wait_idle(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            try:
                states = self.node_states()
            except ClusterUnavailable:
                states = {}
            if len(states) == self.nodes and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        raise ClusterUnavailable(f"the nodes did not become idle within {timeout_s:g} s (states {states}){self.logs()}")

    def logs(self, lines: int = 15) -> str:
        tails = []
        for log in sorted(self.base.glob("log/*.log")) + sorted(self.base.glob("munge/*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"\n--- {log.name}:\n" + "\n".join(text))
        return "".join(tails)

    # --- faults ----------------------------------------------------------------------------------------------
    def crash_node(self, host: str) -> list[int]:
        """Kill (SIGKILL) every process in ``host``'s namespace: its slurmd, the job steps and ranks it runs, as
        a node that crashed; returns their pids. :meth:`start_node` brings it back."""
        done = subprocess.run(["ip", "netns", "pids", self.netns(host)], capture_output=True, text=True, check=True)
        pids = [int(p) for p in done.stdout.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def cut_link(self, host: str) -> None:
        """Take ``host``'s link to the bridge down (its processes keep running, unreachable), as a failed switch
        port or cable; :meth:`restore_link` brings it back."""
        self._ip("-n", self.netns(CONTROLLER[0]), "link", "set", f"v-{host}", "down", what=f"cut the link of {host}")

    def restore_link(self, host: str) -> None:
        self._ip("-n", self.netns(CONTROLLER[0]), "link", "set", f"v-{host}", "up", what=f"restore the link of {host}")

    def job_processes(self) -> dict[str, list[tuple[int, str]]]:
        """host -> (pid, command line) of the processes in each compute node's namespace other than its slurmd:
        the jobs' (slurmstepd, batch scripts, Parsl's workers, hydra's proxies, ranks); empty lists when idle."""
        found: dict[str, list[tuple[int, str]]] = {}
        for host, _ in self.hosts:
            done = subprocess.run(["ip", "netns", "pids", self.netns(host)], capture_output=True, text=True)
            found[host] = []
            for pid in map(int, done.stdout.split()):
                try:
                    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if words[0] and Path(words[0].decode(errors="replace")).name != "slurmd":
                    found[host].append((pid, b" ".join(words).decode(errors="replace")[:200]))
        return found

    def start_node(self, host: str) -> None:
        """Start ``host``'s slurmd again (after :meth:`crash_node`): the node registers and returns to service."""
        self._daemon(host, ["slurmd", "-N", host, "-f", str(self.conf)], f"slurmd on {host}")

    # --- stop ------------------------------------------------------------------------------------------------
    def _netns_exists(self, netns: str) -> bool:
        return Path("/run/netns", netns).exists()

    def namespaces(self) -> list[str]:
        """This cluster's network namespaces that exist now."""
        return [self.netns(h) for h, _ in [CONTROLLER, *self.hosts] if self._netns_exists(self.netns(h))]

    def pids(self) -> set[int]:
        """Processes of this cluster: those in its namespaces, and its daemons named by its directory in their
        command line (munged runs in the root namespace)."""
        found: set[int] = set()
        for netns in self.namespaces():
            done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
            found.update(int(p) for p in done.stdout.split())
        needle = str(self.base).encode()
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    words = (proc / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if Path(words[0].decode(errors="replace")).name in DAEMONS and any(needle in w for w in words):
                    found.add(int(proc.name))
        found.discard(os.getpid())
        return found

    def down(self, check: bool = True, timeout_s: float = 20) -> None:
        """Cancel every job, kill every process of the cluster (TERM, KILL after 5 s), delete the namespaces,
        the hosts files and the directory; with ``check``, raise :class:`ClusterUnavailable` listing anything
        left (a process, a namespace)."""
        if self._netns_exists(self.netns(CONTROLLER[0])) and self.conf.exists():
            try:
                self.run(["scancel", "--full", "--user", "root"], timeout_s=10, check=False)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + timeout_s
        sig = signal.SIGTERM
        kill_at = time.monotonic() + 5
        while (pids := self.pids()) and time.monotonic() < deadline:
            if time.monotonic() > kill_at:
                sig = signal.SIGKILL
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
        for netns in self.namespaces():
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / netns, ignore_errors=True)
        for host, _ in [CONTROLLER, *self.hosts]:
            shutil.rmtree(Path("/etc/netns") / self.netns(host), ignore_errors=True)
        left = self.leftovers()
        if not left:
            shutil.rmtree(self.base, ignore_errors=True)
        if check and left:
            raise ClusterUnavailable(f"cluster {self.name!r} not fully stopped: {left}")

    def leftovers(self) -> dict[str, list]:
        """What of this cluster still exists: processes (pid, command line) and namespaces; empty when none."""
        left: dict[str, list] = {}
        processes = []
        for pid in sorted(self.pids()):
            try:
                processes.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]))
            except OSError:
                continue
        if processes:
            left["processes"] = processes
        if self.namespaces():
            left["namespaces"] = self.namespaces()
        return left


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tests/support/cluster.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status", "run"))
    parser.add_argument("--name", default=os.environ.get("IOBO_CLUSTER", "iobo"), help="(default: %(default)s)")
    parser.add_argument("--nodes", type=int, default=3, help="compute nodes (default: %(default)s)")
    own, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(own)
    if (args.action == "run") != bool(command):
        parser.error("run takes a command after --; the other actions none")
    cluster = Cluster(args.name, args.nodes)
    try:
        if args.action == "up":
            cluster.up()
            print(f"cluster {cluster.name!r} up: {cluster.node_states()}; files in {cluster.base}, "
                  f"shared work directory {cluster.base / 'work'}\n"
                  f"run commands on its login host: python tests/support/cluster.py run -- sinfo\n"
                  f"  (that is: SLURM_CONF={cluster.conf} {' '.join(cluster.command(['sinfo']))})")
        elif args.action == "down":
            cluster.down()
            print(f"cluster {cluster.name!r} down: no process, namespace or file left")
        elif args.action == "status":
            print("up" if cluster.healthy() else "down", cluster.leftovers() or "")
        else:
            os.execvpe("nsenter", cluster.command(command), cluster.env())
    except ClusterUnavailable as exc:
        print(f"cluster {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
