"""Where a ChatTTS-architecture voice loses intelligibility: the same held-out utterances through
ever more of the model, each judged alike.

    /usr/bin/python3 -m train.chattts.oracle --checkpoint R/finalD.pt --feats F --corpus C --limit 60 --out DIR

Sets (one wav per utterance under DIR/wav, the judge's WER, the demo recogniser's CER, the
median F0, the length against the source):
  source            the corpus audio itself (the judge resamples it to 16 kHz)
  vocos_gt_mel      Vocos on the ground-truth log-mel: the vocoder alone
  dvae_full_codes   the DVAE's own encoding of the mel, all streams (no neutral ones), decoded:
                    the DVAE autoencoder alone
  dvae_gt_codes     the DVAE decoder on the stored ground-truth codes (the codes the GPT is
                    trained to predict, neutral streams included), then Vocos
  gpt_teacher       the GPT teacher-forced on those codes, its hidden states through the decoder
                    (the path the engine's audio takes) and Vocos: the best the decoder does from
                    the GPT when no frame is wrong
  gpt_sampled       the full model as train.chattts.evaluate runs it: the GPT sampling from the
                    plain text (espeak IPA, [speed_5]) at the checkpoint's code defaults (the
                    engine's: temperature 0.3, top_p 0.7, top_k 20), seed = utterance number,
                    hidden states -> decoder -> Vocos
  gpt_sampled_dvae  the codes gpt_sampled drew, through the DVAE decoder instead (are the codes
                    or the hidden states the weaker carrier?)
  gpt_sampled_row   as gpt_sampled, but prompted with the corpus row's own phonemes and speed
                    (the training prompt, controls included), so text front-end differences drop out
The speaker is the utterance's own: for held-out speakers (split test) the vector
train.chattts.evaluate fits on the adaptation utterances, for training speakers (test-seen)
the speaker table's row.  Prints a table and writes DIR/results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from typing import Dict, List, Optional

import numpy as np
import soundfile as sf
import torch

from .evaluate import SR, cer, f0_median, fit_speakers, load, read_24k, transcribe
from .infer import Sampling, generate_codes, synthesize, vocode
from .train import Feats, GPTData, collate_gpt

SETS = ("source", "vocos_gt_mel", "dvae_full_codes", "dvae_gt_codes", "gpt_teacher", "gpt_sampled", "gpt_sampled_dvae",
        "gpt_sampled_row")


def base_sampling(ck: dict, temperature: Optional[float] = None, max_new: Optional[int] = None) -> Sampling:
    """The checkpoint's code defaults as a Sampling, as train.chattts.evaluate builds it."""
    s = Sampling(**{k: v for k, v in (ck.get("code_defaults") or {}).items() if k in Sampling.__dataclass_fields__})
    s.neutral_streams = tuple(ck.get("neutral_streams") or ())
    if temperature is not None:
        s.temperature = temperature
    if max_new is not None:
        s.max_new_tokens = max_new
    return s


@torch.no_grad()
def codes_audio(m, codes) -> torch.Tensor:
    """(T, num_vq) codes -> the DVAE decoder's log-mel -> Vocos waveform."""
    c = torch.as_tensor(np.asarray(codes), dtype=torch.long)
    if c.numel() == 0:
        return torch.zeros(0)
    mel = m.dvae.decode_codes(c.t().unsqueeze(0))
    return m.vocos.decode(mel)[0]


@torch.no_grad()
def teacher_hiddens(m, item: dict, spk: torch.Tensor) -> torch.Tensor:
    """The GPT's hidden states that predict (and are decoded for) an item's frames, teacher-forced
    on its ground-truth codes with speaker vector spk: (T, H), as the gpt stage's decoder loss reads them."""
    b = collate_gpt([item], eos=m.cfg.num_codes, nvq=m.cfg.gpt.num_vq)
    pos = torch.arange(b["ids"].shape[1]).unsqueeze(0)
    h = m.hidden_states(b["ids"], b["text_mask"], b["attn"], spk.view(1, -1), b["spk_emb_id"], pos)
    return h[0, b["hid_idx"][0]]


