"""GRPO, RLHF-PPO, DPO and SFT on Hugging Face language models with TRL's API: ``GRPOConfig``/``GRPOTrainer``,
``PPOConfig``/``PPOTrainer``, ``DPOConfig``/``DPOTrainer`` and ``SFTConfig``/``SFTTrainer``.

    from proxima.lm import GRPOConfig, GRPOTrainer

    def reward_len(completions, **kwargs):
        return [-abs(20 - len(c)) for c in completions]

    trainer = GRPOTrainer(model="path/to/SmolLM2-135M", reward_funcs=reward_len,
                          args=GRPOConfig(output_dir="out", max_steps=100), train_dataset=dataset)
    trainer.train()
    trainer.save_model()        # a Hugging Face directory: transformers' from_pretrained loads it

The model is a local Hugging Face directory (``config.json``, safetensors weights, ``tokenizer.json``) of a Llama,
SmolLM, Qwen2, Qwen3 or GPT-2 model, or a ``transformers`` model object (saved to a temporary directory first). It
trains in Rust on the CPU, generating its own completions with its current weights (no separate generator to keep in
sync). A reward function is called as TRL calls it: ``func(prompts=..., completions=..., completion_ids=...,
**columns)`` with one entry per completion, the dataset's other columns passed by name; it returns one float (or
``None``) per completion.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Optional, Union

from ._proxima import _CausalLm, _RewardedTrainer, _Trainer

__all__ = ["CausalLM", "DPOConfig", "DPOTrainer", "GRPOConfig", "GRPOTrainer", "LoraConfig", "PPOConfig", "PPOTrainer", "SFTConfig", "SFTTrainer", "TrainOutput", "TrainerState"]

# TRL `GRPOConfig` fields that Proxima does not implement: an error names them rather than ignoring them.
_UNSUPPORTED = {
    "use_vllm": "generation runs in-process with the trained weights",
    "vllm_mode": "generation runs in-process with the trained weights",
    "use_liger_kernel": "the loss is Proxima's own",
    "importance_sampling_level": "only token-level importance ratios ('token')",
    "delta": "two-sided clipping is not implemented",
    "min_p": "min-p sampling is not implemented",
    "repetition_penalty": "repetition penalties are not implemented",
    "sync_ref_model": "the reference model stays the initial one",
    "num_generations_eval": "evaluation during training is not implemented",
    "multi_objective_aggregation": "only 'sum_then_normalize'",
}


@dataclasses.dataclass
class GRPOConfig:
    """TRL's ``GRPOConfig``: the fields Proxima reads, with TRL's defaults.

    :param output_dir: where ``save_model()`` writes by default
    :param learning_rate: Adam's step size, decayed linearly to 0 over the run
    :param max_steps: optimiser steps to take; -1 (the default) means ``num_train_epochs`` passes over the prompts
    :param num_train_epochs: passes over the dataset when ``max_steps`` is -1
    :param per_device_train_batch_size: completions per micro-batch
    :param gradient_accumulation_steps: micro-batches per optimiser step
    :param steps_per_generation: micro-batches per generation batch (None: ``gradient_accumulation_steps``)
    :param num_generations: completions sampled per prompt (G ≥ 2)
    :param num_iterations: passes over each generation batch (μ); > 1 uses the importance ratio to π_old
    :param beta: weight of the k3 KL penalty to the initial model (0: no reference model is kept)
    :param epsilon: the lower clip of the ratio
    :param epsilon_high: the upper clip (None: ``epsilon``; DAPO recommends 0.28)
    :param loss_type: "dapo" (default), "grpo", "bnpo" or "dr_grpo", as TRL defines them
    :param scale_rewards: "group" (default), "batch" or "none": what the advantages are divided by
    :param max_prompt_length: prompts longer than this keep their last tokens (None: whole)
    :param max_completion_length: new tokens per completion at most
    :param temperature: sampling temperature (the log-probabilities use it too, as TRL's)
    :param top_p: nucleus sampling (1.0: off)
    :param top_k: top-k sampling (0: off)
    :param mask_truncated_completions: completions cut at ``max_completion_length`` count in no loss
    :param reward_weights: one weight per reward function (None: all 1)
    :param max_grad_norm: the gradient-norm clip (≤ 0: no clipping)
    :param adam_epsilon: Adam's ε
    :param seed: seeds the prompt order and the sampling
    :param shuffle_dataset: shuffle the prompts each epoch
    :param logging_steps: print a log row every this many optimiser steps (0: never)
    """

    output_dir: str = "trainer_output"
    learning_rate: float = 1e-6
    max_steps: int = -1
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    steps_per_generation: Optional[int] = None
    num_generations: int = 8
    num_iterations: int = 1
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: Optional[float] = None
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    max_prompt_length: Optional[int] = 512
    max_completion_length: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    mask_truncated_completions: bool = False
    reward_weights: Optional[list[float]] = None
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    seed: int = 42
    shuffle_dataset: bool = True
    logging_steps: int = 10

    def __post_init__(self) -> None:
        if self.loss_type not in ("dapo", "grpo", "bnpo", "dr_grpo"):
            raise ValueError(f"loss_type must be 'dapo', 'grpo', 'bnpo' or 'dr_grpo', not {self.loss_type!r}")
        if isinstance(self.scale_rewards, bool):  # TRL's older boolean form
            self.scale_rewards = "group" if self.scale_rewards else "none"
        if self.scale_rewards not in ("group", "batch", "none"):
            raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', not {self.scale_rewards!r}")


_ANY = object()
# TRL / transformers fields that are accepted without effect: any value of those that change nothing Proxima
# computes (logging, saving, memory), or the values that equal what Proxima does. Others are refused.
_TRL_NO_OP: dict[str, Any] = {
    **{k: _ANY for k in ("report_to", "run_name", "logging_dir", "logging_strategy", "logging_first_step",
                         "save_strategy", "save_steps", "save_total_limit", "overwrite_output_dir",
                         "gradient_checkpointing", "gradient_checkpointing_kwargs", "dataloader_num_workers",
                         "remove_unused_columns", "log_completions", "num_completions_to_print", "use_cpu",
                         "disable_dropout", "dataset_num_proc")},
    "push_to_hub": (False,), "bf16": (False, None), "fp16": (False,), "eval_strategy": ("no",),
    "warmup_ratio": (0, 0.0), "warmup_steps": (0,), "lr_scheduler_type": ("linear",), "weight_decay": (0, 0.0),
    "optim": ("adamw_torch", "adamw_torch_fused"), "adam_beta1": (0.9,), "adam_beta2": (0.999,),
    "packing": (False,), "label_smoothing": (0, 0.0), "use_vllm": (False,), "dataset_text_field": ("text",),
    "completion_only_loss": (None, True),
}


def _checked_fields(cls: type) -> type:
    """Wraps a config dataclass's ``__init__``: a keyword that is not one of its fields is a ``NotImplementedError``
    naming it (a TRL field Proxima does not implement, with the reason where ``_UNSUPPORTED`` has one, or a typo) —
    unless ``_TRL_NO_OP`` accepts its value as one without effect —
    and each field's value is checked against its default's type (numbers finite, counts whole and ≥ 0, flags
    bool), naming the field — rather than failing later without its name."""
    init = cls.__init__
    fields = {f.name: f for f in dataclasses.fields(cls)}

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        no_ops = {}
        for key in list(kwargs):
            if key not in fields:
                allowed = _TRL_NO_OP.get(key)
                if allowed is _ANY or (allowed is not None and kwargs[key] in allowed):
                    no_ops[key] = kwargs.pop(key)
                    continue
                why = _UNSUPPORTED.get(key, "not a field Proxima reads: a TRL field it does not implement, or a typo")
                if allowed is not None and key not in _UNSUPPORTED:
                    why = f"only {', '.join(map(repr, allowed))}, which is what Proxima does"
                raise NotImplementedError(f"{cls.__name__}({key}={kwargs[key]!r}): not supported by Proxima ({why})")
        init(self, *args, **kwargs)
        for key, value in no_ops.items():
            object.__setattr__(self, key, value)
        for name, f in fields.items():
            _check_value(cls.__name__, name, getattr(self, name), f)

    cls.__init__ = checked  # type: ignore[method-assign]
    return cls


def _check_value(owner: str, name: str, v: Any, f: "dataclasses.Field[Any]") -> None:
    """One config value against its field's type (its annotation and default)."""
    where, default, kind = f"{owner}.{name}", f.default, str(f.type)
    whole = isinstance(default, int) and not isinstance(default, bool) or ("int" in kind and "float" not in kind)
    if v is None:
        if default is not None and "Optional" not in kind:
            raise TypeError(f"{where} must not be None")
    elif isinstance(default, bool):
        if not isinstance(v, bool):
            raise TypeError(f"{where} must be True or False, got {v!r}")
    elif isinstance(v, bool) and (whole or isinstance(default, float)):
        raise TypeError(f"{where} must be a number, got {v!r}")
    elif isinstance(v, int) and whole:
        if v < 0 and not (name == "max_steps" and v == -1):
            raise ValueError(f"{where} must be ≥ 0, got {v}")
    elif isinstance(v, float):
        if whole:
            raise TypeError(f"{where} must be an integer, got {v!r}")
        if not math.isfinite(v):
            raise ValueError(f"{where} must be a finite number, got {v!r}")
    elif isinstance(default, float) and not isinstance(v, int):
        raise TypeError(f"{where} must be a number, got {v!r}")
    elif isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        if not all(math.isfinite(x) for x in v):
            raise ValueError(f"{where} must hold finite numbers, got {v!r}")


_checked_fields(GRPOConfig)


@dataclasses.dataclass
class LoraConfig:
    """PEFT's ``LoraConfig`` (the fields Proxima reads); a ``peft.LoraConfig`` works as well.

    :param r: the adapters' rank
    :param lora_alpha: the update is scaled by ``lora_alpha / r``
    :param target_modules: the projections to adapt by name (``["q_proj", "v_proj"]``), or ``"all-linear"``;
        None: PEFT's default for the model type (``q_proj``, ``v_proj``; GPT-2's ``c_attn``)
    """

    r: int = 8
    lora_alpha: float = 8
    target_modules: Optional[Union[list[str], str]] = None


def _lora_fields(peft_config: Any) -> Optional[dict[str, Any]]:
    """A LoRA config (Proxima's, PEFT's, or a dict) as the engine's fields."""
    if peft_config is None:
        return None
    get = peft_config.get if isinstance(peft_config, dict) else lambda k, d=None: getattr(peft_config, k, d)
    if str(get("peft_type", "LORA")).upper().rsplit(".", 1)[-1] != "LORA":
        raise NotImplementedError(f"peft_config: only LoRA adapters are supported, not {get('peft_type')}")
    # PEFT fields whose non-default values change the adapters: refused rather than ignored.
    for key, default in (("lora_dropout", 0.0), ("use_dora", False), ("use_rslora", False), ("bias", "none"),
                         ("init_lora_weights", True), ("lora_bias", False)):
        if get(key, default) not in (default, None):
            raise NotImplementedError(f"peft_config.{key}={get(key)!r} is not supported (only {default!r})")
    for key in ("modules_to_save", "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern",
                "exclude_modules", "target_parameters", "trainable_token_indices"):
        if get(key, None):
            raise NotImplementedError(f"peft_config.{key}={get(key)!r} is not supported (only the default, none)")
    targets = get("target_modules", None)
    targets = [targets] if isinstance(targets, str) else sorted(targets or [])
    return {"r": int(get("r", 8)), "lora_alpha": float(get("lora_alpha", 8)), "target_modules": targets}


class TrainerState:
    """What the trainer has done: ``global_step`` (optimiser steps) and ``log_history`` (one dict per generation
    batch, TRL's keys: ``reward``, ``reward_std``, ``rewards/{name}/mean``, ``completions/mean_length``, ``kl``, ...)."""

    def __init__(self) -> None:
        self.global_step = 0
        self.log_history: list[dict[str, Any]] = []


class TrainOutput(NamedTuple):
    """What ``train()`` returns, as ``transformers``' ``TrainOutput``."""

    global_step: int
    training_loss: float
    metrics: dict[str, Any]


def _rows(dataset: Any) -> list[dict[str, Any]]:
    """The dataset's rows as dicts: a ``datasets.Dataset``, a list of dicts, or a path to a JSONL file."""
    if isinstance(dataset, (str, os.PathLike)):
        with open(dataset, encoding="utf-8") as f:
            rows = []
            for i, line in enumerate(f):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{dataset}: line {i + 1} is not JSON: {e}") from None
            return rows
    if isinstance(dataset, Iterable):
        return [dict(row) for row in dataset]
    raise TypeError(f"train_dataset must be a datasets.Dataset, a list of dicts or a JSONL path, not {type(dataset).__name__}")


def _model_dir(model: Any, processing_class: Any, keep: list) -> str:
    if isinstance(model, (str, os.PathLike)):
        if not os.path.isdir(model):
            raise ValueError(
                f"model {str(model)!r} is not a directory: Proxima loads a local Hugging Face model directory "
                "(config.json, *.safetensors, tokenizer.json); download one with `huggingface-cli download ID --local-dir DIR`"
            )
        return os.fspath(model)
    if hasattr(model, "save_pretrained"):
        tmp = tempfile.TemporaryDirectory(prefix="proxima-lm-")
        keep.append(tmp)
        model.save_pretrained(tmp.name)
        if processing_class is None:
            raise ValueError("a transformers model object needs its tokenizer: pass processing_class=tokenizer")
        processing_class.save_pretrained(tmp.name)
        return tmp.name
    raise TypeError(f"model must be a directory path or a transformers model, not {type(model).__name__}")


def _engine_args(args: Any, rows: list[dict[str, Any]], peft_config: Any) -> tuple[str, list[str]]:
    """The engine's settings (``args``' fields less the Python-side ones, ``max_steps`` from ``num_train_epochs``
    when it is -1, the LoRA fields) as JSON, and the rows as JSON lines."""
    fields = dataclasses.asdict(args)
    for key in ("output_dir", "num_train_epochs", "logging_steps"):
        fields.pop(key)
    fields["max_steps"] = _steps(args, len(rows), 1)
    fields["peft_config"] = _lora_fields(peft_config)
    return json.dumps(fields), _json_lines(rows)


def _steps(args: Any, n_rows: int, completions_per_row: int) -> int:
    """``args.max_steps``, or when it is -1 the optimiser steps of ``num_train_epochs`` passes over the rows."""
    if args.max_steps > 0:
        return args.max_steps
    if args.max_steps == 0 or not args.num_train_epochs > 0:
        raise ValueError(f"max_steps ({args.max_steps}) or num_train_epochs ({args.num_train_epochs}) must be positive")
    per_step = max(args.per_device_train_batch_size * args.gradient_accumulation_steps, 1)
    return max(1, math.ceil(args.num_train_epochs * n_rows * completions_per_row / per_step))


def _json_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as JSON lines, for the engine."""
    try:
        return [json.dumps(row) for row in rows]
    except TypeError as e:
        raise TypeError(f"the dataset's columns must be JSON values (str, numbers, lists, dicts): {e}") from None


def _train_loop(engine: Any, state: TrainerState, logging_steps: int) -> TrainOutput:
    """Steps ``engine`` until it is done, keeping ``state`` and printing a row every ``logging_steps`` steps."""
    losses = []
    next_log = logging_steps
    while not engine.is_done():
        row = json.loads(engine.step())
        state.global_step = row["step"]
        state.log_history.append(row)
        losses.append(row["loss"] if "loss" in row else row["loss/policy_avg"] + row["loss/value_avg"])
        if logging_steps > 0 and state.global_step >= next_log:
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, file=sys.stdout)
            next_log += logging_steps
    loss = sum(losses) / max(len(losses), 1)
    return TrainOutput(state.global_step, loss, {"train_loss": loss})


def _reward_callables(reward_funcs: Any) -> list[Callable[..., list]]:
    """``reward_funcs`` (one callable or a list) as a non-empty list of callables."""
    funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs] if reward_funcs else []
    if not funcs:
        raise ValueError("reward_funcs: give one or more callables (prompts, completions, **kwargs) -> list[float]")
    for f in funcs:
        if not callable(f):
            raise NotImplementedError(f"reward function {f!r}: only Python callables are supported (not reward-model ids)")
    return funcs


class _TrainerBase:
    """What every trainer shares: ``train()`` runs the engine to its last step, ``save_model()`` writes the model."""

    args: Any
    state: TrainerState
    _engine: Any

    def train(self) -> TrainOutput:
        """Trains for the steps ``args`` asks for (``max_steps``, or ``num_train_epochs`` passes; PPO: ``total_episodes``).
        Returns a :class:`TrainOutput`."""
        return _train_loop(self._engine, self.state, self.args.logging_steps)

    def save_model(self, output_dir: Optional[str] = None) -> None:
        """Writes the model (PPO: the policy, not its value head) and its tokenizer's files to ``output_dir`` (default
        ``args.output_dir``) as a Hugging Face directory that ``transformers``' ``from_pretrained`` loads."""
        self._engine.save_model(output_dir if output_dir is not None else self.args.output_dir)


