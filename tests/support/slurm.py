"""A one-node Slurm cluster for tests: Debian's ``slurm-wlm`` and ``munge``, configured in a temp dir.

``munged`` (as the ``munge`` user, its socket in the temp dir), ``slurmctld``
and ``slurmd`` (as root) on free loopback ports; one partition, ``debug``,
holding this host with 2 CPUs. No cgroups (``proctrack/linuxproc``,
``task/none``) and no accounting database, so it runs in a container without
systemd. Commands (``sbatch``, ``squeue``, ``scancel``, Parsl's
``SlurmProvider``) find it through ``$SLURM_CONF``: :meth:`SlurmCluster.env`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PARTITION = "debug"
CPUS = 2


class SlurmUnavailable(Exception):
    """The cluster cannot start here; the message says which step failed and its output."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SlurmCluster:
    base: Path
    conf: Path

    @classmethod
    def start(cls) -> "SlurmCluster":
        for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel"):
            if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
                raise SlurmUnavailable(f"{tool} not found: apt-get install slurm-wlm munge")
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd must run as root to start jobs; the tests run as another user")
        base = Path(tempfile.mkdtemp(prefix="iobo-slurm-"))
        os.chmod(base, 0o755)
        cluster = cls(base, base / "slurm.conf")
        try:
            cluster._start_munge()
            cluster._write_conf()
            for daemon in ("slurmctld", "slurmd"):
                cluster._run([f"/usr/sbin/{daemon}", "-f", str(cluster.conf)], daemon)
            cluster._wait_idle()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _run(self, command: list[str], what: str, user: str | None = None) -> str:
        if user:
            command = ["runuser", "-u", user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=self.env())
        if done.returncode != 0:
            raise SlurmUnavailable(f"{what} failed ({done.returncode}): {done.stderr.strip()} {self._logs()}")
        return done.stdout

    def _logs(self) -> str:
        tails = []
        for log in sorted(self.base.glob("*.log")):
            tails.append(f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "".join(tails)

    def _start_munge(self) -> None:
        munge_dir = self.base / "munge"
        munge_dir.mkdir()
        user = pwd.getpwnam("munge")
        os.chown(munge_dir, user.pw_uid, user.pw_gid)
        self._run(["/usr/sbin/munged", f"--socket={munge_dir}/munge.sock", f"--pid-file={munge_dir}/munged.pid",
                   f"--log-file={munge_dir}/munged.log", f"--seed-file={munge_dir}/munge.seed",
                   "--key-file=/etc/munge/munge.key"], "munged", user="munge")

    def _write_conf(self) -> None:
        host = socket.gethostname()
        (self.base / "state").mkdir()
        (self.base / "spool").mkdir()
        b = self.base
        self.conf.write_text(f"""\
ClusterName=iobotest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={b}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd.pid
SlurmctldLogFile={b}/slurmctld.log
SlurmdLogFile={b}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={CPUS} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")

    def _wait_idle(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=self.env())
            state = done.stdout.strip()
            if done.returncode == 0 and state == "idle":
                return
            time.sleep(0.5)
        raise SlurmUnavailable(f"the node did not become idle within {timeout_s:g} s (state {state!r}) {self._logs()}")

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def squeue(self) -> list[tuple[str, str]]:
        """(job id, state) of the jobs Slurm still knows, finished ones included (MinJobAge)."""
        done = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T"], capture_output=True, text=True,
                              env=self.env(), check=True)
        return [tuple(line.split()) for line in done.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "--user", "root"], env=self.env(), capture_output=True)
        for pid_file in (self.base / "slurmd.pid", self.base / "slurmctld.pid", self.base / "munge" / "munged.pid"):
            try:
                os.kill(int(pid_file.read_text().strip()), 15)
            except (OSError, ValueError):
                continue
        time.sleep(1)
        shutil.rmtree(self.base, ignore_errors=True)