@torch.no_grad()
def row_sampled(m, prompt: List[int], spk: torch.Tensor, spk_emb_id: int, s: Sampling):
    """generate_codes on a ready prompt, with synthesize's end-token hold-back."""
    if s.min_frames_per_token > 0:
        s = replace(s, min_new_tokens=max(s.min_new_tokens, int(s.min_frames_per_token * (len(prompt) - 4))))
    codes, h = generate_codes(m, prompt, spk, spk_emb_id, s)
    return vocode(m, h), codes


def speakers_for(m, tok, feats: str, split: str, steps: int) -> Dict[int, torch.Tensor]:
    """speaker_index -> vector: fitted on the adaptation split for held-out speakers (as
    train.chattts.evaluate does), the training table's rows otherwise."""
    if split == "test":
        return fit_speakers(m, tok, feats, steps=steps)
    w = m.speakers.weight.detach()
    return {i: w[i].clone() for i in range(w.shape[0])}


def run(a) -> dict:
    t0 = time.time()
    m, tok, ck = load(a.checkpoint, a.feats)
    fe = ck.get("frontend") or {}
    base = base_sampling(ck, a.temperature, a.max_new)
    f = Feats(a.feats, a.split)
    n = len(f) if a.limit <= 0 else min(a.limit, len(f))
    ds = GPTData(f, tok)
    spk_id = tok.token_id("[spk_emb]")
    vecs = speakers_for(m, tok, a.feats, a.split, a.speaker_steps)
    wdir = os.path.join(a.out, "wav")
    os.makedirs(wdir, exist_ok=True)

    paths: Dict[str, List[str]] = {k: [] for k in SETS}
    secs: Dict[str, List[float]] = {k: [] for k in SETS}
    audio: Dict[str, List[np.ndarray]] = {k: [] for k in SETS}
    refs, frames_gt, frames_gen, stored_vs_encoded = [], [], [], []
    times: Dict[str, float] = {k: 0.0 for k in SETS}
    for i in range(n):
        r = f.index[i]
        refs.append(r["plain"])
        spk = vecs[r["speaker_index"]]
        gt_codes = f.get_codes(i)
        mel = torch.from_numpy(f.get_mel(i)).t().unsqueeze(0)
        frames_gt.append(len(gt_codes))
        with torch.no_grad():  # the stored codes against the checkpoint's own DVAE (stale codes would show here)
            enc = m.dvae.encode(mel)[1][0].t().numpy()  # as train.encode_codes
            out = {"_full": enc.copy()}
            if base.neutral_streams:
                enc[:, list(base.neutral_streams)] = gt_codes[:, list(base.neutral_streams)]
            k = min(len(enc), len(gt_codes))
            stored_vs_encoded.append(float((enc[:k] == gt_codes[:k]).mean()) if k else 1.0)
        s = Sampling(**{**base.__dict__, "seed": i})
        for name in SETS:
            t = time.time()
            if name == "source":
                src = os.path.join(a.corpus, r["source"]) if a.corpus else None
                x = read_24k(src) if src and os.path.exists(src) else f.get_audio(i)
            elif name == "vocos_gt_mel":
                with torch.no_grad():
                    x = m.vocos.decode(mel)[0].numpy()
            elif name == "dvae_full_codes":
                x = codes_audio(m, out["_full"]).numpy()
            elif name == "dvae_gt_codes":
                x = codes_audio(m, gt_codes).numpy()
            elif name == "gpt_teacher":
                x = vocode(m, teacher_hiddens(m, ds[i], spk)).numpy()
            elif name == "gpt_sampled":
                xt, codes = synthesize(m, tok, fe, r["plain"], spk, s)
                x = xt.numpy()
                frames_gen.append(len(codes))
                out["_codes"] = codes
            elif name == "gpt_sampled_dvae":
                x = codes_audio(m, out["_codes"]).numpy()
            else:  # gpt_sampled_row
                x = row_sampled(m, ds.prompts[i], spk, spk_id, s)[0].numpy()
            times[name] += time.time() - t
            x = np.asarray(x, dtype=np.float32)
            p = os.path.abspath(os.path.join(wdir, f"{name}-{i:03d}.wav"))
            sf.write(p, x, SR, subtype="PCM_16")
            paths[name].append(p)
            secs[name].append(len(x) / SR)
            audio[name].append(x)
        if a.verbose:
            print(json.dumps({"utt": i, "s": round(time.time() - t0, 1)}), file=sys.stderr, flush=True)

    res: dict = {"checkpoint": a.checkpoint, "feats": a.feats, "split": a.split, "utterances": n,
                 "sampling": {**base.__dict__, "neutral_streams": list(base.neutral_streams)},
                 "speaker": "fitted on adapt (evaluate.fit_speakers)" if a.split == "test" else "training table row",
                 "stored_codes_match_dvae": round(float(np.mean(stored_vs_encoded)), 4) if stored_vs_encoded else None,
                 "frames_gt_mean": round(float(np.mean(frames_gt)), 1) if frames_gt else 0.0,
                 "frames_sampled_mean": round(float(np.mean(frames_gen)), 1) if frames_gen else 0.0,
                 "sets": {}}
    judge = None
    if a.judge:
        from ..judge import Judge, JudgeMissing

        try:
            judge = Judge()
        except JudgeMissing as e:
            res["judge_missing"] = str(e)
    from ..judge import score

    hyps_j: Dict[str, List[str]] = {}
    hyps_c: Dict[str, List[str]] = {}
    use_asr = bool(a.parley) and os.path.exists(a.parley) and os.path.isdir(a.asr)
    if a.parley and not use_asr:
        res["asr_missing"] = f"{a.parley} or {a.asr} not found: no CER"
    for name in SETS:
        src_secs = secs["source"]
        e = {"seconds_ratio_to_source": round(float(np.sum(secs[name]) / max(1e-9, np.sum(src_secs))), 3),
             "f0_median_hz": round(float(np.median([f0_median(x) for x in audio[name]])), 1) if n else 0.0,
             "synth_s": round(times[name], 1)}
        if judge is not None:
            hyps_j[name] = [judge.transcribe(x, SR) for x in audio[name]]
            e["judge_wer"] = round(score(zip(hyps_j[name], refs))["wer"], 4)
        if use_asr:
            hyps_c[name] = transcribe(paths[name], a.parley, a.asr)
            e["cer"] = round(cer(refs, hyps_c[name]), 4)
        res["sets"][name] = e
    res["rows"] = [{"key": f.index[i].get("key"), "ref": refs[i],
                    **({"judge": {k: hyps_j[k][i] for k in hyps_j}} if hyps_j else {}),
                    **({"asr": {k: hyps_c[k][i] for k in hyps_c}} if hyps_c else {})} for i in range(n)]
    res["elapsed_s"] = round(time.time() - t0, 1)
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1, ensure_ascii=False)
    return res


