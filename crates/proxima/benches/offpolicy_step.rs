//! One gradient step of SAC, TD3 and TQC (sampling the batch from a replay buffer, the critics' and
//! the actor's losses, backward, Adam, Polyak averaging) on each backend, with rl-zoo's networks
//! and batch (SAC and TQC 256 × 256, TD3 400 × 300, batch 256; TQC's 2 critics of 25 quantiles,
//! 2 dropped per net) on Pendulum-v1's and HalfCheetah's
//! dimensions: ms per step, steps/s, and GFLOP/s of the step's matrix products (element-wise work
//! left out): candle and the fused step on one thread (candle inside a one-thread rayon pool, as
//! the CLI runs it with `num_threads = 1`), and the fused step on two (`num_threads = 2`: the
//! critics side by side on rayon's pool). Run with `cargo bench -p proxima --bench
//! offpolicy_step`; prints a Markdown table.
//! `-- --profile N [ROW]` runs N fused steps of the table's row ROW (1–5; default 2, SAC on
//! HalfCheetah's dimensions) on one thread and nothing else (for `perf record`); anything else is
//! an error (exit 2).

use proxima::algo::offpolicy::LoopParams;
use proxima::algo::sac::{EntCoef, Sac, SacParams};
use proxima::algo::td3::{Td3, Td3Params};
use proxima::algo::tqc::Tqc;
use proxima::policy::{ActionKind, Activation, ActorKind, Backend, Network, OffPolicyShape, PolicySpec};
use proxima::replay::ReplayBuffer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const BATCH: usize = 256;

/// One benchmarked setting.
struct Case {
    name: &'static str,
    kind: ActorKind,
    obs_dim: usize,
    act_dim: usize,
    net_arch: [usize; 2],
    /// Quantiles per critic: 1 for SAC and TD3, sb3-contrib's 25 for TQC.
    quantiles: usize,
}

const CASES: [Case; 5] = [
    Case {
        name: "SAC, Pendulum-v1 (3 → 1)",
        kind: ActorKind::SquashedGaussian,
        obs_dim: 3,
        act_dim: 1,
        net_arch: [256, 256],
        quantiles: 1,
    },
    Case {
        name: "SAC, HalfCheetah (17 → 6)",
        kind: ActorKind::SquashedGaussian,
        obs_dim: 17,
        act_dim: 6,
        net_arch: [256, 256],
        quantiles: 1,
    },
    Case {
        name: "TD3, Pendulum-v1 (3 → 1)",
        kind: ActorKind::Deterministic,
        obs_dim: 3,
        act_dim: 1,
        net_arch: [400, 300],
        quantiles: 1,
    },
    Case {
        name: "TD3, HalfCheetah (17 → 6)",
        kind: ActorKind::Deterministic,
        obs_dim: 17,
        act_dim: 6,
        net_arch: [400, 300],
        quantiles: 1,
    },
    Case {
        name: "TQC, HalfCheetah (17 → 6), 2 × 25 quantiles",
        kind: ActorKind::SquashedGaussian,
        obs_dim: 17,
        act_dim: 6,
        net_arch: [256, 256],
        quantiles: 25,
    },
];

