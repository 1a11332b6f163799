"""Text -> speech with a ChatTTS model in PyTorch, the way the contract tells the Go engine to
(CONTRACT.md, "The two passes"): code pass with temperature, repetition penalty, top-p, top-k,
EOS masking, independent per-stream sampling, then decoder -> Vocos -> ISTFT.  Used for the
demo voice's evaluation and by tests; the graphs are the exported ones' PyTorch twins."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

import torch

from .corpus import phonemize
from .export import GPTGraph
from .model import ChatTTS
from .tokenizer import WordPieceTokenizer

MIN_TOKENS_TO_KEEP = 3
NEUTRAL_CODE = 312


@dataclass
class Sampling:
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.05
    repetition_window: int = 16
    max_new_tokens: int = 2048
    min_new_tokens: int = 0
    # the end token is also held back for this many frames per text token (config.json
    # code.min_frames_per_token; the Go engine applies the same), so a sentence is not cut off
    min_frames_per_token: float = 0.0
    seed: int = 0
    # streams the model was trained to hold the neutral code in (config.json dvae.neutral_streams):
    # written, not sampled, as the Go engine does
    neutral_streams: Tuple[int, ...] = ()


def spk_stat_parts(spk_stat: torch.Tensor):
    """(std, mean) of a spk_stat, which holds the std then the mean of the speaker vectors."""
    s = torch.as_tensor(spk_stat).float().view(-1)
    h = s.numel() // 2
    return s[:h], s[h:]


def speaker_from_seed(spk_stat: torch.Tensor, seed: int) -> torch.Tensor:
    """ChatTTS Speaker._sample_random with a seeded generator: randn * std + mean."""
    std, mean = spk_stat_parts(spk_stat)
    g = torch.Generator().manual_seed(seed)
    return torch.randn(std.numel(), generator=g) * std + mean


def warp(logits: torch.Tensor, top_p: float, top_k: int) -> torch.Tensor:
    """HF TopPLogitsWarper then TopKLogitsWarper (min_tokens_to_keep 3), rows = streams."""
    if top_p is not None and top_p < 1.0:
        s, idx = torch.sort(logits, descending=False, dim=-1)
        cum = s.softmax(-1).cumsum(-1)
        remove = cum <= (1 - top_p)
        remove[..., -MIN_TOKENS_TO_KEEP:] = False
        logits = logits.masked_fill(remove.scatter(-1, idx, remove), -float("inf"))
    if top_k is not None and top_k > 0:
        k = min(max(top_k, MIN_TOKENS_TO_KEEP), logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -float("inf"))
    return logits


def penalize(logits: torch.Tensor, history: List[List[int]], penalty: float, window: int) -> torch.Tensor:
    if penalty == 1.0 or not history:
        return logits
    w = torch.tensor(history[-window:])  # (w, Q)
    out = logits.clone()
    for q in range(logits.shape[0]):
        freq = torch.bincount(w[:, q], minlength=logits.shape[1]).to(logits.dtype)
        alpha = penalty ** freq
        out[q] = torch.where(logits[q] < 0, logits[q] * alpha, logits[q] / alpha)
    return out


@torch.no_grad()
def generate_codes(m: ChatTTS, prompt: List[int], spk: Optional[torch.Tensor], spk_emb_id: int,
                   s: Sampling) -> Tuple[List[List[int]], torch.Tensor]:
    g = m.cfg.gpt
    eos = m.cfg.num_codes
    if len(prompt) + 1 >= g.max_positions:
        raise ValueError(f"prompt of {len(prompt)} tokens leaves no room for audio in the model's "
                         f"{g.max_positions} positions: split the text into sentences")
    graph = GPTGraph(m, spk_emb_id).eval()
    gen = torch.Generator().manual_seed(s.seed)
    n = len(prompt)
    ids = torch.tensor(prompt).view(1, n, 1).expand(1, n, g.num_vq).contiguous()
    mask = torch.ones(1, n, dtype=torch.bool)
    spk_in = (spk if spk is not None else torch.zeros(g.hidden)).view(1, -1)
    past = torch.zeros(g.layers, 2, 1, g.heads, 0, g.hidden // g.heads)
    pos = torch.arange(n).view(1, n)
    total = n
    codes: List[List[int]] = []
    hiddens = []
    temp = max(float(s.temperature), 1e-5)
    for i in range(s.max_new_tokens):
        if total >= g.max_positions:
            break
        _, lc, hid, past = graph(ids, mask, spk_in, torch.ones(1, total, dtype=torch.long), pos, past)
        logits = lc[0] / temp
        logits = penalize(logits, codes, s.repetition_penalty, s.repetition_window)
        logits = warp(logits, s.top_p, s.top_k)
        if i < s.min_new_tokens:
            logits[:, eos] = -float("inf")
        probs = logits.softmax(-1)
        nxt = torch.multinomial(probs, 1, generator=gen).view(-1)
        if s.neutral_streams:
            nxt[list(s.neutral_streams)] = NEUTRAL_CODE
        if (nxt == eos).any():
            break
        codes.append(nxt.tolist())
        hiddens.append(hid[0])
        ids = nxt.view(1, 1, g.num_vq)
        mask = torch.zeros(1, 1, dtype=torch.bool)
        pos = torch.tensor([[total]])
        total += 1
    h = torch.stack(hiddens) if hiddens else torch.zeros(0, g.hidden)
    return codes, h


@torch.no_grad()
def vocode(m: ChatTTS, hiddens: torch.Tensor) -> torch.Tensor:
    if hiddens.shape[0] == 0:
        return torch.zeros(0)
    mel = m.decoder.decode(hiddens.t().unsqueeze(0))
    return m.vocos.decode(mel)[0]


def prompt_ids(tok: WordPieceTokenizer, text: str, frontend: dict, speed: int = 5, speaker: bool = True) -> List[int]:
    body = phonemize(text, frontend.get("voice", "en-us")) if frontend.get("type") == "espeak-ipa" else text
    head = "[Stts][spk_emb]" if speaker else "[Stts][empty_spk]"
    return tok.encode(f"{head}[speed_{speed}]{body}[Ptts]")


@torch.no_grad()
def synthesize(m: ChatTTS, tok: WordPieceTokenizer, frontend: dict, text: str, spk: torch.Tensor,
               s: Sampling, speed: int = 5) -> Tuple[torch.Tensor, List[List[int]]]:
    p = prompt_ids(tok, text, frontend, speed)
    if s.min_frames_per_token > 0:  # the text's tokens: the prompt less [Stts][spk_emb][speed_N] and [Ptts]
        s = replace(s, min_new_tokens=max(s.min_new_tokens, int(s.min_frames_per_token * (len(p) - 4))))
    codes, h = generate_codes(m, p, spk, tok.token_id("[spk_emb]"), s)
    return vocode(m, h), codes