class GRPOTrainer(_TrainerBase):
    """TRL's ``GRPOTrainer`` on Proxima.

    :param model: a local Hugging Face model directory, or a ``transformers`` ``PreTrainedModel`` (with
        ``processing_class``)
    :param reward_funcs: a callable or a list of callables ``(prompts, completions, **kwargs) -> list[float | None]``;
        their weighted sum (``args.reward_weights``) is the reward
    :param args: a :class:`GRPOConfig` (None: the defaults)
    :param train_dataset: rows with a ``prompt`` column (a ``datasets.Dataset``, a list of dicts or a JSONL path):
        text, or a conversation (a list of ``{"role", "content"}`` messages, rendered by the tokenizer's chat template
        with the generation prompt; the reward functions then get the messages as ``prompts`` and each completion as
        ``[{"role": "assistant", "content": ...}]``, as TRL passes them); the other columns go to the reward
        functions by name
    :param processing_class: the tokenizer, only needed with a model object (the directory's ``tokenizer.json`` is
        used otherwise)
    :param peft_config: LoRA adapters to train instead of the whole model (a :class:`LoraConfig` or a
        ``peft.LoraConfig``); generation reads the adapted model, ``save_model`` writes the merged weights
    """

    def __init__(
        self,
        model: Union[str, os.PathLike, Any],
        reward_funcs: Union[Callable[..., list], list[Callable[..., list]]],
        args: Optional[GRPOConfig] = None,
        train_dataset: Any = None,
        processing_class: Any = None,
        peft_config: Any = None,
    ) -> None:
        self.args = args if args is not None else GRPOConfig()
        funcs = _reward_callables(reward_funcs)
        if train_dataset is None:
            raise ValueError("GRPOTrainer needs a train_dataset with a `prompt` column")
        rows = _rows(train_dataset)
        for i, row in enumerate(rows):
            p = row.get("prompt")
            if not (isinstance(p, str) or (isinstance(p, list) and all(isinstance(m, dict) for m in p))):
                raise ValueError(f"dataset row {i}: the `prompt` must be text or a list of messages ({{'role', 'content'}} dicts)")
        self._tmp: list = []
        model_dir = _model_dir(model, processing_class, self._tmp)
        self.state = TrainerState()
        fields = dataclasses.asdict(self.args)
        for key in ("output_dir", "num_train_epochs", "logging_steps"):
            fields.pop(key)
        fields["max_steps"] = self._max_steps(len(rows))
        fields["peft_config"] = _lora_fields(peft_config)
        lines = _json_lines(rows)
        names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
        self._engine = _RewardedTrainer("grpo", model_dir, json.dumps(fields), lines, list(zip(names, funcs)))

    def _max_steps(self, n_rows: int) -> int:
        return _steps(self.args, n_rows, self.args.num_generations * self.args.num_iterations)



