//! The Nature CNN (`policy = "CnnPolicy"`) on both backends against PyTorch in float64: the same
//! weights and a fixed batch of uint8 frames give the same logits and values, PPO loss and
//! gradient of every parameter (1e-5 relative to each tensor's largest entry) as CleanRL's
//! `ppo_atari.py` `Agent` written with `torch.nn.functional`, and the loss that `ppo_loss` defines
//! (L^CLIP with value clipping and the entropy bonus). The fused backend against candle (no
//! torch needed): loss, gradients, an Adam step and inference to 1e-5, the same bits on one
//! thread and two, and checkpoints crossing backends.
//!
//! The reference is computed here by the Python of `PROXIMA_PYTHON` (with torch, which CI's test
//! venv has through Stable-Baselines3): the test is ignored by a plain `cargo test`, run by
//! `cargo test -- --include-ignored` (as `.ci/run` does), where it fails without torch.

use proxima::algo::update::apply_gradients;
use proxima::loss::{Objective, PpoCoefs};
use proxima::optim::Optimizer;
use proxima::policy::{ActionKind, Activation, Backend, ImageShape, Network, Policy, PolicySpec};
use proxima::rollout::Minibatch;
use rand::{Rng, SeedableRng};
use std::process::Command;

#[path = "support/backends.rs"]
mod backends;
use backends::assert_close;

const REFERENCE: &str = r#"
import json, sys
import torch
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
d = json.load(open(sys.argv[1]))
p = {k: torch.tensor(v["data"]).reshape(v["shape"]).requires_grad_() for k, v in d["params"].items()}
c, h, w = d["image"]
b = len(d["actions"])
x = torch.tensor(d["obs"]).reshape(b, c, h, w) / 255.0
for i, s in ((0, 4), (2, 2), (4, 1)):
    x = F.relu(F.conv2d(x, p[f"network.{i}.weight"], p[f"network.{i}.bias"], stride=s))
x = F.relu(F.linear(x.flatten(1), p["network.7.weight"], p["network.7.bias"]))
logits = F.linear(x, p["actor.weight"], p["actor.bias"])
values = F.linear(x, p["critic.weight"], p["critic.bias"]).squeeze(1)
logp_all = torch.log_softmax(logits, 1)
logp = logp_all.gather(1, torch.tensor(d["actions"]).unsqueeze(1)).squeeze(1)
entropy = -(logp_all.exp() * logp_all).sum(1)
t = lambda k: torch.tensor(d[k])
ratio = (logp - t("old_log_probs")).exp()
adv, eps = t("advantages"), d["clip_range"]
pg = -torch.min(adv * ratio, adv * ratio.clamp(1 - eps, 1 + eps)).mean()
v_clipped = t("old_values") + (values - t("old_values")).clamp(-d["clip_range_vf"], d["clip_range_vf"])
vl = 0.5 * torch.max((values - t("returns")) ** 2, (v_clipped - t("returns")) ** 2).mean()
loss = pg + d["vf_coef"] * vl - d["ent_coef"] * entropy.mean()
loss.backward()
out = {"logits": logits.flatten().tolist(), "values": values.tolist(), "parts": [loss.item(), pg.item(), vl.item(), entropy.mean().item()],
       "grads": {k: v.grad.flatten().tolist() for k, v in p.items()}}
json.dump(out, open(sys.argv[2], "w"))
"#;

/// The Python of `PROXIMA_PYTHON` (else `python3`); panics when it has no torch.
fn python_with_torch() -> String {
    let py = std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py).args(["-c", "import torch"]).output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "{py} cannot `import torch`: this test needs it (set PROXIMA_PYTHON to a Python with torch)");
    py
}

/// `max |a − b| / max |b|` (0 for an all-zero `b` equal to `a`).
fn rel_err(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs()));
    let err = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((*x as f64 - y).abs()));
    if scale == 0.0 {
        err
    } else {
        err / scale
    }
}

fn f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
#[ignore = "needs a Python with torch (PROXIMA_PYTHON; .ci/run installs it with stable-baselines3)"]
fn the_nature_cnn_equals_pytorch_in_float64_on_both_backends() {
    let py = python_with_torch();
    for backend in [Backend::Candle, Backend::Fused] {
        println!("{backend:?}");
        nature_cnn_against_pytorch(&py, backend);
    }
}

