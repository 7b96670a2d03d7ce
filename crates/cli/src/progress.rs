//! Progress of fetch and push on stderr, fed by `CallOptions::progress`:
//! the stage (`counted`, `sending`, `sent`, gix's receiving and resolving
//! tasks, the remote's own words), objects, bytes and throughput.
//!
//! * On a terminal (the default there, or `--progress`): a spinner line
//!   redrawn in place.
//! * `--progress` when stderr is not a terminal: a plain line when the stage
//!   changes and at most once a second within one, as git's `--progress`
//!   does into a pipe.
//! * `--no-progress`, `-v` (tracing writes to stderr), or the default when
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

/// One stage's figures, for the line printer.
struct Lines {
    what: String,
    stage: String,
    started: Instant,
    printed: Option<Instant>,
}

enum Shown {
    Spinner(ProgressBar),
    Lines(Arc<Mutex<Lines>>),
}

/// What is shown, if anything.
pub struct Bar(Option<Shown>);

/// `N objects, X, Y/s` for `p`, `Y` over `elapsed`.
fn figures(p: &Progress, elapsed: Duration) -> String {
    let rate = if elapsed.as_secs_f64() > 0.0 && p.bytes > 0 {
        format!(
            ", {}/s",
            HumanBytes((p.bytes as f64 / elapsed.as_secs_f64()) as u64)
        )
    } else {
        String::new()
    };
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
                started: Instant::now(),
                printed: None,
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
                let started = Arc::new(Mutex::new((String::new(), Instant::now())));
                Some(Arc::new(move |p: &Progress| {
                    let mut s = started.lock().unwrap_or_else(|e| e.into_inner());
                    if s.0 != p.stage {
                        *s = (p.stage.clone(), Instant::now());
                    }
                    pb.set_message(format!("{}: {}", p.stage, figures(p, s.1.elapsed())));
                }))
            }
            Shown::Lines(lines) => {
                let lines = Arc::clone(lines);
                Some(Arc::new(move |p: &Progress| {
                    let mut l = lines.lock().unwrap_or_else(|e| e.into_inner());
                    let now = Instant::now();
                    let new_stage = l.stage != p.stage;
                    if new_stage {
                        l.stage = p.stage.clone();
                        l.started = now;
                    } else if l
                        .printed
                        .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
                    {
                        return;
                    }
                    l.printed = Some(now);
                    let line = format!(
                        "{}: {}: {}\n",
                        l.what,
                        p.stage,
                        figures(p, now.duration_since(l.started))
                    );
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
