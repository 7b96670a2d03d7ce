//! A progress spinner on stderr for fetch and push, fed by
//! `CallOptions::progress`; silent when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_git::Progress;

/// The callback type `CallOptions::progress` takes.
pub type Callback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A spinner, or nothing when stderr is not a terminal (or tracing is on).
pub struct Bar(Option<ProgressBar>);

impl Bar {
    /// A spinner labelled `what`, shown only when stderr is a terminal and
    /// tracing (`-v`) does not write there.
    pub fn new(what: &str, tracing: bool) -> Bar {
        if tracing || !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} {msg} [{elapsed}]") {
            pb.set_style(style);
        }
        pb.set_prefix(what.to_string());
        pb.set_message("connecting");
        pb.enable_steady_tick(Duration::from_millis(100));
        Bar(Some(pb))
    }

    /// The callback that feeds the spinner, when it is shown.
    pub fn callback(&self) -> Option<Callback> {
        let pb = self.0.clone()?;
        Some(Arc::new(move |p: &Progress| {
            pb.set_message(format!(
                "{}: {} objects, {}",
                p.stage,
                p.objects,
                HumanBytes(p.bytes)
            ));
        }))
    }

    /// Remove the spinner.
    pub fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}