def table(res: dict) -> str:
    cols = [("judge_wer", "judge WER"), ("cer", "demo CER"), ("f0_median_hz", "F0 Hz"),
            ("seconds_ratio_to_source", "len/src")]
    lines = [f"{'set':<18}" + "".join(f"{h:>11}" for _, h in cols)]
    for name, e in res["sets"].items():
        cells = []
        for k, _ in cols:
            v = e.get(k)
            cells.append(f"{'-':>11}" if v is None else (f"{100 * v:>10.1f}%" if k in ("judge_wer", "cer") else f"{v:>11}"))
        lines.append(f"{name:<18}" + "".join(cells))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.oracle", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="a checkpoint of train.chattts.train (merged: all parts)")
    ap.add_argument("--feats", required=True, help="its features dir (mel, audio, DVAE codes)")
    ap.add_argument("--corpus", default="", help="the corpus dir, for the source audio (default: the features' audio)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--split", default="test", choices=["test", "test-seen"],
                    help="test: held-out speakers (vectors fitted on adapt); test-seen: training speakers")
    ap.add_argument("--limit", type=int, default=60, help="utterances (0: all)")
    ap.add_argument("--temperature", type=float, default=None, help="default: the checkpoint's code defaults")
    ap.add_argument("--max-new", type=int, default=None, help="cap on sampled code frames per utterance")
    ap.add_argument("--speaker-steps", type=int, default=40, help="held-out speaker fit: Adam steps (evaluate's 40)")
    ap.add_argument("--no-judge", dest="judge", action="store_false", help="skip PocketSphinx")
    ap.add_argument("--parley", default="bin/parley", help="'' skips the demo recogniser's CER")
    ap.add_argument("--asr", default="assets/demo/sensevoice")
    ap.add_argument("--verbose", action="store_true")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    res = run(a)
    print(table(res))
    print(json.dumps({k: res[k] for k in ("utterances", "stored_codes_match_dvae", "frames_gt_mean",
                                          "frames_sampled_mean", "elapsed_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
