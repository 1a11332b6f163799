"""Export a ChatTTS model to the ONNX graphs Parley's Go engine (tts/chattts) runs.

    python3 -m train.chattts.export --size tiny --random --seed 20240717 --reference --out testdata/chattts/tiny
    python3 -m train.chattts.export --size official --random --out /tmp/chattts-official   # benchmarks only
    python3 -m train.chattts.export --official ~/ChatTTS/asset --spk-stat ChatTTS/config/config.py --out OUT
    python3 -m train.chattts.export --checkpoint train/out/chattts/run/ckpt-XXXX.pt --out assets/demo/chattts

Writes gpt.onnx, decoder.onnx, vocos.onnx, dvae_encoder.onnx (when the checkpoint has the
DVAE encoder), tokenizer.json, spk_stat.bin and config.json; with --reference also
reference.json (fixed inputs with PyTorch's outputs, checked against ONNX Runtime by
train/onnxcheck, since Python here has no onnxruntime).  The contract is CONTRACT.md.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import sys
import warnings
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from . import checkpoint as ck
from .config import DEMO_SIZES, ChatTTSConfig, config_for
from .model import ChatTTS, apply_speaker, istft, log_mel, count_params
from ..onnxfp16 import FP16_MIN_ELEMENTS, store_fp16
from .tokenizer import CHATTTS_SPECIALS, WordPieceTokenizer, build_spec, english_pieces, write_spec

OPSET = 17
FORMAT = "parley-chattts-onnx"
FORMAT_VERSION = 1

# ChatTTS's inference defaults (core.py RefineTextParams / InferCodeParams; processors.gen_logits).
REFINE_DEFAULTS = dict(temperature=0.7, top_p=0.7, top_k=20, repetition_penalty=1.0, repetition_window=16,
                       max_new_tokens=384, min_new_tokens=0, prompt="")
CODE_DEFAULTS = dict(temperature=0.3, top_p=0.7, top_k=20, repetition_penalty=1.05, repetition_window=16,
                     max_new_tokens=2048, min_new_tokens=0, prompt="[speed_5]",
                     sample_format="[Stts][spk_emb]{sample}{prompt}{text}[Ptts]")  # upstream's clone prompt order


# ------------------------------------------------------------------------------ graphs


class GPTGraph(nn.Module):
    """One decoder step or a prefill: embeddings (+ speaker) -> Llama with explicit KV cache ->
    last position's hidden state, text logits and code logits."""

    def __init__(self, m: ChatTTS, spk_emb_id: int):
        super().__init__()
        self.gpt, self.embed, self.spk_emb_id = m.gpt, m.embed, spk_emb_id
        g = m.cfg.gpt
        self.num_vq, self.num_audio = g.num_vq, g.num_audio_tokens
        with torch.no_grad():  # weight norm folded into plain matrices (one MatMul for the 4 code heads)
            w_text = m.embed.head_text.weight.detach().t().contiguous()
            w_code = torch.cat([h.weight.detach() for h in m.embed.head_code]).t().contiguous()
            if getattr(m, "fp16_gpt", False):  # fp16_gpt_model's copy: the folded heads rounded too
                w_text, w_code = (w if w.numel() < FP16_MIN_ELEMENTS else w.half().float() for w in (w_text, w_code))
            self.register_buffer("w_text", w_text)
            self.register_buffer("w_code", w_code)

    def forward(self, input_ids, text_mask, spk_emb, attention_mask, position_ids, past_kv):
        emb = self.embed(input_ids, text_mask)
        emb = apply_speaker(emb, input_ids, text_mask, spk_emb, self.spk_emb_id)
        h, present = self.gpt(emb, attention_mask, position_ids, past_kv)
        last = h[:, -1, :]
        code = torch.matmul(last, self.w_code).view(-1, self.num_vq, self.num_audio)
        return torch.matmul(last, self.w_text), code, last, present


class DecoderGraph(nn.Module):
    def __init__(self, m: ChatTTS):
        super().__init__()
        self.decoder = m.decoder

    def forward(self, hiddens):  # (B, T, H) -> (B, n_mels, 2T)
        return self.decoder.decode(hiddens.transpose(1, 2))


class VocosGraph(nn.Module):
    def __init__(self, m: ChatTTS):
        super().__init__()
        self.vocos = m.vocos

    def forward(self, mel):  # (B, n_mels, F) -> mag, phase (B, n_fft/2+1, F)
        return self.vocos.mag_phase(mel)


class DVAEEncoderGraph(nn.Module):
    def __init__(self, m: ChatTTS):
        super().__init__()
        self.dvae = m.dvae

    def forward(self, mel):  # (B, n_mels, F) -> codes (B, num_vq, F//2) int64
        return self.dvae.encode(mel)[1]


def _export(module: nn.Module, args, path: str, inputs: List[str], outputs: List[str], axes: Dict[str, Dict[int, str]],
            meta: Dict[str, str]) -> None:
    import onnx

    module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=OPSET, do_constant_folding=True)
    mp = onnx.load(path)
    del mp.metadata_props[:]
    for k, v in meta.items():
        p = mp.metadata_props.add()
        p.key, p.value = k, str(v)
    onnx.save(mp, path)


def gpt_inputs(cfg: ChatTTSConfig, b: int = 1, s: int = 3, past: int = 2):
    g = cfg.gpt
    hd = g.hidden // g.heads
    return (torch.zeros(b, s, g.num_vq, dtype=torch.long), torch.ones(b, s, dtype=torch.bool),
            torch.randn(b, g.hidden), torch.ones(b, past + s, dtype=torch.long),
            torch.arange(past, past + s).unsqueeze(0).expand(b, s).contiguous(),
            torch.zeros(g.layers, 2, b, g.heads, past, hd))


