"""int8 weights (train/onnxquant.py, train.chattts.quantize) and the recogniser's deepening
(train.sensevoice.grow)."""
import json
import os
import tempfile
import unittest

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from train.chattts.export import save_bundle, synthetic_spk_stat, tiny_tokenizer_spec, write_int8_gpt
from train.chattts.config import config_for
from train.chattts.model import ChatTTS
from train.chattts.tokenizer import WordPieceTokenizer
from train.onnxquant import quantize_per_channel
from train.sensevoice import grow
from train.sensevoice import model as svm


class PerChannelTest(unittest.TestCase):
    def test_rounding_error_and_range(self):
        rng = np.random.default_rng(3)
        w = rng.normal(size=(64, 48)).astype(np.float32) * rng.uniform(0.01, 3, size=48).astype(np.float32)
        w[:, 5] = 0  # an all-zero column keeps a usable scale
        for reduce, qmax in ((False, 127), (True, 63)):
            q, s = quantize_per_channel(w, reduce_range=reduce)
            self.assertEqual(q.dtype, np.int8)
            self.assertEqual(s.shape, (48,))
            self.assertLessEqual(int(np.abs(q).max()), qmax + (1 if reduce else 0))
            err = np.abs(q.astype(np.float32) * s - w)
            self.assertTrue(np.all(err <= s / 2 + 1e-6), "per column, off by at most half a step")
            self.assertTrue(np.all(q[:, 5] == 0))


class ChatTTSInt8Test(unittest.TestCase):
    def test_bundle_with_int8_gpt(self):
        torch.manual_seed(1)
        spec = tiny_tokenizer_spec()
        tok = WordPieceTokenizer(spec)
        m = ChatTTS(config_for("tiny", num_text_tokens=tok.size)).eval()
        with tempfile.TemporaryDirectory() as d:
            paths = save_bundle(m, spec, synthetic_spk_stat(m.cfg.gpt.hidden, 1), d, size="tiny", comment="t",
                                frontend={"type": "wordpiece"}, refine=True, int8_bits=7)
            with open(paths["config"]) as f:
                conf = json.load(f)
            self.assertEqual(conf["files"]["gpt_int8"], "gpt.int8.onnx")
            q = onnx.load(os.path.join(d, "gpt.int8.onnx"))
            f32 = onnx.load(os.path.join(d, "gpt.onnx"))
            self.assertEqual([i.name for i in q.graph.input], [i.name for i in f32.graph.input])
            self.assertEqual([o.name for o in q.graph.output], [o.name for o in f32.graph.output])
            meta = {p.key: p.value for p in q.metadata_props}
            self.assertEqual(meta["quantization_bits"], "7")
            self.assertEqual(meta["chattts_part"], "gpt")
            inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
            mmi = [n for n in q.graph.node if n.op_type == "MatMulInteger"]
            self.assertEqual(len(mmi), sum(1 for n in f32.graph.node if n.op_type == "MatMul"
                                           and n.input[1] in {t.name for t in f32.graph.initializer}))
            for n in mmi:
                w = inits[n.input[1]]
                s = inits[n.input[1][: -len("_quantized")] + "_scale"]
                self.assertEqual(w.dtype, np.int8)
                self.assertLessEqual(int(np.abs(w).max()), 64)
                self.assertEqual(s.shape, (w.shape[1],))
            onnx.checker.check_model(q)
            # the model's identity is the same with or without the int8 GPT: clones stay valid
            os.remove(os.path.join(d, "gpt.int8.onnx"))
            with self.assertRaises(ValueError):
                write_int8_gpt(os.path.join(d, "decoder.onnx"), os.path.join(d, "x.onnx"), bits=9)


class GrowTest(unittest.TestCase):
    def test_same_logits_and_new_blocks_learn(self):
        torch.manual_seed(0)
        src = svm.build(svm.config_for("tiny", vocab_size=40, num_blocks=3)).eval()
        dst = grow.grow(src, 6)
        self.assertEqual(dst.cfg.num_blocks, 6)
        self.assertLess(grow.max_logit_difference(src, dst), 1e-5)
        self.assertEqual(grow.placement(2, 5), [0, None, 1, None, None])
        with self.assertRaises(ValueError):
            grow.grow(src, 2)
        dst.train()
        x = torch.randn(2, 20, dst.cfg.input_size)
        loss, _ = dst(x, torch.tensor([20, 15]), torch.tensor([4, 0]), torch.tensor([15, 15]),
                      torch.randint(1, 40, (2, 5)), torch.tensor([5, 3]), torch.full((2, 4), -1))
        loss.backward()
        new = [i for i, old in enumerate(grow.placement(2, 5)) if old is None]
        for i in new:
            layer = dst.encoder.encoders[i]
            self.assertGreater(float(layer.self_attn.linear_q_k_v.weight.grad.abs().sum()), 0, f"block {i}: v learns")
            self.assertGreater(float(layer.feed_forward.w_2.weight.grad.abs().sum()), 0, f"block {i}: ffn learns")


if __name__ == "__main__":
    unittest.main()


class TemplateTest(unittest.TestCase):
    def test_committed_tiny_template_is_current(self):
        from train.chattts.template import build

        here = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "chattts", "template-tiny")
        with tempfile.TemporaryDirectory() as d:
            build("tiny", d, tiny_tokenizer_spec())
            for name in ("recipes.json", "config.json"):
                with open(os.path.join(d, name)) as f, open(os.path.join(here, name)) as g:
                    self.assertEqual(json.load(f), json.load(g), f"{name}: make -C train test-models")
            for name in ("gpt.onnx", "gpt.int8.onnx", "decoder.onnx", "vocos.onnx", "dvae_encoder.onnx"):
                a, b = onnx.load(os.path.join(d, name)), onnx.load(os.path.join(here, name))
                self.assertEqual([n.op_type for n in a.graph.node], [n.op_type for n in b.graph.node], name)
                self.assertEqual(sorted(t.name for t in a.graph.initializer), sorted(t.name for t in b.graph.initializer))


class NgramLMTest(unittest.TestCase):
    def test_probabilities_sum_to_one_and_beam_prefers_known_words(self):
        import math

        import numpy as np

        from train.sensevoice.beam import NgramLM, prefix_beam_search
        from train.sensevoice.lm import build, write

        rng = random_state = np.random.default_rng(0)
        seqs = []
        for _ in range(300):
            s = []
            for _ in range(int(rng.integers(1, 5))):
                s += [[4, 5, 6], [7, 8], [9, 10, 11]][int(rng.integers(0, 3))]
            seqs.append(s)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "lm.bin")
            write(p, build(seqs, 3, 12, min_count=1), 12)
            lm = NgramLM(p)
        for ctx in [(1, 1), (1, 7), (7, 8), (5, 6), (3, 3)]:
            total = sum(math.exp(lm.logp(ctx, w)) for w in range(12))
            self.assertAlmostEqual(total, 1.0, delta=0.03, msg=f"context {ctx}")
        self.assertGreater(lm.logp((1, 7), 8), lm.logp((1, 7), 5))
        # acoustics undecided between 5 and 8 after 7: the LM picks the word it knows
        lp = np.full((4, 12), -12.0)
        lp[0, 7] = lp[1, 0] = lp[3, 0] = 0.0
        lp[2, 5], lp[2, 8] = math.log(0.51), math.log(0.49)
        self.assertEqual(prefix_beam_search(lp, lm, first_text=4), [7, 8])
