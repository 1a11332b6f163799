"""kill -9 of a 2-process ZeRO SenseVoice run mid-epoch, then --resume auto: the final
weights are bit-identical to an uninterrupted run.

The flags are the demo recipe's (train/Makefile SVTRAIN: --batch-size 8000
--batch-size-sample-max 48 --scheduler cosine --weight-decay 0.01 --clip 5
--log-interval 10, no --max-steps, feature cache and SpecAugment on) plus --zero,
with a tiny model, a small synthetic corpus and checkpoints every 2 steps so that
they fall inside epochs.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import soundfile as sf
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ["go", "up", "on", "no", "hi", "ok", "yes"]
TIMEOUT_S = 240


def make_corpus(d: str, n_train: int = 200, n_val: int = 6, seed: int = 0) -> None:
    from train.sensevoice.features import CMVNAccumulator, features

    rng = np.random.default_rng(seed)
    acc = CMVNAccumulator()
    for split, n in (("train", n_train), ("val", n_val)):
        with open(os.path.join(d, f"{split}.jsonl"), "w") as f:
            for i in range(n):
                secs = float(rng.uniform(0.45, 0.8))
                t = np.arange(int(secs * 16000)) / 16000
                tone = 0.2 * np.sin(2 * np.pi * rng.uniform(150, 900) * t)
                x = (tone + 0.02 * rng.standard_normal(t.shape)).astype(np.float32)
                name = f"{split}-{i:04d}.wav"
                sf.write(os.path.join(d, name), x, 16000, subtype="PCM_16")
                if split == "train" and i < 20:
                    acc.add(features(torch.from_numpy(x)))
                text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 3))))
                f.write(json.dumps({"key": f"{split}-{i}", "source": name, "source_len": int(secs * 100),
                                    "target": text, "target_len": len(text.split())}) + "\n")
    neg_mean, inv_std = acc.result()
    with open(os.path.join(d, "cmvn.json"), "w") as f:
        json.dump({"neg_mean": neg_mean, "inv_stddev": inv_std}, f)


class KillResumeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="parley-kill-")
        make_corpus(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def cmd(self, out: str, *extra: str):
        d = self.dir
        return [sys.executable, "-m", "train.launch", "--nproc", "2", "--launcher", "spawn", "-m",
                "train.sensevoice.train", "--train", os.path.join(d, "train.jsonl"),
                "--val", os.path.join(d, "val.jsonl"), "--vocab", "char", "--cmvn", os.path.join(d, "cmvn.json"),
                "--size", "tiny", "--batch-size", "8000", "--batch-size-sample-max", "48",
                "--scheduler", "cosine", "--weight-decay", "0.01", "--clip", "5", "--log-interval", "10",
                "--save-interval", "2", "--epochs", "8", "--lr", "0.002", "--warmup", "3",
                "--val-interval", "5", "--seed", "7", "--zero", "--keep-checkpoints", "100", "--out", os.path.join(d, out), *extra]

    def env(self):
        e = dict(os.environ, PYTHONPATH=ROOT, PARLEY_DIST_TIMEOUT="60", OMP_NUM_THREADS="1")
        return e

    def run_to_end(self, out: str, *extra: str) -> list:
        p = subprocess.run(self.cmd(out, *extra), cwd=ROOT, env=self.env(), capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]

    def run_and_kill(self, out: str) -> list:
        """Start the run; kill -9 its whole process group once the first checkpoint is written."""
        p = subprocess.Popen(self.cmd(out), cwd=ROOT, env=self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        events = []
        deadline = time.time() + TIMEOUT_S
        try:
            for line in p.stdout:
                if line.startswith("{"):
                    events.append(json.loads(line))
                    if events[-1]["event"] == "checkpoint":
                        os.killpg(p.pid, signal.SIGKILL)
                        break
                if time.time() > deadline:
                    break
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
            p.stdout.close()
        return events

    def test_kill_9_then_resume_is_bit_identical(self):
        straight = self.run_to_end("straight")
        done = straight[-1]
        self.assertEqual(done["event"], "done")
        self.assertGreaterEqual(done["step"], 16)

        killed = self.run_and_kill("resume")
        self.assertIn("checkpoint", [e["event"] for e in killed])
        self.assertNotIn("done", [e["event"] for e in killed], "the run ended before the kill")

        resumed = self.run_to_end("resume", "--resume", "auto")
        res = [e for e in resumed if e["event"] == "resume"]
        self.assertEqual(len(res), 1)
        self.assertGreater(res[0]["batch"], 0, f"resumed at {res[0]}: want a checkpoint inside an epoch")
        self.assertLess(res[0]["step"], done["step"])
        self.assertEqual(resumed[-1]["step"], done["step"])
        lrs = {e["step"]: e["lr"] for e in straight if e["event"] == "train"}
        for e in resumed:
            if e["event"] == "train":
                self.assertEqual(e["lr"], lrs[e["step"]], f"step {e['step']}: LR after resume")

        a = torch.load(done["checkpoint"], map_location="cpu")["model"]
        b = torch.load(resumed[-1]["checkpoint"], map_location="cpu")["model"]
        self.assertEqual(sorted(a), sorted(b))
        diff = {k: float((a[k].double() - b[k].double()).abs().max()) for k in a if not torch.equal(a[k], b[k])}
        self.assertFalse(diff, f"{len(diff)} of {len(a)} tensors differ after kill -9 and resume, "
                               f"max |diff| {max(diff.values(), default=0):.3g}")
        first = torch.load(os.path.join(self.dir, "straight", "ckpt-00000002.pt"), map_location="cpu")["model"]
        self.assertFalse(all(torch.equal(first[k], a[k]) for k in a), "training did not change the weights")


if __name__ == "__main__":
    unittest.main()
