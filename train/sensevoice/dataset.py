"""SenseVoice training data: manifest records -> (features, token targets)."""
from __future__ import annotations

import math
import os
import sys
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import soundfile as sf
import torch
from torch.utils.data import Dataset

from ..data import ManifestError, sample_rng
from ..edit import edit_distance
from . import model as svm
from .features import SAMPLE_RATE, apply_cmvn, features
from .tokens import WORD_START, Vocab


class AudioError(RuntimeError):
    pass


def load_audio(path: str) -> torch.Tensor:
    if not os.path.isfile(path):
        raise AudioError(f"{path}: audio file not found")
    try:
        x, sr = sf.read(path, dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001
        raise AudioError(f"{path}: cannot read audio: {e}") from e
    x = x.mean(1)
    if sr != SAMPLE_RATE:
        from scipy.signal import resample_poly

        g = np.gcd(sr, SAMPLE_RATE)
        x = resample_poly(x, SAMPLE_RATE // g, sr // g).astype(np.float32)
    if len(x) == 0:
        raise AudioError(f"{path}: empty audio")
    return torch.from_numpy(np.ascontiguousarray(x))


def load_item_audio(rec: dict) -> torch.Tensor:
    """A row's 16 kHz audio; a joined row (train.sensevoice.join) is its clips one after another,
    each ``gap_s`` after the last, the gap plain silence or (``gap_fill`` "noise") a steady noise
    at the quietest 20 ms of the clips around it, so that a real recording's floor runs on."""
    x = load_audio(rec["source"])
    pieces = rec.get("join")
    if not pieces:
        return x
    rng = np.random.default_rng(zlib.crc32(rec["key"].encode()))  # the same noise in every process
    noise = rec.get("gap_fill") == "noise"
    out, floor = [x], floor_rms(x) if noise else 0.0
    for p in pieces:
        y = load_audio(p["source"])
        n = int(round(float(p["gap_s"]) * SAMPLE_RATE))
        gap = torch.zeros(n)
        if noise:
            next_floor = floor_rms(y)  # each clip's floor once: it borders two gaps
            if n > 0:
                gap = torch.from_numpy(rng.standard_normal(n).astype(np.float32)) * min(floor, next_floor)
            floor = next_floor
        out += [gap, y]
    return torch.cat(out)


def floor_rms(x: torch.Tensor, frame: int = 320) -> float:
    """RMS of the quietest 20 ms frame (digital silence counts as 0)."""
    n = x.shape[0] // frame
    if n == 0:
        return float(x.pow(2).mean().sqrt()) if x.numel() else 0.0
    return float(x[: n * frame].view(n, frame).pow(2).mean(1).min().sqrt())


CLIP_SHARE = (0.002, 0.05)  # the share of samples an overdriven clip drives past full scale


def overdrive(x: np.ndarray, share: float, soft: bool) -> np.ndarray:
    """``x`` as a microphone with its gain set too high records it: amplified until ``share`` of
    its samples pass full scale, then cut there, either at once (hard) or after a tanh curve that
    rounds the samples below the cut towards it (soft).  The corpus never clips; the held-out
    person clipped at 0.5 % / 2 % of samples cost stage O 3 / 15 points of WER."""
    if not 0 < share < 1:
        raise ValueError(f"clip share {share}: want a fraction in (0, 1)")
    a = np.abs(x)
    knee = float(np.quantile(a, 1.0 - share)) if x.size else 0.0
    if knee <= 0:  # silence (or nearly): nothing to overdrive
        return x
    y = x / knee
    if soft:
        y = np.tanh(y) / np.tanh(1.0)
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def tag(rec: dict, field: str, default: str) -> str:
    v = rec.get(field) or default
    return v if v.startswith("<|") else f"<|{v}|>"


class SenseVoiceDataset(Dataset):
    """Items are dicts of tensors; ``collate`` pads them into a batch.

    Features are LFR fbank normalised with the given CMVN.  With ``train=True``
    SpecAugment-style time/frequency masks are applied, seeded per sample from
    (seed, epoch, index), and the language query is replaced by ``auto`` with
    probability ``auto_lang_prob`` (as FunASR does), so ``auto`` works at inference.
    ``speed_perturb`` plays two thirds of the clips at 0.9x or 1.1x speed (a resample: tempo,
    pitch and formants move together, Kaldi's recipe), drawn per (seed, epoch, index); such
    features are computed afresh every time, never cached.  ``clip_prob`` overdrives that share of
    the clips (``overdrive``: 0.2-5 % of the samples past full scale, hard or soft, drawn per
    (seed, epoch, index)), likewise never cached; a clip both overdriven and sped up or slowed
    is clipped first and then resampled (its flat tops ring a little past full scale, as a
    clipped 44.1 kHz recording does once resampled to 16 kHz).  Stage P learnt so.
    """

    def __init__(self, records: Sequence[dict], vocab: Vocab, neg_mean: Sequence[float],
                 inv_stddev: Sequence[float], train: bool = False, seed: int = 0,
                 auto_lang_prob: float = 0.2, cache: bool = False, specaug: bool = True,
                 speed_perturb: bool = False, clip_prob: float = 0.0):
        if not 0.0 <= clip_prob <= 1.0:
            raise ValueError(f"clip_prob {clip_prob}: want a probability in [0, 1]")
        self.records = list(records)
        self.vocab = vocab
        self.neg_mean = torch.tensor(neg_mean, dtype=torch.float32)
        self.inv_std = torch.tensor(inv_stddev, dtype=torch.float32)
        self.train, self.seed, self.epoch = train, seed, 0
        self.auto_lang_prob = auto_lang_prob
        self.specaug = specaug
        self.speed_perturb = speed_perturb and train
        self.clip_prob = clip_prob if train else 0.0
        self.cache: Optional[Dict[str, torch.Tensor]] = {} if cache else None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.records)

    def lengths(self) -> List[int]:
        return [r["source_len"] for r in self.records]

    SPEEDS = (0.9, 1.0, 1.1)

    def clip_for(self, i: int) -> Optional[Tuple[float, bool]]:
        """(share of samples clipped, soft) for item i this epoch, or None."""
        if self.clip_prob <= 0:
            return None
        rng = sample_rng(self.seed + 2, self.epoch, i)
        if rng.random() >= self.clip_prob:
            return None
        lo, hi = np.log(CLIP_SHARE[0]), np.log(CLIP_SHARE[1])
        return float(np.exp(rng.uniform(lo, hi))), bool(rng.random() < 0.3)

    def feats(self, rec: dict, speed: float = 1.0, clip: Optional[Tuple[float, bool]] = None) -> torch.Tensor:
        if speed != 1.0 or clip is not None:  # computed afresh, never cached
            x = load_item_audio(rec).numpy()
            if clip is not None:
                x = overdrive(x, *clip)
            if speed != 1.0:
                from scipy.signal import resample_poly

                up, down = (10, 9) if speed < 1 else (10, 11)  # 0.9x: 10/9 as many samples
                x = np.ascontiguousarray(resample_poly(x, up, down), dtype=np.float32)
            return apply_cmvn(features(torch.from_numpy(x)), self.neg_mean, self.inv_std)
        if self.cache is not None and rec["key"] in self.cache:
            return self.cache[rec["key"]].float()
        f = apply_cmvn(features(load_item_audio(rec)), self.neg_mean, self.inv_std)
        if self.cache is not None:
            # The first use sees the same fp16-rounded values as every later one, so a
            # run restarted with an empty cache trains on identical inputs.
            f = f.half()
            self.cache[rec["key"]] = f
            return f.float()
        return f

    def __getitem__(self, i: int) -> dict:
        rec = self.records[i]
        speed = 1.0
        if self.speed_perturb:
            speed = float(sample_rng(self.seed + 1, self.epoch, i).choice(self.SPEEDS))
        x = self.feats(rec, speed, self.clip_for(i))
        if x.shape[0] == 0:
            raise AudioError(f"{rec['source']}: shorter than one 25 ms frame")
        lang = tag(rec, "text_language", "<|en|>")
        itn = tag(rec, "with_or_wo_itn", "<|woitn|>")
        emo = tag(rec, "emo_target", "<|NEUTRAL|>")
        event = tag(rec, "event_target", "<|Speech|>")
        for t in (lang, itn, emo, event):
            if t not in self.vocab.index:
                raise ManifestError(f"{rec['key']}: tag {t} is not in the vocabulary")
        lang_row = svm.LANG_IDS.get(lang[2:-2], 0)
        if self.train:
            rng = sample_rng(self.seed, self.epoch, i)
            x = x.clone()
            if rng.random() < self.auto_lang_prob:
                lang_row = 0
            for _ in range(2 if self.specaug else 0):  # frequency masks on the 80-bin pattern of every LFR slot
                w = int(rng.integers(0, 10))
                f0 = int(rng.integers(0, 80 - w))
                x.view(x.shape[0], 7, 80)[:, :, f0:f0 + w] = 0.0
            for _ in range(2 if self.specaug else 0):  # time masks
                w = int(rng.integers(0, max(1, min(6, x.shape[0] // 5))))
                t0 = int(rng.integers(0, max(1, x.shape[0] - w)))
                x[t0:t0 + w] = 0.0
        tn_row = svm.TEXTNORM_IDS.get(itn[2:-2], svm.TEXTNORM_IDS["woitn"])
        y = self.vocab.encode(rec["target"])
        rich = [self.vocab.id(lang), self.vocab.id(emo), self.vocab.id(event), self.vocab.id(itn)]
        return {"x": x, "y": torch.tensor(y, dtype=torch.int64), "language": lang_row, "text_norm": tn_row,
                "rich": torch.tensor(rich, dtype=torch.int64), "key": rec["key"]}


def collate(items: List[dict]) -> dict:
    n = len(items)
    t = max(it["x"].shape[0] for it in items)
    c = items[0]["x"].shape[1]
    x = torch.zeros(n, t, c)
    lmax = max(1, max(len(it["y"]) for it in items))
    y = torch.zeros(n, lmax, dtype=torch.int64)
    for i, it in enumerate(items):
        x[i, : it["x"].shape[0]] = it["x"]
        y[i, : len(it["y"])] = it["y"]
    return {
        "x": x,
        "x_length": torch.tensor([it["x"].shape[0] for it in items], dtype=torch.int32),
        "language": torch.tensor([it["language"] for it in items], dtype=torch.int32),
        "text_norm": torch.tensor([it["text_norm"] for it in items], dtype=torch.int32),
        "y": y,
        "y_length": torch.tensor([len(it["y"]) for it in items], dtype=torch.int64),
        "rich": torch.stack([it["rich"] for it in items]),
        "keys": [it["key"] for it in items],
    }


def greedy_decode(logits: torch.Tensor, lengths: torch.Tensor) -> List[List[int]]:
    """CTC greedy over the whole sequence (queries included), blank 0 removed."""
    out = []
    ids = logits.argmax(-1)
    for i in range(ids.shape[0]):
        prev, seq = -1, []
        for t in ids[i, : int(lengths[i])].tolist():
            if t != prev and t != 0:
                seq.append(t)
            prev = t
        out.append(seq)
    return out


def ctc_frames_needed(ids: Sequence[int]) -> int:
    """Frames CTC needs for a target: one per token plus a blank between repeated tokens."""
    return len(ids) + sum(1 for a, b in zip(ids, ids[1:]) if a == b)


def lfr_frames(source_len: int) -> int:
    """LFR frames (what the model sees) of a clip of ``source_len`` 10 ms frames."""
    return math.ceil(max(0, source_len) / 6)


def too_long_for_ctc(y: torch.Tensor, y_length: torch.Tensor, x_length: torch.Tensor) -> torch.Tensor:
    """(N,) bool: targets longer than the frames allow.  CTC cannot align them; the loss
    (zero_infinity) drops them, so they are counted and reported instead of vanishing."""
    out = torch.zeros(len(y_length), dtype=torch.bool)
    for i in range(len(y_length)):
        ids = y[i, : int(y_length[i])].tolist()
        out[i] = ctc_frames_needed(ids) > int(x_length[i])
    return out


def check_targets(records: Sequence[dict], vocab: Vocab, max_token_length: int = 0, batch_size: int = 0) -> dict:
    """What training would silently lose, per record key:

    - ``blank``: the transcript has characters the vocabulary lacks (they encode to <unk>,
      the CTC blank, or are dropped);
    - ``empty``: nothing is left of the transcript after normalisation;
    - ``text_too_long``: more tokens than the clip has frames (estimated from source_len);
    - ``audio_too_long``: longer than max_token_length or the batch budget (the sampler
      skips them)."""
    rep: Dict[str, list] = {"blank": [], "empty": [], "text_too_long": [], "audio_too_long": []}
    for r in records:
        key, text = r["key"], r.get("target", "")
        if (max_token_length and r["source_len"] > max_token_length) or (batch_size and r["source_len"] > batch_size):
            rep["audio_too_long"].append(key)
            continue
        bad = vocab.unknown(text)
        if bad:
            rep["blank"].append((key, "".join(bad)))
        ids = vocab.encode(text)
        if not [i for i in ids if i != 0 and vocab.pieces[i] != WORD_START]:
            rep["empty"].append(key)
        elif ctc_frames_needed(ids) > lfr_frames(r["source_len"]):
            rep["text_too_long"].append(key)
    rep["records"] = len(records)
    return rep


def report_targets(rep: dict, where: str, out=None) -> List[str]:
    """Warnings (one line per kind, with a count and the first keys) for ``check_targets``."""
    out = out if out is not None else sys.stderr
    n = rep["records"]
    lines = []
    what = {
        "blank": "transcripts with characters the vocabulary lacks (they map to <unk>, the CTC blank id, or are dropped)",
        "empty": "transcripts that normalise to nothing (trained as silence)",
        "text_too_long": "clips dropped: the text has more tokens than the audio has frames (CTC cannot align them)",
        "audio_too_long": "clips dropped: longer than --max-token-length or --batch-size",
    }
    for k, msg in what.items():
        items = rep[k]
        if not items:
            continue
        ex = ", ".join(f"{i[0]} {i[1]!r}" if isinstance(i, tuple) else str(i) for i in items[:3])
        lines.append(f"warning: {where}: {len(items)} of {n} {msg}: {ex}{' …' if len(items) > 3 else ''}")
    for line in lines:
        print(line, file=out)
    return lines


def score(vocab: Vocab, hyp_ids: Sequence[int], ref: str) -> Tuple[str, str, int, int, int, int]:
    """Normalise hypothesis and reference as the vocabulary does, then count errors:
    -> (hyp, ref, char errors, ref chars, word errors, ref words)."""
    hyp = vocab.normalize(vocab.decode(hyp_ids))
    ref = vocab.normalize(ref)
    return (hyp, ref, edit_distance(hyp, ref), len(ref), edit_distance(hyp.split(), ref.split()),
            len(ref.split()))
