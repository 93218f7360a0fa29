//! What the Hugging Face trainers share: Adam over the trainable parameters (the LoRA adapters
//! when the model has them, else every weight) with TRL's defaults — the learning rate decayed
//! linearly to 0 over `max_steps` (`lr_scheduler_type` "linear", no warm-up) and the global
//! gradient-norm clip — and the seeded RNG that draws the adapters, the data order and the samples.

use super::lora::LoraConfig;
use super::model::CausalLm;
use candle_core::Var;
use proxima::optim::{Gradients, LrSchedule, Optimizer, Params, StepInfo};
use proxima::Result;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Adam with its schedule, and the trainer's RNG.
pub struct TrainerOptim {
    opt: Optimizer,
    /// Parameters trained beside the model's (PPO's value head), after them.
    extra: Vec<(String, Var)>,
    schedule: LrSchedule,
    max_grad_norm: f64,
    /// Seeded from the trainer's `seed`.
    pub rng: ChaCha8Rng,
}

impl TrainerOptim {
    /// Adds `peft`'s adapters to `model` (drawn from the RNG seeded with `seed`), then Adam over what
    /// trains: learning rate `lr` decayed linearly over `max_steps`, ε `eps`.
    ///
    /// # Errors
    /// `Config` for a negative or non-finite learning rate, a non-positive ε, a NaN clip or no
    /// steps; [`CausalLm::add_lora`]'s.
    pub fn new(
        model: &mut CausalLm,
        peft: Option<&LoraConfig>,
        (lr, eps, max_grad_norm): (f64, f64, f64),
        max_steps: u64,
        seed: u64,
    ) -> Result<TrainerOptim> {
        if !(lr >= 0.0 && lr.is_finite()) || !(eps > 0.0 && eps.is_finite()) || max_grad_norm.is_nan() || max_steps == 0
        {
            return Err(proxima::ProximaError::Config(format!(
                "learning_rate must be a finite number ≥ 0 (got {lr}), adam_epsilon positive (got {eps}), max_grad_norm a number (got {max_grad_norm}; ≤ 0: no clipping) and max_steps positive (got {max_steps})"
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        if let Some(lora) = peft {
            model.add_lora(lora, &mut rng)?;
        }
        let sizes: Vec<usize> = model.trainable_params().iter().map(|(_, v)| v.elem_count()).collect();
        let opt = Optimizer::adam(&sizes, lr, eps);
        let schedule = LrSchedule::Linear { initial: lr, total: max_steps };
        Ok(TrainerOptim { opt, extra: Vec::new(), schedule, max_grad_norm, rng })
    }

    /// Trains `extra` beside the model's parameters (before the first step: Adam is made anew).
    pub fn add_params(&mut self, model: &CausalLm, extra: Vec<(String, Var)>) {
        self.extra = extra;
        let sizes: Vec<usize> = self.params(model).iter().map(|(_, v)| v.elem_count()).collect();
        self.opt = Optimizer::adam(&sizes, self.opt.lr, self.opt.eps);
    }

    /// What trains, in the order of the gradients [`TrainerOptim::step`] takes: `model`'s
    /// trainable parameters, then the extra ones.
    pub fn params(&self, model: &CausalLm) -> Vec<(String, Var)> {
        let mut p = model.trainable_params();
        p.extend(self.extra.iter().cloned());
        p
    }

    /// Adam's state: moments, step count, step size (what a checkpoint saves).
    pub fn adam(&self) -> &Optimizer {
        &self.opt
    }

    /// Adam's state, to restore from a checkpoint.
    pub fn adam_mut(&mut self) -> &mut Optimizer {
        &mut self.opt
    }

    /// One Adam step of `model`'s trainable parameters on `grads` (in their order), at the learning
    /// rate of step `done`; returns the step's measurements and the learning rate used.
    ///
    /// # Errors
    /// `NonFinite` from the optimiser (the parameters are then left as they were).
    pub fn step(&mut self, model: &CausalLm, grads: &[Option<Vec<f32>>], done: u64) -> Result<(StepInfo, f64)> {
        self.opt.lr = self.schedule.at(done);
        let params = self.params(model);
        // transformers' Trainer clips only for max_grad_norm > 0.
        let clip = Some(self.max_grad_norm).filter(|&c| c > 0.0);
        let info = self.opt.step(Params::Vars { vars: &params, grads: Gradients::Host(grads) }, clip)?;
        Ok((info, self.opt.lr))
    }
}
