"""train.launch across "machines" on localhost: node options, the numbering a cluster already
set (torchrun's variables, SLURM's), and workers that die with a launcher killed by SIGKILL."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

from train.launch import cluster_env, free_port
from train.tests.test_launch_term import start_sleepers, wait_gone

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One worker: joins the group the environment describes and sums the ranks over it.
GROUP_WORKER = '''
import json, os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
with open(os.path.join(sys.argv[1], "rank%d.json" % dist.get_rank()), "w") as f:
    json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(), "local_rank": int(os.environ["LOCAL_RANK"]),
               "sum": t.item()}, f)
dist.barrier()
'''

def clean_env(d: str) -> dict:
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("SLURM_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + d
    env["XDG_CACHE_HOME"] = d  # the torchrun probe's answer stays in the test's directory
    return env


class ClusterEnvTest(unittest.TestCase):
    def test_what_the_environment_says(self):
        self.assertEqual(cluster_env({}), {})
        self.assertEqual(cluster_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}),
                         {"worker": {"rank": 3, "world_size": 4, "local_rank": 1}})
        # SLURM, 2 nodes x 4 tasks: every task is a worker
        self.assertEqual(cluster_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_NNODES": "2", "SLURM_LOCALID": "1"}),
                         {"worker": {"rank": 5, "world_size": 8, "local_rank": 1}})
        # SLURM, one task per node: the launcher spawns its --nproc on each
        self.assertEqual(cluster_env({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_NNODES": "2", "SLURM_NODEID": "1"}),
                         {"nnodes": 2, "node_rank": 1})
        self.assertEqual(cluster_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_NNODES": "1"}), {})


class LaunchNodesTest(unittest.TestCase):
    def run_group(self, d: str, launches) -> list:
        """Starts one launcher per (argv, env) and returns each worker's report, by rank."""
        with open(os.path.join(d, "group.py"), "w") as f:
            f.write(GROUP_WORKER)
        procs = [subprocess.Popen([sys.executable, "-m", "train.launch", "--launcher", "spawn"] + argv + ["-m", "group", d],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for argv, env in launches]
        try:
            for p in procs:
                _, err = p.communicate(timeout=300)
                self.assertEqual(p.returncode, 0, err.decode()[-2000:])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        out = []
        for name in sorted(os.listdir(d)):
            if name.startswith("rank") and name.endswith(".json"):
                with open(os.path.join(d, name)) as f:
                    out.append(json.load(f))
        return sorted(out, key=lambda r: r["rank"])

    def test_two_nodes_of_two_processes(self):
        with tempfile.TemporaryDirectory() as d:
            port = free_port()
            common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), "--nproc", "2"]
            got = self.run_group(d, [(common + ["--node-rank", str(n)], clean_env(d)) for n in (0, 1)])
            self.assertEqual([r["rank"] for r in got], [0, 1, 2, 3], "the nodes formed one group of 4")
            self.assertEqual({r["world"] for r in got}, {4})
            self.assertEqual({r["sum"] for r in got}, {6.0})
            self.assertEqual([r["local_rank"] for r in got], [0, 1, 0, 1])

    def test_numbering_from_torchrun_variables(self):
        with tempfile.TemporaryDirectory() as d:
            port = str(free_port())
            launches = [([], dict(clean_env(d), RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                                  MASTER_PORT=port)) for r in (0, 1)]
            got = self.run_group(d, launches)
            self.assertEqual([(r["rank"], r["world"], r["sum"]) for r in got], [(0, 2, 1.0), (1, 2, 1.0)])

    def test_numbering_from_slurm(self):
        with tempfile.TemporaryDirectory() as d:
            port = str(free_port())
            launches = [([], dict(clean_env(d), SLURM_PROCID=str(r), SLURM_NTASKS="2", SLURM_NNODES="1", SLURM_LOCALID=str(r),
                                  MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for r in (0, 1)]
            got = self.run_group(d, launches)
            self.assertEqual([(r["rank"], r["world"], r["local_rank"]) for r in got], [(0, 2, 0), (1, 2, 1)])

    def test_two_nodes_need_the_master(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, "-m", "train.launch", "--nnodes", "2", "--node-rank", "1", "--nproc", "1",
                                "-m", "group", d], cwd=ROOT, env=clean_env(d), capture_output=True, timeout=120)
            self.assertEqual(r.returncode, 2)
            self.assertIn(b"--master-addr", r.stderr)

    def test_workers_die_with_a_killed_launcher(self):
        with tempfile.TemporaryDirectory() as d:
            p, pids = start_sleepers(d, clean_env(d), stderr=subprocess.DEVNULL)
            try:
                self.assertEqual(len(pids), 2, "workers did not start")
                p.send_signal(signal.SIGKILL)
                p.wait(30)
                left = wait_gone(pids)
                for x in left:
                    os.kill(x, signal.SIGKILL)
                self.assertFalse(left, "workers outlived a launcher killed by SIGKILL")
            finally:
                if p.poll() is None:
                    p.kill()
                p.wait()

if __name__ == "__main__":
    unittest.main()
