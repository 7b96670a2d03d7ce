//! `--metrics`: a small in-process `metrics` recorder, and the summary of what it
//! recorded, printed to stderr at exit. Without `--metrics` no recorder is
//! installed and recording costs nothing (the library installs none).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// One metric's value.
enum Value {
    Counter(Arc<AtomicU64>),
    /// An `f64` as bits.
    Gauge(Arc<AtomicU64>),
    Histogram(Arc<Samples>),
}

/// A histogram's count, sum and largest sample.
#[derive(Default)]
struct Samples(Mutex<(u64, f64, f64)>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        s.1 += value;
        s.2 = if s.0 == 1 { value } else { s.2.max(value) };
    }
}

/// Every metric registered, by name and labels.
#[derive(Clone, Default)]
pub struct Summary {
    values: Arc<Mutex<BTreeMap<String, Value>>>,
}

impl Summary {
    /// Install a new summary as the process's recorder; `None` when one is
    /// installed already.
    pub fn install() -> Option<Summary> {
        let summary = Summary::default();
        metrics::set_global_recorder(summary.clone()).ok()?;
        Some(summary)
    }

    /// `name{label="value",...} value` lines, sorted; a histogram as its
    /// count, sum and max.
    pub fn render(&self) -> String {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for (key, value) in values.iter() {
            let _ = match value {
                Value::Counter(c) => writeln!(out, "{key} {}", c.load(Ordering::Relaxed)),
                Value::Gauge(g) => {
                    writeln!(out, "{key} {}", f64::from_bits(g.load(Ordering::Relaxed)))
                }
                Value::Histogram(h) => {
                    let (count, sum, max) = *h.0.lock().unwrap_or_else(|p| p.into_inner());
                    writeln!(out, "{key} count={count} sum={sum:.3} max={max:.3}")
                }
            };
        }
        out
    }

    fn entry(&self, key: &Key, make: impl FnOnce() -> Value) -> Value {
        let mut name = key.name().to_string();
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={:?}", l.key(), l.value()))
            .collect();
        if !labels.is_empty() {
            let _ = write!(name, "{{{}}}", labels.join(","));
        }
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        match values.entry(name).or_insert_with(make) {
            Value::Counter(c) => Value::Counter(Arc::clone(c)),
            Value::Gauge(g) => Value::Gauge(Arc::clone(g)),
            Value::Histogram(h) => Value::Histogram(Arc::clone(h)),
        }
    }
}

/// A gauge kept as the bits of an `f64`.
struct GaugeBits(Arc<AtomicU64>);

impl GaugeFn for GaugeBits {
    fn increment(&self, value: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some((f64::from_bits(b) + value).to_bits())
            });
    }

    fn decrement(&self, value: f64) {
        self.increment(-value);
    }

    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// A counter over a shared atomic.
struct Count(Arc<AtomicU64>);

impl CounterFn for Count {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
    }
}

impl Recorder for Summary {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.entry(key, || Value::Counter(Arc::default())) {
            Value::Counter(c) => Counter::from_arc(Arc::new(Count(c))),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.entry(key, || Value::Gauge(Arc::default())) {
            Value::Gauge(g) => Gauge::from_arc(Arc::new(GaugeBits(g))),
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.entry(key, || Value::Histogram(Arc::default())) {
            Value::Histogram(h) => Histogram::from_arc(h),
            _ => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_renders_counters_gauges_and_histograms_by_name_and_labels() {
        let summary = Summary::default();
        metrics::with_local_recorder(&summary, || {
            metrics::counter!("ops_total", "kind" => "push").increment(2);
            metrics::counter!("ops_total", "kind" => "push").increment(1);
            metrics::gauge!("tokens", "host" => "h:1").set(19.5);
            metrics::histogram!("secs").record(0.5);
            metrics::histogram!("secs").record(1.5);
        });
        assert_eq!(
            summary.render(),
            "ops_total{kind=\"push\"} 3\nsecs count=2 sum=2.000 max=1.500\ntokens{host=\"h:1\"} 19.5\n"
        );
    }
}
