"""Train Parley's ChatTTS-architecture demo voice with Parley's trainer (DDP, exact resume).

    python3 -m train.chattts.train prepare --corpus C --out F          # features, coef, tokenizer
    python3 -m train.launch --nproc 2 -m train.chattts.train vocos --feats F --out R/vocos ...
    python3 -m train.launch --nproc 2 -m train.chattts.train dvae  --feats F --out R/dvae --init R/vocos/ckpt-*.pt
    python3 -m train.chattts.train codes --feats F --checkpoint R/dvae/ckpt-*.pt    # DVAE codes of the corpus
    python3 -m train.launch --nproc 2 -m train.chattts.train gpt   --feats F --out R/gpt  --init R/dvae/ckpt-*.pt

Stages (each trains its part; the others are frozen and carried along in the checkpoint):
  vocos  log-mel -> STFT magnitude/phase: log-magnitude L1, anti-wrapped phase losses (instantaneous
         phase, group delay, instantaneous frequency; magnitude-weighted), multi-resolution STFT and
         mel L1 on the ISTFT waveform (no GAN: a CPU budget).
  dvae   log-mel -> GFSQ codes -> log-mel autoencoder (straight-through rounding).
  gpt    [Stts][spk_emb][speed_N] phonemes [Ptts] + code frames: cross-entropy on the 4 code heads
         (EOS frame = 625 everywhere), the Decoder on the hidden states -> log-mel L1, a per-speaker
         vector table injected at [spk_emb], dropout 0.5 on the code-frame input embeddings (so the
         next frame cannot be copied from the last one), and a guided-attention loss on two heads of two layers
         (1 - the attention mass an audio query puts on a Gaussian band of phonemes around the
         diagonal), which makes a small model align quickly.
``--init`` also takes train.chattts.from_onnx's init.pt (an exported bundle's weights, for more
phases on a shipped voice): its training speaker table is lost in the export, so it starts as
seed speakers of the bundle's spk_stat and ``gpt --only speakers`` re-fits it first.
Every flag of TrainConfig is available (``--help``); ``--resume auto`` continues a stopped run.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import dist as pdist
from ..trainer import CheckpointError, Task, TrainConfig, Trainer, load_torch, save_split
from .config import DEMO_SIZES, ChatTTSConfig, config_for
from .infer import spk_stat_parts
from .model import ChatTTS, apply_speaker, istft, mel_features
from .tokenizer import WordPieceTokenizer, build_spec

STAGES = ("vocos", "dvae", "gpt")
SPLITS = ("train", "val", "test", "test-seen", "adapt")
HOP = 256
FRONTEND = {"type": "espeak-ipa", "voice": "en-us", "marks": ",.;:!?"}


# ------------------------------------------------------------------------------ features


def prepare(corpus: str, out: str) -> None:
    """Log-mel and audio of every split into memory-mappable arrays, the mel coef and the
    IPA tokenizer."""
    import soundfile as sf  # here only: the training stages run where it may be missing (a GPU machine)

    os.makedirs(out, exist_ok=True)
    spec = mel_features()
    chars: Dict[str, int] = {}
    frames_sum = None
    for split in SPLITS:
        path = os.path.join(corpus, f"{split}.jsonl")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        audios, mels, index = [], [], []
        a0 = m0 = 0
        for r in rows:
            x, sr = sf.read(os.path.join(corpus, r["source"]), dtype="int16")
            if sr != 24000:
                raise ValueError(f"{r['source']}: {sr} Hz, want 24000")
            mel = torch.log(torch.clip(spec(torch.from_numpy(x.astype(np.float32) / 32768.0)), min=1e-5)).t()
            audios.append(x)
            mels.append(mel.numpy().astype(np.float16))
            index.append({**r, "a0": a0, "a1": a0 + len(x), "m0": m0, "m1": m0 + mel.shape[0]})
            a0 += len(x)
            m0 += mel.shape[0]
            if split == "train":
                s = mel.double().pow(2).sum(0)
                frames_sum = s if frames_sum is None else frames_sum + s
            for w in r["phonemes"].split():
                if w.startswith("["):
                    continue
                for c in w:
                    chars[c] = chars.get(c, 0) + 1
        np.save(os.path.join(out, f"{split}.audio.npy"), np.concatenate(audios))
        np.save(os.path.join(out, f"{split}.mel.npy"), np.concatenate(mels))
        with open(os.path.join(out, f"{split}.index.json"), "w", encoding="utf-8") as f:
            json.dump(index, f, ensure_ascii=False)
        print(json.dumps({"split": split, "utterances": len(rows), "frames": m0}), flush=True)
    n = sum(1 for _ in open(os.path.join(corpus, "train.jsonl")))
    total_frames = np.load(os.path.join(out, "train.mel.npy"), mmap_mode="r").shape[0]
    rms = torch.sqrt(frames_sum / total_frames).float()
    pieces = sorted(chars)
    spec_json = build_spec(pieces + ["##" + c for c in pieces], lowercase=False, strip_accents=False)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec_json, f, ensure_ascii=False)
    with open(os.path.join(out, "coef.json"), "w") as f:
        json.dump({"coef": rms.tolist(), "utterances": n}, f)
    print(json.dumps({"ipa_symbols": len(pieces), "vocab": WordPieceTokenizer(spec_json).size}), flush=True)



# Where a clone's sample text goes in the code prompt (config.json code.sample_format): upstream
# ChatTTS's order, which its official model learnt.  Checkpoints from before this key learnt
# PROMPT_FIRST, and the exporter says so for them.
SAMPLE_FIRST = "[Stts][spk_emb]{sample}{prompt}{text}[Ptts]"
PROMPT_FIRST = "[Stts][spk_emb]{prompt}{sample}{text}[Ptts]"

class Feats:
    def __init__(self, d: str, split: str):
        with open(os.path.join(d, f"{split}.index.json"), encoding="utf-8") as f:
            self.index = json.load(f)
        self.dir, self.split = d, split
        # a codes-only pack (train.chattts.train pack) has neither: the gpt stage then trains
        # without the decoder's mel loss
        self.audio = _load_optional(os.path.join(d, f"{split}.audio.npy"))
        self.mel = _load_optional(os.path.join(d, f"{split}.mel.npy"))
        cp = os.path.join(d, f"{split}.codes.npy")
        self.codes = np.load(cp, mmap_mode="r") if os.path.exists(cp) else None
        cip = os.path.join(d, f"{split}.codes.json")
        self.code_off = None
        if os.path.exists(cip):
            with open(cip) as f:
                self.code_off = json.load(f)

    def __len__(self):
        return len(self.index)

    def get_mel(self, i) -> np.ndarray:  # (F, 100)
        if self.mel is None:
            raise FileNotFoundError(f"{self.dir}: no {self.split}.mel.npy (a codes-only pack)")
        r = self.index[i]
        return np.asarray(self.mel[r["m0"]:r["m1"]], dtype=np.float32)

    def get_audio(self, i) -> np.ndarray:
        if self.audio is None:
            raise FileNotFoundError(f"{self.dir}: no {self.split}.audio.npy (a codes-only pack)")
        r = self.index[i]
        return np.asarray(self.audio[r["a0"]:r["a1"]], dtype=np.float32) / 32768.0

    def get_codes(self, i) -> np.ndarray:  # (T, 4)
        a, b = self.code_off[i]
        return np.asarray(self.codes[a:b], dtype=np.int64)


def _load_optional(path: str):
    return np.load(path, mmap_mode="r") if os.path.exists(path) else None


def load_tokenizer(d: str) -> dict:
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


def demo_config(tok: WordPieceTokenizer, size: str = "demo") -> ChatTTSConfig:
    return config_for(size, num_text_tokens=tok.size)


# ------------------------------------------------------------------------------ model


class DemoModel(ChatTTS):
    """ChatTTS plus the training-only speaker table; forward(batch) -> (loss, stats) for the
    current stage (so DDP sees a plain module call)."""

    def __init__(self, cfg: ChatTTSConfig, n_speakers: int):
        super().__init__(cfg, layer_scale_init=0.1)
        self.speakers = nn.Embedding(n_speakers, cfg.gpt.hidden)
        nn.init.normal_(self.speakers.weight, std=1.0)
        self.stage = "gpt"
        self.ga_layers = [min(1, cfg.gpt.layers - 1), min(2, cfg.gpt.layers - 1)]
        self.ga_weight = 1.0
        self.code_dropout = 0.0
        self.mel_weight = 1.0
        self.sched_sampling = 0.0
        self.sched_passes = 1
        self.sched_temperature = 0.0
        self.neutral_streams: List[int] = []
        self.untrained: List[str] = []  # parts still at their random start (load_init)

    def set_stage(self, stage: str, only: Optional[List[str]] = None) -> None:
        """``only`` narrows the stage's trainable parts (e.g. ["speakers"]: re-fit the speaker
        table of a model whose table was lost, everything else kept)."""
        self.stage = stage
        train = {"vocos": ["vocos"], "dvae": ["dvae"], "gpt": ["gpt", "embed", "decoder", "speakers"]}[stage]
        if only:
            bad = [x for x in only if x not in train]
            if bad:
                raise ValueError(f"--only {','.join(bad)}: the {stage} stage trains {', '.join(train)}")
            train = list(only)
        for name, p in self.named_parameters():
            # the text head serves the refine pass, which the demo voice does not train
            p.requires_grad = name.split(".", 1)[0] in train and not name.startswith("embed.head_text.")
        for i, layer in enumerate(self.gpt.layers):
            layer.self_attn.keep_attn = stage == "gpt" and i in self.ga_layers

    def spk_stat(self) -> torch.Tensor:
        w = self.speakers.weight.detach().float()
        return torch.cat([w.std(0), w.mean(0)])

    def forward(self, batch):
        return getattr(self, "loss_" + self.stage)(batch)

    # -- vocos
    def loss_vocos(self, b):
        mel, audio, spec = b["mel"], b["audio"], b["spec"]  # (B,100,n) (B,(n-1)*256) complex (B,513,n)
        mag, ph = self.vocos.mag_phase(mel)
        tmag = spec.abs()
        l_mag = (torch.log(mag + 1e-5) - torch.log(tmag + 1e-5)).abs().mean()
        w = tmag / (tmag.mean(dim=(1, 2), keepdim=True) + 1e-7)
        w = w.clamp(max=10.0)
        tph = torch.angle(spec)

        def aw(x):
            return (x - 2 * math.pi * torch.round(x / (2 * math.pi))).abs()

        l_ip = (aw(ph - tph) * w).mean()
        l_gd = (aw(torch.diff(ph, dim=1) - torch.diff(tph, dim=1)) * w[:, 1:]).mean()
        l_iaf = (aw(torch.diff(ph, dim=2) - torch.diff(tph, dim=2)) * w[:, :, 1:]).mean()
        wav = istft(mag, ph, self.vocos.head.istft.window, self.cfg.n_fft, self.cfg.hop)
        l_mr = mr_stft_loss(wav, audio)
        l_mel = (self.vocos.features(wav) - self.vocos.features(audio)).abs().mean()
        loss = l_mag + 0.3 * (l_ip + l_gd + l_iaf) + l_mr + l_mel
        n = mel.shape[0]
        return loss, {"loss_sum": float(loss.detach()) * n, "samples": n, "utts": n, "tokens": float(mel.shape[0] * mel.shape[2]),
                      "mag": float(l_mag) * n, "phase": float(l_ip + l_gd + l_iaf) * n, "mrstft": float(l_mr) * n,
                      "mel": float(l_mel) * n}

    # -- dvae
    def loss_dvae(self, b):
        mel, mask = b["mel"], b["mask"]  # (B,100,F) even F, (B,F)
        feats, _ = self.dvae.encode(mel, straight_through=True)
        rec = self.dvae.decode(feats)
        f = min(rec.shape[2], mel.shape[2])
        m = mask[:, None, :f]
        err = (rec[..., :f] - mel[..., :f]) * m
        l1 = err.abs().sum() / (m.sum() * mel.shape[1])
        l2 = err.pow(2).sum() / (m.sum() * mel.shape[1])
        loss = l1 + l2
        n = mel.shape[0]
        return loss, {"loss_sum": float(loss.detach()) * n, "samples": n, "utts": n, "tokens": float(mask.sum()),
                      "mel_l1": float(l1) * n}

    # -- gpt + decoder
    def own_codes(self, b) -> torch.Tensor:
        """Scheduled sampling: ids with a share of the code frames replaced by the model's own
        prediction of them (no gradient), so training sees the frames it will read when it runs
        free (teacher-forced CER 21.8 % vs free-running 53 % was the demo voice's gap).

        sched_passes > 1 predicts again from the mixed frames and replaces the same frames, so
        a replaced frame follows earlier replaced frames as in free running (parallel
        scheduled sampling); sched_temperature > 0 draws the frames at that temperature, as
        the engine does, instead of taking the most likely one."""
        ids, tm, am = b["ids"], b["text_mask"], b["attn"]
        audio_in = (~tm) & (am > 0)
        # a clone prompt's frames are a recording's at inference, never the model's own
        own = audio_in & ~b["sample"]
        swap = None
        new = ids.clone()
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0).expand(ids.shape[0], -1)
        for _ in range(max(1, self.sched_passes)):
            with torch.no_grad():
                emb = apply_speaker(self.embed(new, tm), new, tm, self.speakers(b["speaker"]), b["spk_emb_id"])
                h, _ = self.gpt(emb, am, pos)
                logits = self.embed.logits_code(h)  # (B,L,4,A): the frame read at the next position
                if self.sched_temperature > 0:
                    probs = F.softmax(logits / self.sched_temperature, -1)
                    pred = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1).reshape(probs.shape[:-1])
                else:
                    pred = logits.argmax(-1)
            if swap is None:  # drawn after the first pass: the one-pass recipe's random stream
                swap = own[:, 1:] & (torch.rand(audio_in[:, 1:].shape, device=ids.device) < self.sched_sampling)
            new[:, 1:][swap] = pred[:, :-1][swap]
            if self.neutral_streams:
                new[:, :, self.neutral_streams] = torch.where(audio_in[..., None], torch.full_like(new[:, :, self.neutral_streams], NEUTRAL_CODE),
                                                              new[:, :, self.neutral_streams])
        return new

    def loss_gpt(self, b):
        if self.training and self.sched_sampling > 0:
            b = {**b, "ids": self.own_codes(b)}
        ids, tm, am, spk_i = b["ids"], b["text_mask"], b["attn"], b["speaker"]
        g = self.cfg.gpt
        spk = self.speakers(spk_i)
        emb = self.embed(ids, tm)
        if self.training and self.code_dropout > 0:
            # dropout on the previous frames' embeddings (Tacotron's pre-net dropout): a frame
            # cannot be copied from its predecessor, so the model must read the phonemes
            emb = torch.where(tm.unsqueeze(-1), emb, F.dropout(emb, self.code_dropout, True))
        emb = apply_speaker(emb, ids, tm, spk, b["spk_emb_id"])
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0).expand(ids.shape[0], -1)
        h, _ = self.gpt(emb, am, pos)
        # code targets: positions S-1 .. S-1+T predict frames 0..T-1 and the EOS frame
        sel = b["target_mask"] > 0  # (B,L): the positions that predict a frame
        tgt = b["targets"][sel]  # (N,4)
        logits = self.embed.logits_code(h[sel])  # (N,4,A)
        ce = F.cross_entropy(logits.reshape(-1, g.num_audio_tokens), tgt.reshape(-1))
        with torch.no_grad():
            acc = (logits.argmax(-1) == tgt).float().mean()
        # decoder on the hidden states that produced frames 0..T-1 (a codes-only batch has no
        # mel: the decoder is then left as it is and fitted later with --only decoder)
        l_mel = torch.zeros((), device=h.device)
        if b.get("mel") is not None:
            hid = torch.gather(h, 1, b["hid_idx"].unsqueeze(-1).expand(-1, -1, g.hidden)) * b["hid_mask"][..., None]
            mel_hat = self.decoder.decode(hid.transpose(1, 2))
            mm = b["mel_mask"][:, None, :]
            l_mel = ((mel_hat - b["mel"]).abs() * mm).sum() / (mm.sum() * mel_hat.shape[1])
        # guided attention: two heads of two layers should put their attention on the phonemes
        # near the diagonal (reward sum_j att * G, G a Gaussian band over the text keys)
        l_ga = torch.zeros((), device=h.device)
        kept = [li for li in self.ga_layers if self.gpt.layers[li].self_attn.keep_attn] if self.ga_weight else []
        if kept:
            ga_w = guided_attention(b["ga_span"], ids.shape[1])
            rows = ga_w.gt(0).any(-1)  # (B,L) audio queries
            n_rows = rows.sum() * 2 + 1e-6
            for li in kept:
                att = self.gpt.layers[li].self_attn.last_attn[:, :2]  # (B,2,L,L)
                hit = (att * ga_w[:, None]).sum(-1)  # (B,2,L)
                l_ga = l_ga + ((1 - hit) * rows[:, None]).sum() / n_rows
        l_ga = l_ga / len(self.ga_layers)
        loss = ce + self.mel_weight * l_mel + self.ga_weight * l_ga
        n = ids.shape[0]
        return loss, {"loss_sum": float(loss.detach()) * n, "samples": n, "utts": n, "tokens": float(am.sum()),
                      "ce": float(ce.detach()) * n, "acc": float(acc) * n, "mel_l1": float(l_mel.detach()) * n,
                      "ga": float(l_ga.detach()) * n}


def batch_weight(batch) -> float:
    """What a batch's loss is a mean over, so that the trainer weighs every one the same across
    micro-batches and ranks: the GPT's target frames (its cross-entropy is a mean over them),
    the DVAE's mel frames, Vocos's crops (all one length).  Weighed by utterances instead, N
    processes differed from one by 3-16 % of the gradient on mixed lengths."""
    if "target_mask" in batch:
        return float((batch["target_mask"] > 0).sum())
    if "mask" in batch:
        return float(batch["mask"].sum())
    return float(batch["mel"].shape[0])


def mr_stft_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = min(x.shape[-1], y.shape[-1])
    x, y = x[..., :n], y[..., :n]
    total = 0.0
    for fft, hop in ((512, 128), (1024, 256), (2048, 512)):
        w = torch.hann_window(fft, device=x.device)
        X = torch.stft(x, fft, hop, window=w, return_complex=True).abs()
        Y = torch.stft(y, fft, hop, window=w, return_complex=True).abs()
        sc = torch.norm(Y - X) / (torch.norm(Y) + 1e-7)
        lm = (torch.log(X + 1e-5) - torch.log(Y + 1e-5)).abs().mean()
        total = total + sc + lm
    return total / 3


# ------------------------------------------------------------------------------ data


class VocosData(torch.utils.data.Dataset):
    def __init__(self, feats: Feats, frames: int, seed: int):
        self.f, self.n, self.seed, self.epoch = feats, frames, seed, 0
        self.window = torch.hann_window(1024)

    def set_epoch(self, e):
        self.epoch = e

    def lengths(self):
        return [self.n] * len(self.f)

    def __len__(self):
        return len(self.f)

    def __getitem__(self, i):
        mel = self.f.get_mel(i)
        audio = torch.from_numpy(self.f.get_audio(i))
        spec = torch.stft(audio, 1024, HOP, window=self.window, center=True, pad_mode="reflect", return_complex=True)
        n = self.n
        total = mel.shape[0]
        rng = np.random.default_rng([self.seed, self.epoch, i])
        a = int(rng.integers(0, max(1, total - n + 1)))
        m = torch.from_numpy(mel[a:a + n]).t()
        s = spec[:, a:a + n]
        wav = audio[a * HOP:(a + n - 1) * HOP]
        if m.shape[1] < n:  # a short utterance: pad with silence frames
            pad = n - m.shape[1]
            m = F.pad(m, (0, pad), value=math.log(1e-5))
            s = F.pad(s, (0, pad))
            wav = F.pad(wav, (0, (n - 1) * HOP - wav.shape[0]))
        return {"mel": m, "spec": s, "audio": wav}


def collate_vocos(items):
    return {"mel": torch.stack([x["mel"] for x in items]), "spec": torch.stack([x["spec"] for x in items]),
            "audio": torch.stack([x["audio"] for x in items])}


class DVAEData(torch.utils.data.Dataset):
    def __init__(self, feats: Feats, max_frames: int, seed: int):
        self.f, self.max, self.seed, self.epoch = feats, max_frames, seed, 0

    def set_epoch(self, e):
        self.epoch = e

    def lengths(self):
        return [min(self.max, r["m1"] - r["m0"]) for r in self.f.index]

    def __len__(self):
        return len(self.f)

    def __getitem__(self, i):
        mel = self.f.get_mel(i)
        rng = np.random.default_rng([self.seed, self.epoch, i])
        if mel.shape[0] > self.max:
            a = int(rng.integers(0, (mel.shape[0] - self.max) // 2 + 1)) * 2
            mel = mel[a:a + self.max]
        return torch.from_numpy(mel[: mel.shape[0] // 2 * 2]).t()


def collate_dvae(items):
    n = max(x.shape[1] for x in items)
    mel = torch.full((len(items), items[0].shape[0], n), math.log(1e-5))
    mask = torch.zeros(len(items), n)
    for i, x in enumerate(items):
        mel[i, :, :x.shape[1]] = x
        mask[i, :x.shape[1]] = 1
    return {"mel": mel, "mask": mask}


class GPTData(torch.utils.data.Dataset):
    """The gpt stage's items.  With prefix_prob > 0 that share of the items (fixed by seed) get
    another utterance of the same speaker as a speaker sample, laid out as the engine lays out
    a clone prompt (tts/chattts synth.go, upstream's order): [Stts][spk_emb] sample text, [speed_N] text [Ptts]
    sample codes, codes — so the model learns to carry on from a recording."""

    def __init__(self, feats: Feats, tok: WordPieceTokenizer, prefix_prob: float = 0.0, seed: int = 0):
        if feats.codes is None:
            raise ValueError("no DVAE codes for this split: run `train.chattts.train codes` first")
        self.f, self.tok = feats, tok
        self.prompts = [tok.encode(f"[Stts][spk_emb][speed_{r['speed']}]{r['phonemes']}[Ptts]") for r in feats.index]
        self.spk_id = tok.token_id("[spk_emb]")
        unk = tok.token_id("[UNK]")
        self.unknown = sum(p.count(unk) for p in self.prompts)
        self.partner = [-1] * len(self.prompts)
        if prefix_prob > 0:
            rng = np.random.default_rng(seed)
            by_spk: Dict[int, List[int]] = {}
            for i, r in enumerate(feats.index):
                by_spk.setdefault(r["speaker_index"], []).append(i)
            for i, r in enumerate(feats.index):
                others = [j for j in by_spk[r["speaker_index"]] if j != i]
                if others and rng.random() < prefix_prob:
                    j = others[int(rng.integers(len(others)))]
                    self.partner[i] = j
                    # upstream's order (SAMPLE_FIRST): the sample's text, then [speed_N] and the text
                    self.prompts[i] = (tok.encode("[Stts][spk_emb]") + tok.encode(feats.index[j]["phonemes"])
                                       + tok.encode(f"[speed_{r['speed']}]") + tok.encode(r["phonemes"])
                                       + tok.encode("[Ptts]"))

    def set_epoch(self, e):
        pass

    def frames(self, i):
        a, b = self.f.code_off[i]
        j = self.partner[i]
        return b - a + (self.f.code_off[j][1] - self.f.code_off[j][0] if j >= 0 else 0)

    def lengths(self):
        return [len(p) + self.frames(i) + 1 for i, p in enumerate(self.prompts)]

    def __len__(self):
        return len(self.f)

    def __getitem__(self, i):
        codes = torch.from_numpy(self.f.get_codes(i))
        with_mel = self.f.mel is not None
        mel = torch.from_numpy(self.f.get_mel(i)[: 2 * codes.shape[0]]).t() if with_mel else None
        j = self.partner[i]
        if j >= 0:  # the speaker sample's codes and mel come first, as in a clone prompt
            sc = torch.from_numpy(self.f.get_codes(j))
            codes = torch.cat([sc, codes])
            if with_mel:
                mel = torch.cat([torch.from_numpy(self.f.get_mel(j)[: 2 * sc.shape[0]]).t(), mel], dim=1)
        return {"prompt": torch.tensor(self.prompts[i]), "codes": codes, "mel": mel,
                "speaker": self.f.index[i]["speaker_index"], "spk_emb_id": self.spk_id,
                "sample_frames": sc.shape[0] if j >= 0 else 0}


def guided_attention(spans: torch.Tensor, length: int, sigma: float = 0.2) -> torch.Tensor:
    """The guided-attention target of a batch, (B, L, L): an audio query (positions s-1 ..
    s-2+t) puts weight on the phoneme keys (3 .. s-2) in a Gaussian band around the diagonal.
    spans (B, 2) holds each item's prompt length s and frame count t; built where the loss
    runs (the GPU), not in the data loader, since it is L x L per item."""
    s = spans[:, 0].view(-1, 1, 1).float()
    t = spans[:, 1].view(-1, 1, 1).float()
    nt = s - 4
    i = torch.arange(length, device=spans.device, dtype=torch.float32).view(1, -1, 1)
    j = torch.arange(length, device=spans.device, dtype=torch.float32).view(1, 1, -1)
    qi = (i - (s - 1) + 0.5) / t.clamp_min(1)
    kj = (j - 3 + 0.5) / nt.clamp_min(1)
    inside = (i >= s - 1) & (i < s - 1 + t) & (j >= 3) & (j < 3 + nt) & (nt > 0) & (t > 0)
    return torch.where(inside, torch.exp(-((qi - kj) ** 2) / (2 * sigma ** 2)), torch.zeros((), device=spans.device))


def collate_gpt(items, eos: int = 625, nvq: int = 4):
    B = len(items)
    L = max(len(x["prompt"]) + x["codes"].shape[0] for x in items)
    T = max(x["codes"].shape[0] for x in items)
    ids = torch.zeros(B, L, nvq, dtype=torch.long)
    tm = torch.zeros(B, L, dtype=torch.bool)
    am = torch.zeros(B, L, dtype=torch.long)
    tgt = torch.zeros(B, L, nvq, dtype=torch.long)
    tmask = torch.zeros(B, L)
    hid_idx = torch.zeros(B, T, dtype=torch.long)
    hid_mask = torch.zeros(B, T)
    with_mel = all(x.get("mel") is not None for x in items)
    mel = torch.zeros(B, 100, 2 * T) if with_mel else None
    mel_mask = torch.zeros(B, 2 * T) if with_mel else None
    ga_span = torch.zeros(B, 2, dtype=torch.long)
    sample = torch.zeros(B, L, dtype=torch.bool)  # a clone prompt's recorded frames
    for b, x in enumerate(items):
        p, c = x["prompt"], x["codes"]
        s, t = len(p), c.shape[0]
        ids[b, :s] = p.view(-1, 1)
        ids[b, s:s + t] = c
        tm[b, :s] = True
        sample[b, s:s + x.get("sample_frames", 0)] = True
        am[b, :s + t] = 1
        tgt[b, s - 1:s - 1 + t] = c
        tgt[b, s - 1 + t] = eos
        tmask[b, s - 1:s + t] = 1
        hid_idx[b, :t] = torch.arange(s - 1, s - 1 + t)
        hid_mask[b, :t] = 1
        if with_mel:
            mel[b, :, :x["mel"].shape[1]] = x["mel"]
            mel_mask[b, :x["mel"].shape[1]] = 1
        ga_span[b] = torch.tensor([s, t])
    return {"ids": ids, "text_mask": tm, "attn": am, "targets": tgt, "target_mask": tmask, "hid_idx": hid_idx,
            "hid_mask": hid_mask, "mel": mel, "mel_mask": mel_mask, "ga_span": ga_span, "sample": sample,
            "speaker": torch.tensor([x["speaker"] for x in items]), "spk_emb_id": items[0]["spk_emb_id"]}


# ------------------------------------------------------------------------------ task


class DemoTask(Task):
    def __init__(self, stage: str, feats_dir: str, tok_spec: dict, model: DemoModel, cfg: TrainConfig, a):
        self.stage, self.dir, self.spec, self.model, self.cfg, self.a = stage, feats_dir, tok_spec, model, cfg, a
        self.tok = WordPieceTokenizer(tok_spec)
        self.train_feats = Feats(feats_dir, "train")
        self._ds = None

    def train_part(self, part, epoch):
        if self._ds is None:
            if self.stage == "vocos":
                self._ds = VocosData(self.train_feats, self.a.crop_frames, self.cfg.seed)
            elif self.stage == "dvae":
                self._ds = DVAEData(self.train_feats, self.a.crop_frames, self.cfg.seed)
            else:
                self._ds = GPTData(self.train_feats, self.tok, self.a.prefix_prob, self.cfg.seed)
                if self._ds.unknown and _is_main():
                    print(f"warning: {self._ds.unknown} [UNK] tokens in the training prompts", file=sys.stderr)
        self._ds.set_epoch(epoch)
        return self._ds

    def collate(self, items):
        return {"vocos": collate_vocos, "dvae": collate_dvae, "gpt": collate_gpt}[self.stage](items)

    def loss(self, model, batch):
        loss, st = model(batch)
        return loss, st

    def batch_weight(self, batch) -> float:
        return batch_weight(batch)

    def validate(self, model, info):
        if self.stage != "gpt" or not os.path.exists(os.path.join(self.dir, "val.codes.npy")):
            return {}
        ds = GPTData(Feats(self.dir, "val"), self.tok)
        idx = list(range(info.rank, len(ds), info.world_size))
        sums = {"ce": 0.0, "acc": 0.0, "mel_l1": 0.0, "n": 0.0}
        m = model.module if hasattr(model, "module") else model
        dev = next(m.parameters()).device
        for s in range(0, len(idx), 8):
            b = collate_gpt([ds[i] for i in idx[s:s + 8]])
            b = {k: (v.to(dev) if torch.is_tensor(v) else v) for k, v in b.items()}
            _, st = m.loss_gpt(b)
            for k in ("ce", "acc", "mel_l1"):
                sums[k] += st[k]
            sums["n"] += b["ids"].shape[0]
        return sums

    def summarize_val(self, s):
        n = max(1.0, s["n"])
        return {"ce": s["ce"] / n, "acc": s["acc"] / n, "mel_l1": s["mel_l1"] / n, "utts": int(s["n"])}

    def checkpoint_extra(self) -> dict:
        m = self.model
        return {"config": m.cfg.to_dict(), "tokenizer": self.spec, "spk_stat": m.spk_stat(), "frontend": FRONTEND,
                "untrained": list(m.untrained),
                "neutral_streams": self.a.neutral_list,
                "refine": False, "size": self.a.size, "stage": self.stage, "speakers": self.a.speaker_names,
                "code_defaults": dict(temperature=0.3, top_p=0.7, top_k=20, repetition_penalty=1.05,
                                      repetition_window=16, max_new_tokens=2048, min_new_tokens=0, prompt="[speed_5]",
                                      sample_format=SAMPLE_FIRST)}


def _is_main() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


# ------------------------------------------------------------------------------ codes


# The FSQ code with every level at its centre (index 2 of 5 on each of 4 dims): 2*(1+5+25+125).
NEUTRAL_CODE = 312

# The regularisers of the demo voice's last GPT phases (train/Makefile GPT5FLAGS: guided
# attention, dropout on the code inputs, 80 % of the code frames the model's own, predicted
# twice and drawn at the engine's temperature); train.chattts.finetune --gpt keeps them.
LATE_PHASE = {"ga_weight": 1.0, "code_dropout": 0.3, "sched_sampling": 0.8, "sched_passes": 2, "sched_temperature": 0.3}


@torch.no_grad()
def encode_codes(feats_dir: str, checkpoint: str, neutral_streams: Optional[List[int]] = None) -> None:
    """DVAE codes of every split.  ``neutral_streams`` (e.g. [1, 3], the second residual of each
    group) are set to NEUTRAL_CODE: those streams carry fine detail that a small GPT cannot
    predict (6% accuracy, 4.6 nats), and sampling them feeds noise back into the history; the
    decoder works from the GPT's hidden states, not from the codes, so the audio keeps its detail."""
    ck = load_torch(checkpoint)
    cfg = ChatTTSConfig.from_dict(ck["config"])
    m = ChatTTS(cfg)
    m.dvae.load_state_dict({k[5:]: v for k, v in ck["model"].items() if k.startswith("dvae.")})
    m.eval()
    for split in SPLITS:
        if not os.path.exists(os.path.join(feats_dir, f"{split}.index.json")):
            continue
        f = Feats(feats_dir, split)
        out, off, a = [], [], 0
        use = np.zeros(625, np.int64)
        for i in range(len(f)):
            mel = torch.from_numpy(f.get_mel(i)).t().unsqueeze(0)
            _, c = m.dvae.encode(mel)
            c = c[0].t().numpy().astype(np.int16)  # (T,4)
            if neutral_streams:
                c[:, neutral_streams] = NEUTRAL_CODE
            out.append(c)
            off.append([a, a + len(c)])
            a += len(c)
            np.add.at(use, c.reshape(-1).astype(np.int64), 1)
        np.save(os.path.join(feats_dir, f"{split}.codes.npy"), np.concatenate(out))
        with open(os.path.join(feats_dir, f"{split}.codes.json"), "w") as fh:
            json.dump(off, fh)
        p = use / use.sum()
        ppl = float(np.exp(-(p[p > 0] * np.log(p[p > 0])).sum()))
        print(json.dumps({"split": split, "frames": a, "codes_used": int((use > 0).sum()), "perplexity": round(ppl, 1)}),
              flush=True)


PACK_FIELDS = ("key", "phonemes", "speed", "speaker", "speaker_index")


# what a gpt stage without mel trains; pack carries them as its init.pt
GPT_PARTS = ("gpt", "embed", "speakers")


def pack(feats_dir: str, out: str, splits=("train", "val"), init: Optional[str] = None,
         more: Optional[List[str]] = None, bundle: Optional[str] = None) -> dict:
    """A codes-only copy of a features dir, as one .tar.xz: what the gpt stage reads without
    the decoder's mel loss (index, DVAE codes, tokenizer, mel coef), for a GPU machine that
    cannot take the gigabytes of audio and mel.  Unpacked, it is a features dir.  With
    ``init``, that checkpoint's GPT parts go in as init.pt in float16 (half the bytes to
    carry; the rounding, about 5e-4 relative, is far below what a training phase changes):
    ``gpt --init FEATS/init.pt`` starts from them, the parts it does not use left out.  The
    train splits of the features dirs in ``more`` (e.g. corpus --speakers extra) are appended
    to the first one's.

    With ``bundle`` (an export of that same checkpoint, e.g. assets/demo/chattts, which the
    repository carries anyway) the GPT stays out: the pack holds the checkpoint's speaker table
    (speakers.pt, which no export has) and bundle.json (the bundle's gpt.onnx sha256), and
    ``bundle-init`` on the other machine rebuilds init.pt from the bundle (train.chattts.
    from_onnx) and the table.  A few MB fewer to carry; the bundle is checked here to hold the
    checkpoint's GPT, and there to be the same file.  ``bundle`` without ``init`` (no training
    checkpoint at hand, as on a fresh checkout): no table either, and the GPU phase re-fits one
    (its --only speakers step)."""
    import io
    import tarfile

    def add(tf, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), 0, 0o644
        tf.addfile(info, io.BytesIO(data))

    ck = load_torch(init) if init else None
    if bundle:  # checked before anything is written
        if not os.path.isfile(os.path.join(bundle, "gpt.onnx")):
            raise FileNotFoundError(f"{bundle}: no gpt.onnx (pack --bundle takes a ChatTTS export directory)")
        if ck is not None:
            check_bundle_gpt(bundle, ck["model"])
    sizes = {}
    tmp = out + ".partial"
    with tarfile.open(tmp, "w:xz") as tf:
        for name in ("tokenizer.json", "coef.json"):
            with open(os.path.join(feats_dir, name), "rb") as f:
                add(tf, name, f.read())
        if bundle:
            add(tf, "bundle.json", json.dumps({"gpt_sha256": sha256_of(os.path.join(bundle, "gpt.onnx")),
                                               "bundle": bundle}).encode())
        if ck is not None:
            small = {k: v for k, v in ck.items() if k not in ("model", "optimizer", "scheduler", "scaler", "trainer", "rng")}
            small["model"] = {k: (v.half() if v.is_floating_point() else v) for k, v in ck["model"].items()
                              if k.split(".", 1)[0] in GPT_PARTS}
            name = "init.pt"
            if bundle:
                small["model"] = {k: v for k, v in small["model"].items() if k.startswith("speakers.")}
                name = "speakers.pt"
            buf = io.BytesIO()
            torch.save(small, buf)
            add(tf, name, buf.getvalue())
        for split in splits:
            index, offs, codes = [], [], []
            for d in [feats_dir] + (list(more or []) if split == "train" else []):
                f = Feats(d, split)
                if f.codes is None:
                    raise ValueError(f"{d}: no {split}.codes.npy: run `train.chattts.train codes` first")
                base = sum(len(c) for c in codes)
                index += [{k: r[k] for k in PACK_FIELDS if k in r} for r in f.index]
                offs += [[a + base, b + base] for a, b in f.code_off]
                codes.append(np.asarray(f.codes))
            add(tf, f"{split}.index.json", json.dumps(index, ensure_ascii=False).encode())
            add(tf, f"{split}.codes.json", json.dumps(offs).encode())
            buf = io.BytesIO()
            np.save(buf, np.concatenate(codes))
            add(tf, f"{split}.codes.npy", buf.getvalue())
            sizes[split] = len(index)
    os.replace(tmp, out)
    res = {"pack": out, "bytes": os.path.getsize(out), "utterances": sizes}
    print(json.dumps(res), flush=True)
    return res


def sha256_of(path: str) -> str:
    from ..corpus.build import sha256_file  # (lazily: the corpus builder's imports are not the trainer's)

    return sha256_file(path)


def _recover_gpt(bundle: str) -> dict:
    """The GPT parts of an exported bundle as PyTorch tensors, and the bundle's metadata."""
    from .from_onnx import RecoverError, recover

    try:
        model, extra = recover(bundle)
    except RecoverError as e:
        raise ValueError(str(e)) from e
    state = {k: v for k, v in model.state_dict().items() if k.split(".", 1)[0] in GPT_PARTS and not k.startswith("speakers.")}
    return {"model": state, **extra}


def check_bundle_gpt(bundle: str, model: Dict[str, torch.Tensor]) -> None:
    """Refuses a bundle whose GPT is not the checkpoint's (within the float16 export's rounding).
    The weight-normed heads are left out: the export folds them, so only their product is kept."""
    got = _recover_gpt(bundle)["model"]
    for k, v in model.items():
        if k.split(".", 1)[0] not in ("gpt", "embed") or "parametrizations" in k:
            continue
        if k not in got or got[k].shape != v.shape:
            raise ValueError(f"{bundle}: its GPT has no {k} of shape {tuple(v.shape)}: not an export of this checkpoint")
        w = v.float()
        tol = 2e-3 * max(1.0, w.abs().max().item())
        if (got[k].float() - w).abs().max().item() > tol:
            raise ValueError(f"{bundle}: its GPT differs from the checkpoint's at {k}: not an export of this checkpoint")


def bundle_init(feats_dir: str, bundle: str) -> str:
    """init.pt for a pack made with --bundle: the bundle's GPT (recovered from its graphs) and
    the pack's speaker table, after checking that the bundle is the file the pack named."""
    with open(os.path.join(feats_dir, "bundle.json")) as f:
        want = json.load(f)
    gpt = os.path.join(bundle, "gpt.onnx")
    if not os.path.isfile(gpt):
        raise FileNotFoundError(f"{bundle}: no gpt.onnx (the bundle the pack was made from: {want.get('bundle')})")
    if sha256_of(gpt) != want["gpt_sha256"]:
        raise ValueError(f"{gpt} is not the GPT the pack was made with ({want.get('bundle')}): "
                         "make the pack again from this bundle's checkpoint")
    spk_path = os.path.join(feats_dir, "speakers.pt")
    spk = load_torch(spk_path) if os.path.exists(spk_path) else {"model": {}}
    rec = _recover_gpt(bundle)
    out = dict(rec, **{k: v for k, v in spk.items() if k != "model"})
    out["model"] = {k: (v.half() if v.is_floating_point() else v) for k, v in rec["model"].items()}
    out["model"].update(spk["model"])
    path = os.path.join(feats_dir, "init.pt")
    torch.save(out, path + ".partial")
    os.replace(path + ".partial", path)
    table = spk["model"].get("speakers.weight")
    print(json.dumps({"init": path, "bundle": bundle, "speakers": 0 if table is None else int(table.shape[0])}), flush=True)
    return path


# ------------------------------------------------------------------------------ main


def min_frames_per_token(feats_dir: str, tok_spec: dict, split: str = "train") -> float:
    """The end token's hold-back for the engine: 3/4 of the 1st percentile of code frames per
    text token over the training utterances (the fastest speech it learnt, with a margin).
    Without it a small GPT sometimes ends a sentence at once, or half-way, after a clone prompt."""
    f = Feats(feats_dir, split)
    tok = WordPieceTokenizer(tok_spec)
    ratios = [(b - a) / max(1, len(tok.encode(r["phonemes"]))) for r, (a, b) in zip(f.index, f.code_off)]
    return round(0.75 * float(np.percentile(ratios, 1)), 2) if ratios else 0.0


def merge(checkpoint: str, vocos: Optional[str], out: str, feats_dir: Optional[str] = None,
          split_mb: float = 0, base: Optional[str] = None) -> None:
    """The final model: the gpt stage's checkpoint with the vocos stage's Vocos (the two
    stages train in parallel), without optimizer state.  Parts the run never had (its
    "untrained" list, e.g. a GPU run from a carried GPT) come from ``base``.  With split_mb,
    ``out`` is a directory of parts of at most that many MB (trainer.save_split; --init reads
    it)."""
    ck = load_torch(checkpoint)
    untrained = list(ck.get("untrained") or [])
    # an untrained part is random: it is left out, and base (or a later merge) puts it in
    model = {k: v for k, v in ck["model"].items() if k.split(".", 1)[0] not in untrained}
    if untrained and base:
        b = load_torch(base)["model"]
        for part in untrained:
            got = {k: v for k, v in b.items() if k.split(".", 1)[0] == part}
            if not got:
                raise SystemExit(f"{base}: no {part} tensors, which {checkpoint} needs")
            model.update(got)
        untrained = []
    if vocos:
        model.update({k: v for k, v in load_torch(vocos)["model"].items() if k.startswith("vocos.")})
        untrained = [p for p in untrained if p != "vocos"]
    keep = {k: ck[k] for k in ("config", "tokenizer", "spk_stat", "frontend", "refine", "size", "speakers",
                               "code_defaults", "neutral_streams") if k in ck}
    if untrained:
        keep["untrained"] = untrained
    keep["model"] = model
    if feats_dir and "code_defaults" in keep:
        keep["code_defaults"] = {**keep["code_defaults"], "min_frames_per_token": min_frames_per_token(feats_dir, keep["tokenizer"])}
    keep["sources"] = {"gpt": os.path.basename(checkpoint), "vocos": os.path.basename(vocos) if vocos else None}
    if split_mb:
        save_split(keep, out, int(split_mb * 1e6))
    else:
        tmp = out + ".partial"
        torch.save(keep, tmp)
        os.replace(tmp, out)
    print(json.dumps({"merged": out, **keep["sources"], "code_defaults": keep.get("code_defaults")}))


def add_train_flags(ap: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    for name, val in d.to_dict().items():
        flag = "--" + name.replace("_", "-")
        if isinstance(val, bool):
            ap.add_argument(flag, action="store_true", default=val)
        elif isinstance(val, list):
            ap.add_argument(flag, type=float, nargs="+", default=val)
        else:
            ap.add_argument(flag, type=type(val), default=val)


def gpt_layer_count(state: dict) -> int:
    return block_count(state, "gpt.layers.")


def block_count(state: dict, prefix: str) -> int:
    """Numbered blocks under prefix in a state dict ("gpt.layers." -> the GPT's layers)."""
    return len({k[len(prefix):].split(".")[0] for k in state if k.startswith(prefix)})


def table_size(ck: dict) -> int:
    """Rows of a checkpoint's training speaker table (0 without one)."""
    w = ck.get("model", {}).get("speakers.weight")
    return int(w.shape[0]) if w is not None else 0


TEXT_ROWS = ("embed.emb_text.weight", "embed.head_text.parametrizations.weight.original0",
             "embed.head_text.parametrizations.weight.original1")


def carry_text_rows(state: dict, spec: Optional[dict], vocab: dict, own: dict, path: str) -> dict:
    """The checkpoint's text-token rows moved to this tokenizer's ids, by token.  A corpus
    whose phonemes add tokens (the human-derived voices' IPA has x and ʔ, say) can then start
    from a voice trained on a smaller tokenizer: every token both know keeps its row, a new one
    keeps the model's random start.  A token the checkpoint knows and this tokenizer lacks is an
    error (its text would be unsayable)."""
    if not spec:
        return state
    old = spec["model"]["vocab"]
    if old == vocab:
        return state
    lost = sorted(set(old) - set(vocab))
    if lost:
        raise SystemExit(f"{path}: its tokenizer has tokens this corpus's lacks: {lost[:8]}")
    out = dict(state)
    for k in TEXT_ROWS:
        if k not in state or k not in own:
            continue
        rows = own[k].clone()
        for tok, i in old.items():
            rows[vocab[tok]] = state[k][i]
        out[k] = rows
    return out


def load_init(model: DemoModel, path: str, deepen: bool = False, unused: tuple = (), ck: Optional[dict] = None,
              vocab: Optional[dict] = None) -> None:
    """Start from a checkpoint's weights.  One made by train.chattts.from_onnx (an exported
    bundle's weights) has no training speaker table: the table then starts as draws from the
    bundle's spk_stat, as seed voices do (re-fit it with ``gpt --only speakers``).  With
    ``deepen`` a checkpoint with fewer GPT layers or decoder blocks than the model is accepted:
    the extra ones go on top and start as the identity (the GPT layers' output projections and
    the decoder blocks' layer scales zero), so the deeper model says exactly what the checkpoint
    said and training goes on from there.  Anything else
    missing, extra or misshaped is an error naming the tensor, except that a part named in
    ``unused`` (one the stage neither trains nor reads, e.g. vocos for the gpt stage) may be
    absent as a whole: it keeps its random start and is recorded in ``model.untrained``, which
    the run's checkpoints carry, so that merge --base fills it in and export refuses it until
    then.  ``ck`` is the checkpoint at path when the caller has read it already; with ``vocab``
    (this run's tokenizer's token -> id) its text rows are carried over by token (carry_text_rows)."""
    ck = ck if ck is not None else load_torch(path)
    state = ck["model"]
    own = model.state_dict()
    if vocab is not None:
        state = carry_text_rows(state, ck.get("tokenizer"), vocab, own, path)
    for k, v in state.items():
        if k in own and tuple(v.shape) != tuple(own[k].shape):
            raise SystemExit(f"{path}: {k} is {tuple(v.shape)}, this model's is {tuple(own[k].shape)}")
    have, want = gpt_layer_count(state), len(model.gpt.layers)
    added = []
    if deepen and 0 < have < want:
        added = [f"gpt.layers.{i}." for i in range(have, want)]
        with torch.no_grad():
            for layer in model.gpt.layers[have:]:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
    have, want = block_count(state, "decoder.decoder.decoder_block."), len(model.decoder.decoder.decoder_block)
    if deepen and 0 < have < want:
        # ConvNeXt blocks are residual with a layer scale: at 0 a new block adds nothing, and
        # the scale's gradient (the block's output) is not 0, so it starts learning at once
        added += [f"decoder.decoder.decoder_block.{i}." for i in range(have, want)]
        with torch.no_grad():
            for blk in model.decoder.decoder.decoder_block[have:]:
                blk.weight.zero_()
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "speakers.weight" and not k.startswith(tuple(added))]
    absent = [p for p in unused if not any(k.startswith(p + ".") for k in state)]
    model.untrained = sorted(set(absent) | set(ck.get("untrained") or []))
    missing = [k for k in missing if k.split(".", 1)[0] not in absent]
    if missing or unexpected:
        raise SystemExit(f"{path}: not this model's checkpoint: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if "speakers.weight" not in state and ck.get("spk_stat") is not None:
        std, mean = spk_stat_parts(ck["spk_stat"])
        with torch.no_grad():
            model.speakers.weight.copy_(torch.randn_like(model.speakers.weight) * std + mean)


def build_model(feats_dir: str, tok: WordPieceTokenizer, size: str, n_speakers: int = 0) -> DemoModel:
    """A model for the features' speakers, or n_speakers when that is more (a checkpoint
    trained beside more speakers than these features have, e.g. corpus --speakers extra)."""
    with open(os.path.join(feats_dir, "coef.json")) as f:
        coef = torch.tensor(json.load(f)["coef"]).view(1, -1, 1)
    with open(os.path.join(feats_dir, "train.index.json"), encoding="utf-8") as f:
        n_spk = max(n_speakers, 1 + max(r["speaker_index"] for r in json.load(f)))
    m = DemoModel(demo_config(tok, size), n_spk)
    m.decoder.coef.copy_(coef)
    m.dvae.coef.copy_(coef)
    return m


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=("prepare", "codes", "merge", "pack", "bundle-init") + STAGES)
    ap.add_argument("--corpus", help="prepare: the corpus dir from train.chattts.corpus")
    ap.add_argument("--feats", required=True, help="the features dir (prepare writes it)")
    ap.add_argument("--checkpoint", help="codes: the DVAE-stage checkpoint; merge: the gpt-stage one; "
                                         "pack: the one whose GPT goes in as init.pt")
    ap.add_argument("--vocos", help="merge: the vocos-stage checkpoint")
    ap.add_argument("--base", help="merge: the checkpoint that fills in the parts the run never had (its 'untrained')")
    ap.add_argument("--bundle", help="pack: leave the GPT out, an export of --checkpoint rebuilds it (bundle-init); "
                                     "bundle-init: that export")
    ap.add_argument("--more-feats", default="", help="pack: features dirs whose train splits are appended, comma-separated")
    ap.add_argument("--neutral-streams", default="", help="codes: streams set to the neutral code, e.g. 1,3")
    ap.add_argument("--init", help="start from this checkpoint's weights (the previous stage)")
    ap.add_argument("--size", choices=[*DEMO_SIZES, "tiny"],
                    help="the model's size (default: --init's, else demo)")
    ap.add_argument("--crop-frames", type=int, default=64, help="vocos/dvae: mel frames per example")
    ap.add_argument("--ga-weight", type=float, default=1.0, help="gpt: guided-attention loss weight")
    ap.add_argument("--prefix-prob", type=float, default=0.0,
                    help="gpt: share of items given another utterance of their speaker as a clone prompt")
    ap.add_argument("--sched-sampling", type=float, default=0.0,
                    help="gpt: share of code frames replaced by the model's own greedy prediction")
    ap.add_argument("--sched-passes", type=int, default=1,
                    help="gpt: predict the replaced frames again from the mixed frames this many times")
    ap.add_argument("--sched-temperature", type=float, default=0.0,
                    help="gpt: draw the replaced frames at this temperature (0: the most likely)")
    ap.add_argument("--code-dropout", type=float, default=0.5, help="gpt: dropout on the code-frame input embeddings")
    ap.add_argument("--deepen", action="store_true",
                    help="gpt: --init may have fewer GPT layers or decoder blocks; the extra ones start as the identity")
    ap.add_argument("--only", default="", help="train only these parts of the stage, e.g. speakers")
    ap.add_argument("--stop-at-step", type=int, default=0)
    ap.add_argument("--split-mb", type=float, default=0,
                    help="merge: write the model as a directory of parts of at most this many MB")
    ap.add_argument("--out", dest="out_dir", default="train/out/chattts/run",
                    help="the run's directory; merge: the model file; pack: the .tar.xz")
    ap.add_argument("--epochs", dest="max_epochs", type=int, default=10)
    ap.add_argument("--warmup", dest="warmup_steps", type=int, default=0)
    add_train_flags(ap)
    a = ap.parse_args(argv)
    if a.stage == "prepare":
        if not a.corpus:
            raise SystemExit("prepare needs --corpus")
        prepare(a.corpus, a.feats)
        return 0
    if a.stage == "codes":
        if not a.checkpoint:
            raise SystemExit("codes needs --checkpoint")
        encode_codes(a.feats, a.checkpoint, [int(x) for x in a.neutral_streams.split(",")] if a.neutral_streams else None)
        return 0
    if a.stage == "pack":
        pack(a.feats, a.out_dir, init=a.checkpoint, more=[d for d in a.more_feats.split(",") if d], bundle=a.bundle)
        return 0
    if a.stage == "bundle-init":
        if not a.bundle:
            raise SystemExit("bundle-init needs --bundle")
        bundle_init(a.feats, a.bundle)
        return 0
    if a.stage == "merge":
        if not a.checkpoint:
            raise SystemExit("merge needs --checkpoint (and --vocos)")
        merge(a.checkpoint, a.vocos, a.out_dir, a.feats, a.split_mb, a.base)
        return 0
    cfg = TrainConfig(**{k: getattr(a, k) for k in TrainConfig().to_dict()})
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    info = pdist.init(cfg.device)
    try:
        spec = load_tokenizer(a.feats)
        tok = WordPieceTokenizer(spec)
        torch.manual_seed(cfg.seed)
        init = load_torch(a.init) if a.init else {}
        if not a.size:
            a.size = init.get("size") or "demo"
        model = build_model(a.feats, tok, a.size, table_size(init))
        with open(os.path.join(a.feats, "train.index.json"), encoding="utf-8") as f:
            idx = json.load(f)
        names = dict(enumerate(init.get("speakers") or []))
        for r in idx:
            names[r["speaker_index"]] = r["speaker"]
        a.speaker_names = [names.get(i, "") for i in range(model.speakers.num_embeddings)]
        # (the file's presence, as Feats decides; no third read of a large index at start-up)
        with_mel = os.path.exists(os.path.join(a.feats, "train.mel.npy"))
        if a.init:
            # the gpt stage never reads vocos or dvae, nor the decoder when the features have no mel
            unused = ("vocos", "dvae") + (() if with_mel else ("decoder",))
            load_init(model, a.init, deepen=a.deepen, unused=unused if a.stage == "gpt" else (), ck=init,
                      vocab=spec["model"]["vocab"])
        a.neutral_list = [int(x) for x in a.neutral_streams.split(",")] if a.neutral_streams else []
        model.ga_weight = a.ga_weight
        model.code_dropout = a.code_dropout
        model.sched_sampling = a.sched_sampling
        model.sched_passes, model.sched_temperature = a.sched_passes, a.sched_temperature
        model.neutral_streams = list(a.neutral_list)
        model.set_stage(a.stage, [x for x in a.only.split(",") if x])
        # a part this run trains is no longer at its random start (a decoder only with mel)
        trains = {n.split(".", 1)[0] for n, q in model.named_parameters() if q.requires_grad}
        if a.stage == "gpt" and not with_mel:
            trains.discard("decoder")
        model.untrained = [p for p in model.untrained if p not in trains]
        task = DemoTask(a.stage, a.feats, spec, model, cfg, a)
        Trainer(cfg, model, task, info).fit(stop_at_step=a.stop_at_step)
    finally:
        pdist.destroy()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (CheckpointError, ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
