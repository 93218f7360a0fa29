"""``proxima.lm``: SFT, DPO, GRPO and RLHF-PPO on a Hugging Face model with TRL's API, on a tiny random Qwen2-shaped model and a
character tokenizer made here with ``transformers`` and ``tokenizers``: SFT learns the completions it is shown, DPO
the preferences, a reward function written in Python steers GRPO, the saved models load in ``transformers`` with the trained weights,
and bad inputs are clear errors."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from proxima.lm import (CausalLM, DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, LoraConfig, PPOConfig, PPOTrainer,
                        SFTConfig, SFTTrainer)

LETTERS = "abcdefghij"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 1-layer Qwen2-shaped model over <pad>, <eos> and ten letters, with a character tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    d = tmp_path_factory.mktemp("tiny-qwen2")
    vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(LETTERS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                   tie_word_embeddings=True, eos_token_id=1, pad_token_id=0)
    model = transformers.Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    model.save_pretrained(d)
    return d


def dataset():
    return [{"prompt": p, "target": "e"} for p in ("abc", "hij", "dd")]


def fraction(completions, target, **kwargs):
    """The share of each completion's letters that are its row's target letter (TRL's calling convention)."""
    assert "completion_ids" in kwargs and "prompts" in kwargs
    return [c.count(t) / max(len(c), 1) for c, t in zip(completions, target)]


def args(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path / "out"), learning_rate=3e-2, max_steps=30, per_device_train_batch_size=8,
                num_generations=4, max_completion_length=6, seed=1, logging_steps=0)
    base.update(kw)
    return GRPOConfig(**base)


def test_a_python_reward_steers_the_model_and_the_result_loads_in_transformers(model_dir, tmp_path):
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=fraction, args=args(tmp_path), train_dataset=dataset())
    out = trainer.train()
    rewards = [row["reward"] for row in trainer.state.log_history]
    assert out.global_step == 30 == trainer.state.global_step
    assert sum(rewards[:5]) / 5 < 0.3 and sum(rewards[-5:]) / 5 > 0.6, rewards
    assert "rewards/fraction/mean" in trainer.state.log_history[-1]
    trainer.save_model()
    saved = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    ids = tok("abc", return_tensors="pt")["input_ids"]
    greedy = saved.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert tok.decode(greedy[0, 3:], skip_special_tokens=True).count("e") >= 3


def test_a_jsonl_dataset_and_two_weighted_reward_functions(model_dir, tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in dataset()))
    calls = []

    def length(completions, **kwargs):
        calls.append(len(completions))
        return [float(len(c)) for c in completions]

    trainer = GRPOTrainer(model=model_dir, reward_funcs=[fraction, length], train_dataset=path,
                          args=args(tmp_path, max_steps=2, reward_weights=[1.0, 0.1], loss_type="grpo", beta=0.04))
    trainer.train()
    assert calls == [8, 8] and trainer.state.global_step == 2
    assert {"rewards/fraction/mean", "rewards/length/mean", "kl"} <= set(trainer.state.log_history[-1])


