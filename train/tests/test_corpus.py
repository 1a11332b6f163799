"""Synthetic corpus generator (needs espeak-ng)."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import unittest

import soundfile as sf

from train.corpus import synth
from train.corpus.sentences import number_words, sentences
from train.data import read_manifest


class SentencesTest(unittest.TestCase):
    def test_number_words(self):
        for n, want in [(0, "zero"), (13, "thirteen"), (40, "forty"), (71, "seventy one"),
                        (100, "one hundred"), (105, "one hundred and five"), (2000, "two thousand"),
                        (1005, "one thousand and five"), (9999, "nine thousand nine hundred and ninety nine")]:
            self.assertEqual(number_words(n), want)

    def test_deterministic(self):
        self.assertEqual(sentences(20, 3), sentences(20, 3))
        self.assertNotEqual(sentences(20, 3), sentences(20, 4))

    def test_test_voices_never_in_training(self):
        self.assertFalse(set(synth.TRAIN_VARIANTS) & set(synth.TEST_VARIANTS))


@unittest.skipIf(shutil.which("espeak-ng") is None, "espeak-ng not installed")
class SynthTest(unittest.TestCase):
    def test_generate_small_corpus(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        counts = synth.generate(d, 4, 1, 2, seed=5, aug=1.0, jobs=1, log=io.StringIO())
        self.assertEqual(counts, {"train": 4, "val": 1, "test": 2})
        train = read_manifest(os.path.join(d, "train.jsonl"), check_audio=True)
        test = read_manifest(os.path.join(d, "test.jsonl"), check_audio=True)
        for r in train + test:
            info = sf.info(r["source"])
            self.assertEqual((info.samplerate, info.channels), (16000, 1))
            self.assertAlmostEqual(r["source_len"], info.frames / 160, delta=1)
            self.assertEqual(r["target"], r["target"].lower())
        variants = lambda rs: {r["voice"].split("+")[1] if "+" in r["voice"] else "" for r in rs}
        self.assertFalse(variants(train) & variants(test))
        self.assertTrue(all(r["augmented"] for r in train))
        self.assertFalse(any(r["augmented"] for r in test))


if __name__ == "__main__":
    unittest.main()
