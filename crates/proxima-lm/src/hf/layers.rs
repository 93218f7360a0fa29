//! The decoder's pieces as differentiable candle operations (candle-nn's fused softmax, RMSNorm,
//! LayerNorm and rotary kernels have no backward pass, so none of them is used): the norms,
//! SwiGLU's SiLU and GPT-2's tanh-GELU, rotary position tables, and masked multi-head attention
//! with grouped-query heads and an optional key/value cache.
//!
//! Sources: `transformers`' `LlamaRMSNorm`, `apply_rotary_pos_emb`/`rotate_half`, `repeat_kv` and
//! `eager_attention_forward` (modeling_llama.py), `NewGELUActivation` (activations.py).

use candle_core::{Device, Tensor, D};

/// RMSNorm: x / √(mean(x²) + ε) · w over the last dimension.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let var = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(var + eps)?.sqrt()?)?.broadcast_mul(w)
}

/// LayerNorm: (x − mean) / √(var + ε) · w + b over the last dimension (biased variance).
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let xc = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    xc.broadcast_div(&(var + eps)?.sqrt()?)?.broadcast_mul(w)?.broadcast_add(b)
}

/// SiLU: x·σ(x).
pub fn silu(x: &Tensor) -> candle_core::Result<Tensor> {
    x.mul(&(x.neg()?.exp()? + 1.0)?.recip()?)
}

/// GPT-2's GELU: ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
pub fn gelu_tanh(x: &Tensor) -> candle_core::Result<Tensor> {
    let inner = ((x + (x.powf(3.0)? * 0.044_715)?)? * (2.0 / std::f64::consts::PI).sqrt())?;
    (x * 0.5)?.mul(&(inner.tanh()? + 1.0)?)
}

/// softmax over the last dimension (the maximum subtracted first, without its gradient: the
/// result does not depend on it).
pub fn softmax(x: &Tensor) -> candle_core::Result<Tensor> {
    let e = x.broadcast_sub(&x.max_keepdim(D::Minus1)?.detach())?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}

/// `x·Wᵀ (+ b)` over the last dimension, W `[out, in]` (a `torch.nn.Linear`). The leading
/// dimensions are flattened into one 2-D product: a batched product against a broadcast W would
/// make the backward pass build W's gradient once per batch row before summing them (B × out × in
/// values per layer).
pub fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> candle_core::Result<Tensor> {
    let dims = x.dims().to_vec();
    let rows: usize = dims[..dims.len() - 1].iter().product();
    let mut out_dims = dims.clone();
    *out_dims.last_mut().expect("x has a last dimension") = w.dim(0)?;
    let y = x.reshape((rows, dims[dims.len() - 1]))?.matmul(&w.t()?)?.reshape(out_dims)?;
    match b {
        Some(b) => y.broadcast_add(b),
        None => Ok(y),
    }
}

/// The rotary tables cos and sin `[max_positions, head_dim]` of the inverse frequencies `inv`
/// (`head_dim / 2` of them, repeated over both halves, as `transformers` builds
/// `emb = cat(freqs, freqs)`), in f32.
pub fn rope_tables(max_positions: usize, inv: &[f64], dev: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let half = inv.len();
    let head_dim = 2 * half;
    let (mut cos, mut sin) =
        (Vec::with_capacity(max_positions * head_dim), Vec::with_capacity(max_positions * head_dim));
    for p in 0..max_positions {
        for k in 0..head_dim {
            // transformers computes inv_freq in f32 and the product in f32.
            let a = (p as f32) * (inv[k % half] as f32);
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    Ok((Tensor::from_vec(cos, (max_positions, head_dim), dev)?, Tensor::from_vec(sin, (max_positions, head_dim), dev)?))
}

/// x·cos + rotate_half(x)·sin for x `[B, heads, T, hd]`, cos/sin `[B, 1, T, hd]`; rotate_half(x)
/// = cat(−x₂, x₁) of x's halves.
pub fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
    let hd = x.dim(D::Minus1)?;
    let (x1, x2) = (x.narrow(D::Minus1, 0, hd / 2)?, x.narrow(D::Minus1, hd / 2, hd - hd / 2)?);
    let rot = Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)?;
    x.broadcast_mul(cos)?.add(&rot.broadcast_mul(sin)?)
}

/// The additive attention mask `[B, 1, T, S]` for T queries after `past` cached keys (S = past + T):
/// 0 where query i may read key j (j ≤ past + i and `key_mask[b, j]` is 1), a large negative
/// number elsewhere (finite, so a query with no key — a left-padding position — stays finite).
pub fn attention_mask(key_mask: &[Vec<u8>], t: usize, dev: &Device) -> candle_core::Result<Tensor> {
    let s = key_mask.first().map_or(t, Vec::len);
    let past = s - t;
    let mut m = Vec::with_capacity(key_mask.len() * t * s);
    for row in key_mask {
        for i in 0..t {
            m.extend((0..s).map(|j| if j <= past + i && row[j] != 0 { 0f32 } else { -1e9 }));
        }
    }
    Tensor::from_vec(m, (key_mask.len(), 1, t, s), dev)
}

/// softmax(q·kᵀ/√hd + mask)·v for q `[B, H, T, hd]`, k and v `[B, KV, S, hd]` (grouped-query
/// attention: query head h reads key/value head h / (H / KV), as `transformers`' `repeat_kv`
/// repeats them), mask `[B, 1, T, S]`: `[B, H, T, hd]`. The query heads of one key/value head are
/// stacked as rows of one product, so k and v are read in place (no repeated copy, and a cache's
/// views need no copy either).
pub fn attend(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let (b, h, t, hd) = q.dims4()?;
    let (kv, s) = (k.dim(1)?, k.dim(2)?);
    let rep = h / kv;
    let q = q.contiguous()?.reshape((b, kv, rep * t, hd))?;
    let scores = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?.reshape((b, h, t, s))?;
    let p = softmax(&scores.broadcast_add(mask)?)?.reshape((b, kv, rep * t, s))?;
    p.matmul(v)?.reshape((b, h, t, hd))
}

/// `[B, T, heads·hd]` → `[B, heads, T, hd]`.
pub fn split_heads(x: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    let (b, t, w) = x.dims3()?;
    x.reshape((b, t, heads, w / heads))?.transpose(1, 2)?.contiguous()
}

/// `[B, heads, T, hd]` → `[B, T, heads·hd]`.
pub fn merge_heads(x: &Tensor) -> candle_core::Result<Tensor> {
    let (b, h, t, hd) = x.dims4()?;
    x.transpose(1, 2)?.contiguous()?.reshape((b, t, h * hd))
}
