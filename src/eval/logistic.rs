//! Logistic regression by maximum likelihood, for the score calibrations
//! `strata eval calibrate` fits (Platt 1999 for one feature).

use crate::config::Calibration;

/// Fits `p = σ(a·x + b)` by maximum likelihood (one feature).
pub fn fit_platt(samples: &[(f64, bool)]) -> Calibration {
    let rows: Vec<(Vec<f64>, bool)> = samples.iter().map(|&(x, y)| (vec![x], y)).collect();
    let (w, b) = fit_logistic(&rows);
    Calibration {
        slope: w[0],
        reference_slope: 0.0,
        intercept: b,
    }
}

/// Logistic regression by maximum likelihood: features are standardised,
/// Newton steps (tiny ridge) are halved until the log-likelihood improves,
/// and the weights are mapped back to raw units. Returns (weights, bias).
pub fn fit_logistic(samples: &[(Vec<f64>, bool)]) -> (Vec<f64>, f64) {
    let weights = vec![1.0; samples.len()];
    fit_logistic_weighted(samples, &weights)
}

/// [`fit_logistic`] with one weight per sample (a sample of weight 2 counts
/// as two copies; weights are rescaled to a mean of 1, so the ridge keeps its
/// strength). `weights` must be as long as `samples`.
pub fn fit_logistic_weighted(samples: &[(Vec<f64>, bool)], weights: &[f64]) -> (Vec<f64>, f64) {
    assert_eq!(samples.len(), weights.len(), "one weight per sample");
    let total: f64 = weights.iter().sum();
    let scale = if total > 0.0 {
        samples.len() as f64 / total
    } else {
        1.0
    };
    let sw: Vec<f64> = weights.iter().map(|w| w * scale).collect();
    let d = samples.first().map(|s| s.0.len()).unwrap_or(0);
    let n = samples.len().max(1) as f64;
    let mut mean = vec![0.0; d];
    let mut sd = vec![0.0; d];
    for ((x, _), w) in samples.iter().zip(&sw) {
        for j in 0..d {
            mean[j] += w * x[j] / n;
        }
    }
    for ((x, _), w) in samples.iter().zip(&sw) {
        for j in 0..d {
            sd[j] += w * (x[j] - mean[j]).powi(2) / n;
        }
    }
    let sd: Vec<f64> = sd.iter().map(|v| v.sqrt().max(1e-9)).collect();
    // rows of standardised features with a trailing 1 for the bias
    let z: Vec<(Vec<f64>, f64, f64)> = samples
        .iter()
        .zip(&sw)
        .map(|((x, y), w)| {
            let mut r: Vec<f64> = (0..d).map(|j| (x[j] - mean[j]) / sd[j]).collect();
            r.push(1.0);
            (r, if *y { 1.0 } else { 0.0 }, *w)
        })
        .collect();
    let k = d + 1;
    let ridge = 1e-4;
    let dot = |w: &[f64], r: &[f64]| w.iter().zip(r).map(|(a, b)| a * b).sum::<f64>();
    let ll = |w: &[f64]| -> f64 {
        z.iter()
            .map(|(r, y, sw)| {
                let t = dot(w, r);
                -sw * (y * (1.0 + (-t).exp()).ln() + (1.0 - y) * (1.0 + t.exp()).ln())
            })
            .sum::<f64>()
            - ridge * w.iter().map(|v| v * v).sum::<f64>()
    };
    let mut w = vec![0.0; k];
    let mut cur = ll(&w);
    for _ in 0..100 {
        let mut g = vec![0.0; k];
        let mut h = vec![vec![0.0; k]; k];
        for (r, y, sw) in &z {
            let p = 1.0 / (1.0 + (-dot(&w, r)).exp());
            let wgt = sw * p * (1.0 - p);
            for i in 0..k {
                g[i] += sw * (y - p) * r[i];
                for j in 0..k {
                    h[i][j] += wgt * r[i] * r[j];
                }
            }
        }
        for i in 0..k {
            g[i] -= 2.0 * ridge * w[i];
            h[i][i] += 2.0 * ridge;
        }
        let Some(step) = solve(h, g) else { break };
        let mut t = 1.0;
        let mut improved = false;
        while t > 1e-6 {
            let cand: Vec<f64> = w.iter().zip(&step).map(|(a, s)| a + t * s).collect();
            let v = ll(&cand);
            if v >= cur {
                improved = v - cur > 1e-10;
                w = cand;
                cur = v;
                break;
            }
            t /= 2.0;
        }
        if !improved {
            break;
        }
    }
    let weights: Vec<f64> = (0..d).map(|j| w[j] / sd[j]).collect();
    let bias = w[d] - (0..d).map(|j| w[j] * mean[j] / sd[j]).sum::<f64>();
    (weights, bias)
}

/// Solves `a · x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            for k in c..n {
                a[r][k] -= f * a[c][k];
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        x[r] = (b[r] - (r + 1..n).map(|k| a[r][k] * x[k]).sum::<f64>()) / a[r][r];
    }
    Some(x)
}