def test_bad_inputs_are_clear_errors(model_dir, tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        GRPOTrainer(model="HuggingFaceTB/SmolLM2-135M", reward_funcs=fraction, train_dataset=dataset())
    with pytest.raises(ValueError, match="no chat_template"):
        GRPOTrainer(model=model_dir, reward_funcs=fraction, train_dataset=[{"prompt": [{"role": "user", "content": "a"}]}])
    with pytest.raises(ValueError, match="row 0: the `prompt` must be text or a list of messages"):
        GRPOTrainer(model=model_dir, reward_funcs=fraction, train_dataset=[{"question": "a"}])
    with pytest.raises(NotImplementedError, match="use_vllm"):
        GRPOConfig(use_vllm=True)
    with pytest.raises(ValueError, match="loss_type"):
        GRPOConfig(loss_type="sapo")
    with pytest.raises(ValueError, match="multiple of num_generations"):
        GRPOTrainer(model=model_dir, reward_funcs=fraction, train_dataset=dataset(),
                    args=args(tmp_path, per_device_train_batch_size=6))

    class Boom(Exception):
        pass

    def boom(completions, **kwargs):
        raise Boom("the reward server is down")

    trainer = GRPOTrainer(model=model_dir, reward_funcs=boom, train_dataset=dataset(), args=args(tmp_path))
    with pytest.raises(Boom, match="the reward server is down"):
        trainer.train()

    def wrong(completions, **kwargs):
        return "1.0"

    trainer = GRPOTrainer(model=model_dir, reward_funcs=wrong, train_dataset=dataset(), args=args(tmp_path))
    with pytest.raises(TypeError, match="must return a list of floats"):
        trainer.train()

    def short(completions, **kwargs):
        return [1.0]

    trainer = GRPOTrainer(model=model_dir, reward_funcs=short, train_dataset=dataset(), args=args(tmp_path))
    with pytest.raises(ValueError, match="returned 1 rewards for 8 completions"):
        trainer.train()


def test_sft_learns_its_completions_and_the_result_generates_them_in_transformers(model_dir, tmp_path):
    rows = [{"prompt": "ab", "completion": "cde"}, {"prompt": "ij", "completion": "jji"}, {"prompt": "ff", "completion": "a"}]
    path = tmp_path / "sft.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    trainer = SFTTrainer(model_dir, args=SFTConfig(output_dir=str(tmp_path / "sft"), learning_rate=1e-2, max_steps=150,
                                                   per_device_train_batch_size=3, seed=3, logging_steps=0),
                         train_dataset=path)
    out = trainer.train()
    assert out.global_step == 150 and trainer.state.log_history[-1]["loss"] < 0.05
    trainer.save_model()
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "sft")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "sft")
    for r in rows:
        ids = tok(r["prompt"], return_tensors="pt")["input_ids"]
        gen = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=1)
        assert tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True) == r["completion"]
    with pytest.raises(ValueError, match="SFT needs `prompt` and `completion` columns"):
        SFTTrainer(model_dir, train_dataset=[{"prompt": "ab"}])


