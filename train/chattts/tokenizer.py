"""BERT WordPiece ``tokenizer.json`` (the format of ChatTTS's asset/tokenizer/tokenizer.json), read
and written without the ``tokenizers`` package, encoding as Hugging Face's BertTokenizerFast does
with ``add_special_tokens=False`` (ChatTTS's Tokenizer.encode):

 1. added tokens (all ChatTTS control tokens are special, normalized=false) are cut out of the raw
    text first, leftmost-longest;
 2. each remaining piece: BertNormalizer (clean_text: drop NUL, U+FFFD and category C* except
    \\t\\n\\r, whitespace -> ' '; handle_chinese_chars: spaces around CJK ideographs;
    strip_accents (null = follow lowercase): NFD and drop Mn; lowercase);
 3. BertPreTokenizer: split on whitespace, isolate every punctuation character (ASCII
    punctuation or Unicode category P*);
 4. WordPiece: greedy longest match, continuation pieces prefixed "##"; a word longer than
    max_input_chars_per_word, or with any unmatched rest, becomes [UNK].

The official special-token ids (21128..21177 after bert-base-chinese's 21128 pieces) were read
from the official tokenizer.json, whose sha256 843838a6…c20e matches ChatTTS/res/sha256_map.json.
"""
from __future__ import annotations

import json
import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# ChatTTS's 50 added tokens, in id order (official ids 21128 + index).
CHATTTS_SPECIALS: List[str] = (
    ["[Sasr]", "[Pasr]", "[Easr]", "[Stts]", "[Ptts]", "[Etts]", "[Sbreak]", "[Pbreak]", "[Ebreak]",
     "[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[undefine]", "[laugh]", "[spk_emb]",
     "[empty_spk]", "[music]", "[pure]"]
    + [f"[break_{i}]" for i in range(8)]
    + [f"[laugh_{i}]" for i in range(3)]
    + [f"[oral_{i}]" for i in range(10)]
    + [f"[speed_{i}]" for i in range(10)]
)
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _is_punct(c: str) -> bool:
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_whitespace(c: str) -> bool:
    return c in " \t\n\r" or unicodedata.category(c) == "Zs" or c.isspace()


def _is_control(c: str) -> bool:
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn")


def _is_cjk(o: int) -> bool:
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF
            or 0x2A700 <= o <= 0x2B73F or 0x2B740 <= o <= 0x2B81F or 0x2B820 <= o <= 0x2CEAF
            or 0xF900 <= o <= 0xFAFF or 0x2F800 <= o <= 0x2FA1F)


class WordPieceTokenizer:
    def __init__(self, spec: dict, path: str = "tokenizer.json"):
        self.path = path
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(f"{path}: model.type is {model.get('type')!r}, want WordPiece")
        self.vocab: Dict[str, int] = dict(model["vocab"])
        self.unk = model.get("unk_token", "[UNK]")
        if self.unk not in self.vocab:
            raise ValueError(f"{path}: unk_token {self.unk!r} is not in the vocabulary")
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        norm = spec.get("normalizer") or {}
        if norm and norm.get("type") != "BertNormalizer":
            raise ValueError(f"{path}: normalizer {norm.get('type')!r} is not supported (want BertNormalizer)")
        self.clean_text = norm.get("clean_text", True)
        self.chinese = norm.get("handle_chinese_chars", True)
        self.lowercase = norm.get("lowercase", True)
        sa = norm.get("strip_accents")
        self.strip_accents = self.lowercase if sa is None else bool(sa)
        self.added: Dict[str, int] = {}
        for t in spec.get("added_tokens") or []:
            self.added[t["content"]] = int(t["id"])
        ids = set(self.vocab.values()) | set(self.added.values())
        self.size = max(ids) + 1
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.added.items()})
        self._added_sorted = sorted(self.added, key=len, reverse=True)

    @classmethod
    def from_file(cls, path: str) -> "WordPieceTokenizer":
        try:
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read tokenizer: {e}") from e
        return cls(spec, path)

    def token_id(self, token: str) -> int:
        if token in self.added:
            return self.added[token]
        if token in self.vocab:
            return self.vocab[token]
        raise KeyError(f"{self.path}: no token {token!r}")

    # -- encoding

    def _split_added(self, text: str) -> List[Tuple[str, bool]]:
        out: List[Tuple[str, bool]] = []
        i, start = 0, 0
        while i < len(text):
            if text[i] == "[" or not text[i].isalnum():
                hit = next((t for t in self._added_sorted if text.startswith(t, i)), None)
                if hit is not None:
                    if start < i:
                        out.append((text[start:i], False))
                    out.append((hit, True))
                    i += len(hit)
                    start = i
                    continue
            i += 1
        if start < len(text):
            out.append((text[start:], False))
        return out

    def normalize(self, text: str) -> str:
        if self.clean_text:
            text = "".join(" " if _is_whitespace(c) else c for c in text
                           if not (c == "\0" or c == "\ufffd" or _is_control(c)))
        if self.chinese:
            text = "".join(f" {c} " if _is_cjk(ord(c)) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            text = text.lower()
        return text

    @staticmethod
    def pre_tokenize(text: str) -> List[str]:
        words, cur = [], []
        for c in text:
            if _is_whitespace(c):
                if cur:
                    words.append("".join(cur))
                    cur = []
            elif _is_punct(c):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(c)
            else:
                cur.append(c)
        if cur:
            words.append("".join(cur))
        return words

    def wordpiece(self, word: str) -> List[int]:
        if len(word) > self.max_chars:
            return [self.vocab[self.unk]]
        out, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.vocab[self.unk]]
            out.append(found)
            start = end
        return out

    def encode(self, text: str) -> List[int]:
        ids: List[int] = []
        for piece, is_added in self._split_added(text):
            if is_added:
                ids.append(self.added[piece])
                continue
            for w in self.pre_tokenize(self.normalize(piece)):
                ids.extend(self.wordpiece(w))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        toks = [self.id_to_token.get(int(i), self.unk) for i in ids]
        s = ""
        for t in toks:
            if t.startswith(self.prefix):
                s += t[len(self.prefix):]
            else:
                s += (" " if s else "") + t
        return s