@dataclasses.dataclass
class SFTConfig:
    """TRL's ``SFTConfig``: the fields Proxima reads, with TRL's defaults.

    :param output_dir: where ``save_model()`` writes by default
    :param learning_rate: Adam's step size, decayed linearly to 0 over the run
    :param max_steps: optimiser steps to take; -1 (the default) means ``num_train_epochs`` passes over the rows
    :param num_train_epochs: passes over the dataset when ``max_steps`` is -1
    :param per_device_train_batch_size: rows per micro-batch
    :param gradient_accumulation_steps: micro-batches per optimiser step
    :param max_length: rows longer than this (in tokens) are cut at the end (None: not cut)
    :param max_grad_norm: the gradient-norm clip (≤ 0: no clipping)
    :param adam_epsilon: Adam's ε
    :param seed: seeds the row order
    :param shuffle_dataset: shuffle the rows each epoch
    :param logging_steps: print a log row every this many optimiser steps (0: never)
    """

    output_dir: str = "trainer_output"
    learning_rate: float = 2e-5
    max_steps: int = -1
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_length: Optional[int] = 1024
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    seed: int = 42
    shuffle_dataset: bool = True
    logging_steps: int = 10


_checked_fields(SFTConfig)


class SFTTrainer(_TrainerBase):
    """TRL's ``SFTTrainer`` on Proxima: the loss on the ``completion`` tokens (and the EOS appended to each) of rows
    with ``prompt`` and ``completion`` columns (text, or lists of messages rendered by the chat template), or on every
    token of rows with a ``messages`` conversation (through the chat template) or a ``text`` column.

    :param model: a local Hugging Face model directory, or a ``transformers`` ``PreTrainedModel`` (with
        ``processing_class``)
    :param args: an :class:`SFTConfig` (None: the defaults)
    :param train_dataset: a ``datasets.Dataset``, a list of dicts or a JSONL path
    :param processing_class: the tokenizer, only needed with a model object
    :param peft_config: LoRA adapters to train instead of the whole model (a :class:`LoraConfig` or a
        ``peft.LoraConfig``); ``save_model`` writes the merged weights
    """

    def __init__(self, model: Union[str, os.PathLike, Any], args: Optional[SFTConfig] = None,
                 train_dataset: Any = None, processing_class: Any = None, peft_config: Any = None) -> None:
        self.args = args if args is not None else SFTConfig()
        if train_dataset is None:
            raise ValueError("SFTTrainer needs a train_dataset (prompt/completion or text rows)")
        rows = _rows(train_dataset)
        self._tmp: list = []
        model_dir = _model_dir(model, processing_class, self._tmp)
        self.state = TrainerState()
        self._engine = _Trainer("sft", model_dir, *_engine_args(self.args, rows, peft_config))



