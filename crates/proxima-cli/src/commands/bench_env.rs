//! `proxima bench-env`: an env's own steps per second under uniformly random actions.

use anyhow::Result;
use clap::Args;

#[derive(Args)]
pub struct BenchEnvArgs {
    /// Environment id (native, or gym:ID with --features gym).
    env_id: String,
    /// Steps to take.
    #[arg(long, default_value_t = 100_000)]
    steps: u64,
    /// Seed of the resets and the random actions.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// `proxima bench-env`: an env's own steps per second under uniformly random actions.
pub fn exec(a: BenchEnvArgs) -> Result<()> {
    use rand::SeedableRng;
    let BenchEnvArgs { env_id, steps, seed } = a;
    if steps == 0 {
        anyhow::bail!("--steps must be at least 1");
    }
    let mut env = proxima::env::make(&env_id)?;
    let space = env.action_space();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let t0 = std::time::Instant::now();
    env.reset(Some(seed))?;
    let (mut episodes, mut a) = (0u64, vec![0f32; space.flat_dim()]);
    for _ in 0..steps {
        let action = space.sample(&mut rng, &mut a);
        let r = env.step(action)?;
        if r.terminated || r.truncated {
            env.reset(None)?;
            episodes += 1;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    let s = if episodes == 1 { "" } else { "s" };
    println!("{env_id}: {steps} random steps ({episodes} episode{s}) in {dt:.2} s: {:.0} steps/s", steps as f64 / dt);
    Ok(())
}
