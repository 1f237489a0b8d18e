"""Tiny, randomly initialised models of each role, built offline in a test and saved to a folder.

They run the real loading and inference code paths in a second; their verdicts are noise, which is
all an engine test needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
JUDGE_SPECIALS = ["<s>", "</s>", "<pad>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
JUDGE_CORPUS = [
    "Yes No yes no 1 2 3 4 5 true false null",
    "Break the answer into short claims. The statement is supported by the context.",
    '{"claims": ["a", "b"], "noncommittal": false, "questions": ["q"], "verdicts": [], "sentences": []}',
    "The capital of France is Paris. Water boils at 100 degrees. 公司 员工 每周 远程 办公",
] * 20
WORDS = ["the", "a", "is", "of", "in", "and", "to", "what", "how", "paris", "france", "capital",
         "days", "week", "policy", "staff", "?", ".", ",", ":"]


def build_judge(folder: Path, seed: int = 1234, *, corpus: list[str] | None = None, tokenizer_vocab: int = 400,
                dtype: torch.dtype | None = None, device: str = "cpu", **shape) -> Path:
    """A Llama-architecture judge; ``shape`` overrides the tiny config (``scripts/device_check.py``
    builds one of Qwen2.5-7B's size this way: its ``vocab_size`` sizes the model's embedding and output
    layers, which may be larger than the ``tokenizer_vocab`` tokens trained), ``corpus`` adds tokenizer
    training text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(JUDGE_CORPUS + list(corpus or []), trainer=trainers.BpeTrainer(
        vocab_size=tokenizer_vocab, special_tokens=JUDGE_SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   additional_special_tokens=JUDGE_SPECIALS[3:])
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(**{**dict(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                                   initializer_range=0.2, tie_word_embeddings=False), **shape},
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    (model.to(dtype) if dtype else model).eval().save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_hhem(folder: Path, seed: int = 0, *, corpus: list[str] | None = None, **shape) -> Path:
    """A T5 classifier saved as HHEM-2.1-Open publishes it (weights prefixed ``t5.``); ``shape``
    overrides the tiny T5 config, ``corpus`` adds words to the tokenizer."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForTokenClassification

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["Determine if the hypothesis is true given premise ? Premise : Hypothesis . ,",
                             " ".join(WORDS), *(corpus or [])],
                            trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>"]))
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    torch.manual_seed(seed)
    config = T5Config(**{**dict(vocab_size=len(fast), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4),
                         **shape}, feed_forward_proj="gated-gelu", tie_word_embeddings=False, num_labels=2,
                      pad_token_id=0, eos_token_id=1)
    model = T5ForTokenClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.2)
    state = {f"t5.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if k != "transformer.encoder.embed_tokens.weight"}
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    fast.save_pretrained(folder)
    save_file(state, str(folder / "model.safetensors"))
    return folder


def build_embedder(folder: Path, seed: int = 0, *, words: list[str] | None = None, **shape) -> Path:
    """A BERT sentence-transformers folder; ``shape`` overrides the tiny config, ``words`` extend the
    vocabulary."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizer

    raw = folder.parent / (folder.name + "-raw")
    raw.mkdir(parents=True, exist_ok=True)
    vocab = raw / "vocab.txt"
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(WORDS + list(words or []))]
    vocab.write_text("\n".join(vocabulary) + "\n")
    BertTokenizer(vocab_file=str(vocab)).save_pretrained(raw)
    torch.manual_seed(seed)
    BertModel(BertConfig(**{**dict(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=64, max_position_embeddings=512),
                            **shape})).save_pretrained(raw)
    SentenceTransformer(str(raw), device="cpu", local_files_only=True).save(str(folder))
    return folder


def write_manifest(path: Path, judge: Path, hhem: Path, embedder: Path) -> Path:
    """A profile manifest naming the tiny models (the shape of models/*.toml)."""
    path.write_text(
        "[profile]\nname = \"tiny\"\nstarter = false\n\n"
        f"[judge]\nbackend = \"transformers\"\npath = {json.dumps(str(judge))}\n\n"
        "[judge.options]\ndtype = \"float32\"\n\n"
        f"[verifier]\nbackend = \"hhem\"\npath = {json.dumps(str(hhem))}\n\n"
        f"[verifier.extra.tokenizer_path]\npath = {json.dumps(str(hhem))}\n\n"
        f"[embedder]\nbackend = \"sentence-transformers\"\npath = {json.dumps(str(embedder))}\n",
        encoding="utf-8")
    return path


def xlmr_tokenizer(words: list[str] | None = None):
    """An XLM-RoBERTa tokenizer (SentencePiece-style Unigram) of BGE-M3's special-token layout
    (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` last): whole words from ``WORDS`` and
    ``words`` (lower-case and capitalised), then single characters, so any ASCII text tokenises."""
    import string

    from transformers import XLMRobertaTokenizer

    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces = dict.fromkeys(v for w in WORDS + list(words or []) for v in (w.lower(), w.capitalize()))
    vocab += [("▁" + w, -5.0) for w in pieces if w.strip()]
    chars = string.ascii_letters + string.digits + string.punctuation
    vocab += [("▁", -8.0)] + [(c, -10.0) for c in chars] + [("▁" + c, -10.5) for c in chars]
    seen: set[str] = set()
    vocab = [(p, s) for p, s in vocab if not (p in seen or seen.add(p))]
    return XLMRobertaTokenizer(vocab=vocab + [("<mask>", 0.0)])


def _xlmr_config(tokenizer, shape: dict):
    from transformers import XLMRobertaConfig

    return XLMRobertaConfig(**{**dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=514,
                                      initializer_range=0.2), **shape},
                            pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                            eos_token_id=tokenizer.eos_token_id)