@dataclasses.dataclass
class PPOConfig:
    """TRL's ``PPOConfig`` (with ``OnPolicyConfig``'s fields): the ones Proxima reads, with TRL's defaults.

    :param output_dir: where ``save_model()`` writes by default
    :param learning_rate: Adam's step size, decayed linearly to 0 over the updates
    :param total_episodes: completions to train on (None: ``num_train_epochs`` passes over the prompts); one update
        takes ``per_device_train_batch_size * gradient_accumulation_steps * num_mini_batches`` of them
    :param num_train_epochs: passes over the prompts when ``total_episodes`` is None
    :param per_device_train_batch_size: completions per micro-batch
    :param gradient_accumulation_steps: micro-batches per optimiser step (one mini-batch)
    :param num_mini_batches: mini-batches per update
    :param num_ppo_epochs: passes over each update's completions
    :param whiten_rewards: whiten the per-token rewards before GAE
    :param kl_coef: β of the per-token KL penalty to the initial model
    :param kl_estimator: "k1" (log π_θold − log π_ref) or "k3"
    :param cliprange: ε of the ratio clip
    :param vf_coef: the value loss's weight c₁
    :param cliprange_value: the value clip
    :param gamma: the discount γ
    :param lam: GAE's λ
    :param response_length: new tokens per completion at most
    :param temperature: sampling temperature (the log-probabilities use it too, as TRL's)
    :param missing_eos_penalty: subtracted from the score of a completion that does not end with the EOS token
    :param stop_token: "eos" (generation stops at the tokenizer's EOS; None is read the same way)
    :param max_grad_norm: the gradient-norm clip (≤ 0: no clipping)
    :param adam_epsilon: Adam's ε
    :param seed: seeds the prompt order, the sampling and the mini-batch shuffles
    :param shuffle_dataset: shuffle the prompts each epoch
    :param logging_steps: print a log row every this many updates (0: never)
    """

    output_dir: str = "trainer_output"
    learning_rate: float = 3e-6
    total_episodes: Optional[int] = None
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    num_mini_batches: int = 1
    num_ppo_epochs: int = 4
    whiten_rewards: bool = False
    kl_coef: float = 0.05
    kl_estimator: str = "k1"
    cliprange: float = 0.2
    vf_coef: float = 0.1
    cliprange_value: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95
    response_length: int = 53
    temperature: float = 0.7
    missing_eos_penalty: Optional[float] = None
    stop_token: Optional[str] = "eos"
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    seed: int = 42
    shuffle_dataset: bool = True
    logging_steps: int = 10

    def __post_init__(self) -> None:
        if self.kl_estimator not in ("k1", "k3"):
            raise ValueError(f"kl_estimator must be 'k1' or 'k3', not {self.kl_estimator!r}")
        if self.stop_token not in (None, "eos"):
            raise NotImplementedError(f"stop_token={self.stop_token!r}: generation stops at the EOS token only")


