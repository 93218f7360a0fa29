//! ONNX export of a policy with everything `predict(deterministic=True)` does inside the graph:
//!
//! * input `obs`: `float32 [batch, obs_dim]` (the flat observation `predict` takes), or for a
//!   `CnnPolicy` `uint8 [batch, C, H, W]`, the frames as the env gives them;
//! * observation normalisation with the frozen statistics, in float64 as Proxima computes it:
//!   ô = clip((o − μ)/√(σ² + 1e-8), ±clip_obs), keys outside `norm_obs_keys` passed through;
//! * pixels scaled by 1/255, the network (`Gemm`, `Conv`, `Tanh`/`Relu`), the deterministic
//!   action: the argmax of the logits (under the optional `action_masks` input, sb3-contrib's
//!   masking), the Gaussian mean clipped to the `Box`, or an off-policy actor's tanh(μ) rescaled
//!   to the `Box` (SB3's `unscale_action`);
//! * outputs `action` (`int64 [batch]` for `Discrete`, `int64 [batch, k]` for `MultiDiscrete`,
//!   `float32 [batch, dim]` for `Box`), and the distribution's parameters and the value:
//!   `logits` or `mean`, and `value` (`float32 [batch]`, on-policy algorithms).
//!
//! A recurrent policy's graph takes its actor's state as sb3-contrib's `predict` does — inputs
//! `state_h` (and `state_c` for an LSTM) `[n_layers, batch, hidden]` and `episode_start`
//! `bool [batch]` — and gives `next_state_h` (`next_state_c`); it has no `value` output.
//!
//! A `Dict` observation's image keys (SB3's `MultiInputPolicy`) go through their CNNs inside the
//! graph too: `obs` is the flat observation, each image key's pixels where Gymnasium's
//! `spaces.flatten` puts them.
//!
//! ONNX opset [`graph::OPSET`]; the file is written atomically.

use super::graph::{Attr, Dim, Graph};
use crate::error::{ProximaError, Result};
use crate::normalize::Normalizer;
use crate::policy::recurrent::CellKind;
use crate::policy::{ActionKind, Activation, Policy, PolicySpec};
use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::Message;
use std::collections::HashMap;
use std::path::Path;

/// What to put in the graph beyond the observation.
#[derive(Clone, Copy, Debug, Default)]
pub struct OnnxOptions {
    /// An `action_masks` input (`bool [batch, mask_dim]`, true = valid): a policy trained masked
    /// (sb3-contrib's `MaskablePPO`) takes its actions among the valid ones. Discrete and
    /// MultiDiscrete actions only.
    pub action_masks: bool,
}

/// What [`export_onnx`] wrote: the graph's inputs and outputs, `(name, "dtype [dims]")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnnxExport {
    /// The inputs, in order.
    pub inputs: Vec<(String, String)>,
    /// The outputs, in order.
    pub outputs: Vec<(String, String)>,
}

/// The actor a policy's parameters describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Actor {
    /// An actor-critic (PPO, A2C, …): [`PolicySpec::plan`]'s towers.
    OnPolicy,
    /// SAC's (and TQC's) squashed Gaussian: tanh(μ(s)).
    Squashed,
    /// TD3's and DDPG's a = tanh(μ(s)).
    Deterministic,
}

/// The parameters by name: shape and values.
type Params = HashMap<String, (Vec<usize>, Vec<f32>)>;

const BATCH: Dim = Dim::Named("batch");

