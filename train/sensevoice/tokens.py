"""SenseVoice vocabularies: special tokens, SentencePiece models, a built-in character set.

tokens.txt is written as ``piece id`` per line (sherpa-onnx format).  Index 0 is
``<unk>``, which SenseVoice also uses as the CTC blank.
"""
from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Sequence

LANG_TOKENS = ["<|zh|>", "<|en|>", "<|yue|>", "<|ja|>", "<|ko|>", "<|nospeech|>"]
EMO_TOKENS = ["<|HAPPY|>", "<|SAD|>", "<|ANGRY|>", "<|NEUTRAL|>", "<|FEARFUL|>",
              "<|DISGUSTED|>", "<|SURPRISED|>", "<|EMO_UNKNOWN|>"]
EVENT_TOKENS = ["<|Speech|>", "<|BGM|>", "<|Laughter|>", "<|Applause|>", "<|Cry|>",
                "<|Sneeze|>", "<|Breath|>", "<|Cough|>"]
ITN_TOKENS = ["<|withitn|>", "<|woitn|>"]
# User-defined symbols, placed right after <unk> <s> </s>.
SPECIAL_TOKENS = LANG_TOKENS + EMO_TOKENS + EVENT_TOKENS + ITN_TOKENS
BASE_TOKENS = ["<unk>", "<s>", "</s>"]

WORD_START = "\u2581"  # SentencePiece's ▁
CHARSET = "abcdefghijklmnopqrstuvwxyz'"


class Vocab:
    """A list of pieces plus an encoder from text to ids."""

    def __init__(self, pieces: Sequence[str], sp=None, sp_path: Optional[str] = None):
        self.pieces = list(pieces)
        self.index: Dict[str, int] = {p: i for i, p in enumerate(self.pieces)}
        if len(self.index) != len(self.pieces):
            raise ValueError("vocabulary has duplicate pieces")
        self.sp = sp
        self.sp_path = sp_path
        missing = [t for t in BASE_TOKENS + SPECIAL_TOKENS if t not in self.index]
        if missing:
            raise ValueError(f"vocabulary lacks special tokens: {missing}")
        if self.pieces[0] != "<unk>":
            raise ValueError(f"piece 0 must be <unk> (the CTC blank), got {self.pieces[0]!r}")

    def __len__(self) -> int:
        return len(self.pieces)

    def id(self, piece: str) -> int:
        return self.index[piece]

    def lang_id(self, lang: str) -> int:
        return self.index[f"<|{lang}|>"]

    def _text_form(self):
        if not hasattr(self, "_chars"):
            chars = set()
            for p in self.pieces:
                if p in BASE_TOKENS or (p.startswith("<|") and p.endswith("|>")):
                    continue
                chars.update(p.replace(WORD_START, ""))
            chars.discard(" ")
            self._chars = chars
            self._cased = any(c.isupper() for c in chars)
        return self._chars, self._cased

    def normalize(self, text: str) -> str:
        """The vocabulary's text form: lower-cased when the vocabulary has no capitals;
        punctuation and symbols it has no piece for become spaces (so "Set a timer, please."
        and "set a timer please" are the same text); letters and digits stay, whether the
        vocabulary can spell them or not (``unknown`` finds those).  For the built-in
        character set and our BPE models this is ``normalize_text`` except that digits stay."""
        chars, cased = self._text_form()
        t = text if cased else text.lower()
        t = "".join(c if (c in chars or c.isalnum()) else " " for c in t)
        return " ".join(t.split())

    def unknown(self, text: str) -> List[str]:
        """Characters of the normalised text that encode to <unk>, which is also the CTC
        blank: a target holding them teaches the model silence where there is speech."""
        t = self.normalize(text)
        if self.sp is not None:
            ids = self.sp.encode(t, out_type=int)
            if 0 not in ids:
                return []
        bad = sorted({c for c in t.replace(" ", "") if c not in self._text_form()[0]})
        return bad or (["<unk>"] if self.sp is not None else [])

    def encode(self, text: str) -> List[int]:
        """Token ids of the normalised text; characters the vocabulary lacks are dropped
        (the char set) or become <unk> (SentencePiece): see ``unknown``."""
        t = self.normalize(text)
        if self.sp is not None:
            return list(self.sp.encode(t, out_type=int))
        out = []
        for w in t.split():
            ids = [self.index[ch] for ch in w if ch in self.index]
            if ids:
                out.append(self.index[WORD_START])
                out.extend(ids)
        return out

    def decode(self, ids: Iterable[int]) -> str:
        s = "".join(self.pieces[i] for i in ids if self.pieces[i] not in BASE_TOKENS and not self.pieces[i].startswith("<|"))
        return s.replace(WORD_START, " ").strip()

    def write_tokens(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for i, p in enumerate(self.pieces):
                if any(c.isspace() for c in p):
                    raise ValueError(f"piece {i} {p!r} contains whitespace")
                f.write(f"{p} {i}\n")


def normalize_text(text: str) -> str:
    """Lower-case, letters/apostrophes/spaces only (the demo model's text form)."""
    t = text.lower().replace("-", " ")
    t = re.sub(r"[^a-z' ]+", " ", t)
    return " ".join(t.split())


def char_vocab() -> Vocab:
    """Built-in character vocabulary: specials, ▁ and a-z plus apostrophe."""
    return Vocab(BASE_TOKENS + SPECIAL_TOKENS + [WORD_START] + list(CHARSET))


def load_sentencepiece(path: str) -> Vocab:
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: SentencePiece model not found")
    sp = spm.SentencePieceProcessor()
    try:
        sp.load(path)
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"{path}: not a SentencePiece model: {e}") from e
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    return Vocab(pieces, sp=sp, sp_path=path)


def train_sentencepiece(texts: Iterable[str], prefix: str, vocab_size: int = 256,
                        model_type: str = "bpe") -> Vocab:
    """Train a small SentencePiece model whose user-defined symbols are the
    SenseVoice special tokens (ids 3..), so tokens.txt carries them."""
    import sentencepiece as spm

    txt = prefix + ".txt"
    with open(txt, "w", encoding="utf-8") as f:
        for t in texts:
            t = normalize_text(t)
            if t:
                f.write(t + "\n")
    spm.SentencePieceTrainer.train(
        input=txt, model_prefix=prefix, vocab_size=vocab_size, model_type=model_type,
        character_coverage=1.0, user_defined_symbols=",".join(SPECIAL_TOKENS),
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1,
        minloglevel=2, hard_vocab_limit=False,
    )
    os.remove(txt)
    return load_sentencepiece(prefix + ".model")


def load_vocab(spec: Optional[str]) -> Vocab:
    """``None``/"char" -> built-in characters; a path ending in .model -> SentencePiece;
    a tokens.txt -> pieces from the file (encode then works only for char-like pieces)."""
    if spec in (None, "", "char"):
        return char_vocab()
    if spec.endswith(".model"):
        return load_sentencepiece(spec)
    return Vocab(read_tokens(spec))


def read_tokens(path: str) -> List[str]:
    pieces: Dict[int, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ")
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError(f"{path}:{n}: want 'piece id', got {line.rstrip()!r}")
            pieces[int(parts[1])] = parts[0]
    if sorted(pieces) != list(range(len(pieces))):
        raise ValueError(f"{path}: ids are not 0..{len(pieces) - 1}")
    return [pieces[i] for i in range(len(pieces))]