_checked_fields(PPOConfig)


class PPOTrainer(_TrainerBase):
    """TRL's ``PPOTrainer`` on Proxima (RLHF-PPO): one completion per prompt sampled with the model's own weights,
    scored by reward functions written in Python (in place of TRL's reward model), a per-token KL penalty to the
    initial model, GAE on a value head over the policy's last hidden state (trained with it), and
    ``num_ppo_epochs`` passes of the clipped surrogate and the clipped value loss. Logs TRL's ``objective/scores``,
    ``objective/kl``, ``objective/rlhf_reward``, ``loss/policy_avg``, ``loss/value_avg``, ``policy/approxkl_avg``,
    ``policy/clipfrac_avg``, ``val/clipfrac_avg``, ``val/ratio``.

    :param args: a :class:`PPOConfig` (None: the defaults)
    :param processing_class: the tokenizer, only needed with a model object
    :param model: a local Hugging Face model directory, or a ``transformers`` ``PreTrainedModel``
    :param ref_model: must be None: the reference is the initial model
    :param reward_funcs: a callable or a list of callables ``(prompts, completions, **kwargs) -> list[float]`` (their
        sum is the score; every completion must get a number)
    :param train_dataset: rows with a ``prompt`` column (text or messages); the other columns go to the reward functions
    :param value_model: must be None: the value head sits on the policy
    :param peft_config: LoRA adapters to train instead of the whole model (the value head trains too)
    :param reward_model: a callable is taken as a reward function; a reward model network is not supported
    """

    def __init__(self, args: Optional[PPOConfig] = None, processing_class: Any = None,
                 model: Union[str, os.PathLike, Any] = None, ref_model: Any = None,
                 reward_funcs: Union[Callable[..., list], list[Callable[..., list]], None] = None,
                 train_dataset: Any = None, value_model: Any = None, peft_config: Any = None,
                 reward_model: Any = None) -> None:
        if ref_model is not None:
            raise NotImplementedError("ref_model: the reference is a frozen copy of the initial model; pass None")
        if value_model is not None:
            raise NotImplementedError("value_model: the value head sits on the policy's last hidden state; pass None")
        if reward_model is not None:
            if not callable(reward_model) or hasattr(reward_model, "parameters"):
                raise NotImplementedError("reward_model: a reward model network is not supported; pass reward_funcs (callables)")
            reward_funcs = [reward_model] + list(reward_funcs or [])
        funcs = _reward_callables(reward_funcs)
        if model is None or train_dataset is None:
            raise ValueError("PPOTrainer needs a model and a train_dataset with a `prompt` column")
        self.args = args if args is not None else PPOConfig()
        rows = _rows(train_dataset)
        self._tmp: list = []
        model_dir = _model_dir(model, processing_class, self._tmp)
        self.state = TrainerState()
        a = self.args
        fields = dataclasses.asdict(a)
        for key in ("output_dir", "num_train_epochs", "logging_steps", "total_episodes", "stop_token"):
            fields.pop(key)
        per_update = a.per_device_train_batch_size * a.gradient_accumulation_steps * a.num_mini_batches
        episodes = a.total_episodes if a.total_episodes is not None else math.ceil(a.num_train_epochs * len(rows))
        if episodes <= 0:
            raise ValueError(f"total_episodes ({a.total_episodes}) or num_train_epochs ({a.num_train_epochs}) must be positive")
        fields["max_steps"] = max(1, math.ceil(episodes / max(per_update, 1)))
        fields["peft_config"] = _lora_fields(peft_config)
        lines = _json_lines(rows)
        names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
        self._engine = _RewardedTrainer("ppo", model_dir, json.dumps(fields), lines, list(zip(names, funcs)))



