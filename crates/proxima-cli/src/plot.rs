//! Learning-curve plots (PNG) for `proxima ablation` and `proxima train --seeds`, with plotters.

use crate::experiments::ablation::AblationResults;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// The font every label is drawn with (DejaVu Sans, embedded: see `assets/DejaVuSans-LICENSE.txt`),
/// so plots have text on machines without system fonts.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Writes `path`: the mean (over seeds) training return of each variant on `env`
/// (index into the spec's envs) against environment steps, with the random policy's level.
pub fn learning_curves(res: &AblationResults, env: usize, path: &Path) -> Result<()> {
    let curves: Vec<(String, Vec<(f64, f64)>)> =
        res.spec.variants.iter().enumerate().map(|(v, var)| (var.label.clone(), res.mean_curve(v, env, 100))).collect();
    let title = format!("{} — mean over seeds {:?}", res.spec.envs[env], res.spec.seeds);
    draw(&title, &curves, Some(("random policy", res.random[env])), res.spec.total_timesteps as f64, path)
}

/// Writes `path`: one training-return curve per seed (label, (step, return) points) against
/// environment steps (`proxima train --seeds`).
pub fn seed_curves(title: &str, curves: &[(String, Vec<(f64, f64)>)], total_timesteps: f64, path: &Path) -> Result<()> {
    draw(title, curves, None, total_timesteps, path)
}

/// One chart of `curves` (x: environment steps up to at least `xmax`; y: mean return of the last
/// 100 episodes), with an optional labelled horizontal level, written atomically to `path`.
fn draw(
    title: &str,
    curves: &[(String, Vec<(f64, f64)>)],
    level: Option<(&str, f64)>,
    xmax: f64,
    path: &Path,
) -> Result<()> {
    register_font();
    let ys = curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.1)).chain(level.map(|l| l.1));
    let (mut lo, mut hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| (a.min(y), b.max(y)));
    if !(hi > lo) {
        (lo, hi) = if lo.is_finite() { (lo - 1.0, hi + 1.0) } else { (0.0, 1.0) };
    }
    let pad = (hi - lo) * 0.05;
    // Runs end on the first whole rollout past total_timesteps: show their last points too.
    let xmax = curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.0)).fold(xmax.max(1.0), f64::max);
    let decimals = if xmax < 20_000.0 { 1 } else { 0 };
    let tmp = path.with_extension("png.tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, (lo - pad)..(hi + pad))?;
        chart
            .configure_mesh()
            .x_desc("environment steps")
            .y_desc("mean return, last 100 episodes")
            .x_label_formatter(&|x| format!("{:.*}k", decimals, x / 1000.0))
            .draw()?;
        for (i, (label, c)) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(c.iter().copied(), color.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        if let Some((label, y)) = level {
            chart
                .draw_series(LineSeries::new(vec![(0.0, y), (xmax, y)], BLACK.mix(0.5)))?
                .label(label)
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        root.present()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
