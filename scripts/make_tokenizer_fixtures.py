#!/usr/bin/env python3
"""Fixtures for tests/test_tokenizer_json.cpp, made with the real Hugging Face `tokenizers`.

For each family (the pipelines of GPT-2, Llama 3, Qwen2/3, Llama 2 and a few extra ones that
exercise the remaining supported components) it trains a small BPE tokenizer on a generated
corpus, saves tests/data/tokenizers/<family>/tokenizer.json and writes cases.jsonl: one line per
document, {"text", "ids", "decoded"} with ids = encode(text, add_special_tokens=False).ids and
decoded = decode(ids, skip_special_tokens=False), both from the library loading the saved file.
It also writes the refusal fixtures under tests/data/tokenizers/unsupported/.

  --unicode-tables  instead writes src/data/tokenizer_json_unicode_tables.cpp: how each Unicode
                    class escape differs between the library's Oniguruma and the system PCRE2
                    (libpcre2-8, through ctypes).
  --bench MB        instead times the library's encode_batch on MB megabytes of documents (and
                    writes them for timing the C++ reader on the same ones).
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import random
import sys
import time
import unicodedata

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizers")

GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# ---------------------------------------------------------------------------------------------
# Corpus and documents

WORDS = ("the of and to in is was for on that with as by at from it this be are or an which "
         "have not has but were had they their been one all would there can more when will "
         "about if out up so what into time other only new some could these two may first "
         "then do any like my now over such our man me even most made after also did many "
         "before must through back years where much your way well down should because each "
         "just those people how too little state good very make world still own see men work "
         "long get here between both life being under never day same another know while last "
         "might us great old year off come since against go came right used take three house "
         "tokenizer model training language linear attention gradient kernel tensor batch "
         "learning rate optimizer checkpoint dataset sequence token vocabulary merge").split()
CODE = [
    "def train(model, batch):\n    loss = model(batch).mean()\n"
    "    loss.backward()\n    return loss\n",
    "for (int i = 0; i < n; ++i) {\n  sum += a[i] * b[i];\n}\n",
    "if __name__ == \"__main__\":\n\tmain(sys.argv[1:])\n",
    "#include <vector>\nstd::vector<int32_t> ids;  // token ids\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "x = {\"key\": [1, 2, 3], 'other': None}  # comment\n",
]
UNICODE = [
    "你好，世界！这是一个测试。我们正在训练一个分词器。", "こんにちは世界、トークナイザーのテストです。",
    "안녕하세요 세계", "مرحبا بالعالم، هذا اختبار", "Ça va? Où est l'hôtel? Straße, naïve café",
    "Привет, мир! Это тест.", "Γειά σου Κόσμε", "नमस्ते दुनिया", "שלום עולם",
    "emoji 😀 👍🏽 ❤️ 🇫🇷 👨‍👩‍👧‍👦 🎉", "math: x² + y² = z², ½ ≤ ∞, α β γ",
]


def corpus(seed=1234):
    rng = random.Random(seed)
    lines = []
    for _ in range(2500):
        n = rng.randint(3, 18)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words[0] = words[0].capitalize()
        if rng.random() < 0.2:
            words.insert(rng.randint(0, len(words)), str(rng.randint(0, 10 ** rng.randint(1, 6))))
        if rng.random() < 0.1:
            words.insert(rng.randint(0, len(words)), rng.choice(["don't", "I'll", "we're", "it's"]))
        lines.append(" ".join(words) + rng.choice([".", ",", "!", "?", ";", ""]))
    for _ in range(20):
        lines.extend(CODE)
        lines.extend(UNICODE)
    rng.shuffle(lines)
    return lines


SPECIALS_IN_TEXT = [
    "<|endoftext|>Hello<|endoftext|> world <|endoftext|>",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>",
    "<s>Hello</s> <s> spaced </s>",
    "<unk> and <0x41> typed literally",
]


def documents(extra):
    docs = [
        "", "Hello world! This is a test.", "The quick brown fox jumps over the lazy dog.",
        " leading space", "  two leading", "trailing space ", "trailing spaces   ",
        "a  b   c    d", "tabs\tand\tnewlines\n\nend\n", "\n\n\n", "   ", "line\r\nwindows\r\n",
        "trailing spaces   \n  next line", "\t\t indented\n    code",
        "DON'T I'LL WE'RE you'Ve she'S it'd they'RE", "don't i'll we've 's 'S ' s", "'ſ 'K",
        "1234567890 3.14159 1,000,000 12345678901234567890", "year 2024: 99 bottles, 007",
        "e\u0301 a\u0308 n\u0303 combining",
        unicodedata.normalize("NFD", "Café déjà vu, naïve résumé"),
        "ﬁne ﬂow ① ＡＢＣ ｶﾀｶﾅ ㎏ Ⅻ", "İstanbul ΣΑΣ ǅ ß ẞ",
        "unseen: ᚠᛇᚻ ꙮ 𓀀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u0007bell \u001b[0m",
        "spaces: a\u00a0b\u2003c\u3000d\u180ee\u0085f\u200bg\u2028h",
        "new letters: \U0001E4D0\U0001E4D1 \u1C89 \U00010D40 \U00011DE1",
        "new marks: a\u1de7\u08cf b\u0301\u0316 e\u08cf\u0301 \U0001FBF5 \u1e9e\u0301",
        "new cases: \ua7cb\u1c89\U00010D50\u0130\u03a3 \u1e9e\ua7c0",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "▁ already ▁▁ metaspace▁",
        "<0x41> <0xZZ> <0x4>", "mixed 中文 and English, 日本語 too.",
    ] + CODE + UNICODE + SPECIALS_IN_TEXT + extra
    rng = random.Random(99)
    pool = WORDS + ["  ", "\n", "\t", ",", ".", "'s", "'LL", "123", "4567", "你好", "世界", "😀",
                    "👍🏽", "é", "e\u0301", "ß", "\u00a0", "  \n", "<|endoftext|>", "<|im_end|>",
                    "<s>", "</s>", "ꙮ", "𓀀", "--", "()", "{}", "$", "€", "٣", "²"] + extra
    for _ in range(60):
        n = rng.randint(1, 12)
        sep = rng.choice(["", " ", ""])
        docs.append(sep.join(rng.choice(pool) for _ in range(n)))
    return docs


# ---------------------------------------------------------------------------------------------
# Families


def byte_level_trainer(vocab, specials):
    return trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def family_gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(corpus(), byte_level_trainer(1000, ["<|endoftext|>"]))
    tok.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, single_word=False,
                               normalized=False, special=False),
                    AddedToken("word", single_word=True, normalized=True, special=False)])
    extra = ["foo <mask> bar", "a<mask>b", "  <mask>  x", "word wordy sword word. (word)",
             "<mask><mask> <mask>", "éword word_ word1 wordé"]
    return tok, extra


def family_llama3():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"] + [
                    f"<|reserved_special_token_{i}|>" for i in range(4)]
    tok.train_from_iterator(corpus(), byte_level_trainer(1200, specials))
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    tok.add_tokens([AddedToken("<tool>", rstrip=True, normalized=False, special=False)])
    extra = ["call <tool>   now", "<tool>\n\nx", "<|reserved_special_token_3|><|eot_id|>",
             "tooling <tool><tool>"]
    return tok, extra


def family_qwen():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.train_from_iterator(corpus(), byte_level_trainer(
        1100, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]))
    tok.add_tokens([AddedToken("café", single_word=True, normalized=True, special=False),
                    AddedToken("<think>", lstrip=True, normalized=False, special=False)])
    extra = [unicodedata.normalize("NFD", "un café, cafés, café!"), "café au lait",
             "hmm   <think>ok</think>", "<|im_start|>system\ncafé<|im_end|>"]
    return tok, extra


def metaspace_corpus_trained(vocab, specials, **bpe_options):
    """BPE with <0xNN> byte pieces after the specials, trained on Metaspace words."""
    byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(**bpe_options))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials + byte_pieces,
                                  show_progress=False, limit_alphabet=200)
    tok.train_from_iterator(corpus(), trainer)
    # Byte pieces are model vocabulary, not added tokens (as in Llama 2's tokenizer.json).
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in byte_pieces]
    return Tokenizer.from_str(json.dumps(data))


def family_llama2():
    tok = metaspace_corpus_trained(1200, ["<unk>", "<s>", "</s>"], unk_token="<unk>",
                                   fuse_unk=True, byte_fallback=True)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tok.add_tokens([AddedToken("hello world", normalized=True, special=False),
                    AddedToken("[INST]", lstrip=True, rstrip=False, normalized=False,
                               special=True)])
    extra = ["say hello world twice: hello world", "hello  world", "x   [INST] do it [INST]",
             "[INST][INST]"]
    return tok, extra


def family_mistral():
    """Newer Llama/Mistral conversions: a Metaspace pre-tokenizer (prepend_scheme first)."""
    tok = metaspace_corpus_trained(1000, ["<unk>", "<s>", "</s>"], unk_token="<unk>",
                                   fuse_unk=True, byte_fallback=True)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                 split=False)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first",
                                                        split=False),
                                     decoders.ByteFallback(), decoders.Fuse()])
    tok.add_tokens([AddedToken("[TOOL_CALLS]", normalized=False, special=True)])
    # Without the byte pieces of 4-byte UTF-8 leads, characters beyond U+FFFF that are not in the
    # vocabulary become <unk> (fused runs of them): byte fallback and fuse_unk together.
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for b in range(0xF0, 0xF5):
        del vocab[f"<0x{b:02X}>"]
    vocab = {t: i for i, t in enumerate(sorted(vocab, key=vocab.get))}
    data["model"]["vocab"] = vocab
    next_id = len(vocab)
    for t in data["added_tokens"]:
        if t["content"] in vocab:
            t["id"] = vocab[t["content"]]
        else:
            t["id"], next_id = next_id, next_id + 1
    tok = Tokenizer.from_str(json.dumps(data))
    extra = ["[TOOL_CALLS]call it", "x [TOOL_CALLS] y", "<s>[TOOL_CALLS] <s>z",
             "astral 😀😀 𓀀x𓀀 é😀é"]
    return tok, extra


def family_wordpiece_style():
    """NFKC + Lowercase, Digits, Split behaviors, Metaspace split, subword prefix and suffix."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False,
                               continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                           normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(r"\p{P}+"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[\p{L}\p{M}]+"), behavior="isolated", invert=True),
        pre_tokenizers.Metaspace(replacement="_", prepend_scheme="always", split=True)])
    tok.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Replace("##", ""),
                                     decoders.Strip(" ", 0, 1)])
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["[UNK]", "[SEP]"],
                                  show_progress=False,
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>")
    tok.train_from_iterator(corpus(), trainer)
    tok.add_tokens([AddedToken("Mask", single_word=True, lstrip=True, rstrip=True,
                               normalized=True, special=False)])
    extra = ["a MASK b mask c Mask.", "masked MASK!", "ＭＡＳＫ  mask", "x\u3000\u3000y"]
    return tok, extra