def test_lora_trains_only_adapters_and_saves_merged_weights(model_dir, tmp_path):
    rows = [{"prompt": "ab", "completion": "eee"}, {"prompt": "ij", "completion": "eee"}]
    lora = LoraConfig(r=4, lora_alpha=16, target_modules="all-linear")
    trainer = SFTTrainer(model_dir, args=SFTConfig(output_dir=str(tmp_path / "lora"), learning_rate=3e-2, max_steps=40,
                                                   per_device_train_batch_size=2, seed=3, logging_steps=0),
                         train_dataset=rows, peft_config=lora)
    trainer.train()
    losses = [r["loss"] for r in trainer.state.log_history]
    assert losses[0] > 2.5 and losses[-1] < 1.8, losses
    trainer.save_model()
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    tuned = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "lora")
    changed = [n for (n, p), (_, q) in zip(base.named_parameters(), tuned.named_parameters()) if not torch.equal(p, q)]
    assert changed and all("proj" in n for n in changed), changed  # merged adapters: the projections only
    g = GRPOTrainer(model_dir, reward_funcs=fraction, train_dataset=dataset(), args=args(tmp_path, max_steps=2),
                    peft_config={"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]})
    g.train()
    with pytest.raises(NotImplementedError, match="lora_dropout"):
        GRPOTrainer(model_dir, reward_funcs=fraction, train_dataset=dataset(), peft_config={"r": 2, "lora_dropout": 0.05})
    with pytest.raises(ValueError, match="name no linear layer"):
        GRPOTrainer(model_dir, reward_funcs=fraction, train_dataset=dataset(), args=args(tmp_path),
                    peft_config=LoraConfig(target_modules=["c_attn"]))


def test_generate_equals_transformers_greedy_and_is_seeded(model_dir):
    ours = CausalLM.from_pretrained(model_dir)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    prompts = [[2, 3, 4], [5, 6, 7, 8, 9]]
    got = ours.generate(prompts, max_new_tokens=5)  # stops at the config's EOS (1), kept last, as generate does
    for p, g in zip(prompts, got):
        ids = torch.tensor([p])
        want = theirs.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False,
                               pad_token_id=0)[0, len(p):].tolist()
        assert g == (want[: want.index(1) + 1] if 1 in want else want)
    a = ours.generate(prompts, max_new_tokens=8, do_sample=True, temperature=1.5, seed=4, eos_token_id=[])
    assert a == ours.generate(prompts, max_new_tokens=8, do_sample=True, temperature=1.5, seed=4, eos_token_id=[])
    assert a != ours.generate(prompts, max_new_tokens=8, do_sample=True, temperature=1.5, seed=5, eos_token_id=[])
    stop = a[0][1]
    cut = ours.generate(prompts, max_new_tokens=8, do_sample=True, temperature=1.5, seed=4, eos_token_id=stop)
    assert cut[0] == a[0][: a[0].index(stop) + 1]
    with pytest.raises(ValueError, match="at least one token"):
        ours.generate([[]])
    with pytest.raises(ValueError, match="temperature"):
        ours.generate(prompts, do_sample=True, temperature=0.0)
    with pytest.raises(TypeError, match="max_new_tokens"):
        ours.generate(prompts, max_new_tokens="8")


def test_conversational_prompts_go_through_the_chat_template(model_dir, tmp_path):
    """Messages are rendered by the tokenizer's chat template; the reward functions get them back, and each
    completion as one assistant message, as TRL passes them."""
    import shutil

    chat_dir = tmp_path / "chat"
    shutil.copytree(model_dir, chat_dir)
    config = json.loads((chat_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}j{% endif %}"
    (chat_dir / "tokenizer_config.json").write_text(json.dumps(config))
    seen = {}

    def conversational(prompts, completions, target, **kwargs):
        seen["prompt"], seen["completion"] = prompts[0], completions[0]
        return [c[0]["content"].count(t) / max(len(c[0]["content"]), 1) for c, t in zip(completions, target)]

    rows = [{"prompt": [{"role": "user", "content": p}], "target": "e"} for p in ("abc", "hij")]
    trainer = GRPOTrainer(chat_dir, reward_funcs=conversational, train_dataset=rows, args=args(tmp_path, max_steps=2))
    trainer.train()
    assert seen["prompt"][0]["role"] == "user" and seen["prompt"][0]["content"] in ("abc", "hij")
    assert seen["completion"][0]["role"] == "assistant" and isinstance(seen["completion"][0]["content"], str)


def _preference(model_dir, prompt="cc", chosen="eee", rejected="ddd"):
    """log π(chosen | prompt) − log π(rejected | prompt) under the model in ``model_dir``, by ``transformers``."""
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)

    def logp(answer):
        p, a = tok(prompt)["input_ids"], tok(answer + "<eos>")["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([p + a])).logits[0, len(p) - 1:-1]
        return torch.log_softmax(logits, -1).gather(-1, torch.tensor(a).unsqueeze(-1)).sum().item()

    return logp(chosen) - logp(rejected)


def test_dpo_learns_the_preferences_and_the_result_loads_in_transformers(model_dir, tmp_path):
    rows = [{"prompt": p, "chosen": "eee", "rejected": "ddd"} for p in ("ab", "ij", "ff", "gh")]
    cfg = DPOConfig(output_dir=str(tmp_path / "dpo"), learning_rate=1e-2, max_steps=30, per_device_train_batch_size=2,
                    gradient_accumulation_steps=2, seed=5, logging_steps=0)
    trainer = DPOTrainer(model_dir, args=cfg, train_dataset=rows)
    out = trainer.train()
    last = trainer.state.log_history[-1]
    assert out.global_step == 30 and last["rewards/accuracies"] == 1.0 and last["rewards/margins"] > 0.3
    assert {"rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected"} <= set(last)
    trainer.save_model()
    before, after = _preference(model_dir), _preference(tmp_path / "dpo")
    assert after > before + 2.0, f"held-out preference {before} -> {after}"


def test_dpo_bad_inputs_are_clear_errors(model_dir, tmp_path):
    with pytest.raises(ValueError, match="row 0: DPO needs `prompt`, `chosen` and `rejected` columns"):
        DPOTrainer(model_dir, train_dataset=[{"prompt": "ab", "chosen": "e"}])
    with pytest.raises(NotImplementedError, match="one loss type at a time"):
        DPOConfig(loss_type=["sigmoid", "sft"])
    with pytest.raises(ValueError, match="loss_type must be"):
        DPOConfig(loss_type="kto")
    with pytest.raises(NotImplementedError, match="ref_model"):
        DPOTrainer(model_dir, ref_model=model_dir, train_dataset=[{"prompt": "a", "chosen": "b", "rejected": "c"}])
    with pytest.raises(ValueError, match="beta must be positive"):
        DPOTrainer(model_dir, args=DPOConfig(beta=0.0), train_dataset=[{"prompt": "a", "chosen": "b", "rejected": "c"}])
    with pytest.raises(ValueError, match="longer than the model's 32 positions"):
        DPOTrainer(model_dir, train_dataset=[{"prompt": "abcdefghij" * 4, "chosen": "b", "rejected": "c"}])


def test_ppo_with_a_python_reward_learns_and_the_result_loads_in_transformers(model_dir, tmp_path):
    cfg = PPOConfig(output_dir=str(tmp_path / "ppo"), learning_rate=1e-2, total_episodes=40 * 16,
                    per_device_train_batch_size=4, gradient_accumulation_steps=2, num_mini_batches=2,
                    response_length=6, temperature=1.0, seed=1, logging_steps=0)
    trainer = PPOTrainer(args=cfg, model=model_dir, reward_funcs=fraction, train_dataset=dataset())
    out = trainer.train()
    scores = [r["objective/scores"] for r in trainer.state.log_history]
    assert out.global_step == 40 and scores[0] < 0.3 and sum(scores[-5:]) / 5 > 0.6, scores
    assert {"objective/kl", "loss/value_avg", "policy/clipfrac_avg", "val/ratio"} <= set(trainer.state.log_history[-1])
    trainer.save_model()
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ppo")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "ppo")
    ids = tok("abc", return_tensors="pt")["input_ids"]
    gen = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=1)
    text = tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True)
    assert text and text.count("e") / len(text) > 0.5, text


