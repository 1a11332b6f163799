"""Fine-tune an installed ChatTTS voice on one person's clips (the wizard's "Train" step for voices).

    python3 -m train.chattts.from_onnx --model MODEL_DIR --out JOB/init          # the starting point
    python3 -m train.chattts.finetune train --init JOB/init/init.pt --clips JOB/clips.jsonl --out JOB/run \
        [--speaker-init spk.bin] [--gpt] --epochs 30 --lr 3e-3 --resume auto
    python3 -m train.chattts.finetune export --run JOB/run --out JOB/model

clips.jsonl: one {"key", "audio" (a WAV of any rate), "text"} per clip.  Targets are built the
way train.chattts.train builds them for the demo voice: audio → 24 kHz log-mel (Vocos's
features) → the model's own DVAE encoder → code frames; the text through the model's front end
(espeak-ng IPA for the demo voice, the WordPiece text otherwise) into
``[Stts][spk_emb][speed_5]…[Ptts]``; loss = the gpt stage's code cross-entropy + decoder mel L1.

What trains: by default only a new speaker vector (the voice; the model stays the installed one,
so the result is a speaker any Parley face can use with that model); with ``--gpt`` also the
GPT, its embeddings and the decoder (a new model, exported whole).  Parley's trainer runs it
(DDP through train.launch, exact resume with --resume auto, JSON-line progress).

``export`` writes the newest checkpoint of a run as an engine bundle (train.chattts.export's
format, as the demo voice ships: gpt.onnx's weights stored in float16 and an int8 GPT beside
it; spk_stat stays the base model's) plus ``speaker.json``: {"dim", "data"} — the trained
speaker vector — and prints {"model": …, "speaker": …, "gpt_trained": …}.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import List, Optional

import numpy as np
import soundfile as sf
import torch

from .. import dist as pdist
from ..trainer import CheckpointError, Task, TrainConfig, Trainer, load_torch
from .config import DEMO_SIZES, ChatTTSConfig
from .corpus import phonemize
from .export import INT8_BITS, save_bundle
from .model import ChatTTS, mel_features
from .tokenizer import WordPieceTokenizer
from .train import LATE_PHASE, NEUTRAL_CODE, DemoModel, add_train_flags, collate_gpt


class FinetuneError(RuntimeError):
    pass


def load_audio_24k(path: str) -> torch.Tensor:
    try:
        x, sr = sf.read(path, dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001
        raise FinetuneError(f"{path}: cannot read audio: {e}") from e
    x = x.mean(1)
    if sr != 24000:
        from scipy.signal import resample_poly

        g = np.gcd(sr, 24000)
        x = resample_poly(x, 24000 // g, sr // g).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(x))


def prompt_text(text: str, frontend: dict) -> str:
    if frontend.get("type") == "espeak-ipa":
        return phonemize(text, frontend.get("voice", "en-us"))
    return text


class ClipData(torch.utils.data.Dataset):
    """The clips as the gpt stage's items: prompt ids, DVAE codes, mel (targets computed once)."""

    def __init__(self, model: ChatTTS, tok: WordPieceTokenizer, frontend: dict, clips: List[dict],
                 neutral_streams: Optional[List[int]] = None):
        spec = mel_features(model.cfg.n_mels, model.cfg.sample_rate, model.cfg.n_fft, model.cfg.hop)
        self.items = []
        self.spk_id = tok.token_id("[spk_emb]")
        unk = tok.token_id("[UNK]")
        self.unknown = 0
        with torch.no_grad():
            for c in clips:
                x = load_audio_24k(c["audio"])
                mel = torch.log(torch.clip(spec(x), min=1e-5))  # (100, F)
                _, codes = model.dvae.encode(mel.unsqueeze(0))
                codes = codes[0].t().contiguous()  # (T, 4)
                if neutral_streams:  # as the base model's gpt stage was trained (train.encode_codes)
                    codes[:, neutral_streams] = NEUTRAL_CODE
                ids = tok.encode(f"[Stts][spk_emb][speed_5]{prompt_text(c['text'], frontend)}[Ptts]")
                self.unknown += ids.count(unk)
                self.items.append({"prompt": torch.tensor(ids), "codes": codes, "mel": mel[:, : 2 * codes.shape[0]],
                                   "speaker": 0, "spk_emb_id": self.spk_id, "key": c["key"]})
        if not self.items:
            raise FinetuneError("no clips to train on")

    def set_epoch(self, e):
        pass

    def lengths(self):
        return [len(it["prompt"]) + it["codes"].shape[0] + 1 for it in self.items]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class FinetuneTask(Task):
    def __init__(self, model: DemoModel, data: ClipData, extra: dict):
        self.model, self.data, self.extra = model, data, extra

    def train_part(self, part, epoch):
        return self.data

    def collate(self, items):
        b = collate_gpt(items)
        b.pop("key", None)
        return b

    def loss(self, model, batch):
        return model(batch)

    def batch_weight(self, batch) -> float:
        return float(batch["speaker"].shape[0])

    def checkpoint_extra(self) -> dict:
        spk = self.model.speakers.weight.detach()[0].float().tolist()
        return {**self.extra, "speaker": spk}