def build_m3(folder: Path, seed: int = 0, *, words: list[str] | None = None, colbert_dim: int | None = None,
             **shape) -> Path:
    """A BGE-M3 folder as BAAI publishes it: an XLM-RoBERTa encoder and its tokenizer, the heads
    ``sparse_linear.pt`` (state dict of ``Linear(hidden, 1)``) and ``colbert_linear.pt`` (``Linear(hidden,
    hidden)``) beside them, and the sentence-transformers files (CLS pooling, normalised) that let the
    same folder serve as ``--embedder``. ``shape`` overrides the tiny config."""
    from transformers import XLMRobertaModel

    tok = xlmr_tokenizer(words)
    config = _xlmr_config(tok, shape)
    torch.manual_seed(seed)
    model = XLMRobertaModel(config).eval()
    hidden = config.hidden_size
    sparse = torch.nn.Linear(hidden, 1)
    colbert = torch.nn.Linear(hidden, colbert_dim or hidden)
    with torch.no_grad():  # centre the lexical logits on a probe text: about half the tokens weigh > 0
        sparse.weight.normal_(0.0, 0.05)  # lexical weights of BGE-M3's scale (mostly below 0.4)
        probe = tok([" ".join(WORDS + list(words or []))], truncation=True, max_length=256, return_tensors="pt")
        logits = sparse(model(**probe).last_hidden_state).flatten()
        sparse.bias.sub_(logits.median())
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    torch.save(sparse.state_dict(), folder / "sparse_linear.pt")
    torch.save(colbert.state_dict(), folder / "colbert_linear.pt")
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": config.max_position_embeddings - 2, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": hidden, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
         "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    return folder


def build_cross_encoder(folder: Path, seed: int = 0, *, words: list[str] | None = None, **shape) -> Path:
    """A cross-encoder reranker of bge-reranker-v2-m3's kind: XLM-RoBERTa with a one-logit
    classification head and its tokenizer (query and passage as a pair), loadable by
    sentence-transformers' ``CrossEncoder``."""
    from transformers import XLMRobertaForSequenceClassification

    tok = xlmr_tokenizer(words)
    config = _xlmr_config(tok, shape)
    config.num_labels = 1
    torch.manual_seed(seed)
    XLMRobertaForSequenceClassification(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