def family_splits():
    """Replace regex normalizer, the other Split behaviors, Digits contiguous, ByteLevel with a
    prefix space and its regex."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Replace(Regex(r"[0-9]{5,}"), "#"),
                                           normalizers.Prepend(">")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("--", behavior="removed"),
        pre_tokenizers.Split(Regex(r"[,;]"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[.!?]"), behavior="merged_with_next"),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus(), byte_level_trainer(800, ["<eos>"]))
    extra = ["a--b----c, d; e. f! g? h", "12345678 and 1234", "x,y;z.w!", "--", ",,..!!"]
    return tok, extra


FAMILIES = {
    "gpt2": family_gpt2, "llama3": family_llama3, "qwen": family_qwen, "llama2": family_llama2,
    "mistral": family_mistral, "wordpiece_style": family_wordpiece_style,
    "splits": family_splits,
}


def write_family(name, make):
    tok, extra = make()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path, pretty=False)
    ref = Tokenizer.from_file(path)  # expectations from the file as it is read back
    with open(os.path.join(d, "cases.jsonl"), "w", encoding="utf-8") as f:
        for text in documents(extra):
            ids = ref.encode(text, add_special_tokens=False).ids
            decoded = ref.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": text, "ids": ids, "decoded": decoded},
                               ensure_ascii=False) + "\n")
    print(f"{name}: vocab {ref.get_vocab_size()}, {os.path.getsize(path)} bytes")


def write_unsupported():
    d = os.path.join(OUT, "unsupported")
    os.makedirs(d, exist_ok=True)
    lines = [line for line in corpus() if line.isascii()][:300]
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    wp.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=200, show_progress=False,
                                                            special_tokens=["[UNK]"]))
    wp.save(os.path.join(d, "wordpiece.json"), pretty=False)
    ug = Tokenizer(models.Unigram())
    ug.train_from_iterator(lines, trainers.UnigramTrainer(vocab_size=120, show_progress=False,
                                                          unk_token="<unk>",
                                                          special_tokens=["<unk>"]))
    ug.save(os.path.join(d, "unigram.json"), pretty=False)
    small = Tokenizer(models.BPE())
    small.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    small.train_from_iterator(lines, byte_level_trainer(300, []))
    base = json.loads(small.to_str())
    variants = {
        "bert_normalizer.json": {"normalizer": {"type": "BertNormalizer", "clean_text": True,
                                                "handle_chinese_chars": True,
                                                "strip_accents": None, "lowercase": True}},
        "whitespace_pre_tokenizer.json": {"pre_tokenizer": {"type": "Whitespace"}},
        "wordpiece_decoder.json": {"decoder": {"type": "WordPiece", "prefix": "##",
                                               "cleanup": True}},
        "dropout.json": {"model": dict(base["model"], dropout=0.1)},
        "truncation.json": {"truncation": {"direction": "Right", "max_length": 8,
                                           "strategy": "LongestFirst", "stride": 0}},
    }
    for fname, change in variants.items():
        data = dict(base)
        data.update(change)
        Tokenizer.from_str(json.dumps(data))  # the library itself reads each variant
        with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Unicode class tables (Oniguruma in the library vs the system PCRE2)

CLASS_ESCAPES = ["\\s", "\\d", "\\w"] + ["\\p{%s}" % c for c in (
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp "
    "C Cc Cf Co Han Hiragana Katakana Hangul Latin Greek Cyrillic Arabic Hebrew Thai "
    "Devanagari Common").split()]
EXACT_LIMIT = 64  # store the whole Oniguruma set when it has at most this many ranges


def all_chars():
    return "".join(chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF)


def ranges_of(flags):
    out, start = [], None
    for cp in range(len(flags) + 1):
        on = cp < len(flags) and flags[cp]
        if on and start is None:
            start = cp
        elif not on and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def onig_members(escape, text):
    kept = pre_tokenizers.Split(Regex(escape), "removed").pre_tokenize_str(text)
    flags = bytearray([1]) * 0x110000
    flags[0] = 0
    for c in range(0xD800, 0xE000):
        flags[c] = 0
    for piece, _ in kept:
        for ch in piece:
            flags[ord(ch)] = 0
    return flags


class Pcre2:
    def __init__(self):
        lib = ctypes.CDLL(ctypes.util.find_library("pcre2-8") or "libpcre2-8.so.0")
        lib.pcre2_compile_8.restype = ctypes.c_void_p
        lib.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32,
                                        ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
        lib.pcre2_match_data_create_8.restype = ctypes.c_void_p
        lib.pcre2_match_data_create_8.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
        lib.pcre2_match_8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                      ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p,
                                      ctypes.c_void_p]
        lib.pcre2_get_ovector_pointer_8.restype = ctypes.POINTER(ctypes.c_size_t)
        lib.pcre2_get_ovector_pointer_8.argtypes = [ctypes.c_void_p]
        self.lib = lib

    def members(self, escape, text):
        utf, ucp = 0x00080000, 0x00020000
        pattern = ("(?:%s)+" % escape).encode()
        err, off = ctypes.c_int(), ctypes.c_size_t()
        code = self.lib.pcre2_compile_8(pattern, len(pattern), utf | ucp, ctypes.byref(err),
                                        ctypes.byref(off), None)
        assert code, escape
        md = self.lib.pcre2_match_data_create_8(1, None)
        data = text.encode()
        flags = bytearray(0x110000)
        start = 0
        while start < len(data):
            rc = self.lib.pcre2_match_8(code, data, len(data), start, 0, md, None)
            if rc < 0:
                break
            ov = self.lib.pcre2_get_ovector_pointer_8(md)
            s, e = ov[0], ov[1]
            for ch in data[s:e].decode():
                flags[ord(ch)] = 1
            start = e if e > s else e + 1
        return flags


def rust_char_tables(text):
    """Rust's char::is_numeric (through the library's Digits) and char::to_lowercase (through its
    Lowercase normalizer), as C++ arrays: the Rust standard library's Unicode version, which
    neither ICU nor PCRE2 on this system has."""
    flags = bytearray(0x110000)
    pieces = pre_tokenizers.Digits(individual_digits=False).pre_tokenize_str(text)
    assert not pieces[0][0][0].isdigit()
    for k, (piece, _) in enumerate(pieces):
        if k % 2 == 1:  # contiguous runs alternate, starting with U+0001 (not numeric)
            for ch in piece:
                flags[ord(ch)] = 1
    numeric = ranges_of(flags)
    chars = [c for c in text if c != "\n"]
    lowered = normalizers.Lowercase().normalize_str("\n".join(chars)).split("\n")
    assert len(lowered) == len(chars)
    runs, multi = [], []
    for c, low in zip(chars, lowered):
        if low == c:
            continue
        cp = ord(c)
        if len(low) > 1:
            multi.append((cp, low))
            continue
        delta = ord(low) - cp
        if runs and runs[-1][2] == delta:
            first, last, _, stride = runs[-1]
            step = cp - last
            if (first == last and step in (1, 2)) or step == stride:
                runs[-1] = [first, cp, delta, step]
                continue
        runs.append([cp, cp, delta, 1])
    print(f"rust: {len(numeric)} numeric ranges, {len(runs)} lowercase runs, "
          f"{len(multi)} multi-character lowercases", file=sys.stderr)
    utf8 = lambda t: "".join(f"\\x{b:02X}" for b in t.encode())
    return [
        "const uint32_t kRustNumeric[] = {" +
        ", ".join(f"0x{a:X}, 0x{b:X}" for a, b in numeric) + "};",
        "const LowercaseRun kRustLowercaseRuns[] = {" +
        ", ".join(f"{{0x{a:X}, 0x{b:X}, {d}, {st}}}" for a, b, d, st in runs) + "};",
        "const LowercaseMulti kRustLowercaseMulti[] = {" +
        ", ".join(f'{{0x{cp:X}, "{utf8(low)}"}}' for cp, low in multi) + "};",
    ]


def write_unicode_tables():
    text = all_chars()
    pcre = Pcre2()
    entries, arrays = [], []
    for k, escape in enumerate(CLASS_ESCAPES):
        onig = onig_members(escape, text)
        pc = pcre.members(escape, text)
        missing = ranges_of(bytearray(a & (1 - b) for a, b in zip(onig, pc)))
        extra = any(b and not a for a, b in zip(onig, pc))
        exact = ranges_of(onig)
        exact_name, missing_name = "nullptr", "nullptr"
        if len(exact) <= EXACT_LIMIT:
            exact_name = f"kExact{k}"
            arrays.append(f"const uint32_t {exact_name}[] = {{" +
                          ", ".join(f"0x{a:X}, 0x{b:X}" for a, b in exact) + "};")
        if extra and exact_name == "nullptr":
            missing = []  # unusable either way: the translation refuses this class
        if missing:
            missing_name = f"kMissing{k}"
            arrays.append(f"const uint32_t {missing_name}[] = {{" +
                          ", ".join(f"0x{a:X}, 0x{b:X}" for a, b in missing) + "};")
        esc = escape.replace("\\", "\\\\")
        n_exact = len(exact) if exact_name != "nullptr" else 0
        entries.append(f"    {{\"{esc}\", {exact_name}, {n_exact}, {missing_name}, "
                       f"{len(missing)}, {'true' if extra else 'false'}}},")
        print(f"{escape}: onig {sum(onig)} pcre2 {sum(pc)} missing {len(missing)} ranges, "
              f"extra {extra}", file=sys.stderr)
    arrays += rust_char_tables(text)
    path = os.path.join(ROOT, "src", "data", "tokenizer_json_unicode_tables.cpp")
    with open(path, "w") as f:
        f.write("// Generated by scripts/make_tokenizer_fixtures.py --unicode-tables (tokenizers "
                f"{tokenizers.__version__}); see\n// tokenizer_json_unicode_tables.h.\n")
        f.write('#include "src/data/tokenizer_json_unicode_tables.h"\n\n')
        f.write("namespace gdn::data::tokjson {\n\nnamespace {\n// clang-format off\n")
        f.write("\n".join(arrays) + "\n\nconst UnicodeClassDelta kClasses[] = {\n")
        f.write("\n".join(entries) + "\n};\n// clang-format on\n}  // namespace\n\n")
        f.write("const UnicodeClassDelta* find_unicode_class(std::string_view escape) {\n"
                "  for (const auto& c : kClasses)\n"
                "    if (escape == c.escape) return &c;\n"
                "  return nullptr;\n}\n\n"
                "CodePointRanges rust_numeric() {\n"
                "  return {kRustNumeric, sizeof kRustNumeric / sizeof kRustNumeric[0] / 2};\n}\n\n"
                "RustLowercase rust_lowercase() {\n"
                "  return {kRustLowercaseRuns, "
                "sizeof kRustLowercaseRuns / sizeof kRustLowercaseRuns[0],\n"
                "          kRustLowercaseMulti, "
                "sizeof kRustLowercaseMulti / sizeof kRustLowercaseMulti[0]};\n}\n\n"
                "}  // namespace gdn::data::tokjson\n")
    print("wrote", path)


# ---------------------------------------------------------------------------------------------


def bench(megabytes, tokenizer_path, text_path, docs_path):
    """Times the library's encode_batch on about `megabytes` MB of documents (40 lines each) from
    `text_path` (default: the generated corpus); writes them to `docs_path` (JSON lines) so
    that the C++ reader can be timed on the same documents."""
    if text_path:
        with open(text_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    else:
        lines = corpus(seed=7) + documents([])
    docs, size, start = [], 0, 0
    while size < megabytes * 1_000_000:
        doc = "\n".join(lines[(start + k) % len(lines)] for k in range(40))
        start += 40
        docs.append(doc)
        size += len(doc.encode())
    if docs_path:
        with open(docs_path, "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    tok = Tokenizer.from_file(tokenizer_path)
    tok.encode_batch(docs[:20], add_special_tokens=False)  # start the thread pool
    methods = ["encode_batch"]
    if hasattr(tok, "encode_batch_fast"):
        methods.append("encode_batch_fast")
    for method in methods:
        best = None
        for _ in range(3):
            t = time.perf_counter()
            out = getattr(tok, method)(docs, add_special_tokens=False)
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        n = sum(len(e.ids) for e in out)
        print(f"tokenizers {tokenizers.__version__} {method}: {size / 1e6:.1f} MB, {len(docs)} "
              f"docs, {n} tokens, best of 3 {best:.3f} s = {size / 1e6 / best:.2f} MB/s "
              f"(RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS')})")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unicode-tables", action="store_true")
    ap.add_argument("--bench", type=float, metavar="MB")
    ap.add_argument("--tokenizer", default=os.path.join(OUT, "gpt2", "tokenizer.json"),
                    help="with --bench: the tokenizer.json to time")
    ap.add_argument("--bench-text", metavar="FILE", help="with --bench: text to cut documents from")
    ap.add_argument("--bench-docs", metavar="FILE",
                    help="with --bench: also write the documents, one JSON string a line")
    args = ap.parse_args()
    if args.unicode_tables:
        write_unicode_tables()
        return
    if args.bench:
        bench(args.bench, args.tokenizer, args.bench_text, args.bench_docs)
        return
    print("tokenizers", tokenizers.__version__)
    for name, make in FAMILIES.items():
        write_family(name, make)
    write_unsupported()


if __name__ == "__main__":
    main()
