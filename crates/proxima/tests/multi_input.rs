//! `MultiInputPolicy` over a `Dict` observation with an image key (SB3's `CombinedExtractor`,
//! `policy::inputs`): the image's Nature CNN reads a channel-last key exactly as it reads the
//! same pixels channel-first (what SB3's `VecTransposeImage` gives its CNN; the channel-first CNN
//! is checked against PyTorch in `tests/cnn.rs`), the losses' gradients reach it, and specs that
//! do not fit are errors.

use candle_core::{Device, Tensor};
use proxima::policy::inputs::{InputImage, InputKey};
use proxima::policy::{ActionKind, ActorCritic, ActorKind, OffPolicyNets, OffPolicyShape, PolicySpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const C: usize = 3;
const SIDE: usize = 36;
const PIXELS: usize = C * SIDE * SIDE;

fn spec(channels_last: bool) -> PolicySpec {
    let inputs = vec![
        InputKey { name: "pos".into(), len: 3, image: None },
        InputKey {
            name: "screen".into(),
            len: PIXELS,
            image: Some(InputImage { chw: [C, SIDE, SIDE], channels_last }),
        },
    ];
    PolicySpec { inputs, ..PolicySpec::mlp(3 + PIXELS, ActionKind::Discrete { n: 4 }, vec![16]) }
}

/// B observations: `pos` then the pixels, channel-first `[C, H, W]` and channel-last `[H, W, C]`.
fn observations(b: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut chw, mut hwc) = (Vec::new(), Vec::new());
    for _ in 0..b {
        let pos: Vec<f32> = (0..3).map(|_| rng.random_range(-1.0..1.0)).collect();
        let img: Vec<f32> = (0..PIXELS).map(|_| f32::from(rng.random::<u8>())).collect();
        chw.extend(&pos);
        chw.extend(&img);
        hwc.extend(&pos);
        for y in 0..SIDE {
            for x in 0..SIDE {
                hwc.extend((0..C).map(|c| img[(c * SIDE + y) * SIDE + x]));
            }
        }
    }
    (chw, hwc)
}

/// The same weights (one seed, one parameter layout) on a channel-last key and on the same
/// pixels channel-first: the same π head and V(s), and the same gradient of every parameter.
#[test]
fn a_channel_last_image_key_is_read_as_its_channel_first_pixels() {
    let last = ActorCritic::new(spec(true), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let first = ActorCritic::new(spec(false), &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    let (chw, hwc) = observations(4);
    let run = |net: &ActorCritic, obs: &[f32]| {
        let x = Tensor::from_slice(obs, (4, 3 + PIXELS), &Device::Cpu).unwrap();
        let (head, values) = net.forward(&x).unwrap();
        let loss = (head.sqr().unwrap().sum_all().unwrap() + values.sum_all().unwrap()).unwrap();
        let grads = loss.backward().unwrap();
        let g: Vec<Vec<f32>> = net
            .named_params()
            .iter()
            .map(|(_, v)| grads.get(v.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap())
            .collect();
        (head.flatten_all().unwrap().to_vec1::<f32>().unwrap(), values.to_vec1::<f32>().unwrap(), g)
    };
    let (h1, v1, g1) = run(&last, &hwc);
    let (h2, v2, g2) = run(&first, &chw);
    let close = |a: &[f32], b: &[f32], what: &str| {
        let scale = b.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
        let err = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(err <= 1e-5 * scale, "{what}: max difference {err} at scale {scale}");
    };
    close(&h1, &h2, "π head");
    close(&v1, &v2, "V(s)");
    for (((name, _), a), b) in last.named_params().iter().zip(&g1).zip(&g2) {
        close(a, b, name);
        assert!(a.iter().any(|&v| v != 0.0), "{name}: no gradient");
    }
    let names: Vec<&str> = last.named_params().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..2], ["extractors.screen.cnn.0.weight", "extractors.screen.cnn.0.bias"]);
    assert!(names.contains(&"extractors.screen.linear.0.weight"));
    let actor0 = last.named_params().iter().find(|(n, _)| n == "actor.0.weight").unwrap();
    assert_eq!(actor0.1.dims(), [16, 256 + 3], "the towers read the CNN's 256 features and the pos key");
}

/// Inputs that do not fit are errors: keys that do not add up to the observation, an image of
/// the wrong size or too small for the Nature CNN, and image keys beside a CNN policy.
#[test]
fn inputs_that_do_not_fit_are_errors() {
    let bad = |sp: PolicySpec| {
        ActorCritic::new(sp, &Device::Cpu, &mut ChaCha8Rng::seed_from_u64(0))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let mut sp = spec(true);
    sp.obs_dim += 1;
    assert!(bad(sp).contains("the observation keys hold"));
    let mut sp = spec(true);
    sp.inputs[1].image = Some(InputImage { chw: [C, 12, 108], channels_last: true });
    assert!(bad(sp).contains("too small for the Nature CNN"));
    let mut sp = spec(true);
    sp.inputs[1].image = Some(InputImage { chw: [1, SIDE, SIDE], channels_last: true });
    assert!(bad(sp).contains("does not hold its"));
    let mut sp = spec(true);
    sp.shared_trunk = true;
    assert!(bad(sp).contains("separate MLP towers"));
}

/// A continuous-action spec over the same keys (SAC, TD3, DDPG, TQC).
fn continuous(channels_last: bool) -> PolicySpec {
    PolicySpec {
        action: ActionKind::Continuous { dim: 2, low: vec![-1.0; 2], high: vec![1.0; 2] },
        ..spec(channels_last)
    }
}

fn grad_norms(nets: &OffPolicyNets, grads: &candle_core::backprop::GradStore, prefix: &str) -> f32 {
    let p = nets.actor_params().iter().chain(nets.critic_params()).chain(nets.target_params());
    p.filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, v)| {
            grads.get(v.as_tensor()).map_or(0.0, |g| g.sqr().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap())
        })
        .sum()
}

