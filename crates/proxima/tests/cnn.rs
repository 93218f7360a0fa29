//! The Nature CNN (`policy = "CnnPolicy"`) against PyTorch in float64: the same weights and a
//! fixed batch of uint8 frames give the same logits and values, PPO loss and gradient of every
//! parameter (1e-5 relative to each tensor's largest entry) as CleanRL's `ppo_atari.py` `Agent`
//! written with `torch.nn.functional`, and the loss that `ppo_loss` defines (L^CLIP with value
//! clipping and the entropy bonus).
//!
//! The reference is computed here by the Python of `PROXIMA_PYTHON` (with torch, which CI's test
//! venv has through Stable-Baselines3): the test is ignored by a plain `cargo test`, run by
//! `cargo test -- --include-ignored` (as `.ci/run` does), where it fails without torch.

use candle_core::Device;
use proxima::loss::{Objective, PpoCoefs};
use proxima::policy::{ActionKind, Activation, ActorCritic, ImageShape, Policy, PolicySpec};
use proxima::rollout::Minibatch;
use rand::{Rng, SeedableRng};
use std::process::Command;

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
fn the_nature_cnn_equals_pytorch_in_float64() {
    let py = python_with_torch();
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
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut net = ActorCritic::new(spec.clone(), &Device::Cpu, &mut rng).unwrap();
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
    };
    let coefs = PpoCoefs {
        clip_range: 0.1,
        clip_range_vf: Some(0.1),
        vf_coef: 0.5,
        ent_coef: 0.01,
        objective: Objective::Clip,
        kl_coef: 0.0,
    };
    let (head, values) = net.forward(&net.obs_tensor(&obs).unwrap()).unwrap();
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
    let run = Command::new(&py).args(["-c", REFERENCE, inp.to_str().unwrap(), out.to_str().unwrap()]).output().unwrap();
    assert!(run.status.success(), "the PyTorch reference failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let want: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();

    let tol = 1e-5;
    let head = head.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let values = values.to_vec1::<f32>().unwrap();
    for (what, got, want) in [
        ("logits", head, f64s(&want["logits"])),
        ("values", values, f64s(&want["values"])),
        ("loss parts", report.values.to_vec(), f64s(&want["parts"])),
    ] {
        let e = rel_err(&got, &want);
        println!("{what}: relative error {e:.2e}");
        assert!(e <= tol, "{what}: relative error {e:.2e} > {tol:.0e}");
    }
    for ((name, _), g) in shapes.iter().zip(&grads) {
        let g = g.as_ref().unwrap_or_else(|| panic!("{name}: no gradient"));
        let e = rel_err(g, &f64s(&want["grads"][name]));
        println!("∇ {name}: relative error {e:.2e}");
        assert!(e <= tol, "∇ {name}: relative error {e:.2e} > {tol:.0e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