/// Writes `policy` (with `norm`'s frozen observation statistics when given) to `path` as an ONNX
/// model computing `predict(deterministic=True)`'s actions (module docs).
///
/// # Errors
/// `InvalidArgument` for masks on a continuous action space, a `path` that is a directory or
/// whose folder does not exist; `Io`. Nothing is written on error.
pub fn export_onnx(
    policy: &dyn Policy,
    norm: Option<&Normalizer>,
    options: OnnxOptions,
    path: &Path,
) -> Result<OnnxExport> {
    let spec = policy.spec();
    check_options(spec, options)?;
    let shown = path.display().to_string();
    if path.is_dir() || shown.ends_with('/') || shown.ends_with(std::path::MAIN_SEPARATOR) {
        return Err(ProximaError::InvalidArgument(format!(
            "export: {shown} is a directory; give a file path, such as {}",
            path.join("policy.onnx").display()
        )));
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(ProximaError::InvalidArgument(format!(
            "export: the folder {} of {} does not exist",
            dir.display(),
            path.display()
        )));
    }
    let params: Params =
        policy.param_shapes().into_iter().zip(policy.params()?).map(|((n, s), v)| (n, (s, v))).collect();
    let actor = actor_of(&params);
    let mut g = Graph::default();
    let mut io = OnnxExport { inputs: Vec::new(), outputs: Vec::new() };
    let x = observation(&mut g, spec, norm.filter(|n| n.obs_rms.is_some()), &mut io);
    match actor {
        Actor::OnPolicy => on_policy(&mut g, spec, &params, &x, options, &mut io)?,
        Actor::Squashed | Actor::Deterministic => off_policy(&mut g, spec, &params, &x, actor, &mut io)?,
    }
    let doc = "proxima policy: predict(deterministic=True) from the observation to the action";
    let meta = vec![
        ("proxima.inputs".to_string(), describe(&io.inputs)),
        ("proxima.outputs".to_string(), describe(&io.outputs)),
    ];
    let bytes = g
        .model("proxima_policy", doc, &meta)
        .write_to_bytes()
        .map_err(|e| ProximaError::InvalidArgument(format!("export: the ONNX model does not serialise: {e}")))?;
    crate::io::write_atomic(path, &bytes)?;
    Ok(io)
}

fn describe(io: &[(String, String)]) -> String {
    io.iter().map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join("; ")
}

/// `InvalidArgument` for options that do not fit the policy: masks on a `Box` action space.
fn check_options(spec: &PolicySpec, options: OnnxOptions) -> Result<()> {
    if options.action_masks && matches!(spec.action, ActionKind::Continuous { .. }) {
        return Err(ProximaError::InvalidArgument(
            "action_masks: masks select among Discrete or MultiDiscrete actions; this policy's actions are a Box"
                .into(),
        ));
    }
    Ok(())
}

/// Which actor the parameter names describe (SB3's names for the off-policy ones).
fn actor_of(params: &Params) -> Actor {
    if params.contains_key("actor.log_std.weight") {
        Actor::Squashed
    } else if params.keys().any(|n| n.starts_with("actor_target.")) {
        Actor::Deterministic
    } else {
        Actor::OnPolicy
    }
}

fn param<'a>(params: &'a Params, name: &str) -> Result<&'a (Vec<usize>, Vec<f32>)> {
    params.get(name).ok_or_else(|| ProximaError::InvalidArgument(format!("export: the policy has no parameter {name}")))
}

/// `x·Wᵀ + b` of the layer `name` (`name.weight` `[out, in]`, `name.bias`).
fn dense(g: &mut Graph, params: &Params, name: &str, x: &str) -> Result<String> {
    let (ws, w) = param(params, &format!("{name}.weight"))?;
    let (bs, b) = param(params, &format!("{name}.bias"))?;
    let w = g.f32s(name, ws, w);
    let b = g.f32s(name, bs, b);
    Ok(g.node("Gemm", &[x, &w, &b], &[("transB", Attr::Int(1))]))
}

