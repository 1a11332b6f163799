"""Speaker encoder: model, loss, EER, corpus plan, export, training smoke run."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest

import numpy as np
import onnx
import soundfile as sf
import torch

from train.onnxcompare import compare_onnx, compare_reference
from train.speaker import corpus as spc
from train.speaker import export as spx
from train.speaker import model as spm
from train.speaker import train as spt
from train.speaker.features import fbank

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ModelTest(unittest.TestCase):
    def test_signature_and_variable_length(self):
        enc = spm.SpeakerEncoder(spm.config_for("tiny")).eval()
        for t in (1, 7, 333):
            self.assertEqual(tuple(enc(torch.randn(2, t, 80)).shape), (2, 192))

    def test_aam_margin_penalises_the_true_class(self):
        head = spm.AAMSoftmax(4, 3, margin=0.3, scale=1.0)
        emb = head.weight.detach()[:1] * 10  # exactly on class 0's direction
        with_margin = head(emb, torch.tensor([0]))
        head.margin = 0.0
        self.assertGreater(float(with_margin), float(head(emb, torch.tensor([0]))))

    def test_eer(self):
        self.assertEqual(spm.eer([0.9, 0.8], [0.1, 0.2]), 0.0)
        self.assertEqual(spm.eer([0.1, 0.2], [0.9, 0.8]), 1.0)
        self.assertAlmostEqual(spm.eer([0.9, 0.3], [0.5, 0.1]), 0.5)

    def test_fbank_rejects_short_input_and_removes_mean(self):
        with self.assertRaisesRegex(ValueError, "shorter than one"):
            fbank(torch.zeros(399))
        f = fbank(torch.sin(torch.arange(16000) * 0.1) * 0.3)
        self.assertLess(float(f.mean(dim=0).abs().max()), 1e-4)


class CorpusTest(unittest.TestCase):
    def test_held_out_speakers_are_unseen(self):
        train = spc.speakers(100, spc.TRAIN_VARIANTS, 1)
        test = spc.speakers(30, spc.TEST_VARIANTS, 2)
        self.assertEqual(len({s["name"] for s in train}), 100)
        self.assertFalse({s["variant"] for s in train} & {s["variant"] for s in test})
        self.assertEqual(train, spc.speakers(100, spc.TRAIN_VARIANTS, 1))
        with self.assertRaisesRegex(ValueError, "combinations exist"):
            spc.speakers(10 ** 6, spc.TRAIN_VARIANTS, 1)

    def test_plan_keeps_pitch_near_the_speaker(self):
        spk = spc.speakers(3, spc.TRAIN_VARIANTS, 1)
        items = spc.plan("train", spk, 4, 1, 0.0, 0.0)
        self.assertEqual(len(items), 12)
        for it in items:
            self.assertLessEqual(abs(it["pitch"] - spk[it["speaker"]]["pitch"]), 3)


class ExportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_committed_tiny_model_is_current(self):
        tiny = os.path.join(ROOT, "testdata", "speaker", "tiny")
        with contextlib.redirect_stdout(io.StringIO()):
            spx.main(["--random", "--size", "tiny", "--seed", "7", "--reference", "--out", self.dir])
        diffs = compare_onnx(os.path.join(self.dir, "model.onnx"), os.path.join(tiny, "model.onnx"))
        with open(os.path.join(self.dir, "reference.json")) as a, open(os.path.join(tiny, "reference.json")) as b:
            diffs += compare_reference(json.load(a), json.load(b))
        self.assertEqual(diffs, [], "run `make -C train test-models`")

    def test_metadata_and_io(self):
        with contextlib.redirect_stdout(io.StringIO()):
            spx.main(["--random", "--size", "tiny", "--out", self.dir])
        m = onnx.load(os.path.join(self.dir, "model.onnx"))
        meta = {p.key: p.value for p in m.metadata_props}
        self.assertEqual((meta["model_type"], meta["window"], meta["output_dim"]), ("campplus", "povey", "192"))
        self.assertEqual([i.name for i in m.graph.input], ["input"])
        self.assertEqual([o.name for o in m.graph.output], ["output"])

    def test_bad_checkpoints(self):
        p = os.path.join(self.dir, "x.pt")
        torch.save({"weights": 1}, p)
        with self.assertRaisesRegex(SystemExit, "not a train.speaker.train checkpoint"):
            spx.load_checkpoint(p)
        enc = spm.SpeakerEncoder(spm.config_for("tiny"))
        sd = {"encoder." + k: v for k, v in enc.state_dict().items()}
        sd.pop("encoder.dense.weight")
        torch.save({"model": sd, "speaker_config": enc.cfg.to_dict()}, p)
        with self.assertRaisesRegex(SystemExit, "dense.weight"):
            spx.load_checkpoint(p)


class TrainTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_manifest_errors(self):
        p = os.path.join(self.dir, "m.jsonl")
        for body, msg in [("", "empty"), ("{\n", "invalid JSON"), ('{"source": "a.wav", "speaker": "x"}\n', "integer")]:
            with open(p, "w") as f:
                f.write(body)
            with self.assertRaisesRegex(spt.ManifestError, msg):
                spt.read_manifest(p)

    def test_training_separates_two_voices(self):
        """Two synthetic 'speakers' (different pitch and timbre): a few steps of training make
        same-speaker embeddings closer than different-speaker ones, and a checkpoint exports."""
        rows = []
        rng = np.random.default_rng(0)
        for spk, (f0, h) in enumerate([(110.0, 0.8), (260.0, 0.2)]):
            for u in range(6):
                t = np.arange(16000 + 800 * u) / 16000
                f = f0 * (1 + 0.05 * np.sin(2 * np.pi * (0.5 + 0.1 * u) * t))
                ph = 2 * np.pi * np.cumsum(f) / 16000
                x = 0.3 * (np.sin(ph) + h * np.sin(3 * ph)) + 0.01 * rng.standard_normal(t.size)
                path = os.path.join(self.dir, f"s{spk}-{u}.wav")
                sf.write(path, x.astype(np.float32), 16000)
                rows.append({"key": f"{spk}-{u}", "source": path, "speaker": spk})
        man = os.path.join(self.dir, "train.jsonl")
        with open(man, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        out = os.path.join(self.dir, "run")
        with contextlib.redirect_stdout(io.StringIO()):
            spt.main(["--train", man, "--val", man, "--size", "tiny", "--out", out, "--epochs", "8",
                      "--lr", "0.01", "--crop-frames", "50", "--batch-size", "300", "--batch-size-sample-max", "6",
                      "--device", "cpu"])
        ck = sorted(f for f in os.listdir(out) if f.startswith("ckpt-"))[-1]
        enc = spx.load_checkpoint(os.path.join(out, ck)).eval()
        with torch.no_grad():
            embs = [enc(fbank(torch.from_numpy(sf.read(r["source"], dtype="float32")[0])).unsqueeze(0))[0] for r in rows]
        same = [float(spm.cosine(embs[i], embs[j])) for i in range(12) for j in range(i + 1, 12) if i // 6 == j // 6]
        diff = [float(spm.cosine(embs[i], embs[j])) for i in range(6) for j in range(6, 12)]
        self.assertLess(spm.eer(same, diff), 0.2)
        self.assertGreater(np.mean(same), np.mean(diff))


if __name__ == "__main__":
    unittest.main()