def read_clips(path: str) -> List[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise FinetuneError(f"{path}:{n}: {e.msg}") from None
            for k in ("key", "audio", "text"):
                if not isinstance(r.get(k), str) or not r[k]:
                    raise FinetuneError(f"{path}:{n}: missing {k!r}")
            out.append(r)
    return out


def build(init: str, speaker_init: Optional[str], gpt: bool):
    try:
        ck = load_torch(init)
    except Exception as e:  # noqa: BLE001
        raise FinetuneError(f"{init}: cannot read the starting point: {e}") from e
    for k in ("model", "config", "tokenizer", "spk_stat"):
        if k not in ck:
            raise FinetuneError(f"{init}: lacks {k!r} (make it with train.chattts.from_onnx)")
    cfg = ChatTTSConfig.from_dict(ck["config"])
    m = DemoModel(cfg, 1)
    missing, unexpected = m.load_state_dict({k: v for k, v in ck["model"].items() if not k.startswith("speakers.")},
                                            strict=False)
    if [k for k in missing if not k.startswith("speakers.")] or unexpected:
        raise FinetuneError(f"{init}: weights do not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}")
    with torch.no_grad():
        stat = ck["spk_stat"].float().view(2, -1)
        if speaker_init:
            v = torch.from_numpy(np.fromfile(speaker_init, dtype="<f4").copy())
            if v.numel() != cfg.gpt.hidden:
                raise FinetuneError(f"{speaker_init}: {v.numel()} values, the model's speakers have {cfg.gpt.hidden}")
        else:
            v = stat[1].clone()  # the mean speaker
        m.speakers.weight[0].copy_(v)
    m.set_stage("gpt")
    if gpt and ck.get("size") in DEMO_SIZES:
        # the whole model trains as the demo voice's own last phases did. Without them a few
        # minutes of one person's speech pulled the small GPT off its text alignment:
        # similarity 0.48 but CER 79 % against 43 % (babble).
        for k, v in LATE_PHASE.items():
            setattr(m, k, v)
    else:
        m.ga_weight = 0.0  # the base model is aligned already; no attention maps kept
        for layer in m.gpt.layers:
            layer.self_attn.keep_attn = False
    for name, p in m.named_parameters():
        if not gpt:
            p.requires_grad = name.startswith("speakers.")
    extra = {k: ck[k] for k in ("config", "tokenizer", "spk_stat", "frontend", "refine", "size", "code_defaults",
                                   "neutral_streams") if k in ck}
    extra["gpt_trained"] = gpt
    return m, extra


def train(a, cfg: TrainConfig) -> None:
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    info = pdist.init(cfg.device)
    try:
        model, extra = build(a.init, a.speaker_init, a.gpt)
        tok = WordPieceTokenizer(extra["tokenizer"])
        data = ClipData(model, tok, extra.get("frontend") or {"type": "wordpiece"}, read_clips(a.clips),
                        extra.get("neutral_streams"))
        if data.unknown and info.is_main:
            print(f"warning: {data.unknown} [UNK] tokens in the prompts (text the voice model cannot read)", file=sys.stderr)
        Trainer(cfg, model, FinetuneTask(model, data, extra), info).fit(stop_at_step=a.stop_at_step)
    finally:
        pdist.destroy()


def export(run: str, out: str) -> dict:
    path = run
    if os.path.isdir(run):
        cks = sorted(glob.glob(os.path.join(run, "ckpt-*.pt")))
        if not cks:
            raise FinetuneError(f"{run}: no checkpoint (ckpt-*.pt)")
        path = cks[-1]
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise FinetuneError(f"{path}: cannot read checkpoint: {e}") from e
    if "speaker" not in ck or "config" not in ck:
        raise FinetuneError(f"{path}: not a train.chattts.finetune checkpoint")
    m = ChatTTS(ChatTTSConfig.from_dict(ck["config"]))
    m.load_state_dict({k[7:] if k.startswith("module.") else k: v for k, v in ck["model"].items()
                       if not k.startswith(("speakers.", "module.speakers."))})
    try:
        paths = save_bundle(m, ck["tokenizer"], ck["spk_stat"], out, size=ck.get("size", "demo"),
                            comment=f"parley ChatTTS voice fine-tuned by train.chattts.finetune ({os.path.basename(path)})",
                            frontend=ck.get("frontend") or {"type": "wordpiece"}, refine=bool(ck.get("refine", False)),
                            code_defaults=ck.get("code_defaults"), neutral_streams=ck.get("neutral_streams"),
                            int8_bits=INT8_BITS, fp16_gpt=True)
        sp = os.path.join(out, "speaker.json")
        with open(sp, "w") as f:
            json.dump({"dim": len(ck["speaker"]), "data": ck["speaker"]}, f)
    except OSError as e:
        raise FinetuneError(f"cannot write the export to {out}: {e.strerror or e} (is the disk full?)") from e
    return {"model": out, "speaker": sp, "gpt_trained": bool(ck.get("gpt_trained")), "checkpoint": path,
            "files": sorted(os.path.basename(p) for p in paths.values())}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.finetune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("train", "export"))
    ap.add_argument("--init", help="train: the starting point (train.chattts.from_onnx's init.pt)")
    ap.add_argument("--clips", help="train: clips.jsonl")
    ap.add_argument("--speaker-init", help="train: the starting speaker vector (float32 LE), e.g. the closest seed speaker")
    ap.add_argument("--gpt", action="store_true", help="train: also the GPT, embeddings and decoder (a new model)")
    ap.add_argument("--run", help="export: a run directory (its newest checkpoint) or a checkpoint")
    ap.add_argument("--stop-at-step", type=int, default=0)
    ap.add_argument("--out", dest="out_dir", default="train/out/chattts/finetune")
    ap.add_argument("--epochs", dest="max_epochs", type=int, default=30)
    ap.add_argument("--warmup", dest="warmup_steps", type=int, default=0)
    add_train_flags(ap)
    a = ap.parse_args(argv)
    try:
        if a.command == "export":
            if not a.run:
                raise FinetuneError("export needs --run")
            print(json.dumps(export(a.run, a.out_dir)))
            return 0
        if not a.init or not a.clips:
            raise FinetuneError("train needs --init and --clips")
        d = TrainConfig().to_dict()
        train(a, TrainConfig(**{k: getattr(a, k) for k in d}))
    except (FinetuneError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
