//! Time per observation of `Policy::act` on a checkpoint, one row at a time and in batches:
//! `cargo run --release -p proxima-policy --example act_timing -- CHECKPOINT [ROWS ...]`.
//! Prints one JSON line per batch size (`bench/policy_timing.sh` runs it beside onnxruntime).

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: act_timing CHECKPOINT [ROWS ...]");
        std::process::exit(2);
    };
    let policy = match proxima_policy::Policy::load(path.as_ref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let sizes: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    for rows in if sizes.is_empty() { vec![1, 1000] } else { sizes } {
        // Observations in [−1, 1), a fixed pattern (no RNG crate needed).
        let obs: Vec<f32> = (0..rows * policy.obs_dim()).map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
        let _ = policy.act(&obs).expect("acts"); // warm-up
                                                 // At least 20 calls and 2 s.
        let (start, mut reps) = (Instant::now(), 0usize);
        while reps < 20 || start.elapsed().as_secs_f64() < 2.0 {
            std::hint::black_box(policy.act(std::hint::black_box(&obs)).expect("acts"));
            reps += 1;
        }
        let per_obs_us = start.elapsed().as_secs_f64() * 1e6 / (reps * rows) as f64;
        println!(
            "{{\"impl\": \"proxima-policy\", \"rows\": {rows}, \"reps\": {reps}, \"us_per_obs\": {per_obs_us:.3}}}"
        );
    }
}
