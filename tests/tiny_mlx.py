"""A tiny MLX model that the real mlx_lm.server loads and serves on the CPU in about a second.

A byte-level BPE tokenizer of a few hundred tokens (saved through transformers'
PreTrainedTokenizerFast, which is what mlx_lm loads) and a 2-layer llama of hidden size 64
with random weights, saved with mlx_lm's own `save_model`/`save_config`. It writes nonsense,
which is all a supervisor needs: a real process that loads, answers and streams.
"""

from __future__ import annotations

import sys
from pathlib import Path

VOCAB = 300
_CORPUS = [
    "Hello, how are you today? I am fine, thank you.",
    "The quick brown fox jumps over the lazy dog.",
    "llamad keeps local model servers always on.",
] * 20
_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def write_tiny_mlx_model(out: Path) -> Path:
    """Write the model directory `out` (config.json, model.safetensors, tokenizer) and return it."""
    import mlx.core as mx
    from mlx_lm.models import llama
    from mlx_lm.utils import save_config, save_model
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>"]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")
    fast.chat_template = _TEMPLATE
    fast.save_pretrained(str(out))

    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-5,
        "vocab_size": bpe.get_vocab_size(),
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
        "bos_token_id": bpe.token_to_id("<s>"),
        "eos_token_id": bpe.token_to_id("</s>"),
    }
    model = llama.Model(llama.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    save_model(out, model, donate_model=True)
    save_config(config, out / "config.json")
    return out


if __name__ == "__main__":
    print(write_tiny_mlx_model(Path(sys.argv[1])))
