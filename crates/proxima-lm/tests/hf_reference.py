"""Tiny random Hugging Face models and their reference outputs from ``transformers``, for
``tests/hf_models.rs``.

    python hf_reference.py make DIR            # DIR/{llama,qwen2,qwen3,gpt2}/ + DIR/reference.json
    python hf_reference.py logits MODEL_DIR    # prints the logits of the reference batch as JSON
    python hf_reference.py grpo MODEL_DIR      # prints TRL's GRPO loss on GRPO_BATCH and its gradient, float64
    python hf_reference.py ppo MODEL_DIR       # TRL's PPO loss with a value head on PPO_BATCH, gradients, float64
    python hf_reference.py dpo MODEL_DIR       # TRL's DPO losses (sigmoid, hinge, ipo) on DPO_BATCH, gradients, float64

Each model has a few layers and a width ≤ 64 (Llama-, Qwen2- and Qwen3-shaped with grouped-query
attention; GPT-2), random weights from a fixed seed, saved with ``save_pretrained``. The reference
batch is two rows, the second left-padded (TRL's and ``generate``'s layout), with positions counted
from each row's first real token; the reference holds the logits at every position and the tokens
of greedy decoding (``generate(do_sample=False)``)."""

from __future__ import annotations

import json
import math
import sys

import torch
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

VOCAB = 96
ROWS = [[5, 17, 42, 8, 91, 3, 60], [0, 0, 33, 12, 7, 70, 2]]  # row 1: two padding tokens first
MASK = [[1] * 7, [0, 0, 1, 1, 1, 1, 1]]
NEW_TOKENS = 6


def models():
    common = dict(vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=0, eos_token_id=None, bos_token_id=None)
    llama = dict(common, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2)
    yield "llama", LlamaForCausalLM(LlamaConfig(**llama, tie_word_embeddings=False, rms_norm_eps=1e-6))
    # Llama 3.1's RoPE scaling, with a short original context so that both its divided and its interpolated
    # frequencies occur at head width 8.
    llama3 = dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                  original_max_position_embeddings=16)
    yield "llama3", LlamaForCausalLM(LlamaConfig(**llama, tie_word_embeddings=True, rope_parameters=llama3))
    yield "llama_bias", LlamaForCausalLM(LlamaConfig(**llama, attention_bias=True, tie_word_embeddings=True))
    yield "qwen2", Qwen2ForCausalLM(Qwen2Config(**llama, tie_word_embeddings=True))
    yield "qwen3", Qwen3ForCausalLM(Qwen3Config(**llama, head_dim=16, tie_word_embeddings=True))
    yield "gpt2", GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                             pad_token_id=0, eos_token_id=None, bos_token_id=None))


def randomize(model, seed):
    """Weights larger than the init's 0.02 (so the logits differ clearly between positions), the norms'
    gains away from 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.3 if p.dim() == 1 else 0.15
            p.copy_(torch.randn(p.shape, generator=g) * scale + (1.0 if "norm" in name or "ln_" in name else 0.0)
                    * (p.dim() == 1 and "bias" not in name))


def logits(model):
    ids, mask = torch.tensor(ROWS), torch.tensor(MASK)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=pos).logits


TEXTS = ["12+34=46", "the cat sat", "7 + 8 = 15<eos>", "unknown ☃ char"]
# A ChatML-style template with what templates use: bos_token, loop.first, a system default, .strip(), .startswith(),
# raise_exception and add_generation_prompt.
CHAT_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou add.<|im_end|>\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('Unknown role: ' + message['role']) }}{%- endif %}"
    "{%- if loop.first and message['content'].startswith(' ') %}{{ '(leading space)' }}{%- endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'].strip() + '<|im_end|>\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{%- endif %}"
)
CHATS = [[{"role": "user", "content": " 12+34= "}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the cat"},
          {"role": "assistant", "content": "sat\n"}, {"role": "user", "content": "on?"}]]


def tokenizer(out: str) -> dict:
    """A BPE tokenizer of 96 tokens trained on a small corpus, saved with its config as
    ``transformers`` saves one, and the encodings of TEXTS by ``AutoTokenizer``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = [f"{a}+{b}={a + b}" for a in range(30) for b in range(30)] + ["the cat sat on the mat"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<pad>", "<unk>", "<eos>", "<bos>"]))
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                                   unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    auto = AutoTokenizer.from_pretrained(out)
    chats = [auto.apply_chat_template(m, tokenize=False, add_generation_prompt=g) for m in CHATS for g in (True, False)]
    return {"texts": TEXTS, "with_special": [auto(t)["input_ids"] for t in TEXTS], "chats": CHATS, "chat_texts": chats,
            "plain": [auto(t, add_special_tokens=False)["input_ids"] for t in TEXTS],
            "decoded": [auto.decode(auto(t)["input_ids"], skip_special_tokens=True) for t in TEXTS],
            "eos": auto.eos_token_id, "pad": auto.pad_token_id}


def make(out: str) -> None:
    torch.manual_seed(0)
    ref = {"rows": ROWS, "mask": MASK, "models": {}, "tokenizer": tokenizer(f"{out}/llama")}
    for i, (name, model) in enumerate(models()):
        randomize(model, 100 + i)
        model.eval()
        model.save_pretrained(f"{out}/{name}")
        ids, mask = torch.tensor(ROWS), torch.tensor(MASK)
        with torch.no_grad():
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                                 pad_token_id=0)
        ref["models"][name] = {"logits": logits(model).tolist(), "greedy": gen[:, len(ROWS[0]):].tolist()}
    json.dump(ref, open(f"{out}/reference.json", "w"))


