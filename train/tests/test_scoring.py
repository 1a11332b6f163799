"""Evaluation and validation score normalised text; targets training would lose are reported."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import unittest

import numpy as np
import soundfile as sf
import torch
from torch import nn

from train import dist as pdist
from train.sensevoice import evaluate as sveval
from train.sensevoice import model as svm
from train.sensevoice.dataset import check_targets, report_targets, too_long_for_ctc
from train.sensevoice.tokens import char_vocab, normalize_text
from train.trainer import TrainConfig


class FixedDecoder(nn.Module):
    """Stands in for a model: its greedy CTC decode is always ``ids`` (tags first)."""

    def __init__(self, ids, vocab_size, rival=None):
        super().__init__()
        self.ids, self.v, self.rival = ids, vocab_size, rival

    def forward(self, x, x_length, language, text_norm, y=None, y_length=None, rich=None):
        n, t = x.shape[0], x.shape[1] + svm.NUM_QUERIES
        assert len(self.ids) <= t, "clip too short for the fixed decode"
        logits = torch.zeros(n, t, self.v)
        logits[:, :, 0] = 1.0  # blank
        for i, tok in enumerate(self.ids):
            logits[:, i, tok] = 2.0
        if self.rival is not None:  # (frame, token, logit): a runner-up close to the best
            frame, tok, value = self.rival
            logits[:, frame, tok] = value
        return logits

    def loss(self, *a, **kw):
        return torch.zeros(()), {}


class ScoringTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="parley-score-")
        cls.wav = os.path.join(cls.dir, "a.wav")
        sf.write(cls.wav, (0.1 * np.random.default_rng(0).standard_normal(32000)).astype(np.float32), 16000)
        cls.v = char_vocab()
        tags = [cls.v.id(t) for t in ("<|en|>", "<|NEUTRAL|>", "<|Speech|>", "<|woitn|>")]
        cls.model = FixedDecoder(tags + cls.v.encode("set a timer please"), len(cls.v))
        cls.recs = [{"key": "k1", "source": cls.wav, "source_len": 200, "target": "Set a timer, please.",
                     "target_len": 4}]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_vocabulary_normalisation(self):
        v = self.v
        self.assertEqual(v.normalize("Set a timer, please."), "set a timer please")
        self.assertEqual(v.normalize("Don't  stop—now!"), "don't stop now")
        for t in ("Hello, World!", "it's a twenty-one gun salute", "a.b;c"):
            self.assertEqual(v.normalize(t), normalize_text(t), t)  # the char set's own form
        self.assertEqual(v.encode("Set a timer, please."), v.encode("set a timer please"))
        self.assertEqual(v.normalize("timer for 20 minutes"), "timer for 20 minutes")
        self.assertEqual(v.unknown("timer for 20 minutes"), ["0", "2"])
        self.assertEqual(v.unknown("Set a timer, please."), [])

    def test_evaluate_compares_normalised_text(self):
        res = sveval.evaluate(self.model, self.v, [0.0] * 560, [1.0] * 560, self.recs)
        self.assertEqual(res["rows"][0]["hyp"], "set a timer please")
        self.assertEqual((res["wer"], res["cer"]), (0.0, 0.0), res["rows"][0])
        # a real error still counts
        recs = [dict(self.recs[0], target="Set the timer, please.")]
        self.assertAlmostEqual(sveval.evaluate(self.model, self.v, [0.0] * 560, [1.0] * 560, recs)["wer"], 0.25)

    def test_margin_is_the_closest_call(self):
        """Each row records the smallest best-minus-runner-up logit gap over its frames (the golden
        decodes carry it, so a Go test can forgive a decode another CPU's kernels may flip)."""
        res = sveval.evaluate(self.model, self.v, [0.0] * 560, [1.0] * 560, self.recs)
        self.assertAlmostEqual(res["rows"][0]["margin"], 1.0, places=6)
        tight = FixedDecoder(self.model.ids, len(self.v), rival=(5, self.v.id("z"), 1.9995))
        res = sveval.evaluate(tight, self.v, [0.0] * 560, [1.0] * 560, self.recs)
        self.assertAlmostEqual(res["rows"][0]["margin"], 5e-4, places=6)
        self.assertEqual(res["rows"][0]["hyp"], "set a timer please")  # the best still wins

    def test_validation_compares_normalised_text(self):
        from train.sensevoice.train import SenseVoiceTask

        task = SenseVoiceTask.__new__(SenseVoiceTask)
        task.val, task.vocab = self.recs, self.v
        task.cmvn = {"neg_mean": [0.0] * 560, "inv_stddev": [1.0] * 560}
        res = task.summarize_val(task.validate(self.model, pdist.DistInfo()))
        self.assertEqual((res["wer"], res["cer"], res["utts"], res["too_long"]), (0.0, 0.0, 1, 0))

    def test_targets_training_would_lose_are_reported(self):
        recs = [
            {"key": "ok", "source_len": 200, "target": "Set a timer, please."},
            {"key": "digits", "source_len": 200, "target": "timer for 20 minutes"},
            {"key": "empty", "source_len": 200, "target": "!!! 42"},
            {"key": "long_text", "source_len": 30, "target": "this sentence cannot fit in five frames"},
            {"key": "long_audio", "source_len": 4000, "target": "hello"},
        ]
        rep = check_targets(recs, self.v, max_token_length=3000)
        self.assertEqual([k for k, _ in rep["blank"]], ["digits", "empty"])
        self.assertEqual(rep["empty"], ["empty"])
        self.assertEqual(rep["text_too_long"], ["long_text"])
        self.assertEqual(rep["audio_too_long"], ["long_audio"])
        out = io.StringIO()
        lines = report_targets(rep, "train.jsonl", out)
        self.assertEqual(len(lines), 4)
        self.assertIn("2 of 5 transcripts with characters the vocabulary lacks", out.getvalue())
        self.assertIn("1 of 5 clips dropped: the text has more tokens than the audio has frames", out.getvalue())
        self.assertEqual(report_targets(check_targets(recs[:1], self.v), "x", io.StringIO()), [])

    def test_too_long_for_ctc_counts_repeats(self):
        y = torch.tensor([[5, 5, 0], [5, 6, 7]])
        dropped = too_long_for_ctc(y, torch.tensor([2, 3]), torch.tensor([2, 3]))
        self.assertEqual(dropped.tolist(), [True, False])  # 5 5 needs a blank between: 3 frames

    def test_training_reports_dropped_clips(self):
        from train.sensevoice.train import SenseVoiceTask

        task = SenseVoiceTask.__new__(SenseVoiceTask)
        m = svm.build(svm.config_for("tiny", vocab_size=len(self.v)))
        b = {"x": torch.zeros(2, 3, 560), "x_length": torch.tensor([3, 3], dtype=torch.int32),
             "language": torch.zeros(2, dtype=torch.int32), "text_norm": torch.full((2,), 15, dtype=torch.int32),
             "y": torch.tensor([[30, 31, 32, 33, 34], [30, 31, 0, 0, 0]]), "y_length": torch.tensor([5, 2]),
             "rich": torch.full((2, 4), -1, dtype=torch.int64)}
        _, st = task.loss(m, b)
        self.assertEqual(st["too_long"], 1)
        self.assertEqual(task.batch_weight(b), 2.0)
        self.assertIsInstance(TrainConfig().max_token_length, int)


if __name__ == "__main__":
    unittest.main()