@dataclasses.dataclass
class DPOConfig:
    """TRL's ``DPOConfig``: the fields Proxima reads, with TRL's defaults.

    :param output_dir: where ``save_model()`` writes by default
    :param learning_rate: Adam's step size, decayed linearly to 0 over the run
    :param beta: how far the model may move from the reference (higher: less); IPO's τ
    :param loss_type: "sigmoid" (DPO, the default), "hinge" or "ipo", as TRL defines them (a one-entry list too)
    :param max_steps: optimiser steps to take; -1 (the default) means ``num_train_epochs`` passes over the pairs
    :param num_train_epochs: passes over the dataset when ``max_steps`` is -1
    :param per_device_train_batch_size: pairs per micro-batch
    :param gradient_accumulation_steps: micro-batches per optimiser step
    :param max_length: prompt + answer longer than this (in tokens) is cut at the end (None: not cut)
    :param max_grad_norm: the gradient-norm clip (≤ 0: no clipping)
    :param adam_epsilon: Adam's ε
    :param seed: seeds the pair order (and LoRA's initial adapters)
    :param shuffle_dataset: shuffle the pairs each epoch
    :param logging_steps: print a log row every this many optimiser steps (0: never)
    """

    output_dir: str = "trainer_output"
    learning_rate: float = 1e-6
    beta: float = 0.1
    loss_type: Union[str, list[str]] = "sigmoid"
    max_steps: int = -1
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_length: Optional[int] = 1024
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    seed: int = 42
    shuffle_dataset: bool = True
    logging_steps: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.loss_type, (list, tuple)):
            if len(self.loss_type) != 1:
                raise NotImplementedError(f"loss_type={self.loss_type!r}: one loss type at a time (no loss_weights)")
            self.loss_type = self.loss_type[0]
        if self.loss_type not in ("sigmoid", "hinge", "ipo"):
            raise ValueError(f"loss_type must be 'sigmoid', 'hinge' or 'ipo', not {self.loss_type!r}")


