"""A tiny ChatTTS release, in the layout 2noise publishes (asset/gpt/model.safetensors,
Embed.safetensors, Decoder.safetensors, DVAE.safetensors, Vocos.safetensors, tokenizer/, and the
speaker statistics as ChatTTS/config/config.py holds them), for the Go converter's tests.

    /usr/bin/python3 -m train.chattts.fixture --out testdata/chattts/tiny-release

The weights are those of testdata/chattts/tiny (``export --size tiny --random --seed 20240717``
draws them the same way), so what the converter makes of this release must run like that
export. The names take both spellings a release may use: the text head's weight norm as
``weight_g``/``weight_v``, the code heads' as ``parametrizations.weight.original0/1``, and the
decoder blocks' scale as ``gamma`` (``checkpoint._rename`` maps them).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import List, Optional

import torch

from . import safetensors as st
from .checkpoint import b14_encode
from .config import config_for
from .export import synthetic_spk_stat, tiny_tokenizer_spec
from .model import ChatTTS
from .tokenizer import WordPieceTokenizer, build_spec, english_pieces, write_spec

SEED = 20240717


def release_names(part: str, name: str) -> str:
    if part == "embed":
        name = re.sub(r"^(head_text)\.parametrizations\.weight\.original0$", r"\1.weight_g", name)
        name = re.sub(r"^(head_text)\.parametrizations\.weight\.original1$", r"\1.weight_v", name)
    if part in ("decoder", "dvae"):
        name = re.sub(r"(decoder_block\.\d+)\.weight$", r"\1.gamma", name)
    return name


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.fixture", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--size", default="tiny", choices=["tiny", "official"],
                    help="official: random weights at the published size (1.1 GB; for checking the Go converter's "
                         "official template by hand, never committed)")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)  # as export --random: the tokenizer, then the model, then the heads x 8
    if a.size == "official":
        base = english_pieces()
        spec = build_spec(base + [f"##w{i}" for i in range(21128 - 5 - len(base))], lowercase=True, strip_accents=None)
    else:
        spec = tiny_tokenizer_spec()
    tok = WordPieceTokenizer(spec)
    m = ChatTTS(config_for(a.size, num_text_tokens=tok.size))
    if a.size != "official":
        with torch.no_grad():
            for h in [m.embed.head_text, *m.embed.head_code]:
                h.parametrizations["weight"].original0.mul_(8.0)
    spk = synthetic_spk_stat(m.cfg.gpt.hidden, a.seed)
    asset = os.path.join(a.out, "asset")
    os.makedirs(os.path.join(asset, "gpt"), exist_ok=True)
    os.makedirs(os.path.join(asset, "tokenizer"), exist_ok=True)
    files = {"gpt": "gpt/model.safetensors", "embed": "Embed.safetensors", "decoder": "Decoder.safetensors",
             "dvae": "DVAE.safetensors", "vocos": "Vocos.safetensors"}
    for part, rel in files.items():
        sd = getattr(m, part).state_dict()
        st.save({release_names(part, k): v.float() for k, v in sd.items()
                 if not k.endswith(("mel_spec.spectrogram.window", "mel_spec.mel_scale.fb", "istft.window",
                                    "rotary_emb.inv_freq"))}, os.path.join(asset, rel))
    g = m.cfg.gpt
    with open(os.path.join(asset, "gpt", "config.json"), "w") as f:
        json.dump({"hidden_size": g.hidden, "intermediate_size": g.ffn, "num_attention_heads": g.heads,
                   "num_hidden_layers": g.layers, "num_audio_tokens": g.num_audio_tokens,
                   "num_text_tokens": g.num_text_tokens, "num_vq": g.num_vq}, f, indent=1)
    write_spec(spec, os.path.join(asset, "tokenizer", "tokenizer.json"))
    raw = spk.detach().float().numpy().astype("<f2").tobytes()
    with open(os.path.join(a.out, "config.py"), "w", encoding="utf-8") as f:
        f.write("# the tiny release's speaker statistics, as ChatTTS/config/config.py holds the real ones\n")
        f.write(f'class Path:\n    spk_stat: str = (\n        "{b14_encode(raw)}"\n    )\n')
    print(json.dumps({"out": a.out, "files": sorted(files.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
