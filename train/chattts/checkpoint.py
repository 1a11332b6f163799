"""Loaders for the published ChatTTS asset layouts and for Parley's own checkpoints.

Matched releases (2noise/ChatTTS; file lists from ChatTTS/res/sha256_map.json at each release):

  v0.2 (HF 2Noise/ChatTTS since Oct 2024, ChatTTS >= 0.2.1; commit b9b007e):
      asset/gpt/config.json  asset/gpt/model.safetensors  asset/Embed.safetensors
      asset/Decoder.safetensors  asset/DVAE.safetensors  asset/Vocos.safetensors
      asset/tokenizer/{tokenizer.json,tokenizer_config.json,special_tokens_map.json}
      (spk_stat is not a file: it is the base16384 string ``spk_stat`` in ChatTTS/config/config.py)
  v0.2.0 (Aug-Oct 2024): as above but asset/Decoder.pt, asset/DVAE_full.pt, asset/Vocos.pt
  v0.1 (May-Aug 2024): asset/GPT.pt (gpt.* + emb_* + head_*), asset/Decoder.pt,
      asset/DVAE.pt (decoder only) or asset/DVAE_full.pt, asset/Vocos.pt, asset/spk_stat.pt,
      asset/tokenizer.pt (a pickled BertTokenizerFast: pass --tokenizer with tokenizer.json instead)

Renames applied to old files: ConvNeXt ``gamma`` -> ``weight`` (Decoder/DVAE, ChatTTS b3d511b);
weight_norm ``weight_g``/``weight_v`` -> ``parametrizations.weight.original0/1``.  Ignored:
``embed_tokens.weight`` (deleted by ChatTTS after loading), ``rotary_emb.inv_freq`` (old
transformers), and the deterministic mel/window buffers of the feature extractors.
Every other difference is an error that names the file, the tensor and both shapes.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from . import safetensors as st
from .config import ChatTTSConfig, GPTConfig, config_for
from .model import ChatTTS
from ..trainer import load_torch


class CheckpointError(ValueError):
    pass


# Buffers that a file may or may not hold (recomputed by our modules, so either is fine).
_OPTIONAL = re.compile(r"(^|\.)(mel_spec\.spectrogram\.window|mel_spec\.mel_scale\.fb|istft\.window|"
                       r"rotary_emb\.inv_freq)$|^embed_tokens\.weight$|^preprocessor_mel\.")


def _rename(part: str, name: str) -> str:
    if part in ("decoder", "dvae"):
        name = re.sub(r"(decoder_block\.\d+)\.gamma$", r"\1.weight", name)
    name = re.sub(r"\.weight_g$", ".parametrizations.weight.original0", name)
    name = re.sub(r"\.weight_v$", ".parametrizations.weight.original1", name)
    return name


def load_part(module: torch.nn.Module, tensors: Dict[str, torch.Tensor], part: str, source: str) -> None:
    """Load ``tensors`` into ``module`` strictly; errors name the tensor and the file."""
    want = module.state_dict()
    got = {_rename(part, k): v for k, v in tensors.items()}
    missing = [k for k in want if k not in got and not _OPTIONAL.search(k)]
    extra = [k for k in got if k not in want and not _OPTIONAL.search(k)]
    problems: List[str] = []
    if missing:
        problems.append(f"missing tensor(s) {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}")
    if extra:
        problems.append(f"unexpected tensor(s) {', '.join(extra[:8])}{' …' if len(extra) > 8 else ''}")
    for k, v in got.items():
        if k in want and tuple(v.shape) != tuple(want[k].shape):
            problems.append(f"tensor {k} has shape {tuple(v.shape)}, the declared size needs {tuple(want[k].shape)}")
    if problems:
        raise CheckpointError(f"{source} ({part}): " + "; ".join(problems))
    sd = {}
    for k, w in want.items():
        v = got.get(k)
        if v is None:
            sd[k] = w
            continue
        if not torch.is_floating_point(v) and torch.is_floating_point(w):
            raise CheckpointError(f"{source} ({part}): tensor {k} has dtype {v.dtype}, want floating point")
        v = v.to(w.dtype)
        if torch.is_floating_point(v) and not torch.isfinite(v).all():
            raise CheckpointError(f"{source} ({part}): tensor {k} holds NaN or Inf")
        sd[k] = v
    module.load_state_dict(sd, strict=True)


def _read(path: str) -> Dict[str, torch.Tensor]:
    try:
        if path.endswith(".safetensors"):
            return st.load(path)
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except st.SafetensorsError as e:
        raise CheckpointError(str(e)) from e
    except Exception as e:  # noqa: BLE001  (torch raises many kinds for a bad file)
        raise CheckpointError(f"{path}: cannot read checkpoint: {e}") from e
    if isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    raise CheckpointError(f"{path}: not a state dict of tensors")


def _first(d: str, *names: str) -> Optional[str]:
    for n in names:
        p = os.path.join(d, n)
        if os.path.exists(p):
            return p
    return None


def asset_dir(path: str) -> str:
    for d in (path, os.path.join(path, "asset")):
        if _first(d, "gpt/model.safetensors", "GPT.pt"):
            return d
    raise CheckpointError(f"{path}: no ChatTTS assets (want asset/gpt/model.safetensors or asset/GPT.pt)")


def check_gpt_config(path: str, g: GPTConfig) -> None:
    """asset/gpt/config.json (a LlamaConfig) must agree with the declared size."""
    try:
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: {e}") from e
    pairs = {"hidden_size": g.hidden, "intermediate_size": g.ffn, "num_attention_heads": g.heads,
             "num_hidden_layers": g.layers, "num_audio_tokens": g.num_audio_tokens,
             "num_text_tokens": g.num_text_tokens, "num_vq": g.num_vq}
    if not isinstance(c, dict):
        raise CheckpointError(f"{path}: not a JSON object")

    def number(k):
        # a key may be null (as configs written by transformers have it): then it says nothing
        v = c.get(k)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
            raise CheckpointError(f"{path}: {k} is {v!r}, not a whole number")
        return int(v)

    for k, want in pairs.items():
        v = number(k)
        if v is not None and v != want:
            raise CheckpointError(f"{path}: {k} is {v}, the declared size has {want}")
    kv = number("num_key_value_heads")
    if kv is not None and kv != g.heads:
        raise CheckpointError(f"{path}: num_key_value_heads {kv} != num_attention_heads {g.heads} (GQA is not supported)")
    for k, ok in (("hidden_act", "silu"), ("rope_scaling", None)):
        if k in c and c[k] != ok:
            raise CheckpointError(f"{path}: {k} is {c[k]!r}, only {ok!r} is supported")
    if c.get("attention_bias") or c.get("mlp_bias"):
        raise CheckpointError(f"{path}: attention/MLP biases are not supported")


def load_official(path: str, cfg: Optional[ChatTTSConfig] = None) -> Tuple[ChatTTS, dict]:
    """Build a model of ``cfg`` (default: size official) from a ChatTTS asset directory."""
    cfg = cfg or config_for("official")
    d = asset_dir(path)
    model = ChatTTS(cfg)
    info: dict = {"asset_dir": d, "files": {}}
    gpt_st = _first(d, "gpt/model.safetensors")
    if gpt_st:
        cj = _first(d, "gpt/config.json")
        if cj:
            check_gpt_config(cj, cfg.gpt)
        emb = _first(d, "Embed.safetensors")
        if not emb:
            raise CheckpointError(f"{d}: gpt/model.safetensors without Embed.safetensors")
        load_part(model.gpt, _read(gpt_st), "gpt", gpt_st)
        load_part(model.embed, _read(emb), "embed", emb)
        info["files"].update(gpt=gpt_st, embed=emb)
        info["layout"] = "v0.2"
    else:
        p = os.path.join(d, "GPT.pt")
        t = _read(p)
        gpt = {k[4:]: v for k, v in t.items() if k.startswith("gpt.")}
        emb = {k: v for k, v in t.items() if not k.startswith("gpt.")}
        load_part(model.gpt, gpt, "gpt", p)
        load_part(model.embed, emb, "embed", p)
        info["files"].update(gpt=p, embed=p)
        info["layout"] = "v0.1"
    for part, names in (("decoder", ("Decoder.safetensors", "Decoder.pt")),
                        ("vocos", ("Vocos.safetensors", "Vocos.pt")),
                        ("dvae", ("DVAE.safetensors", "DVAE_full.pt"))):
        p = _first(d, *names)
        if p is None:
            if part == "dvae":
                info["dvae"] = "absent (DVAE.pt of v0.1 has no encoder): cloning from audio is unavailable"
                continue
            raise CheckpointError(f"{d}: no {' or '.join(names)}")
        load_part(getattr(model, part), _read(p), part, p)
        info["files"][part] = p
    return model, info


# ------------------------------------------------------------------------------ spk_stat


def b14_decode(s: str) -> bytes:
    """base16384 (as pybase16384): 14 bits per character U+4E00..U+8DFF, big-endian bit stream;
    a final U+3D01..U+3D06 gives the byte count mod 7."""
    rs = [ord(c) for c in s.strip()]
    rem = 0
    if rs and 0x3D00 < rs[-1] <= 0x3D06:
        rem = rs.pop() - 0x3D00
    acc, bits, out = 0, 0, bytearray()
    for i, r in enumerate(rs):
        if not 0x4E00 <= r <= 0x8DFF:
            raise ValueError(f"base16384: character {i} (U+{r:04X}) outside U+4E00..U+8DFF")
        acc = (acc << 14) | (r - 0x4E00)
        bits += 14
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
        acc &= (1 << bits) - 1
    full = len(rs) // 4 * 7 if rem == 0 else (len(rs) - (8 * rem + 13) // 14) // 4 * 7
    n = full + rem
    if len(out) < n:
        raise ValueError(f"base16384: {len(rs)} characters hold fewer than {n} bytes")
    return bytes(out[:n])


def b14_encode(b: bytes) -> str:
    out, acc, bits = [], 0, 0
    for x in b:
        acc = (acc << 8) | x
        bits += 8
        if bits >= 14:
            bits -= 14
            out.append(chr(0x4E00 + ((acc >> bits) & 0x3FFF)))
        acc &= (1 << bits) - 1
    if bits > 0:
        out.append(chr(0x4E00 + ((acc << (14 - bits)) & 0x3FFF)))
    if len(b) % 7:
        out.append(chr(0x3D00 + len(b) % 7))
    return "".join(out)


def load_spk_stat(path: str, hidden: int) -> torch.Tensor:
    """spk_stat as (2*hidden,) float32 = std then mean, from spk_stat.pt (v0.1), a text file with
    the base16384 string, ChatTTS/config/config.py (which holds it as ``spk_stat: str = (...)``), or
    an exported bundle's spk_stat.bin (little-endian float32)."""
    if path.endswith(".bin"):
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise CheckpointError(f"{path}: {e}") from e
        if len(raw) % 4:
            raise CheckpointError(f"{path}: spk_stat holds {len(raw)} bytes, not float32 values")
        v = torch.from_numpy(np.frombuffer(raw, dtype="<f4").astype(np.float32))
    elif path.endswith(".pt"):
        try:
            t = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(f"{path}: cannot read spk_stat: {e}") from e
        if not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{path}: spk_stat is not a tensor")
        v = t.detach().float().reshape(-1)
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CheckpointError(f"{path}: {e}") from e
        m = re.search(r"spk_stat\s*:\s*str\s*=\s*\(\s*\"([^\"]+)\"", text)
        s = m.group(1) if m else text.strip()
        try:
            raw = b14_decode(s)
        except ValueError as e:
            raise CheckpointError(f"{path}: spk_stat: {e}") from e
        if len(raw) % 2:
            raise CheckpointError(f"{path}: spk_stat holds {len(raw)} bytes, not float16 values")
        v = torch.from_numpy(np.frombuffer(raw, dtype="<f2").astype(np.float32))
    if v.numel() != 2 * hidden:
        raise CheckpointError(f"{path}: spk_stat has {v.numel()} values, want {2 * hidden} (std and mean of {hidden})")
    if not torch.isfinite(v).all() or (v[:hidden] < 0).any():
        raise CheckpointError(f"{path}: spk_stat has NaN/Inf or negative std values")
    return v