INT8_BITS = 7  # the int8 GPT's default: 7-bit weights, exact on AVX2 CPUs without VNNI (train/onnxquant.py)


def write_int8_gpt(src: str, dst: str, bits: int = INT8_BITS) -> int:
    """gpt.onnx -> the same graph with every weight MatMul dynamically quantized (int8 per
    output column, symmetric; 7 bits unless bits=8), for the engine's tts.precision int8.
    Returns the number of MatMuls quantized."""
    import onnx

    from ..onnxquant import quantize_matmuls

    if bits not in (7, 8):
        raise ValueError(f"int8 bits {bits}: want 7 or 8")
    mp = onnx.load(src)
    n = quantize_matmuls(mp, per_channel=True, reduce_range=bits == 7)
    if n == 0:
        raise ValueError(f"{src}: no weight MatMul to quantize")
    for k, v in {"quantization": "int8 dynamic, weights per output column, symmetric",
                 "quantization_bits": str(bits)}.items():
        p = mp.metadata_props.add()
        p.key, p.value = k, v
    onnx.save(mp, dst)
    return n


def fp16_gpt_model(m: ChatTTS) -> ChatTTS:
    """A copy of m whose GPT-side weights (the Llama, the embeddings and the folded heads: all
    of gpt.onnx) are rounded to float16 precision, so a --fp16-gpt export stores them exactly
    and the reference is computed from the very weights the graph holds.  Tensors under
    FP16_MIN_ELEMENTS values (norms, biases) stay float32, as store_fp16 leaves them."""
    r = copy.deepcopy(m).float().eval()

    def rnd(t: torch.Tensor) -> torch.Tensor:
        return t.half().float() if t.numel() >= FP16_MIN_ELEMENTS else t

    with torch.no_grad():
        for mod in (r.gpt, r.embed.emb_text, *r.embed.emb_code):
            for t in mod.parameters():  # not buffers: the rotary frequencies stay exact
                t.copy_(rnd(t))
    # The weight-norm heads are folded by GPTGraph, which rounds the folded matrices when it sees
    # this mark (the heads' modules stay as they are: the exporter's names depend on them).
    r.fp16_gpt = True
    return r


GPT_FP16_META = "weights_float16"  # gpt.onnx metadata: "true" when its weights are stored as float16


def write_fp16_gpt(path: str) -> int:
    """gpt.onnx in place: its large float32 weights stored as float16 behind Casts (about half
    the file).  Refuses weights float16 cannot hold exactly (export from fp16_gpt_model)."""
    import onnx

    mp = onnx.load(path)
    try:
        n = store_fp16(mp)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
    p = mp.metadata_props.add()
    p.key, p.value = GPT_FP16_META, "true"
    onnx.checker.check_model(mp)
    onnx.save(mp, path)
    return n


def export_graphs(m: ChatTTS, out: str, spk_emb_id: int, with_dvae: bool = True,
                  int8_bits: Optional[int] = None, fp16_gpt: bool = False) -> Dict[str, str]:
    """Write the graphs.  With fp16_gpt, m must come from fp16_gpt_model: gpt.onnx then stores
    its large weights as float16 (computing in float32), after gpt.int8.onnx was quantized from
    the same, already rounded, float32 weights."""
    cfg = m.cfg
    files = {}
    p = os.path.join(out, "gpt.onnx")
    _export(GPTGraph(m, spk_emb_id), gpt_inputs(cfg), p,
            ["input_ids", "text_mask", "spk_emb", "attention_mask", "position_ids", "past_kv"],
            ["logits_text", "logits_code", "hidden", "present_kv"],
            {"input_ids": {0: "batch", 1: "seq"}, "text_mask": {0: "batch", 1: "seq"}, "spk_emb": {0: "batch"},
             "attention_mask": {0: "batch", 1: "total"}, "position_ids": {0: "batch", 1: "seq"},
             "past_kv": {2: "batch", 4: "past"}, "logits_text": {0: "batch"}, "logits_code": {0: "batch"},
             "hidden": {0: "batch"}, "present_kv": {2: "batch", 4: "total"}},
            {"chattts_part": "gpt", "format": FORMAT})
    files["gpt"] = "gpt.onnx"
    if int8_bits:
        write_int8_gpt(p, os.path.join(out, "gpt.int8.onnx"), int8_bits)
        files["gpt_int8"] = "gpt.int8.onnx"
    if fp16_gpt:
        write_fp16_gpt(p)
    p = os.path.join(out, "decoder.onnx")
    _export(DecoderGraph(m), (torch.randn(1, 5, cfg.gpt.hidden),), p, ["hiddens"], ["mel"],
            {"hiddens": {0: "batch", 1: "codes"}, "mel": {0: "batch", 2: "frames"}},
            {"chattts_part": "decoder", "format": FORMAT})
    files["decoder"] = "decoder.onnx"
    p = os.path.join(out, "vocos.onnx")
    _export(VocosGraph(m), (torch.randn(1, cfg.n_mels, 7),), p, ["mel"], ["mag", "phase"],
            {"mel": {0: "batch", 2: "frames"}, "mag": {0: "batch", 2: "frames"}, "phase": {0: "batch", 2: "frames"}},
            {"chattts_part": "vocos", "format": FORMAT})
    files["vocos"] = "vocos.onnx"
    if with_dvae:
        p = os.path.join(out, "dvae_encoder.onnx")
        _export(DVAEEncoderGraph(m), (torch.randn(1, cfg.n_mels, 10),), p, ["mel"], ["codes"],
                {"mel": {0: "batch", 2: "frames"}, "codes": {0: "batch", 2: "codes"}},
                {"chattts_part": "dvae_encoder", "format": FORMAT})
        files["dvae_encoder"] = "dvae_encoder.onnx"
    return files


