"""ChatTTS architecture, loaders, tokenizer and export (train/chattts)."""
import json
import math
import os
import re
import tempfile
import time
import unittest

import numpy as np
import torch

from train.chattts import checkpoint as ck
from train.chattts import safetensors as st
from train.chattts.config import ChatTTSConfig, config_for
from train.chattts.export import (GPTGraph, greedy_codes, save_bundle, synthetic_spk_stat, tiny_tokenizer_spec,
                                  write_spk_stat)
from train.chattts.model import ChatTTS, istft, log_mel, positions_from_mask
from train.chattts.tokenizer import CHATTTS_SPECIALS, WordPieceTokenizer, build_spec


def tiny(seed=0):
    torch.manual_seed(seed)
    tok = WordPieceTokenizer(tiny_tokenizer_spec())
    return ChatTTS(config_for("tiny", num_text_tokens=tok.size)).eval(), tok


def official_narrow():
    """Official widths with one layer per stack: the names and per-layer shapes of the
    published checkpoint without its 1 GB."""
    c = config_for("official")
    c.gpt.layers = 1
    for s in (c.decoder, c.dvae_encoder, c.dvae_decoder):
        s.n_layer = 1
    c.vocos.layers = 1
    return c


class TokenizerTest(unittest.TestCase):
    def setUp(self):
        self.tok = WordPieceTokenizer(tiny_tokenizer_spec())
        self.v = self.tok.vocab

    def test_specials_in_official_order_after_pieces(self):
        ids = [self.tok.token_id(t) for t in CHATTTS_SPECIALS]
        self.assertEqual(ids, list(range(ids[0], ids[0] + 50)))
        self.assertEqual(ids[-1], self.tok.size - 1)
        self.assertEqual(CHATTTS_SPECIALS.index("[spk_emb]"), 21143 - 21128)
        self.assertEqual(CHATTTS_SPECIALS.index("[Ebreak]"), 21136 - 21128)
        self.assertEqual(CHATTTS_SPECIALS.index("[break_0]"), 21147 - 21128)
        self.assertEqual(CHATTTS_SPECIALS.index("[speed_9]"), 21177 - 21128)

    def test_wordpiece(self):
        t, v = self.tok, self.v
        self.assertEqual(t.encode("Hello, WORLD!"), [v["hello"], v[","], v["world"], v["!"]])
        # greedy longest match: "speaking" = speak + ##ing; accents stripped (lowercase, strip null)
        self.assertEqual(t.encode("speaking café"), [v["speak"], v["##ing"], v["c"], v["##a"], v["##f"], v["##e"]])
        # control tokens are cut out of the raw text first, even inside words
        self.assertEqual(t.encode("[Stts]hello[uv_break]world[Ptts]"),
                         [t.token_id("[Stts]"), v["hello"], t.token_id("[uv_break]"), v["world"], t.token_id("[Ptts]")])
        # CJK ideographs are words of their own; unknown ones and unknown symbols are [UNK]
        self.assertEqual(t.encode("你好吗"), [v["你"], v["好"], v["[UNK]"]])
        self.assertEqual(t.encode("a€b"), [v["[UNK]"]])
        self.assertEqual(t.encode("x" * 101), [v["[UNK]"]])
        self.assertEqual(t.encode("\x00a\u200b b\t"), [v["a"], v["b"]])
        self.assertEqual(t.encode("[laugh][break_3]"), [t.token_id("[laugh]"), t.token_id("[break_3]")])
        self.assertEqual(t.encode(""), [])

    def test_long_text_is_fast(self):
        text = ("the time is what it is, [uv_break] hello world! " * 120)[:5000]
        t0 = time.time()
        ids = self.tok.encode(text)
        self.assertLess(time.time() - t0, 2.0)
        self.assertGreater(len(ids), 500)

    def test_spec_roundtrip_and_errors(self):
        spec = build_spec(["ab", "##c"], lowercase=False, strip_accents=False)
        t = WordPieceTokenizer(json.loads(json.dumps(spec)))
        self.assertEqual(t.encode("abc AB"), [t.vocab["ab"], t.vocab["##c"], t.vocab["[UNK]"]])
        bad = dict(spec, model={"type": "BPE"})
        with self.assertRaisesRegex(ValueError, "WordPiece"):
            WordPieceTokenizer(bad)

    def test_one_writer_for_both_layouts(self):
        """wordpiece_spec writes the demo voice's layout (build_spec) and the Go tests' ChatTTS-like
        one (BERT specials among [unused] entries, plain control tokens, [CLS] A [SEP])."""
        from train.chattts.tokenizer import wordpiece_spec

        vocab = ["[PAD]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ab", "##c"]
        like = wordpiece_spec(vocab, lowercase=False, strip_accents=None, specials_special=False,
                              cls_sep=True, controls_in_vocab=False)
        self.assertEqual(like["model"]["vocab"]["[UNK]"], 2)
        self.assertNotIn("[laugh]", like["model"]["vocab"])
        laugh = [a for a in like["added_tokens"] if a["content"] == "[laugh]"][0]
        self.assertEqual((laugh["id"], laugh["special"], laugh["normalized"]),
                         (len(vocab) + CHATTTS_SPECIALS.index("[laugh]"), False, True))
        self.assertEqual(like["post_processor"]["special_tokens"]["[SEP]"]["ids"], [4])
        t = WordPieceTokenizer(like)
        self.assertEqual(t.encode("abc [laugh]"), [6, 7, laugh["id"]])
        self.assertEqual(build_spec(vocab[6:], lowercase=True, strip_accents=None),
                         wordpiece_spec(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ab", "##c"],
                                        lowercase=True, strip_accents=None))
        with self.assertRaisesRegex(ValueError, "lacks \\[MASK\\]"):
            wordpiece_spec(vocab[:5], lowercase=True, strip_accents=None)
        with self.assertRaisesRegex(ValueError, "repeats"):
            wordpiece_spec(vocab + ["ab"], lowercase=True, strip_accents=None)
        with self.assertRaisesRegex(ValueError, "also a piece"):
            wordpiece_spec(vocab + ["[laugh]"], lowercase=True, strip_accents=None)


