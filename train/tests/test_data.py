"""Manifests and samplers."""
from __future__ import annotations

import json
import os
import random
import tempfile
import unittest

import numpy as np
import torch

from train.data import (DynamicBatchSampler, ManifestError, ManifestIndex, ShardSampler, read_manifest,
                        sample_rng, seed_worker)


def rec(i, **kw):
    r = {"key": f"u{i}", "source": f"wav/u{i}.wav", "source_len": 100 + i, "target": "hello world", "target_len": 2}
    r.update(kw)
    return r


class ManifestTest(unittest.TestCase):
    def write(self, lines):
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        with os.fdopen(fd, "w") as f:
            for l in lines:
                f.write((l if isinstance(l, str) else json.dumps(l)) + "\n")
        self.addCleanup(os.remove, path)
        return path

    def test_valid_manifest_resolves_relative_paths(self):
        p = self.write([rec(0), rec(1, source="/abs/x.wav", text_language="<|en|>")])
        rs = read_manifest(p)
        self.assertEqual(len(rs), 2)
        self.assertEqual(rs[0]["source"], os.path.join(os.path.dirname(p), "wav/u0.wav"))
        self.assertEqual(rs[1]["source"], "/abs/x.wav")

    def test_bad_lines_name_file_and_line(self):
        cases = [
            ("{not json", "invalid JSON"),
            ("[1, 2]", "want a JSON object"),
            (json.dumps({k: v for k, v in rec(5).items() if k != "target"}), "missing field 'target'"),
            (json.dumps(rec(5, source_len="12")), "'source_len' must be an integer"),
            (json.dumps(rec(5, source_len=-1)), "must be >= 0"),
            (json.dumps(rec(5, source_len=True)), "must be an integer"),
            (json.dumps(rec(5, target=3)), "'target' must be a string"),
            (json.dumps(rec(5, key="")), "empty key"),
            (json.dumps(rec(5, text_language=4)), "'text_language' must be a string"),
            (json.dumps(rec(0)), "duplicate key 'u0' (first on line 1)"),
        ]
        for line, want in cases:
            with self.subTest(want=want):
                p = self.write([rec(0), rec(1), line])
                with self.assertRaises(ManifestError) as cm:
                    read_manifest(p)
                self.assertIn(f"{p}:3:", str(cm.exception))
                self.assertIn(want, str(cm.exception))

    def test_missing_audio_and_empty_manifest(self):
        p = self.write([rec(0)])
        with self.assertRaisesRegex(ManifestError, r":1: audio file .*u0.wav not found"):
            read_manifest(p, check_audio=True)
        with self.assertRaisesRegex(ManifestError, "manifest is empty"):
            read_manifest(self.write(["", "  "]))
        with self.assertRaisesRegex(ManifestError, "manifest not found"):
            read_manifest("/nonexistent/x.jsonl")

    def test_index_parts_cover_lines_once(self):
        p = self.write([rec(i) for i in range(23)] + [""])
        idx = ManifestIndex(p)
        self.assertEqual(len(idx), 23)
        keys = [r["key"] for k in range(4) for r in idx.part(k, 4)]
        self.assertEqual(sorted(keys), sorted(f"u{i}" for i in range(23)))
        self.assertEqual(idx.get(7)["key"], "u7")

    def test_index_reports_bad_line_lazily(self):
        p = self.write([rec(0), "{oops", rec(2)])
        idx = ManifestIndex(p)
        with self.assertRaisesRegex(ManifestError, r":2: invalid JSON"):
            idx.part(0, 1)


class ShardSamplerTest(unittest.TestCase):
    def test_disjoint_covering_deterministic(self):
        for n, w in [(20, 2), (21, 2), (17, 3), (5, 4)]:
            shards = [ShardSampler(n, w, r, seed=9) for r in range(w)]
            for s in shards:
                s.set_epoch(2)
            idx = [list(s) for s in shards]
            self.assertEqual([len(i) for i in idx], [len(s) for s in shards])
            flat = [i for s in idx for i in s]
            self.assertEqual(sorted(flat), list(range(n)), "not each sample exactly once")
            again = ShardSampler(n, w, 0, seed=9)
            again.set_epoch(2)
            self.assertEqual(list(again), idx[0])
            again.set_epoch(3)
            self.assertNotEqual(list(again), idx[0])

    def test_each_sample_once_at_any_world_size(self):
        for w in range(1, 9):
            for n in list(range(0, 20)) + [40, 100, 101, 257]:
                with self.subTest(world=w, n=n):
                    shards = [ShardSampler(n, w, r, seed=n) for r in range(w)]
                    idx = [list(s) for s in shards]
                    self.assertEqual(sorted(i for s in idx for i in s), list(range(n)))
                    self.assertLessEqual(max(map(len, idx)) - min(map(len, idx)), 1)

    def test_drop_last_disjoint(self):
        shards = [list(ShardSampler(21, 2, r, drop_last=True)) for r in range(2)]
        self.assertFalse(set(shards[0]) & set(shards[1]))
        self.assertEqual(len(shards[0]), 10)
        self.assertEqual(len(shards[1]), 10)


