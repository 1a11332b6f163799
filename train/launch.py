"""Launch a training module on N local processes.

    python3 -m train.launch --nproc 2 -m train.sensevoice.train --train ... --out ...

Uses ``torchrun`` (``python3 -m torch.distributed.run``) when it works, and
otherwise (Debian's torch 1.13 on Python 3.11, whose torchrun crashes before
starting workers) spawns the workers with ``torch.multiprocessing``, setting
RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun would.
``--launcher spawn|torchrun`` forces one.  Multi-node jobs: run torchrun on
every node directly (see train/README.md).
"""
from __future__ import annotations

import argparse
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
    """torchrun of torch 1.13 fails on Python 3.11 before any worker starts; probe it."""
    try:
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
                            "--no_python", "true"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


# The thread pools of the math libraries torch may load.  They must be sized in the environment
# the workers start with: a spawned worker loads torch (and with it OpenBLAS, which sizes its
# pool once, to every core) before _worker runs.  Left at every core, Debian's OpenBLAS kept a
# second thread per worker busy beside torch's own: 2 workers ran 25 % slower on 2 cores.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PARLEY_TORCH_THREADS")


def thread_env(env: dict, threads: int) -> dict:
    for k in THREAD_VARS:
        env.setdefault(k, str(threads))
    return env


def _worker(local_rank: int, nproc: int, port: int, module: str, args: List[str], threads: int) -> None:
    os.environ.update({"RANK": str(local_rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(nproc),
                       "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    thread_env(os.environ, threads)
    sys.argv = [module] + list(args)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise RuntimeError(f"rank {local_rank}: {module} exited with status {e.code}") from None
    from train import dist as pdist

    pdist.exit_worker()  # the work is done and saved; skip gloo's teardown at exit


class _Terminated(Exception):
    pass


def _terminate(signum, frame):
    raise _Terminated()


def spawn(nproc: int, module: str, args: List[str], threads: int = 1) -> int:
    import torch.multiprocessing as mp

    port = int(os.environ.get("MASTER_PORT") or free_port())
    thread_env(os.environ, threads)  # inherited by the spawned workers before they import torch
    # SIGTERM to the launcher alone (Parley's job runner dying: its death signal reaches only
    # its child) stops the workers too instead of orphaning them.
    old = signal.signal(signal.SIGTERM, _terminate)
    ctx = None
    try:
        ctx = mp.start_processes(_worker, args=(nproc, port, module, args, threads), nprocs=nproc, join=False,
                                 start_method="spawn")
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


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=1, help="processes on this machine (GPUs, or CPU workers)")
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
    use = a.launcher
    if use == "auto":
        use = "torchrun" if torchrun_works() else "spawn"
        print(f"train.launch: using {use}", file=sys.stderr)
    if use == "torchrun":
        env = thread_env(dict(os.environ), a.threads)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(a.nproc),
               "-m", a.module] + args
        return subprocess.call(cmd, env=env)
    return spawn(a.nproc, a.module, args, a.threads)


if __name__ == "__main__":
    sys.exit(main())
