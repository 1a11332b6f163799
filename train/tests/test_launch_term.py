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


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class LaunchTermTest(unittest.TestCase):
    def test_sigterm_stops_workers(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sleeper.py"), "w") as f:
                f.write(WORKER)
            env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + d)
            p = subprocess.Popen([sys.executable, "-m", "train.launch", "--nproc", "2", "--launcher", "spawn",
                                  "-m", "sleeper", d], cwd=ROOT, env=env, stderr=subprocess.PIPE)
            try:
                pids = []
                deadline = time.time() + 120
                while time.time() < deadline and len(pids) < 2:
                    pids = [int(open(os.path.join(d, n)).read() or 0) for n in os.listdir(d) if n.endswith(".pid")]
                    pids = [x for x in pids if x]
                    time.sleep(0.2)
                self.assertEqual(len(pids), 2, "workers did not start")
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(60), 128 + signal.SIGTERM)
                deadline = time.time() + 20
                while time.time() < deadline and any(alive(x) for x in pids):
                    time.sleep(0.1)
                self.assertFalse([x for x in pids if alive(x)], "workers outlived the launcher")
                self.assertIn(b"train.launch: terminated", p.stderr.read())
            finally:
                if p.poll() is None:
                    p.kill()
                p.wait()


if __name__ == "__main__":
    unittest.main()