def test_ppo_bad_inputs_are_clear_errors(model_dir):
    with pytest.raises(NotImplementedError, match="value_model"):
        PPOTrainer(model=model_dir, reward_funcs=fraction, train_dataset=dataset(), value_model=model_dir)
    with pytest.raises(NotImplementedError, match="reward model network"):
        PPOTrainer(model=model_dir, reward_model=torch.nn.Linear(2, 1), train_dataset=dataset())
    with pytest.raises(ValueError, match="reward_funcs: give one or more callables"):
        PPOTrainer(model=model_dir, train_dataset=dataset())
    with pytest.raises(ValueError, match="kl_estimator"):
        PPOConfig(kl_estimator="k2")

    def boom(completions, **kwargs):
        raise KeyError("from the reward")

    trainer = PPOTrainer(args=PPOConfig(total_episodes=8, response_length=4, logging_steps=0), model=model_dir,
                         reward_funcs=boom, train_dataset=dataset())
    with pytest.raises(KeyError, match="from the reward"):
        trainer.train()

    def none(completions, **kwargs):
        return [None] * len(completions)

    trainer = PPOTrainer(args=PPOConfig(total_episodes=8, response_length=4, logging_steps=0), model=model_dir,
                         reward_funcs=none, train_dataset=dataset())
    with pytest.raises(ValueError, match="PPO needs a score for every completion"):
        trainer.train()