/// The graph input `obs` and what the network reads of it: normalised (float64, as
/// [`Normalizer::normalize_obs`]) when `norm` has statistics; a `CnnPolicy`'s uint8 frames as
/// float32 `[batch, C, H, W]`.
fn observation(g: &mut Graph, spec: &PolicySpec, norm: Option<&Normalizer>, io: &mut OnnxExport) -> String {
    let d = spec.obs_dim;
    let x = match &spec.cnn {
        Some(img) => {
            let dims = [BATCH, Dim::Fixed(img.channels), Dim::Fixed(img.height), Dim::Fixed(img.width)];
            g.input("obs", DataType::UINT8, &dims);
            io.inputs.push(("obs".into(), format!("uint8 [batch, {}, {}, {}]", img.channels, img.height, img.width)));
            let x = g.node("Cast", &["obs"], &[("to", Attr::Int(DataType::FLOAT as i64))]);
            let flat = g.i64s("flat", &[-1, d as i64]);
            g.node("Reshape", &[&x, &flat], &[])
        }
        None => {
            g.input("obs", DataType::FLOAT, &[BATCH, Dim::Fixed(d)]);
            io.inputs.push(("obs".into(), format!("float32 [batch, {d}]")));
            "obs".to_string()
        }
    };
    let Some(rms) = norm.and_then(|n| n.obs_rms.as_ref().map(|r| (n, r))) else { return x };
    let (n, rms) = rms;
    let raw = |j: usize| n.obs_raw.get(j).copied().unwrap_or(false);
    let mean: Vec<f64> = (0..d).map(|j| if raw(j) { 0.0 } else { rms.mean[j] }).collect();
    let std: Vec<f64> = (0..d).map(|j| if raw(j) { 1.0 } else { (rms.var[j] + 1e-8).sqrt() }).collect();
    let hi: Vec<f64> = (0..d).map(|j| if raw(j) { f64::INFINITY } else { n.clip_obs }).collect();
    let lo: Vec<f64> = hi.iter().map(|h| -h).collect();
    let x64 = g.node("Cast", &[&x], &[("to", Attr::Int(DataType::DOUBLE as i64))]);
    let (mean, std) = (g.f64s("obs_mean", &[d], &mean), g.f64s("obs_std", &[d], &std));
    let (hi, lo) = (g.f64s("obs_clip_high", &[d], &hi), g.f64s("obs_clip_low", &[d], &lo));
    let centred = g.node("Sub", &[&x64, &mean], &[]);
    let scaled = g.node("Div", &[&centred, &std], &[]);
    let clipped = g.node("Min", &[&scaled, &hi], &[]);
    let clipped = g.node("Max", &[&clipped, &lo], &[]);
    g.node("Cast", &[&clipped], &[("to", Attr::Int(DataType::FLOAT as i64))])
}

fn activate(g: &mut Graph, activation: Activation, x: &str) -> String {
    match activation {
        Activation::Tanh => g.node("Tanh", &[x], &[]),
        Activation::Relu => g.node("Relu", &[x], &[]),
    }
}

/// The dense layers `prefix.0`, `prefix.2`, … (as many as `n`), the activation after each (and
/// after the last only when `activate_last`).
fn tower(
    g: &mut Graph,
    params: &Params,
    (prefix, n): (&str, usize),
    x: &str,
    act: Activation,
    activate_last: bool,
) -> Result<String> {
    let mut h = x.to_string();
    for i in 0..n {
        h = dense(g, params, &format!("{prefix}.{}", 2 * i), &h)?;
        if i + 1 < n || activate_last {
            h = activate(g, act, &h);
        }
    }
    Ok(h)
}

/// The Nature CNN (`network.0`, `.2`, `.4` convolutions, `network.7` dense, ReLU after each) on
/// `x` (float32 pixels, flat): `[batch, 512]` features.
fn nature_cnn(g: &mut Graph, spec: &PolicySpec, params: &Params, x: &str) -> Result<String> {
    let img = spec.cnn.as_ref().expect("a CNN policy");
    let shape = g.i64s("image", &[-1, img.channels as i64, img.height as i64, img.width as i64]);
    let x = g.node("Reshape", &[x, &shape], &[]);
    cnn_layers(g, params, (&|i| format!("network.{i}"), "network.7"), &x)
}