def build_spec(pieces: Sequence[str], *, lowercase: bool, strip_accents: Optional[bool],
               specials: Sequence[str] = CHATTTS_SPECIALS) -> dict:
    """A BERT WordPiece tokenizer.json: the five BERT specials first (ids 0-4), then ``pieces``,
    then the ChatTTS control tokens as added special tokens (in the official order)."""
    vocab: List[str] = []
    for t in list(BERT_SPECIALS) + list(pieces):
        if t not in vocab:
            vocab.append(t)
    return wordpiece_spec(vocab, lowercase=lowercase, strip_accents=strip_accents, specials=specials)


def wordpiece_spec(vocab: Sequence[str], *, lowercase: bool, strip_accents: Optional[bool],
                   specials: Sequence[str] = CHATTTS_SPECIALS, specials_special: bool = True,
                   mask_lstrip: bool = False, cls_sep: bool = False, controls_in_vocab: bool = True) -> dict:
    """The one tokenizer.json writer (Hugging Face ``tokenizers`` format, BertTokenizerFast's
    layout): ``vocab`` is the whole WordPiece vocabulary in id order and must hold the five BERT
    specials wherever they sit (bert-base-chinese has [unused] entries between them); the
    ChatTTS control tokens follow as added tokens, special (normalized=false) or, with
    specials_special=False, plain normalized tokens as ChatTTS's own file has them, and are also
    entries of the model's vocabulary unless controls_in_vocab is False. mask_lstrip, cls_sep
    ([CLS] A [SEP] post-processing) and controls_in_vocab=False give the variants the Go
    tokenizer tests check (train/tts/chattts_tokenizer.py)."""
    ids: Dict[str, int] = {}
    for t in vocab:
        if t in ids:
            raise ValueError(f"vocabulary entry {t} repeats")
        ids[t] = len(ids)
    missing = [t for t in BERT_SPECIALS if t not in ids]
    if missing:
        raise ValueError(f"vocabulary lacks {', '.join(missing)}")
    added = [_added(ids[t], t, lstrip=mask_lstrip and t == "[MASK]") for t in BERT_SPECIALS]
    for t in specials:
        if t in ids:
            raise ValueError(f"control token {t} is also a piece")
        ids[t] = len(ids)
        added.append(_added(ids[t], t, normalized=not specials_special, special=specials_special))
    post = None
    if cls_sep:
        cls, sep = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}
        post = {"type": "TemplateProcessing",
                "single": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep],
                "pair": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep,
                         {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")}}
    vocab_map = ids if controls_in_vocab else {t: i for t, i in ids.items() if t not in specials}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": strip_accents, "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab_map},
    }


def _added(i: int, t: str, *, lstrip: bool = False, normalized: bool = False, special: bool = True) -> dict:
    return {"id": i, "content": t, "single_word": False, "lstrip": lstrip, "rstrip": False,
            "normalized": normalized, "special": special}


def english_pieces() -> List[str]:
    """A small English WordPiece vocabulary for test models: characters, digits, punctuation,
    their ## forms, and a few whole words and suffixes (so greedy longest-match is exercised)."""
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789") + list("'")
    punct = list(".,!?;:-\"()")
    words = ["the", "hello", "world", "parley", "time", "is", "it", "what", "a", "to", "and", "you", "of",
             "speak", "voice", "test"]
    suffixes = ["##ing", "##ed", "##s", "##ly", "##er", "##llo", "##orld"]
    return words + chars + punct + ["##" + c for c in chars] + suffixes + ["你", "好", "世", "界"]


def write_spec(spec: dict, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=1)
        f.write("\n")
