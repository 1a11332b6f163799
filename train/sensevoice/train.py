"""Train (or fine-tune) SenseVoice with CTC on FunASR-style manifests.

    python3 -m train.launch --nproc 2 -m train.sensevoice.train \
        --train corpus/train.jsonl --val corpus/val.jsonl \
        --vocab exp/demo/bpe.model --cmvn exp/demo/cmvn.json --size demo --out exp/demo \
        --epochs 10 --batch-size 6000 --lr 1e-3 --warmup 300

Every flag of ``TrainConfig`` is available (``--help``).  ``--init`` loads
weights from an official FunASR ``model.pt`` or one of our checkpoints for
fine-tuning.  Progress: JSON lines on stdout.  Export the result with
``python3 -m train.sensevoice.export --checkpoint OUT/ckpt-XXXXXXXX.pt --out DIR``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

import torch

from .. import dist as pdist
from ..data import ManifestIndex, read_manifest
from ..trainer import CheckpointError, Task, TrainConfig, Trainer, load_torch
from . import model as svm
from .dataset import (SenseVoiceDataset, check_targets, collate, greedy_decode, report_targets, score,
                      too_long_for_ctc)
from .tokens import Vocab, load_vocab


class SenseVoiceTask(Task):
    def __init__(self, train_manifest: str, val_manifest: Optional[str], vocab: Vocab, cmvn: dict,
                 model_cfg: svm.SenseVoiceConfig, cfg: TrainConfig, cache: bool = True, specaug: bool = True,
                 speed_perturb: bool = False, clip_prob: float = 0.0):
        self.index = ManifestIndex(train_manifest)
        self.val = read_manifest(val_manifest, check_audio=True) if val_manifest else []
        self.vocab, self.cmvn, self.model_cfg, self.cfg = vocab, cmvn, model_cfg, cfg
        self.cache = cache
        self.specaug = specaug
        self.speed_perturb = speed_perturb
        self.clip_prob = clip_prob
        self._parts: Dict[int, SenseVoiceDataset] = {}
        self._checked: set = set()
        if self.val and _is_main():
            report_targets(check_targets(self.val, vocab), val_manifest)

    def num_parts(self) -> int:
        return max(1, self.cfg.data_split_num)

    def train_part(self, part: int, epoch: int):
        ds = self._parts.get(part)
        if ds is None:
            recs = self.index.part(part, self.num_parts())
            ds = SenseVoiceDataset(recs, self.vocab, self.cmvn["neg_mean"], self.cmvn["inv_stddev"],
                                   train=True, seed=self.cfg.seed, cache=self.cache, specaug=self.specaug,
                                   speed_perturb=self.speed_perturb, clip_prob=self.clip_prob)
            if self.num_parts() == 1:  # one part: keep it (and its feature cache) across epochs
                self._parts[part] = ds
            if part not in self._checked:
                self._checked.add(part)
                if _is_main():
                    where = self.index.path + (f" (part {part + 1} of {self.num_parts()})" if self.num_parts() > 1 else "")
                    report_targets(check_targets(recs, self.vocab, self.cfg.max_token_length, self.cfg.batch_size), where)
        ds.set_epoch(epoch)
        return ds

    def collate(self, items):
        return collate(items)

    def loss(self, model, batch):
        total, st = model(batch["x"], batch["x_length"], batch["language"], batch["text_norm"],
                          y=batch["y"], y_length=batch["y_length"], rich=batch["rich"])
        n = batch["x"].shape[0]
        dropped = int(too_long_for_ctc(batch["y"], batch["y_length"], batch["x_length"]).sum())
        return total / n, {"loss_sum": float(total.detach()), "samples": n,
                           "tokens": float(batch["x_length"].sum()) * 6, "too_long": dropped}

    def batch_weight(self, batch) -> float:
        return float(batch["x"].shape[0])

    def validate(self, model, info: pdist.DistInfo) -> Dict[str, float]:
        if not self.val:
            return {}
        recs = self.val[info.rank::info.world_size]
        ds = SenseVoiceDataset(recs, self.vocab, self.cmvn["neg_mean"], self.cmvn["inv_stddev"], train=False)
        sums = dict(loss_sum=0.0, n=0.0, char_err=0.0, chars=0.0, word_err=0.0, words=0.0, tags_ok=0.0,
                    too_long=0.0)
        bs = 16
        for s in range(0, len(ds), bs):
            b = collate([ds[i] for i in range(s, min(len(ds), s + bs))])
            b = {k: (v.to(info.device) if torch.is_tensor(v) else v) for k, v in b.items()}
            total, _ = model.loss(b["x"], b["x_length"], b["language"], b["text_norm"], b["y"], b["y_length"], b["rich"])
            logits = model(b["x"], b["x_length"], b["language"], b["text_norm"])
            hyps = greedy_decode(logits.float().cpu(), b["x_length"].cpu() + svm.NUM_QUERIES)
            sums["loss_sum"] += float(total)
            sums["n"] += len(hyps)
            sums["too_long"] += float(too_long_for_ctc(b["y"].cpu(), b["y_length"].cpu(), b["x_length"].cpu()).sum())
            for j, h in enumerate(hyps):
                _, _, c_err, c_n, w_err, w_n = score(self.vocab, h, recs[s + j]["target"])
                sums["char_err"] += c_err
                sums["chars"] += c_n
                sums["word_err"] += w_err
                sums["words"] += w_n
                sums["tags_ok"] += float(h[:1] == [self.vocab.id("<|en|>")])
        return sums

    def summarize_val(self, s):
        return {"loss": s["loss_sum"] / max(1, s["n"]), "cer": s["char_err"] / max(1, s["chars"]),
                "wer": s["word_err"] / max(1, s["words"]), "lang_acc": s["tags_ok"] / max(1, s["n"]),
                "utts": int(s["n"]), "too_long": int(s.get("too_long", 0))}

    def checkpoint_extra(self) -> dict:
        extra = {"config": self.model_cfg.to_dict(), "tokens": list(self.vocab.pieces),
                 "cmvn": {"neg_mean": self.cmvn["neg_mean"], "inv_stddev": self.cmvn["inv_stddev"]}}
        if getattr(self.vocab, "sp_proto", None):
            extra["sp_model"] = self.vocab.sp_proto
        elif self.vocab.sp_path:
            with open(self.vocab.sp_path, "rb") as f:
                extra["sp_model"] = f.read()
        return extra


def _is_main() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


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


def build_config(a) -> TrainConfig:
    d = TrainConfig().to_dict()
    return TrainConfig(**{k: getattr(a, k) for k in d})


def from_init(path: Optional[str], over: dict):
    """-> (vocab, cmvn, model config) stored in one of our checkpoints."""
    if not path:
        raise ValueError("--from-init needs --init")
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{path}: cannot read checkpoint: {e}") from e
    missing = [k for k in ("config", "tokens", "cmvn") if not isinstance(ck, dict) or k not in ck]
    if missing:
        raise ValueError(f"{path}: --from-init needs one of our checkpoints (it lacks {', '.join(missing)})")
    if ck.get("sp_model"):
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor()
        sp.load_from_serialized_proto(ck["sp_model"])
        vocab = Vocab(ck["tokens"], sp=sp)
        vocab.sp_proto = ck["sp_model"]  # saved again in every checkpoint (checkpoint_extra)
    else:
        vocab = Vocab(ck["tokens"])
    d = dict(ck["config"])
    d.update(over)
    return vocab, {"neg_mean": ck["cmvn"]["neg_mean"], "inv_stddev": ck["cmvn"]["inv_stddev"]}, \
        svm.SenseVoiceConfig.from_dict(d)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="training manifest (JSONL)")
    ap.add_argument("--val", help="validation manifest (JSONL)")
    ap.add_argument("--vocab", default="char", help="'char' or a SentencePiece .model")
    ap.add_argument("--cmvn", help="cmvn.json from train.sensevoice.prepare (required unless --from-init)")
    ap.add_argument("--size", default="demo", choices=sorted(svm.SIZES))
    ap.add_argument("--model-config", help="JSON object overriding SenseVoiceConfig fields")
    ap.add_argument("--init", help="initial weights (FunASR model.pt or our checkpoint)")
    ap.add_argument("--from-init", action="store_true",
                    help="take the model size, vocabulary and CMVN from the --init checkpoint (ours, e.g. written by "
                         "train.sensevoice.base): fine-tuning keeps the starting point's frontend and tokens")
    ap.add_argument("--init-new-head", action="store_true",
                    help="--init from a recogniser with another vocabulary: its encoder, a new CTC head")
    ap.add_argument("--no-cache", action="store_true", help="do not cache features in memory")
    ap.add_argument("--no-specaug", action="store_true", help="no time/frequency masking")
    ap.add_argument("--speed-perturb", action="store_true",
                    help="train on 0.9x/1.0x/1.1x speed copies, drawn per clip and epoch")
    ap.add_argument("--clip-prob", type=float, default=0.0,
                    help="overdrive this share of the clips, as a microphone set too loud clips (0.2-5 %% of samples)")
    ap.add_argument("--stop-at-step", type=int, default=0,
                    help="stop (with a checkpoint) at this step, keeping the full run's LR schedule")
    ap.add_argument("--out", dest="out_dir", default="train/out/sensevoice")
    ap.add_argument("--epochs", dest="max_epochs", type=int, default=10)
    ap.add_argument("--warmup", dest="warmup_steps", type=int, default=0)
    add_train_flags(ap)
    a = ap.parse_args(argv)
    if not 0.0 <= a.clip_prob <= 1.0:
        ap.error(f"--clip-prob {a.clip_prob}: want a probability in [0, 1]")
    cfg = build_config(a)
    torch.set_num_threads(int(os.environ.get("PARLEY_TORCH_THREADS", "1")))
    info = pdist.init(cfg.device)
    try:
        over = json.loads(a.model_config) if a.model_config else {}
        if a.from_init:
            vocab, cmvn, mcfg = from_init(a.init, over)
        else:
            if not a.cmvn:
                raise ValueError("--cmvn is required (or --from-init with --init)")
            vocab = load_vocab(a.vocab)
            with open(a.cmvn) as f:
                cmvn = json.load(f)
            mcfg = svm.config_for(a.size, vocab_size=len(vocab), **over)
        torch.manual_seed(cfg.seed)
        model = svm.build(mcfg)
        if a.init:
            svm.load_checkpoint_weights(model, a.init, new_head=a.init_new_head)
        task = SenseVoiceTask(a.train, a.val, vocab, cmvn, mcfg, cfg, cache=not a.no_cache, specaug=not a.no_specaug,
                               speed_perturb=a.speed_perturb, clip_prob=a.clip_prob)
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
