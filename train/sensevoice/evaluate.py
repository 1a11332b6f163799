"""Evaluate a SenseVoice checkpoint on a manifest: CER, WER, tag accuracy, hypotheses.

    python3 -m train.sensevoice.evaluate --checkpoint exp/run/ckpt-00001000.pt \
        --manifest corpus/test.jsonl [--out results.json]

Decoding is greedy CTC over the whole output (the first four tokens are the
language/emotion/event/ITN tags), exactly what Parley's Go engine does with the
exported ONNX model (whose logits match PyTorch's to ~1e-6).  Hypothesis and
reference are both normalised as the vocabulary does (case, punctuation) before
CER/WER are counted; transcripts the vocabulary cannot spell are reported.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from ..data import read_manifest
from . import model as svm
from .dataset import SenseVoiceDataset, check_targets, collate, greedy_decode, report_targets, score
from .export import load_our_checkpoint, resolve_checkpoint, round_fp16


def evaluate(model, vocab, neg_mean, inv_std, records, language: str = "en", batch: int = 16) -> dict:
    model.eval()
    ds = SenseVoiceDataset(records, vocab, neg_mean, inv_std, train=False)
    rows = []
    ce = cn = we = wn = tags_ok = 0
    want_tags = None
    with torch.no_grad():
        for s in range(0, len(ds), batch):
            items = [ds[i] for i in range(s, min(len(ds), s + batch))]
            b = collate(items)
            lang = torch.full_like(b["language"], svm.LANG_IDS[language])
            logits = model(b["x"], b["x_length"], lang, b["text_norm"])
            lengths = b["x_length"] + svm.NUM_QUERIES
            top2 = logits.topk(2, dim=-1).values
            gaps = top2[..., 0] - top2[..., 1]
            for j, ids in enumerate(greedy_decode(logits, lengths)):
                rec = records[s + j]
                hyp, ref, c_err, c_n, w_err, w_n = score(vocab, ids, rec["target"])
                tags = [vocab.pieces[i] for i in ids[:4]]
                want_tags = [vocab.pieces[i] for i in items[j]["rich"].tolist()]
                ce += c_err
                cn += c_n
                we += w_err
                wn += w_n
                tags_ok += tags == want_tags
                rows.append({"key": rec["key"], "ref": ref, "hyp": hyp, "raw_ref": rec["target"], "tags": tags,
                             "ids": ids, "voice": rec.get("voice", ""), "char_err": c_err, "chars": c_n,
                             "word_err": w_err, "words": w_n,
                             "margin": float(gaps[j, : int(lengths[j])].min())})
    return {"utts": len(rows), "cer": ce / max(1, cn), "wer": we / max(1, wn),
            "tag_acc": tags_ok / max(1, len(rows)), "language": language, "rows": rows}


def group_by(records, rows, field: str) -> dict:
    """CER/WER per value of a manifest field ("person", "snr", "text_source", …)."""
    acc: dict = {}
    for rec, row in zip(records, rows):
        k = str(rec.get(field))
        a = acc.setdefault(k, [0, 0, 0, 0, 0])
        a[0] += row["char_err"]
        a[1] += row["chars"]
        a[2] += row["word_err"]
        a[3] += row["words"]
        a[4] += 1
    return {k: {"utts": a[4], "cer": round(a[0] / max(1, a[1]), 4), "wer": round(a[2] / max(1, a[3]), 4)}
            for k, a in sorted(acc.items())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--language", default="en", choices=sorted(svm.LANG_IDS))
    ap.add_argument("--out", help="write per-utterance results here (JSON)")
    ap.add_argument("--fp16-weights", action="store_true",
                    help="round the weights to float16 first, as export --fp16-weights stores them")
    ap.add_argument("--by", action="append", default=[], help="also report CER/WER per value of this manifest field")
    ap.add_argument("--golden", help="write golden decodes (language auto and en, woitn) for Go tests")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    a.checkpoint = resolve_checkpoint(a.checkpoint)
    model, vocab, nm, istd = load_our_checkpoint(a.checkpoint)
    if a.fp16_weights:
        round_fp16(model)
    records = read_manifest(a.manifest, check_audio=True)
    report_targets(check_targets(records, vocab), a.manifest)
    res = evaluate(model, vocab, nm, istd, records, a.language)
    for field in a.by:
        res.setdefault("by", {})[field] = group_by(records, res["rows"], field)
    if a.golden:
        import os

        per = {lang: evaluate(model, vocab, nm, istd, records, lang, batch=1)["rows"] for lang in ("auto", "en")}
        items = []
        for i, r in enumerate(records):
            item = {"file": os.path.basename(r["source"]), "ref": r["target"]}
            for lang, rows in per.items():
                row = rows[i]
                # margin: the smallest gap between a frame's best and second-best logit. Where it
                # is tiny another CPU's kernels may flip that frame's argmax, so the Go test
                # forgives a differing decode there.
                item[lang] = {"ids": row["ids"], "tags": row["tags"], "text": vocab.decode(row["ids"]),
                              "margin": round(row["margin"], 6)}
            items.append(item)
        g = {"comment": "greedy CTC decodes of the demo model (PyTorch, torchaudio kaldi fbank, one utterance "
                        "per call, text_norm woitn); 'auto'/'en' = the language query",
             "model": "assets/demo/sensevoice/model.onnx", "checkpoint": os.path.basename(a.checkpoint),
             "items": items}
        with open(a.golden, "w") as f:
            json.dump(g, f, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
