//! SFT then GRPO on two-digit addition: `cargo run --release -p proxima --example lm_addition -- SFT_STEPS GRPO_STEPS [BETA] [SHUFFLE]`.
use proxima::algo::optim::Adam;
use proxima::lm::model::{LmSpec, TinyLm};
use proxima::lm::task::{split, VOCAB};
use proxima::lm::train::{accuracy, grpo_step, sft_step, GrpoConfig};
use rand::SeedableRng;

fn main() -> proxima::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let sft_steps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);
    let grpo_steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let beta: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0.04);
    let shuffle = args.get(4).is_some_and(|s| s == "shuffle");
    let dev = candle_core::Device::Cpu;
    let spec = LmSpec { vocab: VOCAB, context: 16, d_model: 64, n_heads: 4, n_layers: 2 };
    let model = TinyLm::new(spec.clone(), 1, &dev)?;
    let (train, held) = split();
    let sizes: Vec<usize> = model.named_params().iter().map(|(_, v)| v.elem_count()).collect();
    let lr: f64 = std::env::var("SFT_LR").ok().and_then(|s| s.parse().ok()).unwrap_or(1e-3);
    let mut opt = Adam::new(&sizes, lr, 1e-8);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let t0 = std::time::Instant::now();
    for step in 1..=sft_steps {
        let l = sft_step(&model, &mut opt, &train, 128, 0.0, &mut rng)?;
        if step % 50 == 0 {
            println!(
                "sft {step}: loss {l:.3}, held-out acc {:.3} ({:.0} s)",
                accuracy(&model, &held)?,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    let reference = TinyLm::new(spec, 2, &dev)?;
    reference.copy_from(&model)?;
    println!("SFT start: held-out greedy accuracy {:.3}", accuracy(&model, &held)?);
    let grpo_lr: f64 = std::env::var("GRPO_LR").ok().and_then(|s| s.parse().ok()).unwrap_or(1e-4);
    let mut opt = Adam::new(&sizes, grpo_lr, 1e-8);
    let cfg = GrpoConfig { beta, shuffle_rewards: shuffle, ..GrpoConfig::default() };
    for step in 1..=grpo_steps {
        let s = grpo_step(&model, &reference, &mut opt, &train, &cfg, &mut rng)?;
        if step % 10 == 0 {
            println!(
                "grpo {step}: reward {:.3}, flat {:.2}, kl {:.4}, held-out acc {:.3} ({:.0} s)",
                s.reward_mean,
                s.flat_fraction,
                s.kl,
                accuracy(&model, &held)?,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}
