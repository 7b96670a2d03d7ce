//! Progress of fetch and push on stderr, fed by `CallOptions::progress`:
//! the stage (`counted`, `sending`, `sent`, gix's receiving and resolving
//! tasks, git's own progress lines from the remote — never the remote's
//! other words, which are `remote:` lines), objects, bytes and throughput.
//!
//! Throughput is the bytes moved within one stage over a real interval of
//! the clock, at least [`RATE_WINDOW`] long: a stage seen once, or for less
//! than that, shows none (a count over a few microseconds would claim
//! terabytes a second).
//!
//! * On a terminal (the default there, or `--progress`): a spinner line
//!   redrawn in place.
//! * `--progress` when stderr is not a terminal: a plain line when the stage
//!   changes and at most once a second within one, as git's `--progress`
//!   does into a pipe.
//! * `--no-progress`, `-q`, `--trace` (tracing writes to stderr), or the default when
//!   stderr is not a terminal: nothing.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_git::Progress;

/// The callback type `CallOptions::progress` takes.
pub type Callback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// `--progress` / `--no-progress` / neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// On when stderr is a terminal.
    #[default]
    Auto,
    /// On, as lines when stderr is not a terminal.
    On,
    /// Off.
    Off,
}

/// The least interval a throughput figure is measured over.
pub const RATE_WINDOW: Duration = Duration::from_millis(500);

/// Bytes per second within one stage, measured from the stage's first
/// report.
#[derive(Default)]
struct Rate {
    stage: String,
    first: Option<(Instant, u64)>,
}

impl Rate {
    /// Takes `p`, seen at `now`; the throughput since the stage's first
    /// report when at least [`RATE_WINDOW`] has passed and bytes moved.
    fn update(&mut self, p: &Progress, now: Instant) -> Option<u64> {
        if self.stage != p.stage || self.first.is_none() {
            self.stage = p.stage.clone();
            self.first = Some((now, p.bytes));
            return None;
        }
        let (t0, b0) = self.first?;
        let dt = now.saturating_duration_since(t0);
        let moved = p.bytes.checked_sub(b0).filter(|b| *b > 0)?;
        (dt >= RATE_WINDOW).then(|| (moved as f64 / dt.as_secs_f64()) as u64)
    }
}

/// The line printer's state.
struct Lines {
    what: String,
    stage: String,
    printed: Option<Instant>,
    rate: Rate,
}

enum Shown {
    Spinner(ProgressBar),
    Lines(Arc<Mutex<Lines>>),
}

/// What is shown, if anything.
pub struct Bar(Option<Shown>);

/// `N objects, X` for `p`, and `, Y/s` when a throughput was measured.
fn figures(p: &Progress, rate: Option<u64>) -> String {
    let rate = rate.map_or_else(String::new, |r| format!(", {}/s", HumanBytes(r)));
    format!("{} objects, {}{rate}", p.objects, HumanBytes(p.bytes))
}

impl Bar {
    /// Progress labelled `what` (`fetch`, `push`), per `mode`; never while
    /// tracing (`-v`) writes to stderr.
    pub fn new(what: &str, tracing: bool, mode: Mode) -> Bar {
        let terminal = std::io::stderr().is_terminal();
        if tracing || mode == Mode::Off || (mode == Mode::Auto && !terminal) {
            return Bar(None);
        }
        if !terminal {
            return Bar(Some(Shown::Lines(Arc::new(Mutex::new(Lines {
                what: what.to_string(),
                stage: String::new(),
                printed: None,
                rate: Rate::default(),
            })))));
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} {msg} [{elapsed}]") {
            pb.set_style(style);
        }
        pb.set_prefix(what.to_string());
        pb.set_message("connecting");
        pb.enable_steady_tick(Duration::from_millis(100));
        Bar(Some(Shown::Spinner(pb)))
    }

    /// The callback that feeds it, when something is shown.
    pub fn callback(&self) -> Option<Callback> {
        match self.0.as_ref()? {
            Shown::Spinner(pb) => {
                let pb = pb.clone();
                let rate = Arc::new(Mutex::new(Rate::default()));
                Some(Arc::new(move |p: &Progress| {
                    let mut rate = rate.lock().unwrap_or_else(|e| e.into_inner());
                    let r = rate.update(p, Instant::now());
                    pb.set_message(format!("{}: {}", p.stage, figures(p, r)));
                }))
            }
            Shown::Lines(lines) => {
                let lines = Arc::clone(lines);
                Some(Arc::new(move |p: &Progress| {
                    let mut l = lines.lock().unwrap_or_else(|e| e.into_inner());
                    let now = Instant::now();
                    let rate = l.rate.update(p, now);
                    let new_stage = l.stage != p.stage;
                    if new_stage {
                        l.stage = p.stage.clone();
                    } else if l
                        .printed
                        .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
                    {
                        return;
                    }
                    l.printed = Some(now);
                    let line = format!("{}: {}: {}\n", l.what, p.stage, figures(p, rate));
                    let _ = std::io::stderr().write_all(line.as_bytes());
                }))
            }
        }
    }

    /// Remove the spinner.
    pub fn finish(&self) {
        if let Some(Shown::Spinner(pb)) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(stage: &str, bytes: u64) -> Progress {
        Progress {
            stage: stage.into(),
            objects: 0,
            bytes,
        }
    }

    #[test]
    fn throughput_is_measured_over_a_real_interval_within_one_stage() {
        let t0 = Instant::now();
        let mut r = Rate::default();
        // A stage's first report: nothing measured yet, whatever it holds.
        assert_eq!(r.update(&at("read pack", 70 << 40), t0), None);
        // Too short an interval: none.
        let soon = t0 + Duration::from_millis(1);
        assert_eq!(r.update(&at("read pack", (70 << 40) + 4096), soon), None);
        // One second later, 1 MiB more: 1 MiB/s.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(
            r.update(&at("read pack", (70 << 40) + (1 << 20)), later),
            Some(1 << 20)
        );
        // A new stage starts over.
        assert_eq!(r.update(&at("received", 1 << 30), later), None);
    }
}
