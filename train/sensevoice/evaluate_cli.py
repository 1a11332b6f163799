"""The recogniser as a user runs it: ``parley transcribe`` (the Go pipeline: its features, the
beam search with the model's lm.bin, or greedy with --lm none) over a held-out manifest, scored
as train.sensevoice.evaluate scores PyTorch's greedy decodes.

    python3 -m train.sensevoice.evaluate_cli --model assets/demo/sensevoice --manifest train/out/human/test-voice.jsonl [--lm none]

Prints {"utts", "wer", "cer", "by": {field: {value: {wer, cer, utts}}}}.

``--join N`` measures long recordings instead: each N consecutive utterances joined into one
file (``--gap`` seconds of silence between them; the rest left out), scored against their
transcripts joined, as a person reading a passage is heard.

``--clip-share SHARE`` measures a microphone set too loud: each file amplified until SHARE of its
samples pass full scale and cut there (16-bit, as a recorder writes it).

``--hyps FILE`` also writes each utterance's source (as the manifest names it; a joined file's
first), reference, transcript and word errors, one JSON object a line, for reading what it misses.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ..chattts.evaluate import cer, transcripts
from ..edit import edit_distance
from ..judge import score, words


def transcribe(parley: str, model: str, files: List[str], lm: str, extra: Sequence[str] = ()) -> Dict[str, str]:
    """{file: text} from ``parley transcribe``; extra are more of its flags (--beam-alpha …)."""
    cmd = [parley, "transcribe", "--model", model, "--lang", "en", "--format", "json"]
    if lm:
        cmd += ["--lm", lm]
    cmd += list(extra)
    out = {}
    for i in range(0, len(files), 200):  # keep command lines short
        r = subprocess.run(cmd + files[i:i + 200], capture_output=True, text=True, timeout=3600)
        if r.returncode != 0 and not r.stdout:
            raise RuntimeError(f"parley transcribe: {r.stderr.strip()[-400:]}")
        out.update(transcripts(r.stdout, files[i:i + 200]))
    return out


def load_manifest(path: str, limit: int = 0) -> Tuple[List[dict], List[str]]:
    """A manifest's rows (the first limit; 0 = all) and their audio files' paths."""
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    if limit:
        rows = rows[:limit]
    joined = [r["key"] for r in rows if r.get("join")]
    if joined:  # parley hears files: a joined training row is several (use --join for long audio)
        raise ValueError(f"{path}: {len(joined)} joined training rows (train.sensevoice.join), e.g. {joined[0]}")
    base = os.path.dirname(os.path.abspath(path))
    return rows, [os.path.join(base, r["source"]) for r in rows]


def join(rows: List[dict], files: List[str], n: int, gap: float, out: str) -> Tuple[List[dict], List[str]]:
    """Each n consecutive utterances as one 16 kHz file in out (gap seconds of silence between
    them): the joined rows (target the transcripts joined) and files; a remainder is left out."""
    import numpy as np
    import soundfile as sf

    jrows, jfiles = [], []
    for g in range(0, len(rows) - n + 1, n):
        parts = []
        for f in files[g:g + n]:
            x, sr = sf.read(f, dtype="float32", always_2d=True)
            if sr != 16000:
                raise ValueError(f"{f}: {sr} Hz, want 16000")
            parts += [x.mean(axis=1), np.zeros(int(round(gap * sr)), np.float32)]
        path = os.path.join(out, f"joined-{g // n:04d}.wav")
        sf.write(path, np.concatenate(parts[:-1]), 16000, subtype="FLOAT")
        jrows.append(dict(rows[g], target=" ".join(r["target"] for r in rows[g:g + n]), joined=n))
        jfiles.append(path)
    return jrows, jfiles


def clipped(files: List[str], share: float, out: str) -> List[str]:
    """Each file hard-clipped at the level that drives ``share`` of its samples past full scale
    (train.sensevoice.dataset.overdrive), as 16-bit files in out."""
    import soundfile as sf

    from .dataset import overdrive

    got = []
    for i, f in enumerate(files):
        x, sr = sf.read(f, dtype="float32", always_2d=True)
        path = os.path.join(out, f"clipped-{i:05d}.wav")
        sf.write(path, overdrive(x.mean(axis=1), share, soft=False), sr, subtype="PCM_16")
        got.append(path)
    return got


def write_hyps(path: str, rows: List[dict], pairs) -> None:
    """One line per utterance, its word errors counted as score counts them; written whole to a
    temporary name first, removed if that fails, so that a full disk leaves no half file."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for r, (h, ref) in zip(rows, pairs):
                line = {"source": r.get("source", ""), "target": ref, "hyp": h,
                        "errors": edit_distance(words(h), words(ref)), "words": len(words(ref))}
                if r.get("joined"):
                    line["joined"] = r["joined"]
                f.write(json.dumps(line) + "\n")
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def figures(pairs) -> dict:
    return {"utts": len(pairs), "wer": round(score(pairs)["wer"], 4),
            "cer": round(cer([r for _, r in pairs], [h for h, _ in pairs]), 4)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.evaluate_cli", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--lm", default="", help="none = greedy CTC; a file; default: the model's lm.bin")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--by", action="append", default=[])
    ap.add_argument("--join", type=int, default=1, help="N utterances to a file: long recordings")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds of silence between joined utterances")
    ap.add_argument("--clip-share", type=float, default=0.0,
                    help="clip each file so that this share of its samples is at full scale")
    ap.add_argument("--hyps", default="", help="also write each utterance's reference and transcript (JSONL) here")
    a = ap.parse_args(argv)
    if a.join < 1 or a.gap < 0:
        ap.error("--join must be at least 1 and --gap not negative")
    if not 0 <= a.clip_share < 1:
        ap.error("--clip-share is a share of samples, from 0 up to 1")
    if a.hyps and not os.path.isdir(os.path.dirname(os.path.abspath(a.hyps))):
        ap.error(f"--hyps {a.hyps}: no such folder")  # before the decoding, not after
    import tempfile

    try:
        rows, files = load_manifest(a.manifest, a.limit)
    except (OSError, ValueError) as e:  # ValueError: malformed JSON too
        print(f"error: {e}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="joined-") as tmp:
        if a.join > 1:
            try:
                rows, files = join(rows, files, a.join, a.gap, tmp)
            except (ValueError, RuntimeError, OSError) as e:  # a file soundfile cannot read, or at another rate
                print(f"error: --join: {e}", file=sys.stderr)
                return 1
            if not rows:
                print(f"error: --join {a.join}: the manifest has fewer utterances than that", file=sys.stderr)
                return 1
        if a.clip_share > 0:
            try:
                files = clipped(files, a.clip_share, tmp)
            except (ValueError, RuntimeError, OSError) as e:
                print(f"error: --clip-share: {e}", file=sys.stderr)
                return 1
        hyp = transcribe(a.parley, a.model, files, a.lm)
    pairs = [(hyp.get(f, ""), r["target"]) for f, r in zip(files, rows)]
    if a.hyps:
        try:
            write_hyps(a.hyps, rows, pairs)
        except OSError as e:
            print(f"error: --hyps: {e}", file=sys.stderr)
            return 1
    res = figures(pairs)
    for field in a.by:
        groups: Dict[str, list] = {}
        for p, r in zip(pairs, rows):
            groups.setdefault(str(r.get(field, "")), []).append(p)
        res.setdefault("by", {})[field] = {k: figures(v) for k, v in sorted(groups.items())}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