/// Off-policy networks over image keys are laid out as SB3's `MultiInputPolicy` for SAC, TD3 and
/// TQC (`share_features_extractor = False`): the actor, the critics (one extractor for all
/// `qf`s) and every target own a `CombinedExtractor`, named `{net}.features_extractor.
/// extractors.{key}.cnn.0` …; the MLPs read its 256 features beside the other keys' values.
/// Targets start equal to their networks; the critics' loss reaches only the critics'
/// extractor, the actor's only the actor's.
#[test]
fn off_policy_networks_give_each_network_its_own_extractor() {
    let (_, hwc) = observations(4);
    let obs = Tensor::from_slice(&hwc, (4, 3 + PIXELS), &Device::Cpu).unwrap();
    let actions = Tensor::zeros((4, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
    for (kind, n_critics) in
        [(ActorKind::SquashedGaussian, 2), (ActorKind::Deterministic, 2), (ActorKind::Deterministic, 1)]
    {
        let nets = OffPolicyNets::new(continuous(true), kind, n_critics, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        let names: Vec<String> =
            proxima::policy::Policy::param_shapes(&nets).into_iter().map(|(n, s)| format!("{n} {s:?}")).collect();
        let has = |s: &str| names.iter().any(|n| n == s);
        for net in ["actor", "critic", "critic_target"] {
            assert!(
                has(&format!("{net}.features_extractor.extractors.screen.cnn.0.weight [32, 3, 8, 8]")),
                "{names:?}"
            );
            assert!(has(&format!("{net}.features_extractor.extractors.screen.linear.0.weight [256, 64]")));
        }
        assert_eq!(
            has("actor_target.features_extractor.extractors.screen.cnn.4.bias [64]"),
            kind == ActorKind::Deterministic
        );
        let first = if kind == ActorKind::SquashedGaussian { "actor.latent_pi.0" } else { "actor.mu.0" };
        assert!(has(&format!("{first}.weight [16, 259]")), "the actor reads 256 features + pos: {names:?}");
        assert!(has("critic.qf0.0.weight [16, 261]"), "Q reads features, pos and a");
        assert!(!names.iter().any(|n| n.starts_with("critic.qf0.features") || n.contains("pos")));
        // The targets start as copies: the same Q-values and actions.
        let q = nets.q_values(&obs, &actions, false).unwrap();
        let qt = nets.q_values(&obs, &actions, true).unwrap();
        for (a, b) in q.iter().zip(&qt) {
            assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        }
        // The critics' loss reaches the critics' extractor and not the actor's.
        let loss = q
            .iter()
            .fold(Tensor::new(0f32, &Device::Cpu).unwrap(), |s, x| (s + x.sqr().unwrap().sum_all().unwrap()).unwrap());
        let g = loss.backward().unwrap();
        assert!(grad_norms(&nets, &g, "critic.features_extractor.") > 0.0);
        assert_eq!(grad_norms(&nets, &g, "actor.features_extractor."), 0.0);
        // The actor's output reaches the actor's extractor and not the critics'.
        let out = match kind {
            ActorKind::SquashedGaussian => nets.actor_dist(&obs).unwrap().0,
            ActorKind::Deterministic => nets.actor_action(&obs, false).unwrap(),
        };
        let g = out.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        assert!(grad_norms(&nets, &g, "actor.features_extractor.") > 0.0);
        assert_eq!(grad_norms(&nets, &g, "critic.features_extractor."), 0.0);
        // Polyak moves the target extractor towards the critics' extractor.
        let name = "critic.features_extractor.extractors.screen.cnn.0.weight";
        let (_, w) = nets.critic_params().iter().find(|(n, _)| n == name).unwrap();
        w.set(&(w.as_tensor() + 1.0).unwrap()).unwrap();
        nets.polyak_update(0.5).unwrap();
        let (_, wt) =
            nets.target_params().iter().find(|(n, _)| n == &name.replacen("critic", "critic_target", 1)).unwrap();
        let diff = (w.as_tensor() - wt.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(diff.iter().all(|d| (d - 0.5).abs() < 1e-5), "θ̄ ← ½θ + ½θ̄ after θ += 1");
    }
}

/// The fused kernels have no CNN: image keys under `backend = "fused"` are an error naming candle.
#[test]
fn fused_off_policy_networks_refuse_image_keys() {
    let shape = OffPolicyShape::new(ActorKind::SquashedGaussian, 2);
    let err = proxima::policy::Network::off_policy(
        continuous(true),
        shape,
        proxima::policy::Backend::Fused,
        &mut ChaCha8Rng::seed_from_u64(0),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("candle"), "{err}");
    let auto = proxima::policy::Network::off_policy(
        continuous(true),
        shape,
        proxima::policy::Backend::Auto,
        &mut ChaCha8Rng::seed_from_u64(0),
    );
    assert!(matches!(auto, Ok(proxima::policy::Network::OffPolicy(_))), "auto picks candle");
}