def test_a_tokenizer_of_another_vocabulary_is_refused(model_dir, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    tok = transformers.AutoTokenizer.from_pretrained(other)
    tok.add_tokens(["<x1>", "<x2>"])
    tok.save_pretrained(other)
    with pytest.raises(ValueError, match="does not match the model's vocabulary of 12"):
        SFTTrainer(other, train_dataset=[{"prompt": "ab", "completion": "c"}])


def test_config_values_and_unknown_fields_are_named():
    with pytest.raises(ValueError, match=r"GRPOConfig.learning_rate must be a finite number"):
        GRPOConfig(learning_rate=float("nan"))
    with pytest.raises(ValueError, match=r"SFTConfig.per_device_train_batch_size must be ≥ 0, got -1"):
        SFTConfig(per_device_train_batch_size=-1)
    with pytest.raises(TypeError, match=r"GRPOConfig.num_generations must be an integer"):
        GRPOConfig(num_generations=2.5)
    with pytest.raises(ValueError, match=r"GRPOConfig.reward_weights must hold finite numbers"):
        GRPOConfig(reward_weights=[float("nan")])
    with pytest.raises(TypeError, match=r"DPOConfig.shuffle_dataset must be True or False"):
        DPOConfig(shuffle_dataset=1)
    with pytest.raises(NotImplementedError, match=r"PPOConfig\(reward_model_path='x'\): not supported by Proxima"):
        PPOConfig(reward_model_path="x")
    with pytest.raises(NotImplementedError, match=r"SFTConfig\(packing=True\): not supported by Proxima \(only False"):
        SFTConfig(packing=True)
    with pytest.raises(NotImplementedError, match=r"GRPOConfig\(use_vllm=True\): not supported by Proxima"):
        GRPOConfig(use_vllm=True)
    # TRL's defaults, and fields without effect here, as copied TRL scripts pass them.
    assert SFTConfig(packing=False, report_to="none", bf16=False).report_to == "none"
    DPOConfig(label_smoothing=0.0, gradient_checkpointing=True, lr_scheduler_type="linear")
    GRPOConfig(max_prompt_length=None, epsilon_high=0.28, scale_rewards=True, reward_weights=[1, 0.5])


def test_step_counts_and_optimiser_settings_are_checked(model_dir, tmp_path):
    rows = [{"prompt": "ab", "completion": "c"}]
    with pytest.raises(ValueError, match="num_train_epochs"):
        SFTTrainer(model_dir, args=SFTConfig(num_train_epochs=0), train_dataset=rows)
    with pytest.raises(ValueError, match="total_episodes"):
        PPOTrainer(args=PPOConfig(total_episodes=0), model=model_dir, reward_funcs=fraction, train_dataset=dataset())
    with pytest.raises(ValueError, match="learning_rate must be a finite number ≥ 0"):
        DPOTrainer(model_dir, args=DPOConfig(learning_rate=-1.0), train_dataset=[{"prompt": "a", "chosen": "b", "rejected": "c"}])
    # max_grad_norm 0 means no clipping (transformers' Trainer), not a zero step.
    trainer = SFTTrainer(model_dir, args=SFTConfig(output_dir=str(tmp_path / "noclip"), max_grad_norm=0.0, max_steps=2,
                                                   learning_rate=1e-2, logging_steps=0), train_dataset=rows)
    trainer.train()
    trainer.save_model()
    before = transformers.AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    after = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "noclip").state_dict()
    assert max((before[k] - after[k]).abs().max().item() for k in before) > 1e-3


def test_generate_and_lora_refuse_what_they_would_ignore(model_dir):
    lm = CausalLM(model_dir)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer ≥ 0"):
        lm.generate([[2]], max_new_tokens=-5)
    with pytest.raises(ValueError, match="eos_token_id must be token ids ≥ 0"):
        lm.generate([[2]], eos_token_id=[1, -1])
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        lm.generate([[2]], temperature=float("nan"))
    with pytest.raises(ValueError, match="max_new_tokens must be at least 1"):
        lm.generate([[2]], max_new_tokens=0)
    for field, value in (("bias", "all"), ("modules_to_save", ["lm_head"]), ("layers_to_transform", [0]),
                         ("init_lora_weights", "gaussian"), ("rank_pattern", {"q_proj": 4})):
        with pytest.raises(NotImplementedError, match=f"peft_config.{field}"):
            SFTTrainer(model_dir, train_dataset=[{"text": "abc"}], peft_config={"r": 4, field: value})
