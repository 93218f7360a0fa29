//! µs per PPO minibatch update (L^CLIP with value clipping and the entropy bonus, backward,
//! global-norm clipping and Adam) of CleanRL's CartPole network (4 → 64 → 64 → 2 | 1, tanh) on
//! each backend, next to the arithmetic floor: the update's FLOP count divided by the
//! single-thread GEMM rate this machine reaches on the hidden layer's shape: the better of the
//! `gemm` crate's and the fused backend's own kernel's (`proxima_kernels::gemm::chain_gemm`),
//! both measured here and printed. Run with `cargo bench -p proxima --bench update`; prints a Markdown table.
//! `-- --fused-only` skips candle; `-- --profile ROWS` only times the fused update of ROWS rows
//! (1 to 65,536) on one thread (for `perf record`); anything else is an error (exit 2).

use proxima::algo::update::apply_gradients;
use proxima::config::{Backend, Objective};
use proxima::loss::PpoCoefs;
use proxima::optim::Optimizer;
use proxima::policy::{ActionKind, Activation, Network, Policy, PolicySpec};
use proxima::rollout::Minibatch;
use proxima_kernels::gemm::{chain_gemm, Rows, Start};
use proxima_kernels::View;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

mod common;

fn spec() -> PolicySpec {
    PolicySpec {
        obs_dim: 4,
        action: ActionKind::Discrete { n: 2 },
        net_arch: vec![64, 64],
        activation: Activation::Tanh,
        shared_trunk: false,
        log_std_init: 0.0,
        ortho_init: true,
        aux_value_head: false,
        cnn: None,
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// FLOPs of one minibatch update of `b` rows: forward 2·b·in·out per layer, ∂W the same, ∂X the
/// same for every layer but a tower's first (its input is the observation). Element-wise work
/// (activations, the loss, Adam) is left out: the floor is the matrix products.
fn flops(spec: &PolicySpec, b: usize) -> f64 {
    let shapes = spec.param_shapes();
    let mut total = 0f64;
    for (name, shape) in shapes.iter().filter(|(n, s)| n.ends_with(".weight") && s.len() == 2) {
        let mac = (b * shape[0] * shape[1]) as f64;
        let first = name.ends_with(".0.weight");
        total += 2.0 * mac * if first { 2.0 } else { 3.0 };
    }
    total
}

/// Single-thread GFLOP/s of `f(a, w, c)` computing `c[b, 64] = a[b, 64]·w[64, 64]`: the median
/// of 21 timed batches (the same statistic as the update's time, so that a noisy machine moves
/// both alike).
fn rate(b: usize, f: impl Fn(&[f32], &[f32], &mut [f32])) -> f64 {
    let (m, n, k) = (b, 64usize, 64usize);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
    let w: Vec<f32> = (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut c = vec![0f32; m * n];
    let reps = (2_000_000 / (m * n * k)).max(10);
    let mut times = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        for _ in 0..reps {
            f(&a, &w, &mut c);
        }
        times.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    std::hint::black_box(&c);
    times.sort_by(f64::total_cmp);
    2.0 * (m * n * k) as f64 / times[times.len() / 2] / 1e9
}

/// The `gemm` crate's rate on the hidden layer's shape (what the fused backend used before its
/// own kernel).
fn gemm_crate_rate(b: usize) -> f64 {
    rate(b, |a, w, c| {
        let (m, n, k) = (b, 64usize, 64usize);
        // SAFETY: every slice holds exactly the [m, k], [k, n], [m, n] row-major elements read/written.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                w.as_ptr(),
                1,
                n as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    })
}

/// The fused backend's own kernel's rate on the same shape.
fn chain_gemm_rate(b: usize) -> f64 {
    rate(b, |a, w, c| {
        let (a, w) = (View::rows(a, 64), Rows { data: w, ld: 64 });
        chain_gemm(c, (b, 64, 64), a, w, Start::Zero);
    })
}

fn minibatch(policy: &Network, b: usize, rng: &mut ChaCha8Rng) -> Minibatch {
    let obs: Vec<f32> = (0..b * 4).map(|_| rng.random_range(-1.0..1.0)).collect();
    common::minibatch_of(policy, obs, b, rng)
}

/// Median µs of one minibatch update (loss + backward + clip + Adam) on `backend`, its rows
/// split over `threads` (the fused backend's `num_threads`).
fn update_us(backend: Backend, b: usize, threads: usize) -> f64 {
    let sp = spec();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut policy = Network::new(sp.clone(), backend, &mut rng).unwrap();
    policy.set_threads(threads);
    let sizes: Vec<usize> = sp.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
    let mut opt = Optimizer::adam(&sizes, 2.5e-4, 1e-5);
    let coefs = PpoCoefs {
        clip_range: 0.2,
        clip_range_vf: Some(0.2),
        vf_coef: 0.5,
        ent_coef: 0.01,
        objective: Objective::Clip,
        kl_coef: 1.0,
    };
    let mb = minibatch(&policy, b, &mut rng);
    let reps = (200_000 / b).max(50);
    let mut times = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        for _ in 0..reps {
            policy.ppo_loss(&mb, &[], &coefs).unwrap();
            apply_gradients(&mut policy, &mut opt, Some(0.5)).unwrap();
        }
        times.push(t.elapsed().as_secs_f64() / reps as f64 * 1e6);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The most rows `--profile` takes: the network's buffers for this many rows (about ten of
/// `[rows, 64]` f32, and the minibatch) peak near 350 MB.
const MAX_PROFILE_ROWS: usize = 1 << 16;

/// What the command line asks for: the table (without candle's columns with `--fused-only`), or
/// the fused update of `--profile ROWS` rows alone. `cargo bench` adds `--bench`.
fn parse_args(args: &[String]) -> Result<(bool, Option<usize>), String> {
    let (mut fused_only, mut profile) = (false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--fused-only" => fused_only = true,
            "--bench" => {}
            "--profile" => {
                let rows = it.next().ok_or("--profile needs a number of rows")?;
                match rows.parse::<usize>() {
                    Ok(n) if (1..=MAX_PROFILE_ROWS).contains(&n) => profile = Some(n),
                    _ => {
                        return Err(format!(
                            "--profile {rows:?}: expected a number of rows from 1 to {MAX_PROFILE_ROWS}"
                        ))
                    }
                }
            }
            other => return Err(format!("unknown argument {other:?} (expected --fused-only or --profile ROWS)")),
        }
    }
    Ok((fused_only, profile))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (fused_only, profile) = parse_args(&args).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    if let Some(rows) = profile {
        println!("fused, {rows} rows, one thread: {:.1} µs", update_us(Backend::Fused, rows, 1));
        return;
    }
    let sp = spec();
    println!(
        "| batch | FLOP per update | GEMM rate, gemm crate | GEMM rate, fused kernel | floor | fused | fused ÷ floor | fused, 2 threads | candle | candle ÷ fused |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for b in [64usize, 128, 512] {
        let (crate_rate, own_rate) = (gemm_crate_rate(b), chain_gemm_rate(b));
        let (f, rate) = (flops(&sp, b), crate_rate.max(own_rate));
        let floor = f / (rate * 1e9) * 1e6;
        let fused = update_us(Backend::Fused, b, 1);
        let fused2 = update_us(Backend::Fused, b, 2);
        // With --fused-only the candle columns say so ("—") instead of printing NaN.
        let candle = if fused_only {
            ("—".to_string(), "—".to_string())
        } else {
            let c = update_us(Backend::Candle, b, 1);
            (format!("{c:.0} µs"), format!("{:.1}×", c / fused))
        };
        println!(
            "| {b} | {:.2} M | {crate_rate:.0} GFLOP/s | {own_rate:.0} GFLOP/s | {floor:.1} µs | {fused:.1} µs | {:.2}× | {fused2:.1} µs | {} | {} |",
            f / 1e6,
            fused / floor,
            candle.0,
            candle.1
        );
    }
}