class ModelTest(unittest.TestCase):
    def test_official_names_and_shapes(self):
        m = ChatTTS(official_narrow())
        want = {
            "gpt": {"layers.0.self_attn.q_proj.weight": (768, 768), "layers.0.mlp.gate_proj.weight": (3072, 768),
                    "layers.0.mlp.down_proj.weight": (768, 3072), "layers.0.input_layernorm.weight": (768,),
                    "layers.0.post_attention_layernorm.weight": (768,), "norm.weight": (768,)},
            "embed": {"emb_text.weight": (21178, 768), "emb_code.3.weight": (626, 768),
                      "head_text.parametrizations.weight.original0": (21178, 1),
                      "head_text.parametrizations.weight.original1": (21178, 768),
                      "head_code.3.parametrizations.weight.original1": (626, 768)},
            "decoder": {"coef": (1, 100, 1), "decoder.conv_in.0.weight": (128, 384, 3),
                        "decoder.conv_in.2.weight": (512, 128, 3), "decoder.decoder_block.0.weight": (512,),
                        "decoder.decoder_block.0.dwconv.weight": (512, 1, 7),
                        "decoder.decoder_block.0.pwconv1.weight": (2048, 512),
                        "decoder.conv_out.weight": (384, 512, 1), "out_conv.weight": (100, 384, 3)},
            "dvae": {"downsample_conv.0.weight": (512, 100, 3), "downsample_conv.2.weight": (512, 512, 4),
                     "encoder.conv_in.0.weight": (128, 512, 3), "encoder.conv_out.weight": (1024, 256, 1),
                     "decoder.conv_out.weight": (512, 256, 1), "out_conv.weight": (100, 512, 3),
                     "vq_layer.quantizer.rvqs.1.project_in.weight": (4, 512),
                     "vq_layer.quantizer.rvqs.1.project_out.weight": (512, 4)},
            "vocos": {"backbone.embed.weight": (512, 100, 7), "backbone.convnext.0.dwconv.weight": (512, 1, 7),
                      "backbone.convnext.0.pwconv1.weight": (1536, 512), "backbone.convnext.0.gamma": (512,),
                      "backbone.final_layer_norm.weight": (512,), "head.out.weight": (1026, 512),
                      "head.istft.window": (1024,), "feature_extractor.mel_spec.mel_scale.fb": (513, 100)},
        }
        for part, names in want.items():
            sd = getattr(m, part).state_dict()
            for k, shape in names.items():
                self.assertIn(k, sd, f"{part}: {k}")
                self.assertEqual(tuple(sd[k].shape), shape, f"{part}: {k}")
        self.assertFalse(any("inv_freq" in k for k in m.gpt.state_dict()))
        full = config_for("official")
        self.assertEqual((full.gpt.layers, full.decoder.n_layer, full.vocos.layers), (20, 12, 8))

    def test_kv_cache_equals_full_pass(self):
        m, tok = tiny(1)
        g = m.cfg.gpt
        graph = GPTGraph(m, tok.token_id("[spk_emb]")).eval()
        prompt = tok.encode("[Stts][spk_emb][speed_5]hello world[Ptts]")
        spk = torch.randn(1, g.hidden)
        codes, hiddens, _, _ = greedy_codes(m, prompt, spk[0], tok.token_id("[spk_emb]"), 6)
        # the whole sequence at once gives the same hidden state for every step
        s = len(prompt)
        ids = torch.tensor(prompt).view(1, s, 1).expand(1, s, g.num_vq)
        if codes:
            ids = torch.cat([ids, torch.tensor(codes).view(1, -1, g.num_vq)], 1)
        n = ids.shape[1]
        tm = torch.zeros(1, n, dtype=torch.bool)
        tm[:, :s] = True
        with torch.no_grad():
            h = m.hidden_states(ids, tm, torch.ones(1, n, dtype=torch.long), spk, tok.token_id("[spk_emb]"))
        for i in range(len(codes)):
            torch.testing.assert_close(h[0, s - 1 + i], hiddens[i], atol=1e-5, rtol=1e-4)

    def test_left_padding_does_not_change_a_row(self):
        m, tok = tiny(2)
        g = m.cfg.gpt
        p = tok.encode("[Stts][empty_spk]what time is it[Ptts]")
        graph = GPTGraph(m, tok.token_id("[spk_emb]")).eval()
        past = torch.zeros(g.layers, 2, 1, g.heads, 0, g.hidden // g.heads)

        def run(pad):
            s = len(p) + pad
            ids = torch.zeros(1, s, g.num_vq, dtype=torch.long)
            ids[0, pad:] = torch.tensor(p).view(-1, 1)
            am = torch.zeros(1, s, dtype=torch.long)
            am[0, pad:] = 1
            out = graph(ids, am.bool(), torch.zeros(1, g.hidden), am, positions_from_mask(am), past)
            return out[1]

        with torch.no_grad():
            torch.testing.assert_close(run(0), run(5), atol=1e-5, rtol=1e-4)

    def test_speaker_replaces_spk_emb_position_normalised(self):
        m, tok = tiny(3)
        sid = tok.token_id("[spk_emb]")
        ids = torch.tensor([tok.token_id("[Stts]"), sid, tok.vocab["hello"]]).view(1, 3, 1).expand(1, 3, 4)
        tm = torch.ones(1, 3, dtype=torch.bool)
        from train.chattts.model import apply_speaker
        spk = torch.randn(1, m.cfg.gpt.hidden) * 7
        e = apply_speaker(m.embed(ids, tm), ids, tm, spk, sid)
        torch.testing.assert_close(e[0, 1], spk[0] / spk[0].norm())
        torch.testing.assert_close(e[0, 2], m.embed.emb_text.weight[tok.vocab["hello"]])

    def test_gfsq_matches_vector_quantize_pytorch_2024(self):
        m, _ = tiny(4)
        rvq = m.dvae.vq_layer.quantizer.rvqs[0]
        with torch.no_grad():
            rvq.project_in.weight.zero_()
            rvq.project_in.bias.copy_(torch.tensor([0.0, 0.3, -10.0, 0.6]))
            q, idx = rvq(torch.zeros(1, 1, rvq.project_in.in_features))
        # FSQ (levels 5): bound(z) = tanh(z) * 2.002; residual 0 quantises round(bound)/2 with
        # scale 1, residual 1 the rest with scale 1/4: check by hand
        # (the residual is bounded once before the loop and again inside each FSQ)
        b = torch.tanh(torch.tensor([0.0, 0.3, -10.0, 0.6])) * 2.002
        q0 = torch.round(torch.tanh(b) * 2.002) / 2
        r1 = torch.round(torch.tanh((b - q0) * 4) * 2.002) / 2
        levels0 = (q0 * 2 + 2).long()
        levels1 = (r1 * 2 + 2).long()
        basis = torch.tensor([1, 5, 25, 125])
        self.assertEqual(idx.view(-1).tolist(), [int((levels0 * basis).sum()), int((levels1 * basis).sum())])
        # indices -> features inverts the quantiser
        f, codes = m.dvae.encode(torch.randn(2, 100, 12))
        self.assertEqual(tuple(codes.shape), (2, 4, 6))
        self.assertTrue(0 <= int(codes.min()) and int(codes.max()) < 625)
        torch.testing.assert_close(m.dvae.vq_layer.embed(codes), f)

    def test_decoder_doubles_frames_and_vocos_length(self):
        m, _ = tiny(5)
        with torch.no_grad():
            mel = m.decoder.decode(torch.randn(1, m.cfg.gpt.hidden, 7))
            self.assertEqual(tuple(mel.shape), (1, 100, 14))
            self.assertEqual(m.vocos.decode(mel).shape[-1], 256 * 13)

    def test_istft_as_the_contract_writes_it(self):
        g = torch.Generator().manual_seed(0)
        mag = torch.rand(1, 513, 6, generator=g) * 3
        ph = (torch.rand(1, 513, 6, generator=g) - 0.5) * 20
        w = torch.hann_window(1024)
        want = istft(mag, ph, w, 1024, 256)[0].numpy()
        spec = mag[0].numpy() * (np.cos(ph[0].numpy()) + 1j * np.sin(ph[0].numpy()))
        n = np.arange(1024)
        win = 0.5 - 0.5 * np.cos(2 * np.pi * n / 1024)
        y, env = np.zeros(1024 + 256 * 5), np.zeros(1024 + 256 * 5)
        for f in range(6):
            y[f * 256:f * 256 + 1024] += win * np.fft.irfft(spec[:, f], 1024)
            env[f * 256:f * 256 + 1024] += win ** 2
        got = y[512:512 + 256 * 5] / env[512:512 + 256 * 5]
        np.testing.assert_allclose(got, want, atol=1e-5)

    def test_log_mel_as_the_contract_writes_it(self):
        m, _ = tiny(6)
        g = torch.Generator().manual_seed(0)
        audio = torch.sin(torch.arange(3000) * 0.05) * 0.5 + 0.1 * torch.randn(3000, generator=g)
        want = log_mel(m.vocos.feature_extractor.mel_spec, audio).numpy()
        x = np.pad(audio.numpy().astype(np.float64), 512, mode="reflect")
        n = np.arange(1024)
        win = 0.5 - 0.5 * np.cos(2 * np.pi * n / 1024)
        frames = 1 + 3000 // 256
        mag = np.stack([np.abs(np.fft.rfft(win * x[f * 256:f * 256 + 1024])) for f in range(frames)], 1)
        hz2mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
        mel2hz = lambda mm: 700 * (10 ** (mm / 2595) - 1)  # noqa: E731
        pts = mel2hz(np.linspace(hz2mel(0), hz2mel(12000), 102))
        freqs = np.linspace(0, 12000, 513)
        fb = np.zeros((513, 100))
        for i in range(100):
            lo, c, hi = pts[i], pts[i + 1], pts[i + 2]
            fb[:, i] = np.maximum(0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
        got = np.log(np.maximum(fb.T @ mag, 1e-5))
        np.testing.assert_allclose(np.exp(got), np.exp(want), rtol=1e-3, atol=1e-4)


class CheckpointTest(unittest.TestCase):
    def write_v02(self, m, d, tokenizer=True):
        os.makedirs(os.path.join(d, "gpt"))
        st.save(m.gpt.state_dict(), os.path.join(d, "gpt", "model.safetensors"))
        g = m.cfg.gpt
        with open(os.path.join(d, "gpt", "config.json"), "w") as f:
            json.dump({"hidden_size": g.hidden, "intermediate_size": g.ffn, "num_attention_heads": g.heads,
                       "num_hidden_layers": g.layers, "num_audio_tokens": g.num_audio_tokens, "num_vq": 4}, f)
        st.save(m.embed.state_dict(), os.path.join(d, "Embed.safetensors"))
        st.save(m.decoder.state_dict(), os.path.join(d, "Decoder.safetensors"))
        st.save(m.dvae.state_dict(), os.path.join(d, "DVAE.safetensors"))
        st.save(m.vocos.state_dict(), os.path.join(d, "Vocos.safetensors"))

    def test_v02_layout_loads_exactly(self):
        m, _ = tiny(7)
        with tempfile.TemporaryDirectory() as d:
            self.write_v02(m, os.path.join(d, "asset"))
            got, info = ck.load_official(d, m.cfg)
            self.assertEqual(info["layout"], "v0.2")
            for k, v in m.state_dict().items():
                torch.testing.assert_close(got.state_dict()[k], v, msg=k)

    def test_v01_layout_with_old_names(self):
        m, _ = tiny(8)
        with tempfile.TemporaryDirectory() as d:
            gpt = {"gpt." + k: v for k, v in m.gpt.state_dict().items()}
            for k, v in m.embed.state_dict().items():
                k = k.replace("parametrizations.weight.original0", "weight_g").replace(
                    "parametrizations.weight.original1", "weight_v")
                gpt[k] = v
            gpt["gpt.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
            torch.save(gpt, os.path.join(d, "GPT.pt"))
            dec = {re.sub(r"(decoder_block\.\d+)\.weight$", r"\1.gamma", k): v for k, v in m.decoder.state_dict().items()}
            torch.save(dec, os.path.join(d, "Decoder.pt"))
            torch.save(m.vocos.state_dict(), os.path.join(d, "Vocos.pt"))
            got, info = ck.load_official(d, m.cfg)
            self.assertEqual(info["layout"], "v0.1")
            self.assertIn("absent", info["dvae"])
            torch.testing.assert_close(got.embed.head_text.weight, m.embed.head_text.weight)
            torch.testing.assert_close(got.decoder.state_dict()["decoder.decoder_block.0.weight"],
                                       m.decoder.state_dict()["decoder.decoder_block.0.weight"])

    def test_errors_name_the_tensor(self):
        m, _ = tiny(9)
        with tempfile.TemporaryDirectory() as d:
            a = os.path.join(d, "asset")
            self.write_v02(m, a)
            emb = m.embed.state_dict()
            cases = {
                "missing tensor\\(s\\) emb_code.2.weight": {k: v for k, v in emb.items() if k != "emb_code.2.weight"},
                "unexpected tensor\\(s\\) emb_extra.weight": {**emb, "emb_extra.weight": torch.zeros(2)},
                r"tensor emb_text.weight has shape \(3, 16\)": {**emb, "emb_text.weight": torch.zeros(3, 16)},
                "NaN": {**emb, "emb_text.weight": emb["emb_text.weight"] * float("nan")},
            }
            for msg, sd in cases.items():
                st.save(sd, os.path.join(a, "Embed.safetensors"))
                with self.assertRaisesRegex(ck.CheckpointError, "Embed.safetensors \\(embed\\): .*" + msg):
                    ck.load_official(d, m.cfg)
            with open(os.path.join(a, "Embed.safetensors"), "wb") as f:
                f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
            with self.assertRaisesRegex(ck.CheckpointError, "Embed.safetensors"):
                ck.load_official(d, m.cfg)

    def test_declared_size_mismatch_is_refused(self):
        m, _ = tiny(10)
        with tempfile.TemporaryDirectory() as d:
            self.write_v02(m, d)
            with self.assertRaisesRegex(ck.CheckpointError, "hidden_size is 16, the declared size has 768"):
                ck.load_official(d)
            os.remove(os.path.join(d, "gpt", "config.json"))
            with self.assertRaisesRegex(ck.CheckpointError, r"the declared size needs \(768,"):
                ck.load_official(d)

    def test_spk_stat_sources(self):
        v = torch.cat([torch.rand(8) + 0.5, torch.randn(8)]).half()
        s = ck.b14_encode(v.numpy().astype("<f2").tobytes())
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "config.py")
            with open(p, "w", encoding="utf-8") as f:
                f.write(f'class Config:\n    spk_stat: str = (\n        "{s}"\n    )\n')
            torch.testing.assert_close(ck.load_spk_stat(p, 8), v.float())
            torch.save(v.float(), os.path.join(d, "spk_stat.pt"))
            torch.testing.assert_close(ck.load_spk_stat(os.path.join(d, "spk_stat.pt"), 8), v.float())
            with self.assertRaisesRegex(ck.CheckpointError, "has 16 values, want 1536"):
                ck.load_spk_stat(p, 768)
            b = os.path.join(d, "spk_stat.bin")  # an exported bundle's, as write_spk_stat writes it
            write_spk_stat(v.float(), b)
            torch.testing.assert_close(ck.load_spk_stat(b, 8), v.float())
            with open(b, "ab") as f:
                f.write(b"\x00\x01")
            with self.assertRaisesRegex(ck.CheckpointError, "spk_stat.bin: spk_stat holds 66 bytes, not float32"):
                ck.load_spk_stat(b, 8)
            write_spk_stat(-v.float(), b)
            with self.assertRaisesRegex(ck.CheckpointError, "negative std"):
                ck.load_spk_stat(b, 8)
        for n in range(0, 20):
            b = bytes(range(n))
            self.assertEqual(ck.b14_decode(ck.b14_encode(b)), b)


class ExportTest(unittest.TestCase):
    def test_tiny_bundle(self):
        import onnx

        m, tok = tiny(11)
        with tempfile.TemporaryDirectory() as d:
            paths = save_bundle(m, tiny_tokenizer_spec(), synthetic_spk_stat(m.cfg.gpt.hidden, 1), d, size="tiny",
                                comment="test", frontend={"type": "wordpiece"}, refine=True)
            with open(paths["config"]) as f:
                conf = json.load(f)
            self.assertEqual(conf["tokens"]["[spk_emb]"], tok.token_id("[spk_emb]"))
            self.assertEqual(conf["eos_code"], 625)
            self.assertEqual(conf["gpt"]["num_text_tokens"], tok.size)
            self.assertEqual(os.path.getsize(paths["spk_stat"]), 4 * 2 * m.cfg.gpt.hidden)
            g = onnx.load(paths["gpt"])
            self.assertEqual([i.name for i in g.graph.input],
                             ["input_ids", "text_mask", "spk_emb", "attention_mask", "position_ids", "past_kv"])
            self.assertEqual([o.name for o in g.graph.output], ["logits_text", "logits_code", "hidden", "present_kv"])
            self.assertEqual([o.name for o in onnx.load(paths["vocos"]).graph.output], ["mag", "phase"])
            with self.assertRaisesRegex(ValueError, "tokenizer has"):
                save_bundle(m, build_spec(["a"], lowercase=True, strip_accents=None), synthetic_spk_stat(16, 1), d,
                            size="tiny", comment="", frontend={}, refine=False)

    def test_only_control_tokens_and_long_prompt_terminate(self):
        m, tok = tiny(12)
        sid = tok.token_id("[spk_emb]")
        spk = torch.randn(m.cfg.gpt.hidden)
        for text in ["[laugh][uv_break][break_7]", "hello world " * 40]:
            prompt = tok.encode("[Stts][spk_emb]" + text + "[Ptts]")
            codes, hid, _, _ = greedy_codes(m, prompt, spk, sid, 5)
            self.assertLessEqual(len(codes), 5)
            self.assertEqual(hid.shape[0], len(codes))


if __name__ == "__main__":
    unittest.main()


class DemoPipelineTest(unittest.TestCase):
    """The demo voice's corpus front-end, batching and stage losses, on a few synthetic items."""

    def test_phonemize_keeps_controls_and_marks(self):
        from train.chattts import corpus

        calls = []

        def fake(text, voice="en-us"):
            calls.append(text)
            return "<" + text.replace(" ", "_") + ">"

        orig = corpus.espeak_ipa
        corpus.espeak_ipa = fake
        try:
            got = corpus.phonemize("hello there, how are you? [uv_break]fine [laugh]")
        finally:
            corpus.espeak_ipa = orig
        self.assertEqual(got, "<hello_there> , <how_are_you> ? [uv_break] <fine> [laugh]")
        self.assertEqual(calls, ["hello there", "how are you", "fine"])
        self.assertEqual(corpus.split_controls("a[break_3]b"), [("a", False), ("[break_3]", True), ("b", False)])

    def test_scheduled_sampling_replaces_only_code_frames(self):
        """--sched-sampling: a code frame becomes the model's own greedy prediction of it (made at
        the position before), text positions stay, neutral streams keep the neutral code."""
        from train.chattts.train import NEUTRAL_CODE, DemoModel, collate_gpt

        torch.manual_seed(0)
        m = DemoModel(config_for("tiny", num_text_tokens=40), 2)
        items = [{"prompt": torch.tensor([1, 2, 3, 10, 11, 4]), "codes": torch.full((5, 4), 7),
                  "mel": torch.ones(100, 10), "speaker": 0, "spk_emb_id": 2}]
        b = collate_gpt(items)
        m.sched_sampling, m.neutral_streams = 1.0, [1, 3]
        new = m.own_codes(b)
        self.assertTrue(torch.equal(new[0, :6], b["ids"][0, :6]))  # the prompt
        with torch.no_grad():
            from train.chattts.model import apply_speaker
            ids, tm = b["ids"], b["text_mask"]
            emb = apply_speaker(m.embed(ids, tm), ids, tm, m.speakers(b["speaker"]), 2)
            h, _ = m.gpt(emb, b["attn"], torch.arange(ids.shape[1]).unsqueeze(0))
            pred = m.embed.logits_code(h).argmax(-1)
        for k in range(5):  # frame k sits at position 6+k and is predicted at 5+k
            self.assertEqual(new[0, 6 + k, [0, 2]].tolist(), pred[0, 5 + k, [0, 2]].tolist())
            self.assertEqual(new[0, 6 + k, [1, 3]].tolist(), [NEUTRAL_CODE] * 2)
        # two passes: each frame is predicted again from the frames the first pass replaced
        m.sched_passes = 2
        two = m.own_codes(b)
        with torch.no_grad():
            emb = apply_speaker(m.embed(new, tm), new, tm, m.speakers(b["speaker"]), 2)
            h, _ = m.gpt(emb, b["attn"], torch.arange(ids.shape[1]).unsqueeze(0))
            pred2 = m.embed.logits_code(h).argmax(-1)
        for k in range(5):
            self.assertEqual(two[0, 6 + k, [0, 2]].tolist(), pred2[0, 5 + k, [0, 2]].tolist())
        # drawn at a temperature: frames vary with the random stream, and stay valid codes
        m.sched_passes, m.sched_temperature = 1, 5.0
        draws = {tuple(m.own_codes(b)[0, 6:, 0].tolist()) for _ in range(8)}
        self.assertGreater(len(draws), 1)
        m.sched_temperature = 0.0
        # a clone prompt's recorded frames (the first 2 of the 5) stay as recorded
        items[0]["sample_frames"] = 2
        bs = collate_gpt(items)
        self.assertEqual(bs["sample"][0].nonzero().flatten().tolist(), [6, 7])
        kept = m.own_codes(bs)
        self.assertTrue(torch.equal(kept[0, 6:8, [0, 2]], bs["ids"][0, 6:8, [0, 2]]))
        self.assertFalse(torch.equal(kept[0, 8:11, [0, 2]], bs["ids"][0, 8:11, [0, 2]]))
        m.sched_sampling = 0.0
        self.assertTrue(torch.equal(m.own_codes(b)[0, :, [0, 2]], b["ids"][0, :, [0, 2]]))

    def test_clone_prompt_items(self):
        """--prefix-prob: an item carries another utterance of its speaker as the clone prompt, in
        the engine's layout (sample text before the text, sample codes and mel before its own)."""
        from train.chattts.train import Feats, GPTData
        from train.chattts.tokenizer import build_spec

        spec = build_spec(list("abcdefgh"), lowercase=False, strip_accents=False)
        tok = WordPieceTokenizer(spec)
        with tempfile.TemporaryDirectory() as d:
            index, codes, offs, mel = [], [], [], []
            for i, (ph, spk, t) in enumerate([("ab", 0, 2), ("cd", 0, 3), ("ef", 1, 2), ("gh", 1, 4)]):
                index.append({"phonemes": ph, "speed": 5, "speaker_index": spk, "m0": len(mel), "m1": len(mel) + 2 * t})
                offs.append([len(codes), len(codes) + t])
                codes += [[10 * i + k] * 4 for k in range(t)]
                mel += [[float(i)] * 100] * (2 * t)
            with open(os.path.join(d, "x.index.json"), "w") as f:
                json.dump(index, f)
            with open(os.path.join(d, "x.codes.json"), "w") as f:
                json.dump(offs, f)
            np.save(os.path.join(d, "x.codes.npy"), np.array(codes, dtype=np.int16))
            np.save(os.path.join(d, "x.mel.npy"), np.array(mel, dtype=np.float32))
            np.save(os.path.join(d, "x.audio.npy"), np.zeros(10, dtype=np.int16))
            f = Feats(d, "x")
            plain = GPTData(f, tok)
            ds = GPTData(f, tok, prefix_prob=1.0, seed=3)
            for i in range(4):
                j = ds.partner[i]
                self.assertEqual(f.index[j]["speaker_index"], f.index[i]["speaker_index"])
                self.assertNotEqual(i, j)
                it, own, smp = ds[i], plain[i], plain[j]
                self.assertEqual(it["prompt"].tolist(), tok.encode("[Stts][spk_emb]") + tok.encode(f.index[j]["phonemes"])
                                 + tok.encode("[speed_5]") + tok.encode(f.index[i]["phonemes"])
                                 + tok.encode("[Ptts]"))
                self.assertTrue(torch.equal(it["codes"], torch.cat([smp["codes"], own["codes"]])))
                self.assertEqual(it["mel"].shape[1], 2 * it["codes"].shape[0])
                self.assertEqual(ds.lengths()[i], len(it["prompt"]) + it["codes"].shape[0] + 1)
            self.assertEqual(GPTData(f, tok, prefix_prob=0.0).partner, [-1] * 4)
            # the merge's end-token hold-back: 3/4 of the fastest speech's frames per token
            from train.chattts.train import min_frames_per_token
            fastest = min(t / len(tok.encode(ph)) for ph, t in [("ab", 2), ("cd", 3), ("ef", 2), ("gh", 4)])
            self.assertAlmostEqual(min_frames_per_token(d, spec, "x"),
                                   0.75 * fastest, delta=0.02)

    def test_gpt_batch_alignment(self):
        from train.chattts.train import collate_gpt

        items = [{"prompt": torch.tensor([1, 2, 3, 10, 11, 4]), "codes": torch.arange(12).view(3, 4),
                  "mel": torch.ones(100, 6), "speaker": 0, "spk_emb_id": 2},
                 {"prompt": torch.tensor([1, 2, 3, 10, 4]), "codes": torch.arange(8).view(2, 4) + 100,
                  "mel": torch.ones(100, 4), "speaker": 1, "spk_emb_id": 2}]
        b = collate_gpt(items)
        # [Ptts] (position 5) predicts frame 0; the last frame predicts EOS; frames are inputs
        self.assertEqual(b["targets"][0, 5].tolist(), [0, 1, 2, 3])
        self.assertEqual(b["targets"][0, 8].tolist(), [625] * 4)
        self.assertEqual(b["ids"][0, 6].tolist(), [0, 1, 2, 3])
        self.assertEqual(b["target_mask"][0].tolist(), [0, 0, 0, 0, 0, 1, 1, 1, 1])
        self.assertEqual(b["target_mask"][1].tolist(), [0, 0, 0, 0, 1, 1, 1, 0, 0])
        self.assertEqual(b["hid_idx"][1, :2].tolist(), [4, 5])
        self.assertEqual(b["text_mask"][1].tolist(), [1, 1, 1, 1, 1, 0, 0, 0, 0])
        self.assertEqual(b["mel_mask"][1].sum().item(), 4)
        # guided attention: only audio queries x phoneme keys carry weight, most near the diagonal
        from train.chattts.train import guided_attention

        self.assertEqual(b["ga_span"].tolist(), [[6, 3], [5, 2]])
        ga = guided_attention(b["ga_span"], b["ids"].shape[1])
        w = ga[0]
        self.assertTrue(torch.all(w[:5] == 0) and torch.all(w[:, :3] == 0) and torch.all(w[:, 5:] == 0))
        self.assertGreater(w[5, 3].item(), w[5, 4].item())
        self.assertGreater(w[7, 4].item(), w[7, 3].item())
        # the band itself: audio query k of t against phoneme key m of nt, a Gaussian of
        # sigma 0.2 in their relative positions; item 1 (one phoneme) has weight on key 3 alone
        for k in range(3):
            for m in range(2):
                want = math.exp(-(((k + 0.5) / 3 - (m + 0.5) / 2) ** 2) / (2 * 0.2 ** 2))
                self.assertAlmostEqual(w[5 + k, 3 + m].item(), want, places=6)
        self.assertEqual(ga[1].nonzero().tolist(), [[4, 3], [5, 3]])

    def test_stage_losses_backpropagate(self):
        from train.chattts.train import DemoModel, collate_dvae, collate_gpt

        torch.manual_seed(0)
        tok = WordPieceTokenizer(tiny_tokenizer_spec())
        m = DemoModel(config_for("tiny", num_text_tokens=tok.size), 3)
        for stage in ("vocos", "dvae", "gpt"):
            m.set_stage(stage)
            if stage == "vocos":
                audio = torch.randn(2, 256 * 9) * 0.1
                spec = torch.stft(torch.nn.functional.pad(audio, (0, 256)), 1024, 256, window=torch.hann_window(1024),
                                  return_complex=True)[:, :, :10]
                b = {"mel": torch.randn(2, 100, 10), "spec": spec, "audio": audio}
            elif stage == "dvae":
                b = collate_dvae([torch.randn(100, 12), torch.randn(100, 8)])
            else:
                p = tok.encode("[Stts][spk_emb][speed_5]hello world[Ptts]")
                b = collate_gpt([{"prompt": torch.tensor(p), "codes": torch.randint(0, 625, (5, 4)),
                                  "mel": torch.randn(100, 10), "speaker": 2, "spk_emb_id": tok.token_id("[spk_emb]")}])
            loss, st = m(b)
            m.zero_grad()
            loss.backward()
            trained = [n for n, p in m.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0]
            want = {"vocos": ("vocos",), "dvae": ("dvae",), "gpt": ("gpt", "embed", "decoder", "speakers")}[stage]
            self.assertTrue(trained and all(n.split(".")[0] in want for n in trained), (stage, trained[:5]))
            self.assertTrue(math.isfinite(loss.item()))
            if stage == "gpt":
                self.assertGreater(st["ga"], 0)


    def test_gpt_batches_weigh_every_target_frame_the_same(self):
        """Two batches weighted as the trainer weighs them (across ranks or micro-batches) give
        the gradient of one batch holding both: the loss is a mean over target frames."""
        from train.chattts.train import DemoModel, batch_weight, collate_gpt

        torch.manual_seed(0)
        tok = WordPieceTokenizer(tiny_tokenizer_spec())
        m = DemoModel(config_for("tiny", num_text_tokens=tok.size), 3)
        m.set_stage("gpt")
        m.eval()  # no dropout: the same forward pass in both arrangements
        m.mel_weight, m.ga_weight = 0.0, 0.0
        p = tok.encode("[Stts][spk_emb][speed_5]hello world[Ptts]")
        items = [{"prompt": torch.tensor(p), "codes": torch.randint(0, 625, (n, 4)), "mel": torch.randn(100, 2 * n),
                  "speaker": i, "spk_emb_id": tok.token_id("[spk_emb]")} for i, n in enumerate((3, 17))]

        def grads(batches, weigh):
            m.zero_grad()
            ws = [weigh(b) for b in batches]
            for b, w in zip(batches, ws):
                loss, _ = m(b)
                (loss * w / sum(ws)).backward()
            return torch.cat([q.grad.reshape(-1) for q in m.parameters() if q.grad is not None])

        one = grads([collate_gpt(items)], batch_weight)
        split = [collate_gpt([it]) for it in items]
        by_frames = grads(split, batch_weight)
        by_utts = grads(split, lambda b: float(b["speaker"].shape[0]))
        scale = float(one.abs().max())
        self.assertLess(float((by_frames - one).abs().max()) / scale, 1e-5)
        self.assertGreater(float((by_utts - one).abs().max()) / scale, 1e-2, "the test cannot tell the weightings apart")


class InferTest(unittest.TestCase):
    def test_bad_texts_give_audio_or_a_clear_error(self):
        from train.chattts.infer import Sampling, generate_codes, speaker_from_seed, synthesize, warp

        m, tok = tiny(13)
        fe = {"type": "wordpiece"}
        spk = speaker_from_seed(synthetic_spk_stat(m.cfg.gpt.hidden, 1), 5)
        s = Sampling(max_new_tokens=6, seed=1)
        for text in ["[laugh][uv_break]", "", "☃ ⌘ \u0007 zzz", "[break_7][speed_9]"]:
            audio, codes = synthesize(m, tok, fe, text, spk, s)
            self.assertEqual(audio.numel(), 256 * max(0, 2 * len(codes) - 1) if codes else 0)
        t0 = time.time()
        with self.assertRaisesRegex(ValueError, "split the text into sentences"):
            synthesize(m, tok, fe, "hello world " * 420, spk, s)  # 5040 characters
        self.assertLess(time.time() - t0, 5)
        # same seed, same codes; top-k 1 keeps min_tokens_to_keep (3) candidates per stream
        a, _ = generate_codes(m, tok.encode("[Stts][spk_emb]hello[Ptts]"), spk, tok.token_id("[spk_emb]"), s)
        b, _ = generate_codes(m, tok.encode("[Stts][spk_emb]hello[Ptts]"), spk, tok.token_id("[spk_emb]"), s)
        self.assertEqual(a, b)
        # min_frames_per_token: the end token, made the only likely one, waits for that many
        # frames per text token of the sentence
        import train.chattts.infer as infer
        eos, orig = m.cfg.num_codes, infer.warp
        infer.warp = lambda logits, p, k: orig(logits.index_fill(-1, torch.tensor([eos]), 1e4), p, k)
        try:
            _, none = synthesize(m, tok, fe, "hello world again", spk, Sampling(max_new_tokens=50, seed=1))
            _, held = synthesize(m, tok, fe, "hello world again", spk, Sampling(max_new_tokens=50, seed=1, min_frames_per_token=2.5))
        finally:
            infer.warp = orig
        n = len(tok.encode("hello world again"))
        self.assertEqual((len(none), len(held)), (0, int(2.5 * n)))
        w = warp(torch.randn(4, 626), 1.0, 1)
        self.assertEqual(torch.isfinite(w).sum(-1).tolist(), [3, 3, 3, 3])
        w = warp(torch.tensor([[5.0, 4.0, 0.0, -1.0, -2.0]]), 0.5, 0)
        self.assertEqual(torch.isfinite(w).sum().item(), 3)


class CardTest(unittest.TestCase):
    def test_card_is_what_the_engine_reads(self):
        """The card's goal is a number (Go's chattts.Card.Goal is a float64: a string would make the
        whole config.json unreadable) and meets_goal follows the ratio to espeak-ng's CER."""
        from train.chattts.export import add_card
        with tempfile.TemporaryDirectory() as d:
            conf, res = os.path.join(d, "config.json"), os.path.join(d, "results.json")
            # results without seed speakers: the held-out speaker decides
            for demo, meets in ((0.30, True), (0.50, False)):
                with open(conf, "w") as f:
                    json.dump({"format": "parley-chattts-onnx"}, f)
                with open(res, "w") as f:
                    json.dump({"cer": {"demo_heldout": demo, "espeak_heldout": 0.25, "demo_seen": 0.2, "espeak_seen": 0.2},
                               "cer_ratio_heldout": round(demo / 0.25, 3)}, f)
                add_card(conf, res)
                with open(conf) as f:
                    card = json.load(f)["card"]["intelligibility"]
                self.assertIsInstance(card["goal"], float)
                self.assertIsInstance(card["ratio"], float)
                self.assertEqual(card["meets_goal"], meets)
            # with seed speakers, they decide (the voice auto plays); the held-out speaker is kept
            for seeds, meets in ((0.36, True), (0.40, False)):
                with open(res, "w") as f:
                    json.dump({"cer": {"demo_heldout": 0.55, "espeak_heldout": 0.25, "demo_seen": 0.2, "espeak_seen": 0.2,
                                       "demo_seeds": seeds}, "cer_ratio_heldout": 2.2}, f)
                add_card(conf, res)
                with open(conf) as f:
                    card = json.load(f)["card"]["intelligibility"]
                self.assertEqual(card["meets_goal"], meets)
                self.assertAlmostEqual(card["ratio"], seeds / 0.25, places=3)
                self.assertEqual(card["heldout_speaker"], {"value": 0.55, "ratio": 2.2})

    def test_clone_card_keeps_the_intelligibility_card(self):
        """The clone card sits beside the intelligibility card (which decides the default voice)
        and meets its goal by the 1.3x ratio of clone_cer's results."""
        from train.chattts.export import add_card, add_clone_card
        with tempfile.TemporaryDirectory() as d:
            conf, res, cl = (os.path.join(d, n) for n in ("config.json", "results.json", "clone.json"))
            with open(conf, "w") as f:
                json.dump({"format": "parley-chattts-onnx", "code": {"sample_weight": 0.3}}, f)
            with open(res, "w") as f:
                json.dump({"cer": {"demo_heldout": 0.2, "espeak_heldout": 0.2, "demo_seen": 0.2, "espeak_seen": 0.2},
                           "cer_ratio_heldout": 1.0}, f)
            add_card(conf, res)
            for ratio, meets in ((1.25, True), (1.6, False)):
                with open(cl, "w") as f:
                    json.dump({"clone": {"cer": 0.2 * ratio}, "seed": {"cer": 0.2}, "ratio": ratio,
                               "ratio_95": [1.0, 1.9], "sentences": 120, "sample_weight": 0.3}, f)
                add_clone_card(conf, cl)
                with open(conf) as f:
                    c = json.load(f)
                self.assertTrue(c["card"]["intelligibility"]["meets_goal"])
                self.assertEqual(c["card"]["clone"]["meets_goal"], meets)
                self.assertEqual((c["card"]["clone"]["sample_weight"], c["code"]["sample_weight"]), (0.3, 0.3))
            with open(cl, "w") as f:  # measured at another weight than the bundle ships
                json.dump({"clone": {"cer": 0.3}, "seed": {"cer": 0.2}, "ratio": 1.5, "sample_weight": 1.0}, f)
            with self.assertRaises(SystemExit):
                add_clone_card(conf, cl)


class FinetuneBuildTest(unittest.TestCase):
    def test_whole_model_keeps_the_demo_recipe(self):
        """finetune --gpt on the demo voice trains with the demo's own regularisers (guided
        attention, code-input dropout, 80 % of the frames the model's own); on another model,
        or for a speaker vector only, none of them, and only the speaker trains."""
        from train.chattts.finetune import build

        m, tok = tiny(3)
        with tempfile.TemporaryDirectory() as d:
            for size, gpt in (("demo", True), ("tiny", True), ("demo", False)):
                init = os.path.join(d, f"{size}-{gpt}.pt")
                torch.save({"model": m.state_dict(), "config": m.cfg.to_dict(), "tokenizer": tiny_tokenizer_spec(),
                            "spk_stat": synthetic_spk_stat(m.cfg.gpt.hidden, 1), "size": size}, init)
                fm, extra = build(init, None, gpt)
                demo = size == "demo" and gpt
                self.assertEqual((fm.sched_sampling, fm.sched_passes, fm.ga_weight, fm.code_dropout),
                                 (0.8, 2, 1.0, 0.3) if demo else (0.0, 1, 0.0, 0.0), (size, gpt))
                self.assertEqual(any(l.self_attn.keep_attn for l in fm.gpt.layers), demo)
                trained = {n.split(".")[0] for n, p in fm.named_parameters() if p.requires_grad}
                self.assertEqual(trained, {"gpt", "embed", "decoder", "speakers"} if gpt else {"speakers"})
                self.assertEqual(extra["gpt_trained"], gpt)


class GPTConfigFileTest(unittest.TestCase):
    def test_nulls_say_nothing_and_bad_values_are_named(self):
        import json
        import tempfile

        from train.chattts.checkpoint import CheckpointError, check_gpt_config

        g = config_for("official").gpt
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "config.json")

            def check(c):
                with open(p, "w") as f:
                    json.dump(c, f)
                check_gpt_config(p, g)

            check({"hidden_size": g.hidden, "num_key_value_heads": None, "intermediate_size": None, "rope_scaling": None})
            for bad, word in (({"hidden_size": "768"}, "whole number"), ({"num_hidden_layers": 3.5}, "whole number"),
                              ({"hidden_size": g.hidden + 1}, "declared size"), ([1, 2], "JSON object"),
                              ({"num_key_value_heads": 2}, "GQA")):
                with self.assertRaises(CheckpointError) as cm:
                    check(bad)
                self.assertIn(word, str(cm.exception))
