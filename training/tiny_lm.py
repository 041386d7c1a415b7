"""A tiny chat model built on the spot, for CPU tests and dry runs of the training pipeline.

``build_tiny_lm(directory, seed)`` writes a Hugging Face model folder that loads offline with
``AutoModelForCausalLM.from_pretrained(directory)`` and ``AutoTokenizer.from_pretrained(directory)``:

* a Qwen2-architecture causal LM (2 layers, hidden size 64, 4 heads) with random weights drawn from
  ``seed``; it speaks gibberish, but every code path of rollout and training runs on it, in seconds;
* a byte-level BPE tokenizer (vocabulary 2048) trained here on a small generated corpus of English
  words, JSON-schema keys, tool names and the chat markers, so tool specs and calls tokenise compactly
  and any text round-trips (byte level: no unknown tokens);
* a ChatML chat template (``<|im_start|>role ... <|im_end|>``) that supports ``tools=``, in the
  Hermes / Qwen3 convention: the tool specs go into the system prompt inside ``<tools></tools>`` (one
  JSON object per line), an assistant's tool calls are ``<tool_call>{"name": ..., "arguments": ...}
  </tool_call>`` blocks, and tool results come back as ``<tool_response>`` blocks inside a user turn
  (consecutive tool messages share one turn). ``<|im_end|>`` is the end-of-turn (EOS) token.

The same seed gives byte-identical files. Command line::

    python -m training.tiny_lm var/models/tiny-lm --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

PAD, BOS_TURN, EOS_TURN = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS_TURN, EOS_TURN]
# Single tokens, but not "special": decoding with skip_special_tokens keeps them (as in Qwen).
TAG_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]
VOCAB_SIZE = 2048

CHAT_TEMPLATE = """\
{%- set has_system = messages and messages[0].role == 'system' -%}
{%- if tools -%}
<|im_start|>system
{% if has_system %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif has_system -%}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'tool' -%}
{%- if loop.first or loop.previtem.role != 'tool' %}<|im_start|>user{% endif %}

<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or loop.nextitem.role != 'tool' %}<|im_end|>
{% endif -%}
{%- elif message.role == 'assistant' -%}
<|im_start|>assistant
{{ message.content or '' }}
{%- for call in message.tool_calls or [] -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- if message.content or not loop.first %}{{ '\n' }}{% endif -%}
<tool_call>
{"name": {{ fn.name | tojson }}, "arguments": \
{% if fn.arguments is string %}{{ fn.arguments }}{% else %}{{ fn.arguments | tojson }}{% endif %}}
</tool_call>
{%- endfor %}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
"""

_WORDS = """
the a an to of in on for with from by and or not is are be this that it you your my please can could
would should will now then also all any each more most new old first last next file files folder
directory document report text line lines word words name names path source destination content
message messages user users account order orders item items product products price total amount
ticket tickets flight flights booking reservation seat seats date time day today tomorrow city
airport hotel car payment card credit balance refund return exchange cancel status id number list
get set add remove delete create update find search send post read write move copy sort check show
tweet comment follow stock trade market vehicle engine door lock fuel tire temperature contact phone
reminder note food restaurant shopping cart address email password login logout authenticate error
result results value values string integer boolean array object required description parameters
properties type function arguments tool call response system assistant question answer ok done yes no
which allows control manage view information such various operations operation current provides access
default perform simple basic creating reading writing following unit part core functionality support
none mode retrieve format used calculate location base specified specific keyword history only local
given convert change one two false true start based supplied another details limit contents allowed
must second its method pattern optional filter compute round option nearest gets end containing
absolute maximum minimum mean percentage places sum use target customer years year purchase working
into readable returns contain within provided existing characters relevant close changed updates input
using desired displays sets range info available transaction handle management initial options rate
field service code register belongs their belongs default defaults client mode display api token
""".split()
_TOOL_NAMES = """
cd ls mkdir mv cp rm rmdir cat grep sort diff touch echo wc tail pwd du find post_tweet get_tweet
comment retweet follow_user authenticate_twitter send_message view_messages_sent get_user_id
create_ticket get_ticket close_ticket edit_ticket book_flight cancel_booking get_flight_cost
get_nearest_airport_by_city compute_exchange_rate place_order cancel_order get_stock_info
get_order_details get_user_details get_product_details return_delivered_order_items
exchange_delivered_order_items modify_pending_order_address transfer_to_human_agents
lockDoors startEngine fillFuelTank check_tire_pressure display_car_status login_food_platform
add_reminder search_messages think calculate
""".split()
_JSON_TYPES = ["string", "integer", "number", "boolean", "array", "object"]


def _corpus(rng: random.Random, n_lines: int = 3000) -> list[str]:
    """Chat-shaped lines: tool specs, tool calls, tool responses and sentences, all in the template's
    markup, so common pieces of a rollout become single tokens."""

    def words(k: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(k))

    def spec() -> str:
        props = {
            rng.choice(_WORDS): {"type": rng.choice(_JSON_TYPES), "description": words(rng.randint(2, 6))}
            for _ in range(rng.randint(1, 3))
        }
        fn = {"name": rng.choice(_TOOL_NAMES), "description": words(rng.randint(4, 12))}
        fn["parameters"] = {"type": "object", "properties": props, "required": list(props)[:1]}
        return json.dumps({"type": "function", "function": fn})

    def call() -> str:
        arguments = {rng.choice(_WORDS): rng.choice([words(2), rng.randint(0, 999), True]) for _ in range(2)}
        return f"<tool_call>\n{json.dumps({'name': rng.choice(_TOOL_NAMES), 'arguments': arguments})}\n</tool_call>"

    makers = [
        lambda: f"{BOS_TURN}system\n<tools>\n{spec()}\n{spec()}\n</tools>{EOS_TURN}",
        lambda: f"{BOS_TURN}user\n{words(rng.randint(5, 20)).capitalize()}.{EOS_TURN}",
        lambda: f"{BOS_TURN}assistant\n{call()}{EOS_TURN}",
        lambda: (
            f"{BOS_TURN}user\n<tool_response>\n{json.dumps({rng.choice(_WORDS): words(3)})}\n"
            f"</tool_response>{EOS_TURN}"
        ),
        lambda: f"{BOS_TURN}assistant\n{words(rng.randint(3, 15)).capitalize()}.{EOS_TURN}",
        lambda: f"Error: {words(rng.randint(3, 8))} '{rng.choice(_WORDS)}' {rng.randint(0, 99)}",
    ]
    return [rng.choice(makers)() for _ in range(n_lines)]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The byte-level BPE tokenizer with the chat template (independent of the seed)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS + TAG_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(random.Random(0)), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TURN,
        pad_token=PAD,
        additional_special_tokens=[BOS_TURN],
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_tiny_lm(directory: str | Path, seed: int = 0, heads: int = 4) -> Path:
    """Write the tiny model and its tokenizer to ``directory`` (created if needed); returns it. ``heads``
    attention heads share the hidden size 64 (4: head size 16, the tests' model; 1: head size 64, which
    vLLM's attention kernels take)."""
    if heads not in (1, 2, 4):
        raise ValueError(f"heads={heads}: choose 1, 2 or 4 (head size 64 / heads)")
    directory = Path(directory)
    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build the tiny random chat LM used by CPU tests.")
    parser.add_argument("directory", help="output folder (created)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (1: head size 64, for vLLM)")
    args = parser.parse_args(argv)
    path = build_tiny_lm(args.directory, seed=args.seed, heads=args.heads)
    print(f"tiny LM written to {path}")


if __name__ == "__main__":
    main()
