"""Measure the demo voice: intelligibility with the demo recogniser, and the controls on audio.

    python3 -m train.chattts.evaluate --checkpoint R/final.pt --feats F --corpus C --out R/eval

Intelligibility: the held-out test sentences, spoken (a) by espeak-ng itself (the corpus audio)
and (b) by the demo voice, both for the 6 held-out speakers (the demo voice gets a speaker vector
fitted on 8 adaptation utterances of each, the model frozen) and for training speakers; and
(c) by the demo voice with seed speakers.  All audio is transcribed by ``parley transcribe``
with assets/demo/sensevoice (the same recogniser for both), CER against the sentence.

Controls (4 fixed sentences): same seed + text -> identical codes; seeds -> speaker vectors
and median F0 that differ; temperature 0.1/0.3/0.6/0.9 -> code disagreement between samples;
top-k / top-p -> distinct codes sampled; [uv_break]/[break_N]/[lbreak] -> the longest pause;
[laugh] -> an added segment with separate energy bursts; [speed_N] -> duration.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np
import soundfile as sf
import torch

from .infer import Sampling, generate_codes, prompt_ids, speaker_from_seed, synthesize, vocode
from .tokenizer import WordPieceTokenizer
from .train import Feats, GPTData, build_model, collate_gpt, table_size
from ..edit import edit_distance
from ..trainer import load_torch

SR = 24000
CONTROL_TEXTS = ["what time is it", "turn on the kitchen lights", "set a timer for ten minutes",
                 "the weather is nice today"]


def load(checkpoint: str, feats: str):
    ck = load_torch(checkpoint)
    tok = WordPieceTokenizer(ck["tokenizer"])
    m = build_model(feats, tok, ck.get("size", "demo"), table_size(ck))
    m.load_state_dict(ck["model"])
    m.eval()
    return m, tok, ck


# ------------------------------------------------------------------------------ asr


def read_24k(path: str) -> np.ndarray:
    """A sound file as mono float32 at this module's 24 kHz, whatever its rate."""
    from scipy.signal import resample_poly

    x, sr = sf.read(path, dtype="float32", always_2d=True)
    x = x.mean(1)
    if sr != SR:
        g = np.gcd(int(sr), SR)
        x = resample_poly(x, SR // g, int(sr) // g).astype(np.float32)
    return x


def resample_24k(x: np.ndarray) -> np.ndarray:
    """A 16 kHz voice (train.corpus.voices) at this module's 24 kHz."""
    from scipy.signal import resample_poly

    return resample_poly(x, 3, 2).astype(np.float32)


def transcripts(stdout: str, batch: List[str]) -> Dict[str, str]:
    """{file: text} from ``parley transcribe --format json``'s lines for the files in batch. One
    file in gives one result without its name (parley's format), paired with that file."""
    got = {}
    for line in stdout.splitlines():
        if line.strip():
            j = json.loads(line)
            got[j.get("file", batch[0] if len(batch) == 1 else "")] = j.get("text", "")
    return got


def transcribe(paths: List[str], parley: str, model_dir: str) -> List[str]:
    out = []
    for i in range(0, len(paths), 50):
        r = subprocess.run([parley, "transcribe", "-model", model_dir, "-lang", "en", "-itn=false", "-format", "json",
                            *paths[i:i + 50]], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError(f"parley transcribe: {r.stderr.strip()[-500:]}")
        batch = paths[i:i + 50]
        got = transcripts(r.stdout, batch)
        out += [got.get(p, "") for p in batch]
    return out


def norm(s: str) -> str:
    return " ".join("".join(c if c.isalnum() or c == "'" else " " for c in s.lower()).split())


def edits(a: str, b: str) -> int:
    return edit_distance(a, b)


def cer(refs: List[str], hyps: List[str]) -> float:
    e = sum(edits(norm(r), norm(h)) for r, h in zip(refs, hyps))
    n = sum(len(norm(r)) for r in refs)
    return e / max(1, n)


# ------------------------------------------------------------------------------ audio measures


def frame_db(x: np.ndarray, hop: int = 240) -> np.ndarray:
    n = len(x) // hop
    if n == 0:
        return np.zeros(0)
    e = np.sqrt((x[:n * hop].reshape(n, hop) ** 2).mean(1) + 1e-12)
    return 20 * np.log10(e / (e.max() + 1e-12))


def longest_pause_ms(x: np.ndarray, floor_db: float = -35.0) -> float:
    """Longest run of 10 ms frames below floor_db (relative to the loudest) between speech."""
    db = frame_db(x)
    on = np.nonzero(db > floor_db)[0]
    if len(on) < 2:
        return 0.0
    inner = db[on[0]:on[-1] + 1] <= floor_db
    best = cur = 0
    for v in inner:
        cur = cur + 1 if v else 0
        best = max(best, cur)
    return best * 10.0


def speech_ms(x: np.ndarray, floor_db: float = -35.0) -> float:
    db = frame_db(x)
    on = np.nonzero(db > floor_db)[0]
    return 0.0 if len(on) == 0 else (on[-1] - on[0] + 1) * 10.0


def f0_frames(x: np.ndarray, fmin: float = 60, fmax: float = 400):
    """F0 (Hz) of each voiced 40 ms frame by normalised autocorrelation (peak > 0.5), and how
    many frames were not silent (voiced or not): a whisper's voiced share is near 0."""
    win, hop = 960, 480
    lo, hi = int(SR / fmax), int(SR / fmin)
    f0s, sounding = [], 0
    for s in range(0, len(x) - win, hop):
        fr = x[s:s + win] - x[s:s + win].mean()
        if np.sqrt((fr ** 2).mean()) < 1e-3:
            continue
        sounding += 1
        ac = np.correlate(fr, fr, "full")[win - 1:]
        ac = ac / (ac[0] + 1e-12)
        k = lo + int(np.argmax(ac[lo:hi]))
        if ac[k] > 0.5:
            f0s.append(SR / k)
    return f0s, sounding


def f0_median(x: np.ndarray, fmin: float = 60, fmax: float = 400) -> float:
    """Median F0 (Hz) of voiced 40 ms frames by normalised autocorrelation (peak > 0.5)."""
    f0s, _ = f0_frames(x, fmin, fmax)
    return float(np.median(f0s)) if f0s else 0.0


def voiced_share(x: np.ndarray) -> float:
    """The share of x's sounding frames that are voiced (f0_frames)."""
    f0s, sounding = f0_frames(x)
    return len(f0s) / max(1, sounding)


# A seed speaker whose takes are voiced less than this whispers: its "median F0" is a few
# frames' (often Vocos's 93.75 Hz frame rate), not a pitch.
WHISPER_SHARE = 0.15


def bursts(x: np.ndarray, dip_db: float = 6.0) -> int:
    """Energy bursts in 20 ms frames: peaks separated by dips of at least dip_db."""
    db = frame_db(x, 480)
    db = db[db > -40] if len(db) else db
    n, state, peak = 0, "low", -1e9
    low = db.min() if len(db) else 0
    for v in frame_db(x, 480):
        if state == "low" and v > low + dip_db and v > -30:
            state, peak = "high", v
            n += 1
        elif state == "high":
            peak = max(peak, v)
            if v < peak - dip_db:
                state, low = "low", v
        elif state == "low":
            low = min(low, v)
    return n


# ------------------------------------------------------------------------------ speakers


def fit_speakers(m, tok, feats_dir: str, steps: int = 40, lr: float = 0.05) -> Dict[int, torch.Tensor]:
    """One speaker vector per held-out speaker from its adaptation utterances, model frozen."""
    f = Feats(feats_dir, "adapt")
    ds = GPTData(f, tok)
    by: Dict[int, List[int]] = {}
    for i, r in enumerate(f.index):
        by.setdefault(r["speaker_index"], []).append(i)
    table = m.speakers
    out = {}
    for p in m.parameters():
        p.requires_grad_(False)
    for spk, idx in sorted(by.items()):
        v = torch.nn.Parameter(table.weight.detach().mean(0).clone())
        opt = torch.optim.Adam([v], lr=lr)
        b = collate_gpt([ds[i] for i in idx])
        b["speaker"] = torch.zeros(len(idx), dtype=torch.long)
        for _ in range(steps):
            m.speakers = _Fixed(v)
            loss, _ = m.loss_gpt(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
        out[spk] = v.detach().clone()
    m.speakers = table
    return out


class _Fixed(torch.nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = v

    def forward(self, idx):
        return self.v.unsqueeze(0).expand(idx.shape[0], -1)


# ------------------------------------------------------------------------------ main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--feats", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--asr", default="assets/demo/sensevoice")
    ap.add_argument("--limit", type=int, default=120, help="test sentences")
    ap.add_argument("--temperature", type=float, default=None)
    ap.add_argument("--max-new", type=int, default=None, help="cap on code frames per utterance")
    ap.add_argument("--judge", action="store_true",
                    help="also transcribe every set with the independent judge (train.judge, PocketSphinx)")
    ap.add_argument("--sources", default="",
                    help="comma-separated voice ids (train.corpus.voices) that speak the test sentences as recorded, "
                         "judged beside the model: the source voices it learnt from")
    ap.add_argument("--seeds", type=int, default=6, help="seed speakers whose median F0 is measured")
    a = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    m, tok, ck = load(a.checkpoint, a.feats)
    fe = ck["frontend"]
    base = Sampling(**{k: v for k, v in ck["code_defaults"].items() if k in Sampling.__dataclass_fields__})
    base.neutral_streams = tuple(ck.get("neutral_streams") or ())
    if a.temperature is not None:
        base.temperature = a.temperature
    if a.max_new is not None:
        base.max_new_tokens = a.max_new
    os.makedirs(a.out, exist_ok=True)
    res: dict = {"checkpoint": a.checkpoint, "sampling": base.__dict__}
    t0 = time.time()

    def wav(name, x):
        p = os.path.abspath(os.path.join(a.out, name + ".wav"))
        sf.write(p, np.asarray(x, dtype=np.float32), SR, subtype="PCM_16")
        return p

    # -- intelligibility
    test = [json.loads(l) for l in open(os.path.join(a.corpus, "test.jsonl"))][:a.limit]
    seen = [json.loads(l) for l in open(os.path.join(a.corpus, "test-seen.jsonl"))][:a.limit]
    vecs = fit_speakers(m, tok, a.feats)
    refs = [r["plain"] for r in test]
    sets = {"espeak_heldout": [os.path.abspath(os.path.join(a.corpus, r["source"])) for r in test],
            "espeak_seen": [os.path.abspath(os.path.join(a.corpus, r["source"])) for r in seen]}
    gen_t, gen_s, frames = 0.0, 0.0, 0
    for name, rows, spk_of in (("demo_heldout", test, lambda r: vecs[r["speaker_index"]]),
                               ("demo_seen", seen, lambda r: m.speakers.weight[r["speaker_index"]].detach()),
                               ("demo_seeds", test, lambda r: speaker_from_seed(ck["spk_stat"], 1000 + r["speaker_index"]))):
        paths = []
        for i, r in enumerate(rows):
            s = Sampling(**{**base.__dict__, "seed": i})
            t = time.time()
            x, codes = synthesize(m, tok, fe, r["plain"], spk_of(r), s)
            gen_t += time.time() - t
            gen_s += len(x) / SR
            frames += len(codes)
            paths.append(wav(f"{name}-{i:03d}", x.numpy()))
        sets[name] = paths
    res["rtf_pytorch_1thread"] = round(gen_t / max(1e-9, gen_s), 3)
    hyps = {k: transcribe(v, a.parley, a.asr) for k, v in sets.items()}
    res["cer"] = {k: round(cer(refs, h), 4) for k, h in hyps.items()}
    res["cer_ratio_heldout"] = round(res["cer"]["demo_heldout"] / max(1e-9, res["cer"]["espeak_heldout"]), 3)
    res["cer_ratio_seen"] = round(res["cer"]["demo_seen"] / max(1e-9, res["cer"]["espeak_seen"]), 3)
    if a.sources:
        from ..corpus import voices as V

        for vid in [v for v in a.sources.split(",") if v]:
            v = V.voice(vid)
            xs = V.synthesize_many(refs, v, [V.Knobs()] * len(refs))
            name = "source_" + vid.replace(":", "_")
            sets[name] = [wav(f"{name}-{i:03d}", resample_24k(x)) for i, x in enumerate(xs) if x is not None]
    if a.judge:
        from ..judge import Judge, score

        j = Judge()
        res["judge_wer"] = {}
        for k, paths in sets.items():
            got = [j.transcribe_file(p) for p in paths]
            res["judge_wer"][k] = round(score(zip(got, refs[:len(got)]))["wer"], 4)
        src = {k: v for k, v in res["judge_wer"].items() if k.startswith("source_")}
        if src:
            best = min(src, key=src.get)
            res["judge_best_source"] = {"voice": best, "wer": src[best]}
            for k in ("demo_heldout", "demo_seen", "demo_seeds"):
                res.setdefault("judge_ratio_to_best_source", {})[k] = round(res["judge_wer"][k] / max(1e-9, src[best]), 3)
        print(json.dumps({"judge_wer": res["judge_wer"]}), flush=True)
    res["examples"] = [{"ref": refs[i], **{k: hyps[k][i] for k in hyps}} for i in range(min(8, len(refs)))]
    print(json.dumps({"cer": res["cer"]}), flush=True)

    # -- controls
    spk0 = m.speakers.weight[0].detach()
    ctl: dict = {}
    p0 = prompt_ids(tok, CONTROL_TEXTS[0], fe)
    c1, _ = generate_codes(m, p0, spk0, tok.token_id("[spk_emb]"), Sampling(**{**base.__dict__, "seed": 7}))
    c2, _ = generate_codes(m, p0, spk0, tok.token_id("[spk_emb]"), Sampling(**{**base.__dict__, "seed": 7}))
    ctl["same_seed_identical_codes"] = c1 == c2 and len(c1) > 0

    seeds = list(range(1, a.seeds + 1))
    svs = [speaker_from_seed(ck["spk_stat"], s) for s in seeds]
    cos = [float(torch.nn.functional.cosine_similarity(x, y, dim=0)) for x, y in itertools.combinations(svs, 2)]
    f0, voiced = {}, {}
    for s, v in zip(seeds, svs):
        xs = [synthesize(m, tok, fe, t, v, Sampling(**{**base.__dict__, "seed": 0}))[0].numpy() for t in CONTROL_TEXTS[:2]]
        f0[s] = round(f0_median(np.concatenate(xs)), 1)
        voiced[s] = round(voiced_share(np.concatenate(xs)), 3)
    pitched = [f0[s] for s in seeds if voiced[s] >= WHISPER_SHARE and f0[s] > 0] or [0.0]
    ctl["seed_speakers"] = {"max_pairwise_cosine": round(max(cos), 3), "mean_pairwise_cosine": round(float(np.mean(cos)), 3),
                            "median_f0_hz": f0, "f0_spread_hz": round(max(f0.values()) - min(f0.values()), 1),
                            "f0_range_hz": [min(f0.values()), max(f0.values())], "voiced_share": voiced,
                            "whispering": [s for s in seeds if voiced[s] < WHISPER_SHARE],
                            "f0_range_hz_voiced": [min(pitched), max(pitched)]}

    def disagreement(codes_list):
        ds = []
        for x, y in itertools.combinations(codes_list, 2):
            n = min(len(x), len(y))
            if n == 0:
                continue
            ds.append(float((np.array(x[:n]) != np.array(y[:n])).mean()))
        return round(float(np.mean(ds)), 4) if ds else 0.0

    # disagreement between 8 samples of each of the 4 control sentences, averaged: one
    # sentence's 5 samples (the first cards) were too few to order 0.3 and 0.6 reliably
    temps = {}
    prompts = [prompt_ids(tok, t, fe) for t in CONTROL_TEXTS]
    for tmp in (0.1, 0.3, 0.6, 0.9):
        per, frames = [], []
        for p in prompts:
            cl = [generate_codes(m, p, spk0, tok.token_id("[spk_emb]"), Sampling(**{**base.__dict__, "temperature": tmp, "seed": s}))[0]
                  for s in range(8)]
            per.append(disagreement(cl))
            frames += [len(c) for c in cl]
        temps[str(tmp)] = {"code_disagreement": round(float(np.mean(per)), 4), "per_sentence": per,
                           "frames_mean": round(float(np.mean(frames)), 1)}
    ctl["temperature"] = temps
    ctl["temperature_monotonic"] = all(temps[a_]["code_disagreement"] < temps[b_]["code_disagreement"]
                                       for a_, b_ in zip(list(temps)[:-1], list(temps)[1:]))

    def distinct(**kw):
        seen_codes = set()
        for s in range(5):
            cl, _ = generate_codes(m, p0, spk0, tok.token_id("[spk_emb]"),
                                   Sampling(**{**base.__dict__, "temperature": 0.9, "seed": s, **kw}))
            seen_codes |= {(q, c[q]) for c in cl for q in range(4)}
        return len(seen_codes)

    ctl["distinct_codes"] = {"top_k_1": distinct(top_k=1, top_p=1.0), "top_k_5": distinct(top_k=5, top_p=1.0),
                             "top_k_20": distinct(top_k=20, top_p=1.0), "top_p_0.3": distinct(top_k=0, top_p=0.3),
                             "top_p_0.7": distinct(top_k=0, top_p=0.7), "top_p_1.0": distinct(top_k=0, top_p=1.0)}

    pauses = {}
    for tokn in ["", "[uv_break]"] + [f"[break_{n}]" for n in (1, 3, 5, 7)] + ["[lbreak]"]:
        vals = []
        for i, t in enumerate(CONTROL_TEXTS):
            w = t.split()
            txt = " ".join(w[:2] + ([tokn] if tokn else []) + w[2:])
            x, _ = synthesize(m, tok, fe, txt, spk0, Sampling(**{**base.__dict__, "seed": i}))
            vals.append(longest_pause_ms(x.numpy()))
        pauses[tokn or "none"] = round(float(np.mean(vals)), 1)
    ctl["pause_ms"] = pauses

    laugh = {"with": [], "without": []}
    for i, t in enumerate(CONTROL_TEXTS):
        for key, txt in (("without", t), ("with", t + " [laugh]")):
            x, _ = synthesize(m, tok, fe, txt, spk0, Sampling(**{**base.__dict__, "seed": i}))
            x = x.numpy()
            laugh[key].append({"ms": speech_ms(x), "bursts": bursts(x), "f0": round(f0_median(x), 1)})
            if i == 0:
                wav(f"laugh-{key}", x)
    ctl["laugh"] = {k: {"mean_ms": round(float(np.mean([v["ms"] for v in vs])), 1),
                        "mean_bursts": round(float(np.mean([v["bursts"] for v in vs])), 2),
                        "mean_f0": round(float(np.mean([v["f0"] for v in vs])), 1)} for k, vs in laugh.items()}

    speed = {}
    for n in (2, 5, 8):
        ms = []
        for i, t in enumerate(CONTROL_TEXTS):
            x, _ = synthesize(m, tok, fe, t, spk0, Sampling(**{**base.__dict__, "seed": i}), speed=n)
            ms.append(speech_ms(x.numpy()))
        speed[f"speed_{n}"] = round(float(np.mean(ms)), 1)
    ctl["speed_ms"] = speed
    ctl["speed_2_over_8"] = round(speed["speed_2"] / max(1e-9, speed["speed_8"]), 3)
    res["controls"] = ctl
    res["elapsed_s"] = round(time.time() - t0, 1)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