_checked_fields(DPOConfig)


class DPOTrainer(_TrainerBase):
    """TRL's ``DPOTrainer`` on Proxima: Direct Preference Optimization on rows with ``prompt``, ``chosen`` and
    ``rejected`` columns, against a frozen copy of the initial model as the reference (with LoRA, the model without
    its adapters). Logs TRL's ``rewards/chosen``, ``rewards/rejected``, ``rewards/accuracies``, ``rewards/margins``,
    ``logps/chosen`` and ``logps/rejected``.

    :param model: a local Hugging Face model directory, or a ``transformers`` ``PreTrainedModel`` (with
        ``processing_class``)
    :param ref_model: must be None: the reference is the initial model
    :param args: a :class:`DPOConfig` (None: the defaults)
    :param train_dataset: a ``datasets.Dataset``, a list of dicts or a JSONL path; the three columns all text (the
        end-of-sequence token is appended to the answers) or all conversations (lists of ``{"role", "content"}``
        messages, rendered by the tokenizer's chat template)
    :param processing_class: the tokenizer, only needed with a model object
    :param peft_config: LoRA adapters to train instead of the whole model (a :class:`LoraConfig` or a
        ``peft.LoraConfig``); ``save_model`` writes the merged weights
    """

    def __init__(self, model: Union[str, os.PathLike, Any], ref_model: Any = None, args: Optional[DPOConfig] = None,
                 train_dataset: Any = None, processing_class: Any = None, peft_config: Any = None) -> None:
        if ref_model is not None:
            raise NotImplementedError("ref_model: the reference is a frozen copy of the initial model; pass None")
        self.args = args if args is not None else DPOConfig()
        if train_dataset is None:
            raise ValueError("DPOTrainer needs a train_dataset with `prompt`, `chosen` and `rejected` columns")
        rows = _rows(train_dataset)
        self._tmp: list = []
        model_dir = _model_dir(model, processing_class, self._tmp)
        self.state = TrainerState()
        self._engine = _Trainer("dpo", model_dir, *_engine_args(self.args, rows, peft_config))