# ------------------------------------------------------------------------------ config


def engine_config(m: ChatTTS, tok: WordPieceTokenizer, files: Dict[str, str], *, size: str, comment: str,
                  frontend: dict, refine: bool, code_defaults: Optional[dict] = None,
                  neutral_streams: Optional[List[int]] = None) -> dict:
    cfg = m.cfg
    g = cfg.gpt
    tokens = {t: tok.token_id(t) for t in ["[PAD]", "[UNK]"] + CHATTTS_SPECIALS}
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "model_type": "chattts",
        "size": size,
        "comment": comment,
        "files": files,
        "frontend": frontend,
        "gpt": {"hidden": g.hidden, "layers": g.layers, "heads": g.heads, "head_dim": g.hidden // g.heads,
                "num_text_tokens": g.num_text_tokens, "num_audio_tokens": g.num_audio_tokens,
                "num_vq": g.num_vq, "max_positions": g.max_positions,
                "kv_layout": "past_kv[layer][0=key,1=value][batch][head][position][head_dim]"},
        "tokens": tokens,
        "eos_code": cfg.num_codes,
        "eos_text": tokens["[Ebreak]"],
        "speaker": {"dim": g.hidden, "token": "[spk_emb]", "normalize": "l2", "stat_file": files.get("spk_stat"),
                    "stat_layout": "float32 little-endian [2][dim]: std then mean"},
        "audio": {"sample_rate": cfg.sample_rate, "n_fft": cfg.n_fft, "hop": cfg.hop, "win_length": cfg.n_fft,
                  "window": "hann_periodic", "center": True, "n_mels": cfg.n_mels, "mel_frames_per_code": 2,
                  "code_rate_hz": cfg.sample_rate / cfg.hop / 2, "mag_max": 100.0},
        "mel": {"f_min": 0.0, "f_max": cfg.sample_rate / 2, "mel_scale": "htk", "norm": None, "power": 1,
                "pad_mode": "reflect", "log_floor": 1e-5},
        "refine": {"enabled": refine, **REFINE_DEFAULTS, "prompt_format": "[Sbreak]{text}[Pbreak]{prompt}",
                   "keep_below": "[break_0]"},
        "code": {**(code_defaults or CODE_DEFAULTS), "prompt_format": "[Stts][spk_emb]{prompt}{text}[Ptts]",
                 "no_speaker_format": "[Stts][empty_spk]{prompt}{text}[Ptts]"},
        "min_tokens_to_keep": 3,
        "dvae": ({"codes_per_mel_frame": 0.5, "num_vq": g.num_vq, "neutral_streams": neutral_streams or [],
                  "neutral_code": 312} if "dvae_encoder" in files else None),
    }