fn spec(c: &Case) -> PolicySpec {
    PolicySpec {
        cnn: None,
        obs_dim: c.obs_dim,
        action: ActionKind::Continuous { dim: c.act_dim, low: vec![-1.0; c.act_dim], high: vec![1.0; c.act_dim] },
        net_arch: c.net_arch.to_vec(),
        activation: Activation::Relu,
        shared_trunk: false,
        log_std_init: 0.0,
        ortho_init: false,
        aux_value_head: false,
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// Multiply-adds of one gradient step: forward passes of the actor (A) and of one critic (C) per
/// row, times the passes the step makes (backward = 2 forward; ∂Q/∂a alone = 1). SAC: actor on s
/// and s', 2 targets, 2 critics forward + backward, 2 critics on ã + ∂Q/∂a, actor backward = 4A +
/// 12C (TQC: the same, each critic's head M wide). TD3 (actor every 2nd step): target actor, 2 targets, 2 critics forward + backward, then
/// on every 2nd step actor + critic 0 + ∂Q/∂a + actor backward = 2.5A + 9C.
fn step_macs(c: &Case) -> f64 {
    let [h1, h2] = c.net_arch;
    let head = if c.kind == ActorKind::SquashedGaussian { 2 * c.act_dim } else { c.act_dim };
    let a = (c.obs_dim * h1 + h1 * h2 + h2 * head) as f64;
    let q = ((c.obs_dim + c.act_dim) * h1 + h1 * h2 + h2 * c.quantiles) as f64;
    BATCH as f64
        * match c.kind {
            ActorKind::SquashedGaussian => 4.0 * a + 12.0 * q,
            ActorKind::Deterministic => 2.5 * a + 9.0 * q,
        }
}

fn filled_buffer(c: &Case, rng: &mut ChaCha8Rng) -> ReplayBuffer {
    let mut rb = ReplayBuffer::new(10_000, 1, c.obs_dim, c.act_dim).unwrap();
    for _ in 0..10_000 {
        let mut v = |n: usize| (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect::<Vec<f32>>();
        let (o, o2, a, r) = (v(c.obs_dim), v(c.obs_dim), v(c.act_dim), v(1));
        rb.add(&o, &o2, &a, &r, &[false], &[false]).unwrap();
    }
    rb
}

/// SAC's, TD3's or TQC's state and networks for `c` on `backend`, its steps on `threads` threads.
fn learner(c: &Case, backend: Backend, threads: usize) -> (proxima::algo::learner::Learner, Network) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let shape = OffPolicyShape { quantiles: c.quantiles, ..OffPolicyShape::new(c.kind, 2) };
    let mut net = Network::off_policy(spec(c), shape, backend, &mut rng).unwrap();
    net.set_threads(threads);
    let (actor, critics) = net.off_policy_sizes().unwrap();
    let (sizes, rb) = ((&actor[..], &critics[..]), filled_buffer(c, &mut rng));
    let looping = LoopParams { learning_starts: 0, train_freq: 1, gradient_steps: 1, batch_size: BATCH };
    let l = match c.kind {
        ActorKind::SquashedGaussian => {
            let p = SacParams {
                looping,
                gamma: 0.99,
                tau: 0.005,
                target_update_interval: 1,
                target_entropy: -(c.act_dim as f64),
                ent_coef: EntCoef::Auto(1.0),
            };
            let sac = Sac::new(p, rb, sizes, 3e-4, 1e-8);
            if c.quantiles > 1 {
                let tqc = Tqc { sac, n_quantiles: c.quantiles, top_quantiles_to_drop_per_net: 2 };
                proxima::algo::learner::Learner::Tqc(tqc)
            } else {
                proxima::algo::learner::Learner::Sac(sac)
            }
        }
        ActorKind::Deterministic => {
            let p = Td3Params {
                looping,
                gamma: 0.99,
                tau: 0.005,
                policy_delay: 2,
                target_policy_noise: 0.2,
                target_noise_clip: 0.5,
                noise_std: 0.1,
            };
            proxima::algo::learner::Learner::Td3(Td3::new(p, rb, sizes, 1e-3, 1e-8))
        }
    };
    (l, net)
}

/// The median ms per gradient step over 9 runs of 20 steps (after 10 warm-up steps).
fn ms_per_step(c: &Case, backend: Backend, threads: usize) -> f64 {
    let (mut l, mut net) = learner(c, backend, threads);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for _ in 0..10 {
        l.gradient_step(&mut net, 3e-4, &mut rng).unwrap();
    }
    let mut times: Vec<f64> = (0..9)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..20 {
                l.gradient_step(&mut net, 3e-4, &mut rng).unwrap();
            }
            t.elapsed().as_secs_f64() * 1e3 / 20.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[4]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    match args.as_slice() {
        [] => {}
        [flag, n, case @ ..] if flag == "--profile" && case.len() <= 1 => {
            let case = case.first().map_or(Some(2), |c| c.parse::<usize>().ok());
            let (Ok(n), Some(c)) = (n.parse::<usize>(), case.filter(|c| (1..=CASES.len()).contains(c))) else {
                eprintln!("--profile takes a number of steps and a row of the table (1–{}, default 2)", CASES.len());
                std::process::exit(2);
            };
            let (mut l, mut net) = learner(&CASES[c - 1], Backend::Fused, 1);
            let mut rng = ChaCha8Rng::seed_from_u64(2);
            for _ in 0..n {
                l.gradient_step(&mut net, 3e-4, &mut rng).unwrap();
            }
            return;
        }
        other => {
            eprintln!("unknown arguments {other:?}: none, or --profile N [ROW]");
            std::process::exit(2);
        }
    }
    println!(
        "| step (batch {BATCH}) | candle ms | fused ms | fused steps/s | fused GFLOP/s | fused / candle | fused on 2 threads: ms (steps/s) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    ms_per_step(&CASES[0], Backend::Fused, 2); // rayon's pool started and warm before timing
    for c in &CASES {
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
        let candle = one.install(|| ms_per_step(c, Backend::Candle, 1));
        let fused = ms_per_step(c, Backend::Fused, 1);
        let two = ms_per_step(c, Backend::Fused, 2);
        let gflops = 2.0 * step_macs(c) / (fused * 1e-3) / 1e9;
        println!(
            "| {} | {candle:.2} | {fused:.2} | {:.0} | {gflops:.0} | {:.2}× | {two:.2} ({:.0}) |",
            c.name,
            1e3 / fused,
            candle / fused,
            1e3 / two
        );
    }
}
