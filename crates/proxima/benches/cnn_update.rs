//! The Nature CNN's PPO minibatch update (`paper-atari`: 256 rows of 4 × 84 × 84 frames, 6
//! actions; L^CLIP, backward, global-norm clipping, Adam) and its rollout inference (8 rows) on
//! each backend, in ms and GFLOP/s of the network's matrix products (element-wise work left
//! out), next to the fused kernel's single-thread rate on conv1's shape. Run with `cargo bench -p
//! proxima --bench cnn_update`; prints a Markdown table. `-- --profile N [--threads T]` runs N
//! fused updates on T threads (1) and nothing else (for `perf record`); anything else is an error
//! (exit 2).

use proxima::algo::update::apply_gradients;
use proxima::config::{Backend, Objective};
use proxima::loss::PpoCoefs;
use proxima::optim::Optimizer;
use proxima::policy::{ActionKind, Activation, ImageShape, Network, Policy, PolicySpec, NATURE_CONVS};
use proxima::rollout::Minibatch;
use proxima_kernels::gemm::{chain_gemm, Rows, Start};
use proxima_kernels::View;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

mod common;

const IMAGE: ImageShape = ImageShape { channels: 4, height: 84, width: 84 };

fn spec() -> PolicySpec {
    PolicySpec {
        obs_dim: 4 * 84 * 84,
        action: ActionKind::Discrete { n: 6 },
        net_arch: vec![],
        activation: Activation::Relu,
        shared_trunk: true,
        log_std_init: 0.0,
        ortho_init: true,
        aux_value_head: false,
        cnn: Some(IMAGE),
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// Multiply-adds of one row's forward pass (each convolution's positions × window × channels, the
/// dense layer and the heads), and conv1's share (its ∂x is never computed: the pixels).
fn forward_macs() -> (f64, f64) {
    let outs = IMAGE.nature_outputs().unwrap();
    let mut c_in = IMAGE.channels;
    let mut macs = 0f64;
    for (&(c, k, _), &(_, h, w)) in NATURE_CONVS.iter().zip(&outs) {
        macs += (h * w * c_in * k * k * c) as f64;
        c_in = c;
    }
    let (c, h, w) = outs[2];
    let (c1, h1, w1) = outs[0];
    let k1 = NATURE_CONVS[0].1;
    (macs + (c * h * w * 512 + 512 * 7) as f64, (h1 * w1 * IMAGE.channels * k1 * k1 * c1) as f64)
}

fn minibatch(policy: &Network, b: usize, rng: &mut ChaCha8Rng) -> Minibatch {
    let obs: Vec<f32> = (0..b * IMAGE.channels * 84 * 84).map(|_| rng.random_range(0..=255u8) as f32).collect();
    common::minibatch_of(policy, obs, b, rng)
}

const COEFS: PpoCoefs = PpoCoefs {
    clip_range: 0.1,
    clip_range_vf: None,
    vf_coef: 1.0,
    ent_coef: 0.01,
    objective: Objective::Clip,
    kl_coef: 1.0,
};

/// The median of `f`'s times over `reps` runs, in ms.
fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// ms of one 256-row minibatch update and of one 8-row inference on `backend`, `threads`.
fn times(backend: Backend, threads: usize, reps: usize) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut policy = Network::new(spec(), backend, &mut rng).unwrap();
    policy.set_threads(threads);
    let sizes: Vec<usize> = spec().param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
    let mut opt = Optimizer::adam(&sizes, 2.5e-4, 1e-5);
    let mut mb = minibatch(&policy, 256, &mut rng);
    let obs = mb.observations[..8 * spec().obs_dim].to_vec();
    if policy.reads_byte_pixels() {
        // The frames as PPO's minibatches give them to this policy: the rollout's bytes.
        mb.pixels = mb.observations.iter().map(|&v| v as u8).collect();
        mb.observations.clear();
    }
    let update = median_ms(reps, || {
        policy.ppo_loss(&mb, &[], &COEFS).unwrap();
        apply_gradients(&mut policy, &mut opt, Some(0.5)).unwrap();
    });
    let infer = median_ms(reps * 4, || {
        policy.act(&obs, false, &mut rng).unwrap();
    });
    (update, infer)
}

/// Single-thread GFLOP/s of `chain_gemm` on conv1's forward shape for 8 samples: `[8·400, 256] ·
/// [256, 32]`.
fn conv1_rate() -> f64 {
    let (m, n, k) = (8 * 400, 32, 256);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
    let w: Vec<f32> = (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut c = vec![0f32; m * n];
    let ms = median_ms(51, || chain_gemm(&mut c, (m, n, k), View::rows(&a, k), Rows { data: &w, ld: n }, Start::Zero));
    2.0 * (m * n * k) as f64 / (ms * 1e6)
}

fn parse_args(args: &[String]) -> Result<(Option<usize>, usize), String> {
    let (mut profile, mut threads) = (None, 1);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => {}
            "--profile" => {
                let n = it.next().ok_or("--profile needs a number of updates")?;
                profile = Some(
                    n.parse::<usize>()
                        .ok()
                        .filter(|n| (1..=100_000).contains(n))
                        .ok_or_else(|| format!("--profile {n:?}: expected a number of updates from 1 to 100000"))?,
                );
            }
            "--threads" => {
                let t = it.next().ok_or("--threads needs a number")?;
                threads = t
                    .parse::<usize>()
                    .ok()
                    .filter(|t| (1..=64).contains(t))
                    .ok_or_else(|| format!("--threads {t:?}: expected a number of threads from 1 to 64"))?;
            }
            other => return Err(format!("unknown argument {other:?} (expected --profile N [--threads T])")),
        }
    }
    if threads > 1 && profile.is_none() {
        return Err("--threads goes with --profile".into());
    }
    Ok((profile, threads))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (profile, threads) = parse_args(&args).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    if let Some(n) = profile {
        let (update, infer) = times(Backend::Fused, threads, n);
        println!("fused, {threads} thread(s): update {update:.1} ms, inference of 8 rows {infer:.2} ms");
        return;
    }
    let (macs, conv1) = forward_macs();
    // An update: forward, ∂W and ∂x (but conv1's ∂x) over 256 rows.
    let update_flop = 2.0 * 256.0 * (3.0 * macs - conv1);
    let infer_flop = 2.0 * 8.0 * macs;
    println!("conv1's forward shape on chain_gemm, one thread: {:.0} GFLOP/s", conv1_rate());
    println!("| backend | threads | update (256 rows) | GFLOP/s | inference (8 rows) | GFLOP/s |");
    println!("|---|---|---|---|---|---|");
    for (backend, threads) in [(Backend::Fused, 1), (Backend::Fused, 2), (Backend::Candle, 1)] {
        let (u, i) = times(backend, threads, 7);
        println!(
            "| {} | {threads} | {u:.1} ms | {:.0} | {i:.2} ms | {:.0} |",
            backend.as_str(),
            update_flop / (u * 1e6),
            infer_flop / (i * 1e6)
        );
    }
}