/// Pixels `[batch, C, H, W]` (0..=255) through the Nature CNN's layers named `conv(0)`, `conv(2)`,
/// `conv(4)` and `dense`: ÷255, three `Conv` + `Relu`, `Flatten` (channel-first, as PyTorch's),
/// `Gemm` + `Relu`.
fn cnn_layers(
    g: &mut Graph,
    params: &Params,
    (conv, dense_name): (&dyn Fn(usize) -> String, &str),
    x: &str,
) -> Result<String> {
    let k255 = g.f32s("k255", &[], &[255.0]);
    let mut h = g.node("Div", &[x, &k255], &[]);
    for (i, &(_, _, stride)) in crate::policy::NATURE_CONVS.iter().enumerate() {
        let name = conv(2 * i);
        let (ws, w) = param(params, &format!("{name}.weight"))?;
        let (bs, b) = param(params, &format!("{name}.bias"))?;
        let (w, b) = (g.f32s(&name, ws, w), g.f32s(&name, bs, b));
        let s = stride as i64;
        h = g.node("Conv", &[&h, &w, &b], &[("strides", Attr::Ints(vec![s, s]))]);
        h = g.node("Relu", &[&h], &[]);
    }
    let h = g.node("Flatten", &[&h], &[("axis", Attr::Int(1))]);
    let h = dense(g, params, dense_name, &h)?;
    Ok(g.node("Relu", &[&h], &[]))
}

