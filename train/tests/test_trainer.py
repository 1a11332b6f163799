"""One-process trainer tests: the schedule survives a resume, samples weigh the same
whatever micro-batch they are in."""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
import unittest
import warnings

import torch

from train import dist as pdist
from train.tests.dist_worker import params
from train.tests.toy import SplitTask, ToyTask, toy_model
from train.trainer import TrainConfig, Trainer


def fit(cfg, task, stop_at=0, dropout=0.0):
    out = io.StringIO()
    tr = Trainer(cfg, toy_model(dropout), task, pdist.DistInfo(), out=out)
    tr.fit(stop_at_step=stop_at)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    return tr, events


class TrainerTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.dir = tempfile.mkdtemp(prefix="parley-trainer-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def cfg(self, name, **kw):
        base = dict(max_epochs=3, lr=1e-2, optim="adamw", scheduler="cosine", warmup_steps=3, log_interval=1,
                    seed=5, device="cpu", keep_checkpoints=10)
        base.update(kw)
        return TrainConfig(out_dir=os.path.join(self.dir, name), **base)

    def test_bf16_autocast_on_cpu(self):
        """--amp bf16 on a CPU: the layers compute in bfloat16 while the weights and the
        optimiser stay float32, and the run still learns; fp16 stays off on a CPU."""
        seen = []
        model = toy_model()
        model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype) if m.training else None)
        out = io.StringIO()
        tr = Trainer(self.cfg("bf16", amp="bf16", max_epochs=2), model, ToyTask(), pdist.DistInfo(), out=out)
        tr.fit()
        ev = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual(ev[0]["amp"], "bf16")
        self.assertIn(torch.bfloat16, seen)
        self.assertTrue(all(p.dtype == torch.float32 for p in tr.model.parameters()))
        losses = [e["loss"] for e in ev if e["event"] == "train"]
        self.assertTrue(all(math.isfinite(v) for v in losses))
        self.assertLess(losses[-1], losses[0])
        fp16 = Trainer(self.cfg("fp16", amp="fp16"), toy_model(), ToyTask(), pdist.DistInfo(), out=io.StringIO())
        self.assertEqual(fp16.amp, "none")

    def test_resume_mid_epoch_keeps_the_cosine_schedule(self):
        # No --max-steps (as the demo recipe): the schedule's length comes from the epochs.
        straight, ev = fit(self.cfg("straight"), ToyTask(), dropout=0.2)
        self.assertEqual(straight.step, 48)  # 16 batches x 3 epochs
        lrs = {e["step"]: e["lr"] for e in ev if e["event"] == "train"}
        self.assertGreater(lrs[30], 1e-3, "the cosine should still be well above 0 at step 30 of 48")
        first, _ = fit(self.cfg("resume"), ToyTask(), stop_at=5, dropout=0.2)
        self.assertEqual(first.pos, {"epoch": 0, "part": 0, "batch": 5})
        second, ev2 = fit(self.cfg("resume", resume="auto"), ToyTask(), dropout=0.2)
        self.assertEqual(second.step, 48)
        self.assertEqual(second.total_steps, straight.total_steps)
        for e in ev2:
            if e["event"] == "train":
                self.assertEqual(e["lr"], lrs[e["step"]], f"step {e['step']}: LR after resume")
        d = float((params(straight.model) - params(second.model)).abs().max())
        self.assertEqual(d, 0.0, f"resumed run differs from the straight one by {d}")

    def test_first_learning_rate_uses_the_runs_length(self):
        # cosine without warm-up: the first update's LR must come from the real length (48 steps),
        # not from the placeholder the scheduler had before the data was seen
        tr = Trainer(self.cfg("nowarm", warmup_steps=0), toy_model(), ToyTask(), pdist.DistInfo(), out=io.StringIO())
        used = []
        step = tr.opt.step

        def record(*a, **kw):
            used.append(tr.opt.param_groups[0]["lr"])
            return step(*a, **kw)

        tr.opt.step = record
        with warnings.catch_warnings():  # LambdaLR notices the wrapped step
            warnings.simplefilter("ignore", UserWarning)
            tr.fit(stop_at_step=2)
        want = [1e-2 * 0.5 * (1 + math.cos(math.pi * s / 48)) for s in (1, 2)]
        self.assertEqual(len(used), 2)
        for got, w in zip(used, want):
            self.assertAlmostEqual(got, w, places=15)

    def test_accumulated_micro_batches_weigh_every_sample_the_same(self):
        # micro-batches of 1 and 12 samples accumulated into one step == one batch of 13
        one, _ = fit(self.cfg("one", scheduler="constant", warmup_steps=0, max_epochs=1, max_steps=4, optim="adam"),
                     ToyTask(world_for_split=2, sizes=[1, 12]))
        acc, _ = fit(self.cfg("acc", scheduler="constant", warmup_steps=0, max_epochs=1, max_steps=4, optim="adam",
                              grad_accum=2), SplitTask(sizes=[1, 12]))
        self.assertEqual(acc.step, 4)
        d = float((params(one.model) - params(acc.model)).abs().max())
        self.assertLessEqual(d, 1e-5, f"accumulated 1 + 12 vs one batch of 13: max abs diff {d}")

    def test_time_budget_fits_the_cosine_to_the_steps_that_fit(self):
        # A fake clock: the first step costs 5 s more (workers starting), each step 0.125 s.
        # The rate leaves the first 10 steps out, so the 11.25 s budget holds 50 steps (not the
        # 38 a rate over all steps would give), the cosine ends there, and the run stops.
        from train import trainer as trainer_mod

        class Clock:
            t = 1000.0

            def time(self):
                return self.t

        clock = Clock()
        tr = Trainer(self.cfg("budget", max_epochs=50, time_budget_s=11.25), toy_model(), ToyTask(),
                     pdist.DistInfo(), out=io.StringIO())
        step = tr.opt.step

        def timed(*a, **kw):
            clock.t += 0.125 + (5.0 if tr.step == 0 else 0.0)
            return step(*a, **kw)

        tr.opt.step = timed
        real = trainer_mod.time
        trainer_mod.time = clock
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                tr.fit()
        finally:
            trainer_mod.time = real
        events = [json.loads(line) for line in tr.out.getvalue().splitlines()]
        fits = [e for e in events if e["event"] == "budget"]
        self.assertEqual([(e["step"], e["total_steps"]) for e in fits], [(30, 50), (31, 50)])
        self.assertEqual(tr.step, 50, "the run stops when its time is up, not after 50 epochs (800 steps)")
        last = [e for e in events if e["event"] == "train"][-1]
        self.assertEqual(last["step"], 50)
        self.assertLess(last["lr"], 1e-6, "the cosine reaches its end with the budget")
        self.assertEqual(events[-1]["event"], "done")

    def test_split_checkpoint_round_trip(self):
        from train.trainer import CheckpointError, load_torch, save_split

        model = {f"w{i}": torch.randn(100, 10) for i in range(5)}  # 4000 bytes each
        model["big"] = torch.randn(3000)  # 12000 bytes: over the limit, a part of its own
        obj = {"model": model, "config": {"a": 1}, "spk_stat": torch.ones(4)}
        out = os.path.join(self.dir, "split")
        paths = save_split(obj, out, 9000)
        self.assertEqual([os.path.basename(p) for p in paths], ["part-000.pt", "part-001.pt", "part-002.pt",
                                                                "part-003.pt"])
        for p in paths:
            self.assertLessEqual(sum(v.numel() * 4 for v in torch.load(p)["model"].values()), 12000)
        back = load_torch(out)
        self.assertEqual(list(back["model"]), list(model))
        for k, v in model.items():
            self.assertTrue(torch.equal(back["model"][k], v), k)
        self.assertEqual(back["config"], {"a": 1})
        self.assertTrue(torch.equal(back["spk_stat"], torch.ones(4)))
        self.assertNotIn("parts", back)
        # a lost part is named, never a silently smaller model
        os.remove(paths[2])
        with self.assertRaisesRegex(CheckpointError, "3 part files, the first says 4"):
            load_torch(out)
        with self.assertRaisesRegex(FileNotFoundError, "without part"):
            load_torch(self.dir)


if __name__ == "__main__":
    unittest.main()
