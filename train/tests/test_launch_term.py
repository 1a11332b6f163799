"""SIGTERM to train.launch alone (what Parley's job runner dying sends: the kernel's death
signal reaches only its direct child) stops the spawned workers too."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = '''
import os, sys, time
with open(os.path.join(sys.argv[1], "rank%s.pid" % os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
time.sleep(600)
'''


def start_sleepers(d: str, env: dict, **popen) -> "tuple[subprocess.Popen, list]":
    """Launches 2 spawned WORKERs writing their pids into d; -> the launcher and the pids."""
    with open(os.path.join(d, "sleeper.py"), "w") as f:
        f.write(WORKER)
    p = subprocess.Popen([sys.executable, "-m", "train.launch", "--nproc", "2", "--launcher", "spawn",
                          "-m", "sleeper", d], cwd=ROOT, env=env, **popen)
    pids = []
    deadline = time.time() + 120
    while time.time() < deadline and len(pids) < 2:
        pids = []
        for n in os.listdir(d):
            if n.endswith(".pid"):
                with open(os.path.join(d, n)) as f:
                    pids.append(int(f.read() or 0))
        pids = [x for x in pids if x]
        time.sleep(0.2)
    return p, pids


def wait_gone(pids: list, seconds: float = 20) -> list:
    """Waits for the processes to end; -> those still alive."""
    deadline = time.time() + seconds
    while time.time() < deadline and any(alive(x) for x in pids):
        time.sleep(0.1)
    return [x for x in pids if alive(x)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class LaunchTermTest(unittest.TestCase):
    def test_sigterm_stops_workers(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + d)
            p, pids = start_sleepers(d, env, stderr=subprocess.PIPE)
            try:
                self.assertEqual(len(pids), 2, "workers did not start")
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(60), 128 + signal.SIGTERM)
                self.assertFalse(wait_gone(pids), "workers outlived the launcher")
                self.assertIn(b"train.launch: terminated", p.stderr.read())
            finally:
                if p.poll() is None:
                    p.kill()
                p.wait()


if __name__ == "__main__":
    unittest.main()


ENV_WORKER = '''
import json, os, sys
import torch
with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                              "PARLEY_TORCH_THREADS")}, f)
'''


class LaunchThreadsTest(unittest.TestCase):
    def test_workers_start_with_their_thread_pools_sized(self):
        """The math libraries' pools are sized from the environment a worker starts with (OpenBLAS
        sizes its pool when torch loads it, before the worker's own code runs)."""
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "envdump.py"), "w") as f:
                f.write(ENV_WORKER)
            env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "PARLEY_TORCH_THREADS"}
            env["PYTHONPATH"] = ROOT + os.pathsep + d
            r = subprocess.run([sys.executable, "-m", "train.launch", "--nproc", "2", "--launcher", "spawn", "--threads", "1",
                                "-m", "envdump", d], env=env, capture_output=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            import json

            for rank in (0, 1):
                with open(os.path.join(d, f"rank{rank}.json")) as f:
                    self.assertEqual(json.load(f), {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                                    "MKL_NUM_THREADS": "1", "PARLEY_TORCH_THREADS": "1"})