/// SB3's `CombinedExtractor` over the flat observation `x` (`PolicySpec::inputs`): each key's
/// columns as they are, or an image key's pixels (channel-last ones transposed to `[C, H, W]`)
/// through its Nature CNN `{prefix}extractors.{key}.*` to 256 features; side by side.
fn combined(g: &mut Graph, spec: &PolicySpec, params: &Params, prefix: &str, x: &str) -> Result<String> {
    let (axis, mut start, mut parts) = (g.i64s("axis", &[1]), 0i64, Vec::new());
    for key in &spec.inputs {
        let (s, e) = (g.i64s("start", &[start]), g.i64s("end", &[start + key.len as i64]));
        start += key.len as i64;
        let cols = g.node("Slice", &[x, &s, &e, &axis], &[]);
        let Some(img) = key.image else {
            parts.push(cols);
            continue;
        };
        let [c, h, w] = img.chw.map(|d| d as i64);
        let pixels = if img.channels_last {
            let shape = g.i64s("image", &[-1, h, w, c]);
            let hwc = g.node("Reshape", &[&cols, &shape], &[]);
            g.node("Transpose", &[&hwc], &[("perm", Attr::Ints(vec![0, 3, 1, 2]))])
        } else {
            let shape = g.i64s("image", &[-1, c, h, w]);
            g.node("Reshape", &[&cols, &shape], &[])
        };
        let base = format!("{prefix}extractors.{}", key.name);
        let conv = |i: usize| format!("{base}.cnn.{i}");
        parts.push(cnn_layers(g, params, (&conv, &format!("{base}.linear.0")), &pixels)?);
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    Ok(g.node("Concat", &refs, &[("axis", Attr::Int(1))]))
}

/// An actor-critic's graph: the towers (or the CNN and its heads), the action and the value; a
/// recurrent policy's stack between the features and the actor's layers (no value: the
/// critic's own stack and state are not exported).
fn on_policy(
    g: &mut Graph,
    spec: &PolicySpec,
    params: &Params,
    x: &str,
    options: OnnxOptions,
    io: &mut OnnxExport,
) -> Result<()> {
    let (n, act) = (spec.net_arch.len(), spec.activation);
    let features = if spec.cnn.is_some() {
        nature_cnn(g, spec, params, x)?
    } else if !spec.inputs.is_empty() {
        combined(g, spec, params, "", x)?
    } else {
        x.to_string()
    };
    let (actor_in, next_states) = match spec.recurrent {
        Some(_) => recurrent_stack(g, spec, params, &features, io)?,
        None => (features, Vec::new()),
    };
    // A shared MLP trunk once, for both heads (an MLP's towers are each head's own).
    let actor_in = match spec.shared_trunk && spec.cnn.is_none() {
        true => tower(g, params, ("trunk", n), &actor_in, act, true)?,
        false => actor_in,
    };
    let head = head_of(g, spec, params, "actor", &actor_in)?;
    actions_of_head(g, spec, &head, options, io)?;
    if let Some(r) = spec.recurrent {
        let (layers, hid) = (r.n_layers, r.hidden_size);
        for (name, value) in next_states {
            g.output(&value, &name, DataType::FLOAT, &[Dim::Fixed(layers), BATCH, Dim::Fixed(hid)]);
            io.outputs.push((name, format!("float32 [{layers}, batch, {hid}]")));
        }
        return Ok(());
    }
    // Without a recurrent stack the critic reads what the actor read.
    let value = head_of(g, spec, params, "critic", &actor_in)?;
    let axes = g.i64s("axes", &[1]);
    let value = g.node("Squeeze", &[&value, &axes], &[]);
    g.output(&value, "value", DataType::FLOAT, &[BATCH]);
    io.outputs.push(("value".into(), "float32 [batch]".into()));
    Ok(())
}

/// The head of `part` (`actor` or `critic`) on what it reads: the CNN's dense head `part`, the
/// shared trunk's head `part.0`, or the whole tower `part.0`, `part.2`, … of an MLP.
fn head_of(g: &mut Graph, spec: &PolicySpec, params: &Params, part: &str, x: &str) -> Result<String> {
    if spec.cnn.is_some() {
        dense(g, params, part, x)
    } else if spec.shared_trunk {
        dense(g, params, &format!("{part}.0"), x)
    } else {
        tower(g, params, (part, spec.net_arch.len() + 1), x, spec.activation, false)
    }
}

/// The actor's recurrent stack (`lstm_actor`) for one step: inputs `state_h` (and for an LSTM
/// `state_c`), `[n_layers, batch, hidden]` each as sb3-contrib's `predict` takes the state, and
/// `episode_start` `bool [batch]` (the state zeroed first where it is true); outputs
/// `next_state_h` (`next_state_c`). ONNX's `LSTM`/`GRU` per layer, PyTorch's gates reordered
/// (LSTM i f g o → i o f c; GRU r z n → z r h, `linear_before_reset = 1`). Returns the top
/// layer's output `[batch, hidden]` and the next states, `(output name, value)`.
fn recurrent_stack(
    g: &mut Graph,
    spec: &PolicySpec,
    params: &Params,
    x: &str,
    io: &mut OnnxExport,
) -> Result<(String, Vec<(String, String)>)> {
    let r = spec.recurrent.expect("a recurrent policy");
    let (hid, layers, lstm) = (r.hidden_size, r.n_layers, r.cell == CellKind::Lstm);
    let states: &[&str] = if lstm { &["state_h", "state_c"] } else { &["state_h"] };
    let state_dims = [Dim::Fixed(layers), BATCH, Dim::Fixed(hid)];
    for s in states {
        g.input(s, DataType::FLOAT, &state_dims);
        io.inputs.push((s.to_string(), format!("float32 [{layers}, batch, {hid}]")));
    }
    g.input("episode_start", DataType::BOOL, &[BATCH]);
    io.inputs.push(("episode_start".into(), "bool [batch]".into()));
    let keep = g.node("Not", &["episode_start"], &[]);
    let keep = g.node("Cast", &[&keep], &[("to", Attr::Int(DataType::FLOAT as i64))]);
    let shape = g.i64s("keep_shape", &[1, -1, 1]);
    let keep = g.node("Reshape", &[&keep, &shape], &[]);
    let kept: Vec<String> = states.iter().map(|s| g.node("Mul", &[s, &keep], &[])).collect();
    let axis0 = g.i64s("axis0", &[0]);
    let mut h = g.node("Unsqueeze", &[x, &axis0], &[]);
    let mut next: Vec<Vec<String>> = vec![Vec::new(); states.len()];
    for k in 0..layers {
        let (w, rw, b) = gate_weights(g, params, lstm, k, hid)?;
        let mut init = Vec::new();
        for s in &kept {
            let (start, end) = (g.i64s("layer", &[k as i64]), g.i64s("layer_end", &[k as i64 + 1]));
            init.push(g.node("Slice", &[s, &start, &end, &axis0], &[]));
        }
        let (op, attrs) = if lstm {
            ("LSTM", vec![("hidden_size", Attr::Int(hid as i64))])
        } else {
            ("GRU", vec![("hidden_size", Attr::Int(hid as i64)), ("linear_before_reset", Attr::Int(1))])
        };
        let mut inputs = vec![h.as_str(), &w, &rw, &b, ""];
        inputs.extend(init.iter().map(String::as_str));
        let outs = g.node_outputs(op, &inputs, 1 + states.len(), &attrs);
        h = outs[1].clone(); // Y_h [1, batch, H]: the next layer's one-step sequence
        for (i, o) in outs[1..].iter().enumerate() {
            next[i].push(o.clone());
        }
    }
    let next_states = states
        .iter()
        .zip(&next)
        .map(|(s, parts)| {
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            (format!("next_{s}"), g.node("Concat", &refs, &[("axis", Attr::Int(0))]))
        })
        .collect();
    Ok((g.node("Squeeze", &[&h, &axis0], &[]), next_states))
}

/// Layer `k`'s `W` `[1, G·H, in]`, `R` `[1, G·H, H]` and `B` `[1, 2·G·H]` in ONNX's gate order,
/// from PyTorch's `lstm_actor.weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`.
fn gate_weights(g: &mut Graph, params: &Params, lstm: bool, k: usize, hid: usize) -> Result<(String, String, String)> {
    // ONNX's gate i takes PyTorch's gate order[i].
    let order: &[usize] = if lstm { &[0, 3, 1, 2] } else { &[1, 0, 2] };
    let reorder = |v: &[f32], cols: usize| -> Vec<f32> {
        order.iter().flat_map(|&gi| v[gi * hid * cols..(gi + 1) * hid * cols].iter().copied()).collect()
    };
    let get = |what: &str| param(params, &format!("lstm_actor.{what}_l{k}"));
    let (wis, wi) = get("weight_ih")?;
    let (_, wh) = get("weight_hh")?;
    let (_, bi) = get("bias_ih")?;
    let (_, bh) = get("bias_hh")?;
    let (gh, inp) = (wis[0], wis[1]);
    let w = g.f32s("lstm_w", &[1, gh, inp], &reorder(wi, inp));
    let rw = g.f32s("lstm_r", &[1, gh, hid], &reorder(wh, hid));
    let mut b = reorder(bi, 1);
    b.extend(reorder(bh, 1));
    let b = g.f32s("lstm_b", &[1, 2 * gh], &b);
    Ok((w, rw, b))
}

/// The deterministic action of an actor-critic's head: the argmax of the (masked) logits, one
/// per `MultiDiscrete` component, or the Gaussian mean clipped to the `Box`.
fn actions_of_head(
    g: &mut Graph,
    spec: &PolicySpec,
    head: &str,
    options: OnnxOptions,
    io: &mut OnnxExport,
) -> Result<()> {
    let hd = spec.action.head_dim();
    let logits = if options.action_masks {
        g.input("action_masks", DataType::BOOL, &[BATCH, Dim::Fixed(hd)]);
        io.inputs.push(("action_masks".into(), format!("bool [batch, {hd}]")));
        let invalid = g.f32s("masked_logit", &[], &[crate::policy::distributions::MASKED_LOGIT as f32]);
        g.node("Where", &["action_masks", head, &invalid], &[])
    } else {
        head.to_string()
    };
    match &spec.action {
        ActionKind::Discrete { .. } => {
            let a = g.node("ArgMax", &[&logits], &[("axis", Attr::Int(1)), ("keepdims", Attr::Int(0))]);
            g.output(&a, "action", DataType::INT64, &[BATCH]);
            io.outputs.push(("action".into(), "int64 [batch]".into()));
        }
        ActionKind::MultiDiscrete { nvec } => {
            let mut parts = Vec::new();
            let mut start = 0i64;
            for &k in nvec {
                let (s, e, axis) =
                    (g.i64s("start", &[start]), g.i64s("end", &[start + k as i64]), g.i64s("axis", &[1]));
                let part = g.node("Slice", &[&logits, &s, &e, &axis], &[]);
                parts.push(g.node("ArgMax", &[&part], &[("axis", Attr::Int(1)), ("keepdims", Attr::Int(1))]));
                start += k as i64;
            }
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            let a = g.node("Concat", &refs, &[("axis", Attr::Int(1))]);
            g.output(&a, "action", DataType::INT64, &[BATCH, Dim::Fixed(nvec.len())]);
            io.outputs.push(("action".into(), format!("int64 [batch, {}]", nvec.len())));
        }
        ActionKind::Continuous { dim, low, high } => {
            let (lo, hi) = (g.f32s("action_low", &[*dim], low), g.f32s("action_high", &[*dim], high));
            let a = g.node("Min", &[head, &hi], &[]);
            let a = g.node("Max", &[&a, &lo], &[]);
            g.output(&a, "action", DataType::FLOAT, &[BATCH, Dim::Fixed(*dim)]);
            io.outputs.push(("action".into(), format!("float32 [batch, {dim}]")));
            g.output(head, "mean", DataType::FLOAT, &[BATCH, Dim::Fixed(*dim)]);
            io.outputs.push(("mean".into(), format!("float32 [batch, {dim}]")));
            return Ok(());
        }
    }
    g.output(&logits, "logits", DataType::FLOAT, &[BATCH, Dim::Fixed(hd)]);
    io.outputs.push(("logits".into(), format!("float32 [batch, {hd}]")));
    Ok(())
}

/// An off-policy actor's graph (SB3's names): SAC's `actor.latent_pi.*` then `actor.mu`, or
/// TD3's `actor.mu.*`, ReLU between; a = tanh(μ) rescaled to the `Box`:
/// low + (clip(a, −1, 1) + 1)·½·(high − low), as SB3's `unscale_action`.
fn off_policy(
    g: &mut Graph,
    spec: &PolicySpec,
    params: &Params,
    x: &str,
    actor: Actor,
    io: &mut OnnxExport,
) -> Result<()> {
    let ActionKind::Continuous { dim, low, high } = &spec.action else {
        return Err(ProximaError::InvalidArgument("export: an off-policy actor acts in a Box".into()));
    };
    let n = spec.net_arch.len();
    let features =
        if spec.inputs.is_empty() { x.to_string() } else { combined(g, spec, params, "actor.features_extractor.", x)? };
    let x = features.as_str();
    let mu = match actor {
        Actor::Squashed => {
            let h = tower(g, params, ("actor.latent_pi", n), x, Activation::Relu, true)?;
            dense(g, params, "actor.mu", &h)?
        }
        _ => tower(g, params, ("actor.mu", n + 1), x, Activation::Relu, false)?,
    };
    let a = g.node("Tanh", &[&mu], &[]);
    let (m1, p1, half) = (g.f32s("minus_one", &[], &[-1.0]), g.f32s("one", &[], &[1.0]), g.f32s("half", &[], &[0.5]));
    let a = g.node("Clip", &[&a, &m1, &p1], &[]);
    let a = g.node("Add", &[&a, &p1], &[]);
    let a = g.node("Mul", &[&a, &half], &[]);
    let width: Vec<f32> = low.iter().zip(high).map(|(l, h)| h - l).collect();
    let (width, lo) = (g.f32s("action_width", &[*dim], &width), g.f32s("action_low", &[*dim], low));
    let a = g.node("Mul", &[&a, &width], &[]);
    let a = g.node("Add", &[&lo, &a], &[]);
    g.output(&a, "action", DataType::FLOAT, &[BATCH, Dim::Fixed(*dim)]);
    io.outputs.push(("action".into(), format!("float32 [batch, {dim}]")));
    g.output(&mu, "mean", DataType::FLOAT, &[BATCH, Dim::Fixed(*dim)]);
    io.outputs.push(("mean".into(), format!("float32 [batch, {dim}]")));
    Ok(())
}
