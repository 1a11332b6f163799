"""2-process gloo tests: DDP == 1 process on the combined batch (also with unequal
batch sizes), ZeRO-1 == DDP Adam with ~1/N optimizer state per rank, uneven inputs
(zero-weight padding keeps the ranks in lock-step), exact resume."""
from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import time
import unittest

import torch
import torch.multiprocessing as mp

from train import dist as pdist
from train.launch import free_port
from train.tests import dist_worker
from train.tests.toy import ToyTask, toy_model
from train.trainer import TrainConfig, Trainer

WORLD = 2
TIMEOUT_S = 240


def spawn_scenarios(out_dir: str) -> None:
    ctx = mp.start_processes(dist_worker.scenarios, args=(WORLD, free_port(), out_dir), nprocs=WORLD,
                             join=False, start_method="spawn")
    deadline = time.time() + TIMEOUT_S
    while not ctx.join(timeout=5):
        if time.time() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise AssertionError(f"distributed scenarios did not finish in {TIMEOUT_S}s (hang?)")


class DistributedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.dir = tempfile.mkdtemp(prefix="parley-dist-")
        # 1 process stops mid-epoch; the 2 ranks of the scenarios resume it (1 -> 2)
        cls.w1to2_before, _ = dist_worker.world_change_run(os.path.join(cls.dir, "w1to2"), pdist.DistInfo(), stop_at=6)
        cls.w1to2_before_seen = {str(k): v for k, v in cls.w1to2_before.task.seen.items()}
        spawn_scenarios(cls.dir)
        # the 2 ranks stopped mid-epoch; 1 process resumes them (2 -> 1)
        cls.w2to1_after, cls.w2to1_after_seen = dist_worker.world_change_run(os.path.join(cls.dir, "w2to1"),
                                                                            pdist.DistInfo(), resume="auto")
        cls.res = []
        for r in range(WORLD):
            with open(os.path.join(cls.dir, f"res-{r}.json")) as f:
                cls.res.append(json.load(f))
        # one process, one batch holding both ranks' samples
        cfg = TrainConfig(out_dir=os.path.join(cls.dir, "single"), max_epochs=1, max_steps=5, lr=1e-2,
                          optim="adam", log_interval=1, seed=3, device="cpu")
        tr = Trainer(cfg, toy_model(), ToyTask(world_for_split=WORLD), pdist.DistInfo(), out=io.StringIO())
        tr.fit()
        cls.single = dist_worker.params(tr.model)
        cfg.out_dir = os.path.join(cls.dir, "single-sizes")
        cfg.max_steps = 4
        tr = Trainer(cfg, toy_model(), ToyTask(world_for_split=WORLD, sizes=[1, 12]), pdist.DistInfo(),
                     out=io.StringIO())
        tr.fit()
        cls.single_sizes = dist_worker.params(tr.model)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def load(self, name, rank):
        return torch.load(os.path.join(self.dir, f"{name}-{rank}.pt"))

    def test_ddp_matches_single_process(self):
        for r in range(WORLD):
            d = float((self.load("ddp", r) - self.single).abs().max())
            self.assertLessEqual(d, 1e-5, f"rank {r}: DDP vs 1 process max abs diff {d}")
        moved = float((self.single - dist_worker.params(toy_model())).abs().max())
        self.assertGreater(moved, 1e-3, "parameters did not change: the comparison is vacuous")

    def test_zero_matches_ddp(self):
        for r in range(WORLD):
            d = float((self.load("zero", r) - self.load("ddp", r)).abs().max())
            self.assertLessEqual(d, 1e-5, f"rank {r}: ZeRO-1 vs DDP Adam max abs diff {d}")
            self.assertTrue(self.res[r]["zero_is_zero"])

    def test_zero_shards_optimizer_state(self):
        n_params = sum(p.numel() for p in toy_model().parameters())
        full = 2 * n_params  # Adam: exp_avg + exp_avg_sq
        local = [r["zero_state_numel"] for r in self.res]
        self.assertEqual(sum(local), full, f"state per rank {local} does not add up to {full}")
        for r, n in enumerate(local):
            self.assertLess(abs(n / full - 1 / WORLD), 0.2, f"rank {r} holds {n}/{full} of the optimizer state")

    def test_uneven_inputs_pad_in_lock_step(self):
        # rank 0: 8 batches + 3 zero-weight pads, rank 1: 8 + 3 real; both take 11 steps
        self.assertEqual([r["uneven_steps"] for r in self.res], [11, 11])
        d = float((self.load("uneven", 0) - self.load("uneven", 1)).abs().max())
        self.assertEqual(d, 0.0, f"ranks differ by {d} after an uneven epoch")

    def test_uneven_then_even_epoch_keeps_ranks_identical(self):
        steps = [r["uneven_even_steps"] for r in self.res]
        self.assertEqual(steps, [19, 19])
        self.assertEqual(self.res[0]["uneven_even_lr"], self.res[1]["uneven_even_lr"])
        d = float((self.load("uneven2", 0) - self.load("uneven2", 1)).abs().max())
        self.assertEqual(d, 0.0, f"ranks drifted apart by {d} after an uneven then an even epoch")

    def test_max_steps_in_uneven_epoch_stops_every_rank(self):
        self.assertEqual([r["uneven_max_steps"] for r in self.res], [10, 10])

    def test_unequal_batches_weigh_every_sample_the_same(self):
        for r in range(WORLD):
            d = float((self.load("sizes", r) - self.single_sizes).abs().max())
            self.assertLessEqual(d, 1e-5, f"rank {r}: batches of 1 and 12 vs one batch of 13: max abs diff {d}")

    def test_resume_is_exact(self):
        for r in range(WORLD):
            self.assertEqual(self.res[r]["resume_steps"], [9, 5, 9])
            self.assertEqual(self.res[r]["resume_pos"][0], self.res[r]["resume_pos"][1])
            self.assertEqual(self.res[r]["resume_max_diff"], 0.0, f"rank {r}: resumed run differs")

    def test_ranks_resuming_different_checkpoints_stop_with_one_error(self):
        for r in range(WORLD):
            err = self.res[r]["apart_error"]
            self.assertIn("different states", err, f"rank {r}: {err!r}")
            self.assertIn("steps 5 to 9", err)

    def test_time_budget_is_decided_by_rank_0(self):
        self.assertEqual(self.res[0]["budget_steps"], self.res[1]["budget_steps"])
        self.assertEqual(self.res[0]["budget_lr"], self.res[1]["budget_lr"])
        d = float((self.load("budget", 0) - self.load("budget", 1)).abs().max())
        self.assertEqual(d, 0.0, f"ranks ended {d} apart under a time budget")
        self.assertGreater(self.res[0]["budget_steps"][0], 20)

    def check_world_change(self, before, after, steps, events):
        for epoch in ("0", "1"):
            got = sorted(i for part in before + after for i in part.get(epoch, []))
            self.assertEqual(got, list(range(40)), f"epoch {epoch}: samples trained {got}")
        step, total = steps
        self.assertEqual(step, total, "the run did not end where its schedule ends")
        # a train event logs the LR the next step takes: a run straight through logs 0 at its
        # last two steps (the cosine's end); a resume that kept the old length logged 0 for
        # many steps (20 of 35 going 2 -> 1)
        lrs = [e["lr"] for e in events if e["event"] == "train"]
        self.assertTrue(len(lrs) > 2 and all(lr > 0 for lr in lrs[:-2]), f"steps at LR 0 before the end: {lrs}")

    def test_resume_from_2_ranks_on_1(self):
        tr = self.w2to1_after
        events = [json.loads(line) for line in tr.out.getvalue().splitlines()]
        self.assertIn("world_size_changed", [e["event"] for e in events])
        self.check_world_change([r["w2to1_seen"] for r in self.res], [self.w2to1_after_seen],
                                [tr.step, tr.total_steps], events)

    def test_resume_from_1_rank_on_2(self):
        events = [json.loads(line) for line in self.res[0]["w1to2_events"].splitlines()]
        self.assertIn("world_size_changed", [e["event"] for e in events])
        self.assertEqual(self.res[0]["w1to2_steps"], self.res[1]["w1to2_steps"])
        self.check_world_change([self.w1to2_before_seen], [r["w1to2_seen"] for r in self.res],
                                self.res[0]["w1to2_steps"], events)


if __name__ == "__main__":
    unittest.main()