def model_id(out: str, files: Dict[str, str]) -> str:
    """The export's identity: what gives a clone voice's codes their meaning (the DVAE
    encoder) and its seed voices theirs (spk_stat), hashed.  A clone voice records it, so the
    engine refuses one another model made (or an earlier version of this one) instead of
    speaking its codes as noise; re-exporting the same checkpoint keeps it."""
    import hashlib

    h = hashlib.sha256()
    for key in ("spk_stat", "dvae_encoder"):
        if key in files:
            with open(os.path.join(out, files[key]), "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def write_spk_stat(spk_stat: torch.Tensor, path: str) -> None:
    spk_stat.detach().float().numpy().astype("<f4").tofile(path)


def synthetic_spk_stat(hidden: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    std = 0.5 + torch.rand(hidden, generator=g)
    mean = 0.5 * torch.randn(hidden, generator=g)
    return torch.cat([std, mean])


# --------------------------------------------------------------------------- reference


def _f(t) -> List[float]:
    return [float(f"{float(x):.8g}") for x in torch.as_tensor(t).detach().float().reshape(-1).tolist()]


def _stats(t: torch.Tensor) -> dict:
    t = t.detach().float()
    return {"shape": list(t.shape), "mean": float(t.mean()), "std": float(t.std()), "min": float(t.min()),
            "max": float(t.max()), "l2": float(t.norm())}


@torch.no_grad()
def greedy_codes(m: ChatTTS, prompt_ids: List[int], spk: torch.Tensor, spk_emb_id: int, max_new: int,
                 rep_penalty: float = 1.0, rep_window: int = 16):
    """The engine's decoding loop with argmax instead of sampling: prefill the prompt, then one
    step per code frame; stop when any stream's choice is EOS.  Returns codes (T, num_vq),
    the hidden state that produced each frame (T, H), per-step logits, and the smallest
    top-1/top-2 margin seen (so a reference with near-ties is never recorded)."""
    g = m.cfg.gpt
    graph = GPTGraph(m, spk_emb_id).eval()
    s = len(prompt_ids)
    ids = torch.tensor(prompt_ids).view(1, s, 1).expand(1, s, g.num_vq).contiguous()
    mask = torch.ones(1, s, dtype=torch.bool)
    past = torch.zeros(g.layers, 2, 1, g.heads, 0, g.hidden // g.heads)
    codes, hiddens, steps = [], [], []
    margin = math.inf
    total = s
    pos = torch.arange(s).view(1, s)
    for i in range(max_new):
        lt, lc, hid, past = graph(ids, mask, spk.view(1, -1), torch.ones(1, total, dtype=torch.long), pos, past)
        logits = lc[0].clone()  # (num_vq, A)
        if rep_penalty != 1.0 and codes:
            window = torch.tensor(codes[-rep_window:])  # (w, num_vq)
            for q in range(g.num_vq):
                freq = torch.bincount(window[:, q], minlength=g.num_audio_tokens).float()
                alpha = rep_penalty ** freq
                logits[q] = torch.where(logits[q] < 0, logits[q] * alpha, logits[q] / alpha)
        top2 = logits.topk(2, dim=-1).values
        mg = float((top2[:, 0] - top2[:, 1]).min())
        margin = min(margin, mg)
        nxt = logits.argmax(-1)
        steps.append({"logits_code_first8": [_f(logits[q, :8]) for q in range(g.num_vq)],
                      "argmax": nxt.tolist(), "margin": mg})
        if (nxt == m.cfg.num_codes).any():
            break
        codes.append(nxt.tolist())
        hiddens.append(hid[0])
        ids = nxt.view(1, 1, g.num_vq)
        mask = torch.zeros(1, 1, dtype=torch.bool)
        pos = torch.tensor([[total]])
        total += 1
    h = torch.stack(hiddens) if hiddens else torch.zeros(0, g.hidden)
    return codes, h, steps, margin


@torch.no_grad()
def reference(m: ChatTTS, tok: WordPieceTokenizer, spk_stat: torch.Tensor, seed: int, texts: List[str],
              max_new: int = 24) -> dict:
    """Fixed inputs and PyTorch's outputs for every graph (see CONTRACT.md, reference.json)."""
    cfg = m.cfg
    g = cfg.gpt
    m = m.eval()
    spk_id = tok.token_id("[spk_emb]")
    gen = torch.Generator().manual_seed(seed)
    hd = g.hidden // g.heads

    ref: dict = {"comment": "PyTorch outputs for fixed inputs; checked against ONNX Runtime by train/onnxcheck",
                 "tolerance": 1e-4, "tolerance_rule": "|onnx - torch| <= tolerance * max(1, |torch|)"}

    # tokenizer
    ref["tokenizer"] = [{"text": t, "ids": tok.encode(t)} for t in texts]

    # speaker from a seed: randn * std + mean (ChatTTS Speaker._sample_random)
    std, mean = spk_stat[:g.hidden], spk_stat[g.hidden:]
    spk = torch.randn(g.hidden, generator=gen) * std + mean
    ref["speaker"] = _f(spk)

    # gpt: a batch of 2 left-padded prompts (prefill), then one step with the cache
    p1 = tok.encode("[Stts][spk_emb][speed_5]" + texts[0] + "[Ptts]")
    p2 = tok.encode("[Stts][empty_spk][speed_2]" + texts[1] + "[uv_break][Ptts]")
    s = max(len(p1), len(p2))
    ids = torch.zeros(2, s, g.num_vq, dtype=torch.long)
    am = torch.zeros(2, s, dtype=torch.long)
    for r, p in enumerate((p1, p2)):
        ids[r, s - len(p):] = torch.tensor(p).view(-1, 1)
        am[r, s - len(p):] = 1
    tm = am.bool()
    pos = am.cumsum(-1) - 1
    pos = pos.masked_fill(am == 0, 1)
    spk2 = torch.stack([spk, torch.randn(g.hidden, generator=gen)])
    past0 = torch.zeros(g.layers, 2, 2, g.heads, 0, hd)
    graph = GPTGraph(m, spk_id).eval()
    lt, lc, hid, present = graph(ids, tm, spk2, am, pos, past0)
    step_ids = torch.randint(0, cfg.num_codes, (2, 1, g.num_vq), generator=gen)
    step_tm = torch.zeros(2, 1, dtype=torch.bool)
    step_am = torch.cat([am, torch.ones(2, 1, dtype=torch.long)], 1)
    step_pos = pos[:, -1:] + 1
    lt2, lc2, hid2, present2 = graph(step_ids, step_tm, spk2, step_am, step_pos, present)
    # the same step without the cache: the whole sequence at once must agree
    full_ids = torch.cat([ids, step_ids], 1)
    full_tm = torch.cat([tm, step_tm], 1)
    full_pos = torch.cat([pos, step_pos], 1)
    lt3, lc3, hid3, _ = graph(full_ids, full_tm, spk2, step_am, full_pos, past0)
    drift = float((hid3 - hid2).abs().max())
    if drift > 1e-4:
        raise AssertionError(f"KV-cached step differs from the full pass by {drift}")
    ref["gpt"] = {
        "prefill": {"input_ids": ids.tolist(), "text_mask": tm.tolist(), "spk_emb": [_f(x) for x in spk2],
                    "attention_mask": am.tolist(), "position_ids": pos.tolist(),
                    "past_kv_shape": list(past0.shape),
                    "logits_text": [_f(x) for x in lt], "logits_code": [[_f(q) for q in x] for x in lc],
                    "hidden": [_f(x) for x in hid], "present_kv_shape": list(present.shape),
                    "present_kv_stats": _stats(present),
                    # a few cache entries: [layer, k/v, batch, head, position, dim] -> value
                    "present_kv_samples": _kv_samples(present, gen)},
        "step": {"input_ids": step_ids.tolist(), "text_mask": step_tm.tolist(), "attention_mask": step_am.tolist(),
                 "position_ids": step_pos.tolist(), "past": "prefill.present_kv",
                 "logits_text": [_f(x) for x in lt2], "logits_code": [[_f(q) for q in x] for x in lc2],
                 "hidden": [_f(x) for x in hid2], "present_kv_shape": list(present2.shape)},
    }

    # greedy decoding (argmax per stream, stop at EOS in any stream), B=1, with the seed speaker
    prompt = tok.encode("[Stts][spk_emb][speed_5]" + texts[0] + "[Ptts]")
    # A step whose top two logits are within 1e-3 could flip between runtimes: the reference
    # stops before the first such step (random test models are built so that there is none).
    for _ in range(2):
        codes, hiddens, steps, margin = greedy_codes(m, prompt, spk, spk_id, max_new)
        _, _, steps_rp, margin_rp = greedy_codes(m, prompt, spk, spk_id, max_new, rep_penalty=1.05)
        near = [i for run in (steps, steps_rp) for i, st in enumerate(run) if st["margin"] < 1e-3]
        if not near:
            break
        max_new = min(near)
        if max_new < 4:
            raise AssertionError(f"greedy reference has a near-tie at step {max_new}; pick another seed")
    codes_rp, _, _, margin_rp = greedy_codes(m, prompt, spk, spk_id, max_new, rep_penalty=1.05)
    ref["greedy"] = {"prompt_ids": prompt, "max_new_tokens": max_new, "codes": codes, "steps": steps,
                     "min_top2_margin": margin,
                     "with_repetition_penalty": {"penalty": 1.05, "window": 16, "codes": codes_rp}}

    # decoder on the greedy hiddens
    n = min(len(hiddens), 8)
    if n == 0:
        hiddens = torch.randn(4, g.hidden, generator=gen)
        n = 4
    dec_in = hiddens[:n].unsqueeze(0)
    mel = DecoderGraph(m)(dec_in)
    ref["decoder"] = {"hiddens": [[_f(r) for r in dec_in[0]]], "mel": _f(mel), "mel_shape": list(mel.shape)}

    # vocos on that mel, then the ISTFT the engine does itself
    # (the first 6 frames are recorded whole; all frames as statistics)
    mag, phase = VocosGraph(m)(mel)
    k = min(6, mag.shape[-1])
    mag6, phase6 = mag[..., :k].contiguous(), phase[..., :k].contiguous()
    wav = istft(mag6, phase6, m.vocos.head.istft.window, cfg.n_fft, cfg.hop)
    ref["vocos"] = {"mel": "decoder.mel", "shape": list(mag.shape), "frames": k, "mag": _f(mag6),
                    "phase": _f(phase6), "mag_stats": _stats(mag), "phase_stats": _stats(phase)}
    ref["istft"] = {"n_fft": cfg.n_fft, "hop": cfg.hop, "center": True, "window": "hann_periodic",
                    "input": "vocos.mag/phase (first frames)", "audio": _f(wav), "audio_shape": list(wav.shape)}

    # audio -> log-mel (the engine's feature extractor for cloning), then DVAE codes
    t = torch.arange(2400, dtype=torch.float32) / cfg.sample_rate
    audio = 0.3 * torch.sin(2 * math.pi * (200 + 1500 * t) * t) + 0.05 * torch.randn(2400, generator=gen)
    lm = log_mel(m.vocos.feature_extractor.mel_spec, audio.unsqueeze(0))
    ref["mel"] = {"audio": _f(audio), "log_mel": _f(lm), "shape": list(lm.shape)}
    if m.dvae.encoder is not None:
        feats_in = m.dvae.downsample_conv(lm / m.dvae.coef)
        pre = m.dvae.encoder(feats_in).transpose(1, 2)
        # distance of every quantiser input to a rounding boundary (codes flip only near one)
        codes_dvae = DVAEEncoderGraph(m)(lm)
        ref["dvae"] = {"mel": "mel.log_mel", "codes": codes_dvae.tolist(), "shape": list(codes_dvae.shape),
                       "min_round_margin": _round_margin(m, pre)}
    return ref


def _kv_samples(kv: torch.Tensor, gen: torch.Generator, n: int = 16) -> List[list]:
    out = []
    for _ in range(n):
        idx = [int(torch.randint(0, d, (1,), generator=gen)) for d in kv.shape]
        out.append(idx + [float(kv[tuple(idx)])])
    return out


def _round_margin(m: ChatTTS, pre: torch.Tensor) -> float:
    marg = math.inf
    for rvq, chunk in zip(m.dvae.vq_layer.quantizer.rvqs, pre.chunk(len(m.dvae.vq_layer.quantizer.rvqs), -1)):
        residual = rvq.bound(rvq.project_in(chunk))
        for r in range(rvq.residuals):
            b = rvq.bound(residual / rvq.scales[r])
            marg = min(marg, float((b - b.floor() - 0.5).abs().min()))
            q = b.round() / torch.div(rvq.levels, 2, rounding_mode="floor") * rvq.scales[r]
            residual = residual - q
    return marg


# ------------------------------------------------------------------------------- bundle


def save_bundle(m: ChatTTS, tok_spec: dict, spk_stat: torch.Tensor, out: str, *, size: str, comment: str,
                frontend: dict, refine: bool, reference_seed: Optional[int] = None,
                reference_texts: Optional[List[str]] = None, frontend_examples: Optional[List[dict]] = None,
                reference_name: str = "reference.json", code_defaults: Optional[dict] = None,
                neutral_streams: Optional[List[int]] = None, int8_bits: Optional[int] = None,
                fp16_gpt: bool = False) -> Dict[str, str]:
    os.makedirs(out, exist_ok=True)
    tok = WordPieceTokenizer(tok_spec)
    if tok.size != m.cfg.gpt.num_text_tokens:
        raise ValueError(f"tokenizer has {tok.size} ids but the model's text vocabulary is {m.cfg.gpt.num_text_tokens}")
    if spk_stat.numel() != 2 * m.cfg.gpt.hidden:
        raise ValueError(f"spk_stat has {spk_stat.numel()} values, want {2 * m.cfg.gpt.hidden}")
    m = fp16_gpt_model(m) if fp16_gpt else m.float().eval()
    spk_id = tok.token_id("[spk_emb]")
    files = export_graphs(m, out, spk_id, with_dvae=m.dvae.encoder is not None, int8_bits=int8_bits,
                          fp16_gpt=fp16_gpt)
    write_spec(tok_spec, os.path.join(out, "tokenizer.json"))
    files["tokenizer"] = "tokenizer.json"
    write_spk_stat(spk_stat, os.path.join(out, "spk_stat.bin"))
    files["spk_stat"] = "spk_stat.bin"
    conf = engine_config(m, tok, files, size=size, comment=comment, frontend=frontend, refine=refine,
                         code_defaults=code_defaults, neutral_streams=neutral_streams)
    conf["model_id"] = model_id(out, files)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=1, ensure_ascii=False)
        f.write("\n")
    paths = {k: os.path.join(out, v) for k, v in files.items()}
    paths["config"] = os.path.join(out, "config.json")
    if reference_seed is not None:
        ref = reference(m, tok, spk_stat, reference_seed, reference_texts or DEFAULT_TEXTS)
        if frontend_examples:
            ref["frontend"] = [{**e, "ids": tok.encode(e["phonemes"])} for e in frontend_examples]
        ref["config"] = m.cfg.to_dict()
        paths["reference"] = os.path.join(out, reference_name)
        with open(paths["reference"], "w", encoding="utf-8") as f:
            json.dump(ref, f, separators=(",", ":"), ensure_ascii=False)
            f.write("\n")
    return paths


# The demo voice's reference prompts (phonemised with espeak-ng at export time).
IPA_EXAMPLES = ["what time is it", "hello there, [laugh] the weather is nice today! [uv_break] isn't it?",
                "set a timer for ten minutes [break_4] please", "[speed_7]turn on the kitchen lights."]

DEFAULT_TEXTS = ["hello world", "what time is it? [laugh] speak the test", "Café, naïve résumé!",
                 "unaffable xyzzy 12345", "你好世界 [break_3] [oral_2][laugh_0]", "\u0000a\u200bb\tc  [lbreak]"]


def tiny_tokenizer_spec() -> dict:
    return build_spec(english_pieces(), lowercase=True, strip_accents=None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--random", action="store_true", help="random weights (fixed --seed)")
    src.add_argument("--checkpoint", help="a checkpoint written by train.chattts.train")
    src.add_argument("--official", metavar="DIR", help="ChatTTS asset directory (v0.1 .pt or v0.2 safetensors layout)")
    ap.add_argument("--size", choices=["official", *DEMO_SIZES, "tiny"],
                    help="declared size; the export refuses weights of any other size (default: tiny for "
                         "--random, official for --official, the checkpoint's own for --checkpoint)")
    ap.add_argument("--tokenizer", help="tokenizer.json (default: the asset's tokenizer/tokenizer.json; "
                                        "for --random, a small English WordPiece vocabulary)")
    ap.add_argument("--spk-stat", help="spk_stat.pt, a base16384 text file, or ChatTTS/config/config.py")
    ap.add_argument("--seeds-from", metavar="BUNDLE",
                    help="with --checkpoint: keep an earlier export's seed voices (its spk_stat.bin, and its "
                         "config.json speaker.seed_filter and suggested_seeds), for a retrain that left the GPT and "
                         "the DVAE as they were (a decoder or Vocos fit); model_id then stays, so its clones still "
                         "load (a warning says when it does not)")
    ap.add_argument("--seed", type=int, default=20240717)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference", action="store_true", help="write reference.json for the parity tests")
    ap.add_argument("--reference-name", default="reference.json")
    ap.add_argument("--card", help="results.json of train.chattts.evaluate: its figures go into config.json 'card'")
    ap.add_argument("--sample-weight", type=float, default=0.0,
                    help="code.sample_weight: a clone voice's code logits are this share of the prompted "
                         "sequence's, the rest the same text's without the speaker sample (0: not written = 1)")
    ap.add_argument("--clone-card", help="results.json of train.chattts.clone_cer: the clone's CER goes into the card")
    ap.add_argument("--speed", choices=["native", "time-scale"],
                    help="config.json 'speed': how the voice takes a speed, through its [speed_N] (native) or by "
                         "time-scaling its audio (not written: native, except that the engine time-scales a demo "
                         "size voice, as the espeak-trained one barely acted on [speed_N])")
    ap.add_argument("--int8", action="store_true",
                    help="also write gpt.int8.onnx (files.gpt_int8): the GPT's weight MatMuls in int8, which "
                         "the engine runs on CPUs (tts.precision auto/int8)")
    ap.add_argument("--int8-bits", type=int, choices=[7, 8], default=INT8_BITS,
                    help="weight bits of --int8: 7 (default) is exact on every AVX2 CPU; 8 needs VNNI "
                         "(the engine falls back to fp32 without it)")
    ap.add_argument("--fp16-gpt", action="store_true",
                    help="store gpt.onnx's weights as float16 (computed in float32; about half the file): the "
                         "GPT's weights are rounded to float16 first, and the reference and gpt.int8.onnx are "
                         "made from the rounded weights")
    a = ap.parse_args(argv)

    if a.seeds_from and not a.checkpoint:
        ap.error("--seeds-from goes with --checkpoint")
    torch.manual_seed(a.seed)
    frontend = {"type": "wordpiece"}
    refine = True
    code_defaults = None
    neutral = None
    seeds_from = None
    try:
        if a.random:
            size = a.size or "tiny"
            if a.tokenizer:
                with open(a.tokenizer, encoding="utf-8") as f:
                    spec = json.load(f)
            elif size == "official":  # filler pieces, so the control tokens get their official ids
                base = english_pieces()
                spec = build_spec(base + [f"##w{i}" for i in range(21128 - 5 - len(base))],
                                  lowercase=True, strip_accents=None)
            else:
                spec = tiny_tokenizer_spec()
            tok = WordPieceTokenizer(spec, a.tokenizer or "tokenizer.json")
            m = ChatTTS(config_for(size, num_text_tokens=tok.size))
            if size != "official":  # logits with a usable spread, so greedy references have no near-ties
                with torch.no_grad():
                    for h in [m.embed.head_text, *m.embed.head_code]:
                        h.parametrizations["weight"].original0.mul_(8.0)
            spk_stat = synthetic_spk_stat(m.cfg.gpt.hidden, a.seed)
            comment = f"parley random-weight ChatTTS ({size}, seed {a.seed}); not a speech model"
        elif a.official:
            size = a.size or "official"
            d = ck.asset_dir(a.official)
            tpath = a.tokenizer or os.path.join(d, "tokenizer", "tokenizer.json")
            if not os.path.exists(tpath):
                raise SystemExit(f"{tpath}: no tokenizer.json (v0.1's tokenizer.pt needs --tokenizer tokenizer.json)")
            with open(tpath, encoding="utf-8") as f:
                spec = json.load(f)
            tok = WordPieceTokenizer(spec, tpath)
            m, info = ck.load_official(a.official, config_for(size, num_text_tokens=tok.size))
            sp = a.spk_stat or (os.path.join(d, "spk_stat.pt") if os.path.exists(os.path.join(d, "spk_stat.pt")) else None)
            if sp is None:
                raise SystemExit("the v0.2 assets have no spk_stat file: pass --spk-stat ChatTTS/config/config.py "
                                 "(the ChatTTS package holds it as a base16384 string) or a spk_stat.pt")
            spk_stat = ck.load_spk_stat(sp, m.cfg.gpt.hidden)
            comment = f"2noise/ChatTTS ({info['layout']} assets) exported by parley"
        else:
            m, ckd = ck.load_ours(a.checkpoint, a.size)
            seeds_from = bundle_seeds(a.seeds_from, m.cfg.gpt.hidden) if a.seeds_from else None
            size = a.size or ckd.get("size", "demo")
            spec = ckd["tokenizer"]
            spk_stat = seeds_from[0] if seeds_from else ckd.get("spk_stat")
            if spk_stat is None:
                raise SystemExit(f"{a.checkpoint}: no spk_stat in the checkpoint")
            frontend = ckd.get("frontend", frontend)
            refine = bool(ckd.get("refine", False))
            code_defaults = ckd.get("code_defaults")
            if code_defaults is not None and "sample_format" not in code_defaults:
                # trained before the key: clone items put [speed_N] before the sample's text
                from .train import PROMPT_FIRST

                code_defaults = {**code_defaults, "sample_format": PROMPT_FIRST}
            neutral = ckd.get("neutral_streams")
            comment = f"parley ChatTTS-architecture voice trained by train.chattts.train ({os.path.basename(a.checkpoint)})"
    except ck.CheckpointError as e:
        raise SystemExit(f"error: {e}")
    if not 0 <= a.sample_weight <= 1:
        raise SystemExit(f"--sample-weight {a.sample_weight}: want 0..1")
    if a.sample_weight:
        code_defaults = {**(code_defaults or CODE_DEFAULTS), "sample_weight": a.sample_weight}
    ref_texts, examples = None, None
    if frontend.get("type") == "espeak-ipa" and a.reference:
        from .corpus import phonemize

        examples = [{"text": t, "phonemes": phonemize(t, frontend.get("voice", "en-us"))} for t in IPA_EXAMPLES]
        ref_texts = [e["phonemes"] for e in examples]
    paths = save_bundle(m, spec, spk_stat, a.out, size=size, comment=comment, frontend=frontend, refine=refine,
                        reference_seed=a.seed if a.reference else None, reference_name=a.reference_name,
                        code_defaults=code_defaults, reference_texts=ref_texts, frontend_examples=examples,
                        neutral_streams=neutral, int8_bits=a.int8_bits if a.int8 else None,
                        fp16_gpt=a.fp16_gpt)
    if a.card:
        add_card(paths["config"], a.card)
    if a.clone_card:
        add_clone_card(paths["config"], a.clone_card)
    if seeds_from or a.speed:
        with open(paths["config"], encoding="utf-8") as f:
            conf = json.load(f)
        if seeds_from:
            conf["speaker"].update(seeds_from[1])
        if a.speed:
            conf["speed"] = a.speed
        with open(paths["config"], "w", encoding="utf-8") as f:
            json.dump(conf, f, indent=1, ensure_ascii=False)
            f.write("\n")
        old_id = seeds_from[2] if seeds_from else None
        if old_id and conf["model_id"] != old_id:
            print(f"warning: {a.out}: model_id {conf['model_id']} is not {a.seeds_from}'s {old_id}: the DVAE encoder "
                  "changed (or exports differently here), so voices cloned with that bundle will be refused",
                  file=sys.stderr)
    print(json.dumps({"params": count_params(m), **paths}))
    return 0


def bundle_seeds(bundle: str, hidden: int) -> Tuple[torch.Tensor, dict, Optional[str]]:
    """An exported bundle's seed voices: its spk_stat, the speaker keys that choose among them
    (seed_filter, suggested_seeds; checked here, before anything is written) and its model_id."""
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            conf = json.load(f)
        speaker = conf["speaker"]
        stat = os.path.join(bundle, speaker["stat_file"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ck.CheckpointError(f"{path}: not an exported voice's config ({e})") from e
    if not stat.endswith(".bin"):
        raise ck.CheckpointError(f"{path}: speaker.stat_file {speaker['stat_file']!r} is not an exported spk_stat.bin")
    kept = {k: speaker[k] for k in ("seed_filter", "suggested_seeds") if k in speaker}
    filt = kept.get("seed_filter")
    if filt is not None and not (isinstance(filt, dict) and isinstance(filt.get("weights"), list)
                                 and len(filt["weights"]) == hidden):
        raise ck.CheckpointError(f"{path}: speaker.seed_filter is not a filter of {hidden} weights")
    seeds = kept.get("suggested_seeds")
    if seeds is not None and not (isinstance(seeds, list) and all(isinstance(v, int) and v > 0 for v in seeds)):
        raise ck.CheckpointError(f"{path}: speaker.suggested_seeds is not a list of seeds")
    return ck.load_spk_stat(stat, hidden), kept, conf.get("model_id")


GOAL_RATIO = 1.5  # issue 17: the demo voice's CER at most 1.5x the reference speech's


def add_card(config_path: str, results_path: str) -> None:
    """config.json 'card': the measured intelligibility, so the engine can tell whether the
    voice meets the goal and may be the default voice (tts.engine auto).

    The gate is the voice auto plays, the seed speakers, reading the held-out test sentences,
    against the recorded corpus audio of the same sentences (the human-derived held-out
    speakers), both heard by the demo recogniser: seed CER <= 1.5 x corpus CER.  Until session
    13 it was the held-out speaker rebuilt from 8 of their clips, which is a clone's case (the
    clone card measures that) and moved with the recogniser: the same bundle measured 1.27x with
    session 11's recogniser and 1.57x with session 12's.  That figure is kept as
    'heldout_speaker'.  Results without seed speakers fall back to it."""
    with open(results_path) as f:
        r = json.load(f)
    with open(config_path, encoding="utf-8") as f:
        conf = json.load(f)
    c = r["cer"]
    seeds = c.get("demo_seeds")
    if seeds is not None and c["espeak_heldout"] > 0:
        value, ratio = seeds, round(seeds / c["espeak_heldout"], 3)
        metric = ("CER by the demo ASR (assets/demo/sensevoice) on held-out sentences spoken by the seed speakers "
                  "(the voice tts.engine auto plays), against the recorded corpus audio of the same sentences")
    else:
        value, ratio = c["demo_heldout"], r["cer_ratio_heldout"]
        metric = "CER by the demo ASR (assets/demo/sensevoice) on held-out sentences and held-out speakers"
    conf["card"] = {
        "intelligibility": {
            "metric": metric, "value": value, "reference_value": c["espeak_heldout"], "ratio": ratio,
            "heldout_speaker": {"value": c["demo_heldout"], "ratio": r["cer_ratio_heldout"]},
            "seen_speakers": {"value": c["demo_seen"], "reference_value": c["espeak_seen"]},
            "goal": GOAL_RATIO, "goal_text": f"ratio = the voice's CER / the reference speech's CER <= {GOAL_RATIO}",
            "meets_goal": bool(ratio <= GOAL_RATIO)},
        "measured": "make -C train demo-tts-human-cpu or demo-tts-human-gpu (python3 -m train.chattts.evaluate)",
    }
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=1, ensure_ascii=False)
        f.write("\n")


CLONE_GOAL_RATIO = 1.3  # issue 19: a zero-shot clone's CER at most 1.3x the seed voice's


def add_clone_card(config_path: str, results_path: str) -> None:
    """config.json 'card.clone': the zero-shot clone's CER against a seed voice's on held-out
    speakers (train.chattts.clone_cer) and the sample weight it was measured at."""
    with open(results_path, encoding="utf-8") as f:
        r = json.load(f)
    with open(config_path, encoding="utf-8") as f:
        conf = json.load(f)
    ships = conf.get("code", {}).get("sample_weight") or 1.0
    measured = r.get("sample_weight") or 1.0
    if abs(ships - measured) > 1e-9:
        raise SystemExit(f"{results_path}: measured at sample weight {measured}, but {config_path} ships "
                         f"{ships}: measure the bundle as exported (--sample-weight)")
    conf.setdefault("card", {})["clone"] = {
        "metric": "CER by the demo ASR of 3-4.5 s zero-shot clones of held-out speakers, over a seed voice's CER "
                  "on the same sentences",
        "value": r["clone"]["cer"], "seed_value": r["seed"]["cer"], "ratio": r["ratio"], "ratio_95": r.get("ratio_95"),
        "sentences": r.get("sentences"), "sample_weight": r.get("sample_weight"), "goal": CLONE_GOAL_RATIO,
        "meets_goal": bool(r["ratio"] <= CLONE_GOAL_RATIO),
        "measured": "python3 -m train.chattts.clone_cer (make -C train demo-tts-clone-card)",
    }
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
