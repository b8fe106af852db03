"""Build the embedded default model: a tiny Llama-architecture causal LM with a character-level tokenizer.

No machine of this project reaches the Hugging Face Hub, and a new user should see the whole pipeline
work on a laptop in minutes, so the project makes its own model, locally and deterministically:

* the tokenizer is built with the `tokenizers` library from a fixed vocabulary of 130 tokens: a handful
  of special tokens, `<think>` / `</think>`, the 26 assignment keys `a=` .. `z=`, and every printable
  ASCII character plus newline as its own token. Character level keeps the vocabulary tiny; the
  assignment keys make a lookup in the synthetic task (tasks/synthetic.py) a single
  induction step (find the earlier `r=`, copy what follows it), which a model this small learns in
  about a thousand SFT steps (with `r` and `=` as two tokens it had not learned it after 2000);
* the chat template ends every turn, assistant turns included, with the EOS token and wraps the
  assistant content *and its EOS* in `{% generation %}` markers, so SFT with `assistant_only_loss`
  trains the model to stop (the most common complaint about SFT'd models is that they never do);
* the model is `LlamaForCausalLM`. With a Qwen2 config transformers 5.x silently swaps in its own
  Qwen2Tokenizer class and the token ids change; the Llama architecture with an explicit
  `PreTrainedTokenizerFast` class keeps our tokenizer exactly as built.

The same recipes run a 7B model from the Hub; only the YAML differs.
"""

from __future__ import annotations

import json
import logging
import string
from dataclasses import asdict, dataclass
from pathlib import Path

from basics.atomic_files import write_atomic

logger = logging.getLogger(__name__)

PAD_TOKEN = "<|pad|>"
EOS_TOKEN = "<|eos|>"
UNK_TOKEN = "<|unk|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
THINK_TOKENS = ("<think>", "</think>")
# "a=" .. "z=" as single tokens: in "r=j" the key token sits right before its value (see the module docstring).
ASSIGN_TOKENS = tuple(f"{letter}=" for letter in string.ascii_lowercase)

# One string per turn: role marker, content, EOS. The assistant's content and its EOS sit inside the
# generation markers so that TRL's assistant-only loss includes the stop token.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "<|assistant|>{% generation %}{{ message['content'] }}<|eos|>{% endgeneration %}"
    "{%- elif message['role'] in ['system', 'user'] -%}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|eos|>"
    "{%- else -%}"
    "{{ raise_exception('unknown role: ' + message['role']) }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


@dataclass
class TinyModelSpec:
    """Architecture of the tiny model (~0.54 M parameters by default).

    Two layers are the fewest that can look a key up by induction (one layer to note each token's
    predecessor, one to match it), and they run twice as fast as four: the 2-layer model learned the
    synthetic task within 2000 SFT steps here, while a 4-layer one had not after 800.
    """

    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 512


def character_vocabulary() -> list[str]:
    """The ordered vocabulary: special, think and assignment tokens, then newline and the 95 printable ASCII characters."""
    specials = [PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, *ROLE_TOKENS, *THINK_TOKENS, *ASSIGN_TOKENS]
    chars = ["\n"] + [c for c in string.printable if c.isprintable()]  # ' ' .. '~', 95 characters
    return specials + chars


def build_tokenizer():
    """A character-level `PreTrainedTokenizerFast` with our chat template, EOS, PAD and UNK set.

    Every character outside printable ASCII and newline maps to `<|unk|>`; the synthetic task never uses one.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(character_vocabulary())}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    # Split into single characters ([\s\S] also matches newline); Fuse joins them back without spaces.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens([PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, *ROLE_TOKENS])
    # Not special: they are text the model writes, and decoding keeps them.
    backend.add_tokens(list(THINK_TOKENS) + list(ASSIGN_TOKENS))

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",  # generation pads on the left; trainers set their own side when they need to
        model_max_length=TinyModelSpec.max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    return tokenizer


def build_tiny_model(output_dir: str | Path, seed: int = 0, spec: TinyModelSpec | None = None) -> Path:
    """Build the tiny model and tokenizer from scratch and `save_pretrained` both into `output_dir`.

    Deterministic for a seed: the same seed gives bit-identical weights. Takes about a second.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    spec = spec or TinyModelSpec()
    output_dir = Path(output_dir)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_attention_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    # Weights drawn from a private generator state: the global RNG of the caller is left untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    card = {"seed": seed, "spec": asdict(spec), "parameters": sum(p.numel() for p in model.parameters())}
    write_atomic(output_dir / "tiny_model.json", json.dumps(card, indent=2) + "\n")
    logger.info("built tiny model (%d parameters, seed %d) in %s", card["parameters"], seed, output_dir)
    return output_dir


# SmolLM2-135M-Instruct's tokenizer and chat template (Apache-2.0; see its README): a real 49k BPE vocabulary
# with <|im_start|> and <|im_end|>, the tokens of the chat templates of the Qwen2.5 family too.
SMOLLM2_TOKENIZER = Path(__file__).resolve().parents[2] / "assets" / "smollm2-tokenizer"


def save_stand_in(target: str | Path, tokenizer, config_class, model_class, **sizes) -> Path:
    """A randomly initialised 2-layer model of `config_class`'s family (seed 0, tied embeddings) with `tokenizer`'s
    vocabulary and special tokens, saved with the tokenizer to `target`.

    What stands in for a model this machine cannot hold or reach: everything a real model of the family brings to
    the recipes' code (its architecture, tokenizer, chat template, special tokens) at a size that trains a step in
    a second. Its weights are noise, drawn from a private generator state (the caller's RNG is left untouched).
    """
    import torch

    config = config_class(
        vocab_size=len(tokenizer), num_hidden_layers=2, tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **sizes,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return Path(target)
