//! What the online trainers (GRPO, PPO) share between sampling and the loss: a dataset row's
//! prompt as token ids (text with the tokenizer's special tokens; messages through the chat
//! template, which writes its own, as TRL tokenizes them), and the reward functions' scores of a
//! batch of completions.

use super::grpo::RewardFunction;
use super::tokenizer::HfTokenizer;
use proxima::{ProximaError, Result};
use serde_json::{Map, Value};

/// Checks what an online trainer (`what`: "GRPO", "PPO") starts from: at least one reward
/// function, a dataset with rows, each with a `prompt` of text or of messages, and — for the
/// conversational ones — a chat template that renders each; every prompt (cut to
/// `max_prompt_length`) with `max_new` tokens after it within the model's `positions`.
///
/// # Errors
/// `Config` naming what is missing (the first row without a prompt); the chat template's and the
/// tokenizer's errors; `InvalidArgument` for a prompt too long for the model.
pub fn check_prompts(
    what: &str,
    n_funcs: usize,
    dataset: &[Map<String, Value>],
    tok: &HfTokenizer,
    (max_prompt_length, max_new, positions): (Option<usize>, usize, usize),
) -> Result<()> {
    if n_funcs == 0 {
        return Err(ProximaError::Config(format!("{what} needs at least one reward function")));
    }
    if dataset.is_empty() {
        return Err(ProximaError::Config("the training dataset is empty".into()));
    }
    if let Some(i) =
        dataset.iter().position(|row| !matches!(row.get("prompt"), Some(Value::String(_) | Value::Array(_))))
    {
        return Err(ProximaError::Config(format!(
            "dataset row {i} has no `prompt` column of text or of messages ([{{\"role\": ..., \"content\": ...}}])"
        )));
    }
    for (i, row) in dataset.iter().enumerate() {
        let at_row = |e| match e {
            ProximaError::InvalidArgument(m) => ProximaError::InvalidArgument(format!("dataset row {i}: {m}")),
            e => e,
        };
        let (_, ids) = encode_prompt(tok, row, max_prompt_length).map_err(at_row)?;
        if ids.len() + max_new > positions {
            return Err(ProximaError::InvalidArgument(format!(
                "dataset row {i}: a prompt of {} tokens and {max_new} new ones exceed the model's {positions} positions (shorten it, or set max_prompt_length or the completion length)",
                ids.len()
            )));
        }
    }
    Ok(())
}

/// The prompt of `row` as text (what reward functions get) and as ids, keeping the last
/// `max_prompt_length` tokens when it is given.
///
/// # Errors
/// The tokenizer's and chat template's errors.
pub fn encode_prompt(
    tok: &HfTokenizer,
    row: &Map<String, Value>,
    max_prompt_length: Option<usize>,
) -> Result<(String, Vec<u32>)> {
    let (text, special) = match &row["prompt"] {
        p @ Value::Array(_) => (tok.apply_chat_template(p, true)?, false),
        p => (p.as_str().unwrap_or("").to_string(), true),
    };
    let ids = tok.encode(&text, special)?;
    let keep = max_prompt_length.map_or(ids.len(), |m| m.min(ids.len()));
    Ok((text, ids[ids.len() - keep..].to_vec()))
}

/// Each reward function's rewards for the completions (NaN read as `None`, "not scored").
///
/// # Errors
/// A function's own error; `InvalidArgument` when it returns another number of rewards than
/// there are completions, or an infinite one.
pub fn score(
    funcs: &mut [Box<dyn RewardFunction>],
    prompts: &[String],
    completions: &[String],
    ids: &[Vec<u32>],
    columns: &[Map<String, Value>],
) -> Result<Vec<Vec<Option<f64>>>> {
    let mut out = Vec::with_capacity(funcs.len());
    for f in funcs.iter_mut() {
        let r = f.call(prompts, completions, ids, columns)?;
        if r.len() != completions.len() {
            return Err(ProximaError::InvalidArgument(format!(
                "reward function `{}` returned {} rewards for {} completions",
                f.name(),
                r.len(),
                completions.len()
            )));
        }
        if let Some(k) = r.iter().position(|x| x.is_some_and(f64::is_infinite)) {
            return Err(ProximaError::InvalidArgument(format!(
                "reward function `{}` returned {} for completion {k}: rewards must be finite (None or NaN: not scored)",
                f.name(),
                r[k].unwrap_or_default()
            )));
        }
        out.push(r.into_iter().map(|x| x.filter(|v| !v.is_nan())).collect());
    }
    Ok(out)
}
