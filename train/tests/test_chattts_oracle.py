"""train.chattts.oracle end to end on a tiny random model and a six-utterance corpus, so the
diagnostic cannot rot: every set is made, judged where PocketSphinx is present, and written."""
import contextlib
import io
import json
import os
import tempfile
import unittest

import numpy as np
import soundfile as sf
import torch

from train.chattts import oracle
from train.chattts.tokenizer import WordPieceTokenizer
from train.chattts.train import build_model, encode_codes, load_tokenizer, prepare


def tiny_corpus(d: str) -> None:
    os.makedirs(os.path.join(d, "wav"), exist_ok=True)
    rng = np.random.default_rng(0)
    texts = [("hello there", "həlˈoʊ ðɛɹ"), ("good day", "ɡʊd dˈeɪ"), ("it is late", "ɪt ɪz lˈeɪt")]
    n = 0
    for split, count in (("train", 4), ("test", 2), ("adapt", 2)):
        with open(os.path.join(d, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for i in range(count):
                plain, ph = texts[n % len(texts)]
                t = np.arange(int(24000 * 0.4)) / 24000
                x = 0.3 * np.sin(2 * np.pi * (110 + 20 * n) * t) + 0.01 * rng.standard_normal(len(t))
                src = f"wav/{split}-{i}.wav"
                sf.write(os.path.join(d, src), x.astype(np.float32), 24000, subtype="PCM_16")
                f.write(json.dumps({"key": f"{split}-{i}", "source": src, "plain": plain, "text": plain,
                                    "phonemes": ph, "speed": 5, "speaker_index": i % 2}, ensure_ascii=False) + "\n")
                n += 1


class OracleTest(unittest.TestCase):
    def test_every_set_on_a_tiny_model(self):
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as d:
            corpus, feats, out = (os.path.join(d, x) for x in ("corpus", "feats", "out"))
            tiny_corpus(corpus)
            with contextlib.redirect_stdout(io.StringIO()):
                prepare(corpus, feats)
            spec = load_tokenizer(feats)
            m = build_model(feats, WordPieceTokenizer(spec), "tiny")
            ckp = os.path.join(d, "tiny.pt")
            torch.save({"model": m.state_dict(), "config": m.cfg.to_dict(), "tokenizer": spec, "size": "tiny",
                        "frontend": {"type": "text"}, "spk_stat": m.spk_stat(), "neutral_streams": [1, 3],
                        "code_defaults": {"temperature": 0.3, "top_p": 0.7, "top_k": 20, "max_new_tokens": 12,
                                          "min_frames_per_token": 0.5}}, ckp)
            with contextlib.redirect_stdout(io.StringIO()):
                encode_codes(feats, ckp, [1, 3])
                rc = oracle.main(["--checkpoint", ckp, "--feats", feats, "--corpus", corpus, "--out", out,
                                  "--limit", "2", "--speaker-steps", "2", "--parley", ""])
            self.assertEqual(rc, 0)
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual(list(res["sets"]), list(oracle.SETS))
            self.assertEqual(res["utterances"], 2)
            self.assertEqual(res["stored_codes_match_dvae"], 1.0)  # the codes were made by this DVAE
            self.assertEqual(res["sampling"]["neutral_streams"], [1, 3])
            judged = "judge_missing" not in res
            for name, e in res["sets"].items():
                self.assertIn("f0_median_hz", e)
                if judged:
                    self.assertGreaterEqual(e["judge_wer"], 0.0)
                for i in range(2):
                    self.assertTrue(os.path.exists(os.path.join(out, "wav", f"{name}-{i:03d}.wav")))
            # the resyntheses keep the source's length (one mel frame of 256 samples either way)
            for name in ("vocos_gt_mel", "dvae_full_codes", "dvae_gt_codes", "gpt_teacher"):
                self.assertAlmostEqual(res["sets"][name]["seconds_ratio_to_source"], 1.0, delta=0.05)
            self.assertEqual(res["sets"]["source"]["seconds_ratio_to_source"], 1.0)
            self.assertEqual(len(res["rows"]), 2)
            self.assertIn("gpt_sampled_row", oracle.table(res))


if __name__ == "__main__":
    unittest.main()