class CausalLM:
    """A Hugging Face causal language model (a local directory) loaded for generation in Rust: batched, with a
    key/value cache, greedy or sampled.

    :param path: the model directory (``config.json``, safetensors weights)
    """

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self._path = os.fspath(path)
        self._engine = _CausalLm(self._path)
        with open(os.path.join(self._path, "config.json"), encoding="utf-8") as f:
            eos = json.load(f).get("eos_token_id")
        self._eos = [eos] if isinstance(eos, int) else list(eos or [])

    @classmethod
    def from_pretrained(cls, path: Union[str, os.PathLike]) -> "CausalLM":
        """``transformers``' name for loading: the same as ``CausalLM(path)``."""
        return cls(path)

    def generate(self, input_ids: list[list[int]], max_new_tokens: int = 20, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 eos_token_id: Optional[Union[int, list[int]]] = None, pad_token_id: int = 0,
                 seed: int = 0) -> list[list[int]]:
        """The new tokens for each prompt (a list of token ids per row, no padding), the stop token last where one
        came. As ``transformers``' ``generate`` (greedy unless ``do_sample``; temperature, then top-k, then top-p),
        but it returns the completions only, as lists.

        :param input_ids: the prompts, one list of token ids each (at least one token)
        :param max_new_tokens: tokens to generate at most per row
        :param do_sample: sample (True) or take the most likely token (False)
        :param temperature: the logits are divided by it before sampling (> 0)
        :param top_k: keep the k most likely tokens (0: all)
        :param top_p: keep the smallest set of most likely tokens whose probability reaches top_p (1.0: all)
        :param eos_token_id: the token(s) that end a row (default: the config's ``eos_token_id``)
        :param pad_token_id: the token left padding is made of (never attended to)
        :param seed: seeds the sampling (the same seed gives the same tokens)
        """
        rows = [list(map(int, r)) for r in input_ids]
        for name, v, kind in (("max_new_tokens", max_new_tokens, int), ("top_k", top_k, int), ("seed", seed, int),
                              ("pad_token_id", pad_token_id, int), ("temperature", temperature, (int, float)),
                              ("top_p", top_p, (int, float))):
            if isinstance(v, bool) or not isinstance(v, kind):
                raise TypeError(f"{name} must be a number, got {v!r}")
            if not math.isfinite(v) or (kind is int and v < 0):
                raise ValueError(f"{name} must be {'an integer ≥ 0' if kind is int else 'a finite number'}, got {v!r}")
        stops = self._eos if eos_token_id is None else ([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id))
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in stops):
            raise ValueError(f"eos_token_id must be token ids ≥ 0, got {eos_token_id!r}")
        sampling = dict(max_new_tokens=max_new_tokens, do_sample=bool(do_sample), temperature=float(temperature),
                        top_k=top_k, top_p=float(top_p), stop_token_ids=stops, pad_token_id=pad_token_id)
        tokens, _ = self._engine.generate(rows, json.dumps(sampling), seed)
        return tokens