fn nature_cnn_against_pytorch(py: &str, backend: Backend) {
    // A non-square image catches a height/width mix-up: 44 × 40 → 10 × 9 → 4 × 3 → 2 × 1.
    let image = ImageShape { channels: 4, height: 44, width: 40 };
    let obs_dim = 4 * 44 * 40;
    let spec = PolicySpec {
        obs_dim,
        action: ActionKind::Discrete { n: 6 },
        net_arch: vec![],
        activation: Activation::Relu,
        shared_trunk: true,
        log_std_init: 0.0,
        ortho_init: true,
        aux_value_head: false,
        cnn: Some(image),
        recurrent: None,
        inputs: Vec::new(),
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut net = Network::new(spec.clone(), backend, &mut rng).unwrap();
    assert_eq!(net.backend(), backend);
    let shapes = spec.param_shapes();
    assert_eq!(shapes[0], ("network.0.weight".to_string(), vec![32, 4, 8, 8]));
    assert_eq!(shapes[6], ("network.7.weight".to_string(), vec![512, 128]));
    let b = 5;
    let obs: Vec<f32> = (0..b * obs_dim).map(|_| rng.random_range(0..=255u8) as f32).collect();
    let normal = |rng: &mut rand_chacha::ChaCha8Rng| -> f32 { rng.random_range(-1.5..1.5) };
    let mb = Minibatch {
        len: b,
        observations: obs.clone(),
        actions: (0..b).map(|_| rng.random_range(0..6) as f32).collect(),
        old_log_probs: (0..b).map(|_| -1.79 + 0.2 * normal(&mut rng)).collect(),
        advantages: (0..b).map(|_| normal(&mut rng)).collect(),
        old_values: (0..b).map(|_| 0.1 * normal(&mut rng)).collect(),
        returns: (0..b).map(|_| normal(&mut rng)).collect(),
        old_head: vec![],
        action_masks: Vec::new(),
        sequences: None,
        pixels: Vec::new(),
    };
    let coefs = COEFS; // the reference below hard-codes these values
    let (head, _) = net.dist_params_host(&obs).unwrap();
    let values = net.predict_values(&obs).unwrap();
    let report = net.ppo_loss(&mb, &[], &coefs).unwrap();
    let grads = net.backward().unwrap();
    let params = net.params().unwrap();

    let dir = std::env::temp_dir().join(format!("proxima-cnn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let named: serde_json::Map<String, serde_json::Value> =
        shapes.iter().zip(&params).map(|((n, s), v)| (n.clone(), serde_json::json!({"shape": s, "data": v}))).collect();
    let input = serde_json::json!({
        "params": named, "image": [4, 44, 40], "obs": obs, "actions": mb.actions.iter().map(|a| *a as i64).collect::<Vec<_>>(),
        "old_log_probs": mb.old_log_probs, "advantages": mb.advantages, "old_values": mb.old_values, "returns": mb.returns,
        "clip_range": 0.1, "clip_range_vf": 0.1, "vf_coef": 0.5, "ent_coef": 0.01,
    });
    let (inp, out) = (dir.join("in.json"), dir.join("out.json"));
    std::fs::write(&inp, input.to_string()).unwrap();
    let run = Command::new(py).args(["-c", REFERENCE, inp.to_str().unwrap(), out.to_str().unwrap()]).output().unwrap();
    assert!(run.status.success(), "the PyTorch reference failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let want: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();

    let tol = 1e-5;
    for (what, got, want) in [
        ("logits", head, f64s(&want["logits"])),
        ("values", values, f64s(&want["values"])),
        ("loss parts", report.values.to_vec(), f64s(&want["parts"])),
    ] {
        let e = rel_err(&got, &want);
        println!("{what}: relative error {e:.2e}");
        assert!(e <= tol, "{backend:?} {what}: relative error {e:.2e} > {tol:.0e}");
    }
    for ((name, _), g) in shapes.iter().zip(&grads) {
        let g = g.as_ref().unwrap_or_else(|| panic!("{name}: no gradient"));
        let e = rel_err(g, &f64s(&want["grads"][name]));
        println!("∇ {name}: relative error {e:.2e}");
        assert!(e <= tol, "{backend:?} ∇ {name}: relative error {e:.2e} > {tol:.0e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn cnn_spec(image: ImageShape, action: ActionKind) -> PolicySpec {
    PolicySpec {
        obs_dim: image.channels * image.height * image.width,
        action,
        net_arch: vec![],
        activation: Activation::Relu,
        shared_trunk: true,
        log_std_init: -0.3,
        ortho_init: true,
        aux_value_head: false,
        cnn: Some(image),
        recurrent: None,
        inputs: Vec::new(),
    }
}

/// A minibatch of `b` random frames with actions sampled from `policy`, old log-probs shifted by
/// ±0.3 (ratios on both sides of the clip range), old values ±0.05 from V (some beyond ε_v),
/// and π_θold's head a perturbation of the current one.
fn cnn_minibatch(policy: &dyn Policy, b: usize, seed: u64) -> (Minibatch, Vec<f32>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let obs: Vec<f32> = (0..b * policy.spec().obs_dim).map(|_| rng.random_range(0..=255u8) as f32).collect();
    let out = policy.act(&obs, false, &mut rng).unwrap();
    let (head, log_std) = policy.dist_params_host(&obs).unwrap();
    let mut jitter = |v: &[f32], s: f32| v.iter().map(|x| x + rng.random_range(-s..s)).collect::<Vec<_>>();
    let mb = Minibatch {
        len: b,
        observations: obs,
        actions: out.actions,
        old_log_probs: jitter(&out.log_probs, 0.3),
        advantages: jitter(&vec![0.0; b], 2.0),
        old_values: jitter(&out.values, 0.05),
        returns: jitter(&out.values, 1.0),
        old_head: jitter(&head, 0.2),
        action_masks: Vec::new(),
        sequences: None,
        pixels: Vec::new(),
    };
    (mb, jitter(&log_std, 0.1))
}

fn both_backends(spec: &PolicySpec, seed: u64) -> (Network, Network) {
    let c = Network::new(spec.clone(), Backend::Candle, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).unwrap();
    let f = Network::new(spec.clone(), Backend::Fused, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).unwrap();
    assert_eq!(c.params().unwrap(), f.params().unwrap(), "the same initial parameters from one seed");
    (c, f)
}

const COEFS: PpoCoefs = PpoCoefs {
    clip_range: 0.1,
    clip_range_vf: Some(0.1),
    vf_coef: 0.5,
    ent_coef: 0.01,
    objective: Objective::Clip,
    kl_coef: 0.0,
};

#[test]
fn the_fused_cnn_equals_candle_in_loss_gradients_step_and_inference() {
    let discrete = ActionKind::Discrete { n: 6 };
    let gaussian = ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] };
    let cases = [
        ("84×84 Atari, discrete", ImageShape { channels: 4, height: 84, width: 84 }, discrete.clone(), 2),
        ("44×40, discrete", ImageShape { channels: 4, height: 44, width: 40 }, discrete, 7),
        ("37×50 one channel, Gaussian", ImageShape { channels: 1, height: 37, width: 50 }, gaussian, 5),
    ];
    for (what, image, action, b) in cases {
        let spec = cnn_spec(image, action);
        let (mut c, mut f) = both_backends(&spec, 9);
        let (mb, old_log_std) = cnn_minibatch(&c, b, 10);
        let (hc, _) = c.dist_params_host(&mb.observations).unwrap();
        assert_close(&format!("{what}: head"), &f.dist_params_host(&mb.observations).unwrap().0, &hc, 1e-5);
        let vc = c.predict_values(&mb.observations).unwrap();
        assert_close(&format!("{what}: V(s)"), &f.predict_values(&mb.observations).unwrap(), &vc, 1e-5);
        for (lname, ppo) in [("PPO", true), ("A2C", false)] {
            let eval = |p: &mut Network| {
                if ppo {
                    p.ppo_loss(&mb, &old_log_std, &COEFS).unwrap().values
                } else {
                    p.a2c_loss(&mb, 0.5, 0.01).unwrap().values
                }
            };
            let (lc, lf) = (eval(&mut c), eval(&mut f));
            assert_close(&format!("{what}, {lname}: loss parts"), &lf, &lc, 1e-5);
            let (gc, gf) = (c.backward().unwrap(), f.backward().unwrap());
            for ((name, gc), gf) in c.param_names().iter().zip(&gc).zip(&gf) {
                let (gc, gf) = (gc.as_ref().unwrap(), gf.as_ref().unwrap());
                assert!(gf.iter().any(|&g| g != 0.0), "{what}, {lname}: ∂L/∂{name} is all zero");
                assert_close(&format!("{what}, {lname}: ∂L/∂{name}"), gf, gc, 1e-5);
            }
        }
        let sizes: Vec<usize> = spec.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
        let (mut oc, mut of) = (Optimizer::adam(&sizes, 1e-3, 1e-5), Optimizer::adam(&sizes, 1e-3, 1e-5));
        c.ppo_loss(&mb, &old_log_std, &COEFS).unwrap();
        f.ppo_loss(&mb, &old_log_std, &COEFS).unwrap();
        let (ic, i_f) = (
            apply_gradients(&mut c, &mut oc, Some(0.5)).unwrap(),
            apply_gradients(&mut f, &mut of, Some(0.5)).unwrap(),
        );
        assert!((ic.grad_norm - i_f.grad_norm).abs() <= 1e-5 * ic.grad_norm, "{what}: grad norm");
        let (pc, pf) = (c.params().unwrap().concat(), f.params().unwrap().concat());
        assert_close(&format!("{what}: θ after one Adam step"), &pf, &pc, 1e-5);
        // A deterministic act after the step: the same modes.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let (ac, af) =
            (c.act(&mb.observations, true, &mut rng).unwrap(), f.act(&mb.observations, true, &mut rng).unwrap());
        assert_close(&format!("{what}: deterministic actions"), &af.actions, &ac.actions, 1e-5);
    }
}

#[test]
fn the_fused_cnn_reads_a_minibatchs_bytes_as_it_reads_their_floats() {
    let spec = cnn_spec(ImageShape { channels: 4, height: 44, width: 40 }, ActionKind::Discrete { n: 4 });
    let (mut c, mut f) = both_backends(&spec, 4);
    assert!(f.reads_byte_pixels() && !c.reads_byte_pixels(), "the fused CNN reads bytes, candle floats");
    let (floats, old_log_std) = cnn_minibatch(&f, 6, 5);
    let pixels: Vec<u8> = floats.observations.iter().map(|&v| v as u8).collect();
    let bytes = Minibatch { observations: Vec::new(), pixels, ..floats.clone() };
    for threads in [1, 2] {
        f.set_threads(threads);
        let mut loss_and_grads = |mb: &Minibatch| {
            let ppo = (f.ppo_loss(mb, &old_log_std, &COEFS).unwrap().values, f.backward().unwrap());
            (ppo, f.a2c_loss(mb, 0.5, 0.01).unwrap().values, f.backward().unwrap())
        };
        assert_eq!(loss_and_grads(&bytes), loss_and_grads(&floats), "{threads} threads: the same bits");
    }
    // Bytes where floats are read are refused, not read as zero observations.
    let e = c.ppo_loss(&bytes, &old_log_std, &COEFS).unwrap_err().to_string();
    assert!(!e.is_empty());
    let mlp = cnn_spec(ImageShape { channels: 1, height: 1, width: 8 }, ActionKind::Discrete { n: 2 });
    let mlp = PolicySpec { cnn: None, net_arch: vec![8], ..mlp };
    let mut m = Network::new(mlp, Backend::Fused, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1)).unwrap();
    let e = m.ppo_loss(&Minibatch { len: 1, pixels: vec![0; 8], ..Default::default() }, &[], &COEFS).unwrap_err();
    assert!(e.to_string().contains("read by a CNN alone"), "{e}");
}

#[test]
fn the_fused_cnn_gives_the_same_bits_on_two_threads_and_for_any_batch() {
    let spec = cnn_spec(ImageShape { channels: 4, height: 44, width: 40 }, ActionKind::Discrete { n: 4 });
    let run = |threads: usize| {
        let mut f = Network::new(spec.clone(), Backend::Fused, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1)).unwrap();
        f.set_threads(threads);
        let (mb, _) = cnn_minibatch(&f, 5, 2);
        let loss = f.ppo_loss(&mb, &[], &COEFS).unwrap().values;
        let grads: Vec<f32> = f.backward().unwrap().into_iter().flatten().flatten().collect();
        let out = f.act(&mb.observations, false, &mut rand_chacha::ChaCha8Rng::seed_from_u64(3)).unwrap();
        // Each row alone gives the bits it has in the batch.
        let od = spec.obs_dim;
        for r in 0..mb.len {
            let one = f.dist_params_host(&mb.observations[r * od..(r + 1) * od]).unwrap().0;
            assert_eq!(one, out.head[r * 4..(r + 1) * 4], "row {r} alone, {threads} threads");
        }
        (loss, grads, out.head, out.values)
    };
    let one = run(1);
    assert_eq!(one, run(1), "a rerun repeats");
    assert_eq!(one, run(2), "two threads give the one-thread bits");
}

#[test]
fn a_cnn_checkpoint_moves_between_backends() {
    let spec = cnn_spec(ImageShape { channels: 2, height: 40, width: 36 }, ActionKind::Discrete { n: 3 });
    let (mut c, mut f) = both_backends(&spec, 4);
    let (mb, _) = cnn_minibatch(&c, 4, 5);
    let sizes: Vec<usize> = spec.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
    let mut opt = Optimizer::adam(&sizes, 1e-3, 1e-5);
    f.ppo_loss(&mb, &[], &COEFS).unwrap();
    apply_gradients(&mut f, &mut opt, Some(0.5)).unwrap();
    // The trained fused parameters on candle, and back: the same network either way.
    c.set_params(&f.params().unwrap()).unwrap();
    assert_eq!(c.params().unwrap(), f.params().unwrap());
    let (hc, hf) = (c.dist_params_host(&mb.observations).unwrap().0, f.dist_params_host(&mb.observations).unwrap().0);
    assert_close("head after the move", &hf, &hc, 1e-5);
}