# A GRPO micro-batch: prompts left-padded, completions right-padded (pad 0); log π_old and log π_ref are
# the current log-probabilities plus fixed offsets (ratios inside and outside the clip range).
GRPO_BATCH = {
    "prompts": [[5, 17, 42], [33, 12]], "completions": [[8, 91, 3], [7]], "advantages": [0.9, -0.6],
    "old_offset": [[0.1, -0.3, 0.05], [0.25, 0.0, 0.0]], "ref_offset": [[-0.2, 0.1, 0.3], [0.05, 0.0, 0.0]],
    "temperature": 0.7, "beta": 0.04, "epsilon": 0.2, "epsilon_high": 0.28,
}


def completion_batch(prompts, completions):
    """Prompts left-padded then completions right-padded with id 0, as Proxima's trainers lay them out: (ids,
    attention mask, positions from each row's first real token, completion ids, completion mask, P, C)."""
    p, c = max(map(len, prompts)), max(map(len, completions))
    ids, attn, comp, mask = [], [], [], []
    for pr, co in zip(prompts, completions):
        ids.append([0] * (p - len(pr)) + pr + co + [0] * (c - len(co)))
        attn.append([0] * (p - len(pr)) + [1] * (len(pr) + len(co)) + [0] * (c - len(co)))
        comp.append(co + [0] * (c - len(co)))
        mask.append([1.0] * len(co) + [0.0] * (c - len(co)))
    ids, attn = torch.tensor(ids), torch.tensor(attn)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    return ids, attn, pos, torch.tensor(comp), torch.tensor(mask, dtype=torch.float64), p, c


def token_log_probs(logits, comp):
    return torch.log_softmax(logits, -1).gather(-1, comp.unsqueeze(-1)).squeeze(-1)


def grpo(model_dir: str) -> None:
    """TRL's per-token loss (``_compute_loss``) with loss_type "dapo" over the batch's tokens, in float64, and
    the gradient of every parameter."""
    b = GRPO_BATCH
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    ids, attn, pos, comp, mask, p, c = completion_batch(b["prompts"], b["completions"])
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, p - 1:p - 1 + c] / b["temperature"]
    logp = token_log_probs(logits, comp)
    old = logp.detach() + torch.tensor(b["old_offset"], dtype=torch.float64)
    ref = logp.detach() + torch.tensor(b["ref_offset"], dtype=torch.float64)
    adv = torch.tensor(b["advantages"], dtype=torch.float64).unsqueeze(1)
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - b["epsilon"], 1 + b["epsilon_high"])
    per_token = -torch.min(coef_1 * adv, coef_2 * adv) + b["beta"] * (torch.exp(ref - logp) - (ref - logp) - 1)
    loss = (per_token * mask).sum() / mask.sum()
    loss.backward()
    grads = {n: q.grad.flatten().tolist() for n, q in model.named_parameters() if q.grad is not None}
    print(json.dumps({"batch": b, "loss": loss.item(), "grads": grads}))


DPO_BATCH = {
    "prompts": [[5, 17, 42], [33, 12]], "chosen": [[8, 91, 3], [7]], "rejected": [[60, 2], [70, 9, 11, 4]],
    "ref_offset": [0.3, -0.2, 0.15, 0.4], "beta": 0.1,
}


