//! Supervised fine-tuning (SFT) of the tiny language model on the addition task: the masked
//! cross-entropy of the answer tokens and one optimiser step.

use crate::model::TinyLm;
use crate::sampling::{response_log_probs, SEQ_LEN};
use crate::task::{Problem, MAX_ANSWER_LEN, PAD, PROMPT_LEN};
use crate::MAX_GRAD_NORM;
use candle_core::{Device, Tensor};
use proxima::optim::{Gradients, Optimizer, Params};
use proxima::Result;
use rand::seq::IndexedRandom;
use rand::Rng;

/// The supervised loss: masked mean cross-entropy −Σ mask·log π(y_t | prefix) / Σ mask of the
/// response tokens of `tokens` `[B, SEQ_LEN]`, `mask` `[B, MAX_ANSWER_LEN]` (the model's dtype).
///
/// # Errors
/// Tensor errors.
pub fn sft_loss(model: &TinyLm, tokens: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let lp = response_log_probs(model, tokens)?;
    Ok((lp * mask)?.sum_all()?.neg()?.broadcast_div(&mask.sum_all()?.maximum(1.0)?)?)
}

/// One supervised step on `batch` problems: masked cross-entropy of the answer tokens given
/// the prompt. With probability `label_noise` a problem's answer is replaced by a wrong one
/// (a random other sum), to stop pre-training at a partly-correct policy. Returns the loss.
///
/// # Errors
/// Tensor errors; `NonFinite` from the optimiser.
pub fn sft_step<R: Rng + ?Sized>(
    model: &TinyLm,
    opt: &mut Optimizer,
    problems: &[Problem],
    batch: usize,
    label_noise: f64,
    rng: &mut R,
) -> Result<f64> {
    let picked: Vec<Problem> = (0..batch).map(|_| *problems.choose(rng).expect("non-empty training set")).collect();
    let mut tokens = vec![PAD; batch * SEQ_LEN];
    let mut mask = vec![0f32; batch * MAX_ANSWER_LEN];
    for (i, p) in picked.iter().enumerate() {
        let answer = if rng.random::<f64>() < label_noise {
            Problem { a: rng.random_range(0..100), b: rng.random_range(0..100) }.answer()
        } else {
            p.answer()
        };
        tokens[i * SEQ_LEN..i * SEQ_LEN + PROMPT_LEN].copy_from_slice(&p.prompt());
        tokens[i * SEQ_LEN + PROMPT_LEN..i * SEQ_LEN + PROMPT_LEN + answer.len()].copy_from_slice(&answer);
        mask[i * MAX_ANSWER_LEN..i * MAX_ANSWER_LEN + answer.len()].fill(1.0);
    }
    let dev = Device::Cpu;
    let t = Tensor::from_vec(tokens, (batch, SEQ_LEN), &dev)?;
    let m = Tensor::from_vec(mask, (batch, MAX_ANSWER_LEN), &dev)?;
    let loss = sft_loss(model, &t, &m)?;
    let l = loss.to_scalar::<f32>()? as f64;
    opt.step(
        Params::Vars { vars: &model.named_params(), grads: Gradients::Store(&loss.backward()?) },
        Some(MAX_GRAD_NORM),
    )?;
    Ok(l)
}
