"""Launch a training module on N processes per machine, on one machine or several.

    python3 -m train.launch --nproc 2 -m train.sensevoice.train --train ... --out ...
    # two machines, 8 processes each: run on each with its --node-rank
    python3 -m train.launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 \
        --nproc 8 -m train.sensevoice.train ...

Uses ``torchrun`` (``python3 -m torch.distributed.run``) when it works, and
otherwise (Debian's torch 1.13 on Python 3.11, whose torchrun crashes before
starting workers) spawns the workers with ``torch.multiprocessing``, setting
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun would
(global rank = node rank x nproc + local rank).  ``--launcher spawn|torchrun``
forces one.  Where a cluster already started one process per worker (torchrun's
RANK/WORLD_SIZE, or SLURM's SLURM_PROCID/SLURM_NTASKS with several tasks per
node), the launcher runs that one worker with the cluster's numbering; with one
SLURM task per node it takes the node count and rank from SLURM.  Spawned
workers die with the launcher, however it ends.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
from typing import List, Optional


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_works() -> bool:
    """torchrun of torch 1.13 fails on Python 3.11 before any worker starts; probe it (about 8 s),
    once per interpreter and torch installation: the answer is kept in the user's cache."""
    key = _probe_key()
    path = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "parley",
                        "torchrun-probe.json")
    try:
        with open(path, encoding="utf-8") as f:
            cached = json.load(f)
        if key and cached.get("key") == key:
            return bool(cached["works"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    try:
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
                            "--no_python", "true"], capture_output=True, timeout=120)
        works = r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    if key:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({"key": key, "works": works}, f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass
    return works


def _probe_key() -> str:
    """The interpreter and the torch installation the probe ran with (torch located without
    importing it: that alone takes seconds)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    try:
        st = os.stat(spec.origin)
    except OSError:
        return ""
    return f"{sys.executable}|{sys.version}|{spec.origin}|{st.st_mtime_ns}|{st.st_size}"


# The thread pools of the math libraries torch may load.  They must be sized in the environment
# the workers start with: a spawned worker loads torch (and with it OpenBLAS, which sizes its
# pool once, to every core) before _worker runs.  Left at every core, Debian's OpenBLAS kept a
# second thread per worker busy beside torch's own: 2 workers ran 25 % slower on 2 cores.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PARLEY_TORCH_THREADS")


def thread_env(env: dict, threads: int) -> dict:
    for k in THREAD_VARS:
        env.setdefault(k, str(threads))
    return env


# one machine: the default job
LOCAL_NODE = {"nnodes": 1, "node_rank": 0, "master_addr": "127.0.0.1", "master_port": 0}

PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Linux: the kernel kills this worker when the launcher dies, even by SIGKILL (before,
    workers of a killed launcher trained on and wrote checkpoints)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before prctl took effect
        os._exit(1)


def _worker(local_rank: int, nproc: int, port: int, module: str, args: List[str], threads: int,
            launcher: int = 0, node: Optional[dict] = None) -> None:
    if launcher:
        _die_with(launcher)
    node = node or LOCAL_NODE
    os.environ.update({"RANK": str(node["node_rank"] * nproc + local_rank), "LOCAL_RANK": str(local_rank),
                       "WORLD_SIZE": str(node["nnodes"] * nproc), "LOCAL_WORLD_SIZE": str(nproc),
                       "GROUP_RANK": str(node["node_rank"]), "MASTER_ADDR": node["master_addr"],
                       "MASTER_PORT": str(port)})
    _run(module, args, threads, local_rank)


def _run(module: str, args: List[str], threads: int, rank) -> None:
    thread_env(os.environ, threads)
    sys.argv = [module] + list(args)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise RuntimeError(f"rank {rank}: {module} exited with status {e.code}") from None
    from train import dist as pdist

    pdist.exit_worker()  # the work is done and saved; skip gloo's teardown at exit


class _Terminated(Exception):
    pass


def _terminate(signum, frame):
    raise _Terminated()


def spawn(nproc: int, module: str, args: List[str], threads: int = 1, node: Optional[dict] = None) -> int:
    import torch.multiprocessing as mp

    node = node or LOCAL_NODE
    port = int(node.get("master_port") or os.environ.get("MASTER_PORT") or free_port())
    thread_env(os.environ, threads)  # inherited by the spawned workers before they import torch
    # SIGTERM to the launcher alone (Parley's job runner dying: its death signal reaches only
    # its child) stops the workers too instead of orphaning them.
    old = signal.signal(signal.SIGTERM, _terminate)
    ctx = None
    try:
        ctx = mp.start_processes(_worker, args=(nproc, port, module, args, threads, os.getpid(), node), nprocs=nproc,
                                 join=False, start_method="spawn")
        while not ctx.join():
            pass
    except _Terminated:
        for p in ctx.processes if ctx else []:
            if p.is_alive():
                p.terminate()
        for p in ctx.processes if ctx else []:
            p.join(10)
        print("train.launch: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except mp.ProcessRaisedException as e:
        print(f"train.launch: a worker failed:\n{e}", file=sys.stderr)
        return 1
    except mp.ProcessExitedException as e:
        print(f"train.launch: a worker died: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old)
    return 0


def cluster_env(env: dict) -> dict:
    """What the environment says about this process's place in a job: {} when nothing.

    -> {"worker": {"rank", "world_size", "local_rank"}} when a cluster started this process as
    one worker (torchrun's variables, or SLURM with several tasks per node), or
    {"nnodes", "node_rank"} with one SLURM task per node."""
    if env.get("RANK") and env.get("WORLD_SIZE") and env.get("LOCAL_RANK"):
        return {"worker": {"rank": int(env["RANK"]), "world_size": int(env["WORLD_SIZE"]),
                           "local_rank": int(env["LOCAL_RANK"])}}
    if env.get("SLURM_PROCID") and env.get("SLURM_NTASKS"):
        tasks, nodes = int(env["SLURM_NTASKS"]), int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 1)
        if tasks > nodes:
            return {"worker": {"rank": int(env["SLURM_PROCID"]), "world_size": tasks,
                               "local_rank": int(env.get("SLURM_LOCALID") or 0)}}
        if nodes > 1:
            return {"nnodes": nodes, "node_rank": int(env.get("SLURM_NODEID") or env["SLURM_PROCID"])}
    return {}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=1, help="processes on this machine (GPUs, or CPU workers)")
    ap.add_argument("--nnodes", type=int, default=0, help="machines in the job (default: SLURM's, or 1)")
    ap.add_argument("--node-rank", type=int, default=-1, help="this machine's place, 0..nnodes-1 (default: SLURM's, or 0)")
    ap.add_argument("--master-addr", default="", help="address of node 0 (default: $MASTER_ADDR, or 127.0.0.1 on one node)")
    ap.add_argument("--master-port", type=int, default=0, help="a free port on node 0, the same on every node "
                    "(default: $MASTER_PORT, or a free one on one node)")
    ap.add_argument("--launcher", choices=["auto", "torchrun", "spawn"], default="auto")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per CPU worker")
    ap.add_argument("-m", dest="module", required=True, help="module to run, e.g. train.sensevoice.train; "
                    "everything after the module name is passed to it")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-m" in argv:  # split: launcher flags | -m MODULE | module args
        i = argv.index("-m")
        argv, args = argv[: i + 2], argv[i + 2:]
    else:
        args = []
    a = ap.parse_args(argv)
    if a.nproc < 1:
        ap.error("--nproc must be >= 1")
    cl = cluster_env(os.environ)
    if "worker" in cl and a.nnodes <= 1 and a.node_rank < 0:
        w = cl["worker"]
        if not os.environ.get("MASTER_ADDR") or not os.environ.get("MASTER_PORT"):
            ap.error(f"this process is worker {w['rank']} of {w['world_size']} (from the environment), "
                     "but MASTER_ADDR and MASTER_PORT are not set: set them to node 0's address and a free port")
        if a.nproc != 1:
            print(f"train.launch: the environment started this process as worker {w['rank']} of {w['world_size']}: "
                  f"running it alone (--nproc {a.nproc} ignored)", file=sys.stderr)
        os.environ.update({"RANK": str(w["rank"]), "WORLD_SIZE": str(w["world_size"]),
                           "LOCAL_RANK": str(w["local_rank"])})
        _run(a.module, args, a.threads, w["rank"])
        return 0
    nnodes = a.nnodes or cl.get("nnodes", 1)
    node_rank = a.node_rank if a.node_rank >= 0 else cl.get("node_rank", 0)
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        ap.error(f"--node-rank {node_rank} is not in 0..{nnodes - 1}")
    addr = a.master_addr or os.environ.get("MASTER_ADDR", "")
    port = a.master_port or int(os.environ.get("MASTER_PORT") or 0)
    if nnodes > 1 and (not addr or not port):
        ap.error(f"{nnodes} nodes need node 0's address and port on every node: --master-addr and --master-port "
                 "(or MASTER_ADDR and MASTER_PORT)")
    node = {"nnodes": nnodes, "node_rank": node_rank, "master_addr": addr or "127.0.0.1", "master_port": port}
    use = a.launcher
    if use == "auto":
        use = "torchrun" if torchrun_works() else "spawn"
        print(f"train.launch: using {use}", file=sys.stderr)
    if use == "torchrun":
        env = thread_env(dict(os.environ), a.threads)
        if nnodes == 1:
            where = ["--standalone"]
        else:
            where = ["--nnodes", str(nnodes), "--node_rank", str(node_rank), "--master_addr", node["master_addr"],
                     "--master_port", str(port)]
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):  # torchrun numbers its own workers
            env.pop(k, None)
        cmd = [sys.executable, "-m", "torch.distributed.run"] + where + ["--nproc_per_node", str(a.nproc),
                                                                          "-m", a.module] + args
        return subprocess.call(cmd, env=env)
    return spawn(a.nproc, a.module, args, a.threads, node)


if __name__ == "__main__":
    sys.exit(main())