# --------------------------------------------------------------------- Parley checkpoints


def load_ours(path: str, size: Optional[str] = None) -> Tuple[ChatTTS, dict]:
    """A checkpoint written by train.chattts.train (model state under 'model', config under
    'config', plus 'tokenizer' (the tokenizer.json object) and 'spk_stat')."""
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise CheckpointError(f"{path}: cannot read checkpoint: {e}") from e
    if not isinstance(ck, dict):
        raise CheckpointError(f"{path}: not a Parley ChatTTS checkpoint")
    for k in ("model", "config", "tokenizer"):
        if k not in ck:
            raise CheckpointError(f"{path}: checkpoint lacks {k!r} (not made by train.chattts.train?)")
    if ck.get("untrained"):
        raise CheckpointError(f"{path}: {', '.join(ck['untrained'])} never trained in this run (random); "
                              "fill them in with `train.chattts.train merge --base` first")
    try:
        cfg = ChatTTSConfig.from_dict(ck["config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: bad config: {e}") from e
    if size is not None:
        want = config_for(size, num_text_tokens=cfg.gpt.num_text_tokens)
        if want.to_dict() != cfg.to_dict():
            diff = [k for k in want.to_dict() if want.to_dict()[k] != cfg.to_dict()[k]]
            raise CheckpointError(f"{path}: checkpoint is not size {size!r} (differs in {', '.join(diff)})")
    model = ChatTTS(cfg)
    sd = {k[7:] if k.startswith("module.") else k: v for k, v in ck["model"].items()}
    for part in ChatTTS.PARTS:
        pre = part + "."
        load_part(getattr(model, part), {k[len(pre):]: v for k, v in sd.items() if k.startswith(pre)}, part, path)
    stray = [k for k in sd if k.split(".", 1)[0] not in ChatTTS.PARTS and not k.startswith("speakers.")]
    if stray:
        raise CheckpointError(f"{path}: unexpected tensor(s) {', '.join(stray[:8])}")
    return model, ck
