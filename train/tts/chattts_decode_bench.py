#!/usr/bin/env python3
"""PyTorch per-frame time of the ChatTTS code pass, the baseline tts/chattts's Go loop is
compared with (BenchmarkVsPyTorch runs this in the same `make bench` run).

It builds the model of an export directory's size (train.chattts: the module the ONNX graph was
exported from; random weights, which cost the same as trained ones), then runs the exporter's
GPT step module (embeddings, speaker, Llama with KV cache, heads) for a prompt and N frames with
ChatTTS's sampling (temperature, repetition penalty, top-P, top-K; EOS masked so every run has
N frames), exactly the work the Go loop does per frame. Prints one JSON line.

  /usr/bin/python3 train/tts/chattts_decode_bench.py --model /tmp/parley-chattts-official \\
      --prompt 117,129,159,6,7,118 --frames 48 --threads 1
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from train.chattts.config import config_for  # noqa: E402
from train.chattts.export import GPTGraph  # noqa: E402
from train.chattts.model import ChatTTS  # noqa: E402


def sample(logits, hist, temperature=0.3, penalty=1.05, top_p=0.7, top_k=20, eos=None, gen=None):
    # logits (Q, A); ChatTTS order: temperature, repetition penalty (last 16), top-P, top-K, EOS mask
    logits = logits / temperature
    if hist:
        window = torch.tensor(hist[-16:]).t()  # (Q, w)
        freq = torch.nn.functional.one_hot(window, logits.size(1)).sum(1)
        alpha = torch.pow(penalty, freq)
        logits = torch.where(logits < 0, logits * alpha, logits / alpha)
    sl, si = torch.sort(logits, descending=False)
    cum = sl.softmax(-1).cumsum(-1)
    rm = cum <= (1 - top_p)
    rm[..., -3:] = False
    logits = logits.masked_fill(rm.scatter(1, si, rm), -float("inf"))
    kth = torch.topk(logits, max(top_k, 3))[0][..., -1, None]
    logits = logits.masked_fill(logits < kth, -float("inf"))
    if eos is not None:
        logits[:, eos] = -float("inf")
    return torch.multinomial(logits.softmax(-1), 1, generator=gen).squeeze(1)


@torch.no_grad()
def run(graph, cfg, prompt, frames, spk, spk_id, eos):
    g = cfg.gpt
    s = len(prompt)
    ids = torch.tensor(prompt).view(1, s, 1).expand(1, s, g.num_vq).contiguous()
    mask = torch.ones(1, s, dtype=torch.bool)
    past = torch.zeros(g.layers, 2, 1, g.heads, 0, g.hidden // g.heads)
    pos = torch.arange(s).view(1, s)
    total, hist = s, []
    gen = torch.Generator().manual_seed(1)
    for _ in range(frames + 1):
        _, lc, hid, past = graph(ids, mask, spk, torch.ones(1, total, dtype=torch.long), pos, past)
        nxt = sample(lc[0], hist, eos=eos, gen=gen)
        hist.append(nxt.tolist())
        ids = nxt.view(1, 1, g.num_vq)
        mask = torch.zeros(1, 1, dtype=torch.bool)
        pos = torch.tensor([[total]])
        total += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="export directory (its config.json gives the size)")
    ap.add_argument("--prompt", required=True, help="comma-separated prompt ids")
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        conf = json.load(f)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = config_for(conf["size"], num_text_tokens=conf["gpt"]["num_text_tokens"])
    m = ChatTTS(cfg).float().eval()
    spk_id = conf["tokens"]["[spk_emb]"]
    graph = GPTGraph(m, spk_id).eval()
    prompt = [int(x) for x in a.prompt.split(",")]
    spk = torch.randn(1, cfg.gpt.hidden)
    run(graph, cfg, prompt, 4, spk, spk_id, conf["eos_code"])  # warm-up
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        run(graph, cfg, prompt, a.frames, spk, spk_id, conf["eos_code"])
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(json.dumps({"ms_per_frame": 1000 * best / a.frames, "frames": a.frames, "threads": a.threads,
                      "torch": torch.__version__, "size": conf["size"]}))


if __name__ == "__main__":
    main()
