//! Medians, ranges, ratios and how figures are written.

use std::time::Duration;

/// The median of `xs` (the mean of the middle two for an even count).
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The smallest and largest of `xs`.
pub fn min_max(xs: &[f64]) -> Option<(f64, f64)> {
    let min = xs.iter().copied().reduce(f64::min)?;
    let max = xs.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

/// Seconds of `d` as f64.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A duration in seconds, written as `2.75 ms`, `411 ms` or `6.34 s`.
pub fn fmt_secs(s: f64) -> String {
    if s < 0.01 {
        format!("{:.2} ms", s * 1e3)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.2} s", s)
    }
}

/// A min–max range of seconds in one unit: `5.42–5.77 ms`, `1.90–2.10 s`.
pub fn fmt_range(lo: f64, hi: f64) -> String {
    let num = |s: f64| {
        let a = fmt_secs(s);
        a.split(' ').next().unwrap_or_default().to_owned()
    };
    if hi < 1.0 {
        let ms = |s: f64| {
            if hi < 0.01 {
                format!("{:.2}", s * 1e3)
            } else {
                format!("{:.1}", s * 1e3)
            }
        };
        format!("{}–{} ms", ms(lo), ms(hi))
    } else if lo >= 1.0 {
        format!("{}–{} s", num(lo), num(hi))
    } else {
        format!("{}–{}", fmt_secs(lo), fmt_secs(hi))
    }
}

/// Bytes on the wire, decimal (`5.8 KB`, `1.17 MB`, `99.4 MB`).
pub fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b < 1e3 {
        format!("{b} B")
    } else if b < 1e6 {
        format!("{:.1} KB", b / 1e3)
    } else if b < 1e7 {
        format!("{:.2} MB", b / 1e6)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

/// Memory in KiB written in MiB (`11.2 MiB`).
pub fn fmt_kib(k: f64) -> String {
    format!("{:.1} MiB", k / 1024.0)
}

/// `a / b` written with two decimals, `—` when either is missing.
pub fn fmt_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_formats() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(min_max(&[2.0, 5.0, 1.0]), Some((1.0, 5.0)));
        assert_eq!(fmt_secs(0.00275), "2.75 ms");
        assert_eq!(fmt_secs(0.4112), "411.2 ms");
        assert_eq!(fmt_secs(6.344), "6.34 s");
        assert_eq!(fmt_bytes(5_800), "5.8 KB");
        assert_eq!(fmt_bytes(1_170_000), "1.17 MB");
        assert_eq!(fmt_bytes(99_400_000), "99.4 MB");
        assert_eq!(fmt_ratio(Some(1.0), Some(4.0)), "0.25×");
        assert_eq!(fmt_ratio(None, Some(4.0)), "—");
        assert_eq!(fmt_range(0.00542, 0.00577), "5.42–5.77 ms");
        assert_eq!(fmt_range(0.0478, 0.0517), "47.8–51.7 ms");
        assert_eq!(fmt_range(1.9, 2.1), "1.90–2.10 s");
        assert_eq!(fmt_range(0.9, 1.1), "900.0 ms–1.10 s");
    }
}