def dpo(model_dir: str) -> None:
    """TRL's DPO losses (``_compute_loss``'s "sigmoid", "hinge" and "ipo") on DPO_BATCH in float64, the reference's
    log-probabilities being the policy's plus ``ref_offset``; each loss and the gradient of every parameter."""
    b = DPO_BATCH
    out = {"batch": b}
    for loss_type in ("sigmoid", "hinge", "ipo"):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
        ids, attn, pos, comp, mask, p, c = completion_batch(b["prompts"] * 2, b["chosen"] + b["rejected"])
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits[:, p - 1:p - 1 + c]
        logp = token_log_probs(logits, comp)
        logps = (logp * mask).sum(1)
        ref = logps.detach() + torch.tensor(b["ref_offset"], dtype=torch.float64)
        ratio = logps - ref
        n = len(b["prompts"])
        if loss_type == "ipo":
            ratio = ratio / mask.sum(1).clamp(min=1.0)
        delta = ratio[:n] - ratio[n:]
        if loss_type == "sigmoid":
            per_pair = -torch.nn.functional.logsigmoid(b["beta"] * delta)
        elif loss_type == "hinge":
            per_pair = torch.relu(1 - b["beta"] * delta)
        else:
            per_pair = (delta - 1 / (2 * b["beta"])) ** 2
        loss = per_pair.mean()
        loss.backward()
        grads = {k: q.grad.flatten().tolist() for k, q in model.named_parameters() if q.grad is not None}
        out[loss_type] = {"loss": loss.item(), "grads": grads}
    print(json.dumps(out))


PPO_BATCH = {
    "prompts": [[5, 17, 42], [33, 12]], "completions": [[8, 91, 3], [7, 60]],
    "old_offset": [[-0.3, 0.3, 0.05], [0.1, 0.0]], "value_offset": [[0.3, -0.05, -0.3], [0.1, 0.0]],
    "advantages": [[0.9, -0.6, 1.2], [-1.1, 0.4]], "returns": [[-1.0, 0.5, 1.0], [0.3, -0.4]],
    "temperature": 0.7, "cliprange": 0.2, "cliprange_value": 0.2, "vf_coef": 0.1, "v_bias": 0.1,
}


def v_head_weight(d: int) -> list[float]:
    """The value head's weight of the PPO test, by formula (the Rust side builds the same)."""
    return [0.05 * math.sin(i + 1.0) for i in range(d)]


def ppo(model_dir: str) -> None:
    """TRL's PPO loss (``PPOTrainer.train``'s pg_loss + vf_coef · vf_loss over the completion tokens) with a value
    head on the last hidden state, in float64; its value and the gradient of every parameter and of the head."""
    b = PPO_BATCH
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    ids, attn, pos, comp, mask, p, c = completion_batch(b["prompts"], b["completions"])
    hidden = model.base_model(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state[:, p - 1:p - 1 + c]
    logits = model.lm_head(hidden) / b["temperature"]
    logp = token_log_probs(logits, comp)
    w = torch.tensor(v_head_weight(hidden.shape[-1]), dtype=torch.float64, requires_grad=True)
    bias = torch.tensor(b["v_bias"], dtype=torch.float64, requires_grad=True)
    values = hidden @ w + bias
    pad = lambda rows: torch.tensor([r + [0.0] * (c - len(r)) for r in rows], dtype=torch.float64)
    old = logp.detach() + pad(b["old_offset"])
    old_v = values.detach() + pad(b["value_offset"])
    adv, ret = pad(b["advantages"]), pad(b["returns"])
    masked_mean = lambda x: (x * mask).sum() / mask.sum()
    ratio = torch.exp(logp - old)
    pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - b["cliprange"], 1 + b["cliprange"]))
    v_clip = torch.clamp(values, old_v - b["cliprange_value"], old_v + b["cliprange_value"])
    vf = 0.5 * masked_mean(torch.max((values - ret) ** 2, (v_clip - ret) ** 2))
    loss = masked_mean(pg) + b["vf_coef"] * vf
    loss.backward()
    grads = {n: q.grad.flatten().tolist() for n, q in model.named_parameters() if q.grad is not None}
    grads["v_head.weight"], grads["v_head.bias"] = w.grad.tolist(), [bias.grad.item()]
    print(json.dumps({"batch": b, "loss": loss.item(), "grads": grads}))


def main() -> None:
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "grpo":
        grpo(sys.argv[2])
    elif sys.argv[1] == "dpo":
        dpo(sys.argv[2])
    elif sys.argv[1] == "ppo":
        ppo(sys.argv[2])
    else:
        model = AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32)
        print(json.dumps(logits(model.eval()).tolist()))


if __name__ == "__main__":
    main()