class DynamicBatchSamplerTest(unittest.TestCase):
    def setUp(self):
        rng = random.Random(4)
        self.lengths = [rng.randint(1, 400) for _ in range(501)] + [5000, 0]

    def samplers(self, w, **kw):
        args = dict(batch_size=1200, sort_size=64, batch_size_sample_max=10, max_token_length=350, seed=1)
        args.update(kw)
        out = [DynamicBatchSampler(self.lengths, world_size=w, rank=r, **args) for r in range(w)]
        for s in out:
            s.set_epoch(args.get("epoch", 1))
        return out

    def test_properties(self):
        eligible = {i for i, l in enumerate(self.lengths) if 0 < l <= 350}
        for w in (1, 2, 3):
            with self.subTest(world=w):
                per_rank = [list(s) for s in self.samplers(w)]
                self.assertLessEqual(max(map(len, per_rank)) - min(map(len, per_rank)), 1,
                                     "ranks' batch counts differ by more than the last group")
                seen = []
                for batches in per_rank:
                    for b in batches:
                        self.assertLessEqual(max(self.lengths[i] for i in b) * len(b), 1200)
                        self.assertLessEqual(len(b), 10)
                        seen += b
                self.assertEqual(sorted(seen), sorted(eligible), "not each eligible sample exactly once")
                dl = [list(s) for s in self.samplers(w, drop_last=True)]
                flat = [i for bs in dl for b in bs for i in b]
                self.assertEqual(len(flat), len(set(flat)), "drop_last batches overlap")

    def test_each_clip_once_per_epoch_at_any_world_size(self):
        rng = random.Random(11)
        for w in range(1, 9):
            for n in (1, 2, 7, 40, 100, 333):
                lengths = [rng.randint(1, 300) for _ in range(n)]
                with self.subTest(world=w, n=n):
                    ss = [DynamicBatchSampler(lengths, batch_size=600, world_size=w, rank=r, sort_size=16,
                                              batch_size_sample_max=8, seed=n) for r in range(w)]
                    for s in ss:
                        s.set_epoch(3)
                    per_rank = [list(s) for s in ss]
                    self.assertEqual([len(s) for s in ss], [len(b) for b in per_rank])
                    self.assertEqual(sorted(i for bs in per_rank for b in bs for i in b), list(range(n)))
                    self.assertLessEqual(max(map(len, per_rank)) - min(map(len, per_rank)), 1)

    def test_deterministic_per_epoch_and_resume(self):
        a = list(self.samplers(2)[1])
        self.assertEqual(a, list(self.samplers(2)[1]))
        s = self.samplers(2)[1]
        s.set_epoch(2)
        self.assertNotEqual(a, list(s))
        resumed = self.samplers(2, start_step=7)[1]
        self.assertEqual(list(resumed), a[7:])
        self.assertEqual(len(resumed), len(a) - 7)

    def test_batches_at_one_step_have_similar_lengths(self):
        r0, r1 = (list(s) for s in self.samplers(2))
        ratios = []
        for b0, b1 in zip(r0, r1):
            m0 = max(self.lengths[i] for i in b0)
            m1 = max(self.lengths[i] for i in b1)
            ratios.append(max(m0, m1) / min(m0, m1))
        self.assertLess(float(np.median(ratios)), 1.5)


class SeedingTest(unittest.TestCase):
    def test_worker_seeding_reproducible(self):
        class DS(torch.utils.data.Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                return float(np.random.rand()) + random.random()

        def draw(seed):
            g = torch.Generator().manual_seed(seed)
            dl = torch.utils.data.DataLoader(DS(), batch_size=2, num_workers=2, worker_init_fn=seed_worker, generator=g)
            return [x.tolist() for x in dl]

        self.assertEqual(draw(1), draw(1))
        self.assertNotEqual(draw(1), draw(2))

    def test_sample_rng(self):
        self.assertEqual(sample_rng(1, 2, 3).random(), sample_rng(1, 2, 3).random())
        self.assertNotEqual(sample_rng(1, 2, 3).random(), sample_rng(1, 3, 3).random())


if __name__ == "__main__":
    unittest.main()
