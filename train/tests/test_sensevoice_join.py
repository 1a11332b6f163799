"""train.sensevoice.join and joined rows in the manifest reader and the dataset."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest

import numpy as np
import soundfile as sf
import torch

from train.data import ManifestError, read_manifest
from train.sensevoice import join as svj
from train.sensevoice.dataset import AudioError, SenseVoiceDataset, load_item_audio
from train.sensevoice.tokens import char_vocab


class JoinTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        rng = np.random.default_rng(0)
        self.rows = []
        os.makedirs(os.path.join(self.dir, "wav"))
        for i in range(12):
            n = 16000 + 1600 * i
            x = 0.001 * rng.standard_normal(n)  # a noise floor, and a tone between 0.2 s of it each side
            x[3200:-3200] += 0.2 * np.sin(np.arange(n - 6400) / (5 + i))
            x = x.astype(np.float32)
            path = os.path.join("wav", f"u{i}.wav")
            sf.write(os.path.join(self.dir, path), x, 16000)
            self.rows.append({"key": f"u{i}", "source": path, "source_len": n // 160, "target": f"word {'abcdefghijkl'[i]} more",
                              "target_len": 3, "speaker": "a" if i < 8 else f"solo{i}"})
        self.manifest = os.path.join(self.dir, "train.jsonl")
        with open(self.manifest, "w") as f:
            for r in self.rows:
                f.write(json.dumps(r) + "\n")

    def test_rows_join_one_speaker_within_the_limit(self):
        out = svj.join_rows(self.rows, 50, max_s=4.0, seed=1, max_pieces=3)
        self.assertEqual(len(out), 50)
        by_source = {r["source"]: r for r in self.rows}
        for r in out:
            parts = [r["source"]] + [p["source"] for p in r["join"]]
            self.assertTrue(2 <= len(parts) <= 3, parts)
            self.assertEqual(len(set(parts)), len(parts))  # no clip twice in a row
            self.assertEqual({by_source[p]["speaker"] for p in parts}, {"a"})  # solo speakers never join
            self.assertEqual(r["target"], " ".join(by_source[p]["target"] for p in parts))
            gaps = [p["gap_s"] for p in r["join"]]
            self.assertTrue(all(0.05 <= g <= 0.6 for g in gaps), gaps)
            want = sum(by_source[p]["source_len"] for p in parts) + sum(round(g * 100) for g in gaps)
            self.assertEqual(r["source_len"], want)
            self.assertLessEqual(r["source_len"], 400)
        self.assertEqual(out, svj.join_rows(self.rows, 50, max_s=4.0, seed=1, max_pieces=3))  # seeded
        self.assertNotEqual(out, svj.join_rows(self.rows, 50, max_s=4.0, seed=2, max_pieces=3))
        self.assertEqual(svj.join_rows([dict(r, speaker=f"s{i}") for i, r in enumerate(self.rows)], 5, 4.0, 1), [])
        # every corpus build numbers its speakers afresh: spk0001 of one corpus is not spk0001 of another
        mixed = [dict(r, speaker="spk0001", source=f"{'../accented' if i % 2 else 'x'}/shards/train-0/wav/u{i}.wav")
                 for i, r in enumerate(self.rows)]
        for r in svj.join_rows(mixed, 30, max_s=10.0, seed=1):
            corpora = {p["source"].split("/")[0] for p in r["join"]} | {r["source"].split("/")[0]}
            self.assertEqual(len(corpora), 1, r)
        voices = [dict(r, speaker="spk0001", voice=f"v{i % 2}") for i, r in enumerate(self.rows)]
        for r in svj.join_rows(voices, 30, max_s=10.0, seed=1):
            self.assertEqual(len({int(p["source"][5:-4]) % 2 for p in r["join"]} | {int(r["source"][5:-4]) % 2}), 1, r)
        same = [dict(r, target="the same words") for r in self.rows]
        self.assertEqual(svj.join_rows(same, 5, max_s=10.0, seed=1), [])  # a row never says one sentence twice
        with self.assertRaises(ValueError):
            svj.join_rows(self.rows, 5, max_s=4.0, seed=1, max_pieces=1)

    def test_cli_audio_and_dataset(self):
        out = os.path.join(self.dir, "sub", "joined.jsonl")
        self.assertEqual(svj.main(["--manifest", self.manifest, "--out", out, "--count", "20", "--max-s", "5",
                                   "--seed", "3"]), 0)
        rows = read_manifest(out, check_audio=True)  # sources relative to the output resolve
        self.assertEqual(len(rows), 20)
        fills = set()
        for r in rows:
            x = load_item_audio(r).numpy()
            fills.add(r["gap_fill"])
            # the clips end to end with their gaps: within a sample per join of source_len's frames
            self.assertAlmostEqual(len(x) / 160, r["source_len"], delta=len(r["join"]) + 1)
            first = sf.read(r["source"], dtype="float32")[0]
            np.testing.assert_array_equal(x[:len(first)], first)
            gap = x[len(first):len(first) + int(round(r["join"][0]["gap_s"] * 16000))]
            if r["gap_fill"] == "silence":
                self.assertEqual(float(np.abs(gap).max()), 0.0)
            else:  # near the clips' own floor (0.001), far below the tone
                self.assertTrue(0.0002 < float(np.sqrt(np.mean(gap ** 2))) < 0.01)
            np.testing.assert_array_equal(load_item_audio(r).numpy(), x)  # the same noise every time
        self.assertEqual(fills, {"silence", "noise"})
        v = char_vocab()
        it = SenseVoiceDataset(rows, v, [0.0] * 560, [1.0] * 560, train=True, speed_perturb=True)[0]
        self.assertEqual(v.decode(it["y"].tolist()), rows[0]["target"])

    def test_bad_joined_rows(self):
        base = {"key": "j", "source": "wav/u0.wav", "source_len": 100, "target": "a b", "target_len": 2}
        for join, msg in [([], "non-empty list"), ("x", "non-empty list"), ([{"source": "wav/u1.wav"}], r"join\[0\]"),
                          ([{"source": "wav/u1.wav", "gap_s": -1}], r"join\[0\]"),
                          ([{"source": "", "gap_s": 0.1}], r"join\[0\]"),
                          ([{"source": "wav/nope.wav", "gap_s": 0.1}], "nope.wav not found")]:
            path = os.path.join(self.dir, "bad.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps(dict(base, join=join)) + "\n")
            with self.assertRaisesRegex(ManifestError, msg):
                read_manifest(path, check_audio=True)
        with open(path, "w") as f:
            f.write(json.dumps(dict(base, join=[{"source": "wav/u1.wav", "gap_s": 0.1}], gap_fill="nois")) + "\n")
        with self.assertRaisesRegex(ManifestError, "gap_fill"):
            read_manifest(path)
        with self.assertRaisesRegex(AudioError, "gone.wav: audio file not found"):
            load_item_audio(dict(base, source=os.path.join(self.dir, "wav/u0.wav"),
                                 join=[{"source": os.path.join(self.dir, "gone.wav"), "gap_s": 0.1}]))
        # the command-line evaluation hears files: a joined row is refused, not scored as its first clip
        from train.sensevoice import evaluate_cli
        joined = os.path.join(self.dir, "j.jsonl")
        svj.main(["--manifest", self.manifest, "--out", joined, "--count", "2", "--max-s", "5"])
        with self.assertRaisesRegex(ValueError, "joined training rows"):
            evaluate_cli.load_manifest(joined)
        self.assertEqual(evaluate_cli.main(["--model", self.dir, "--manifest", joined, "--parley", "/bin/false"]), 1)
        self.assertNotEqual(svj.main(["--manifest", os.path.join(self.dir, "none.jsonl"), "--out",
                                      os.path.join(self.dir, "o.jsonl")]), 0)


if __name__ == "__main__":
    unittest.main()
