//! The policy engine: runs one operation's attempts under its budget.
//!
//! The loop itself is backon's `BlockingRetry`; the policy plugs in through
//! backon's extension points: a [`Backoff`](backon::Backoff) iterator that
//! wraps the exponential one and applies the remote's retry hint, the settle
//! pause, the deadline and the per-host retry budget (returning `None` to
//! stop, with the reason noted), the `when` predicate (the class × effect
//! table), and the injected sleeper.
//!
//! One operation is a run ([`state`]'s `Run`) through named steps, a file
//! each, in the order they happen:
//!
//! 1. `claim` — the operation id in the ledger;
//! 2. `attempt` — the cancel flag and the budget checked, a credential
//!    bought when one is needed, the caller's attempt run in its span;
//! 3. `classify` — the attempt's end recorded, a refused credential noted,
//!    and whether backon tries again;
//! 4. `wait` — the pause before the next attempt (hint, settle pause,
//!    deadline, retry budget);
//! 5. `settle` — an unknown write settled by reading, never sent again;
//! 6. `finish` — the outcome, its log lines, its record in the ledger.
//!
//! Below them: `operation` (what an operation is), `ctx` (what the caller's
//! closures are given and return), `policy` (the shared value) and `state`
//! (the run). No file imports one that imports it back.

mod attempt;
mod claim;
mod classify;
mod ctx;
mod finish;
mod operation;
mod policy;
mod settle;
mod state;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use backon::BlockingRetryable;

pub use ctx::{AttemptCtx, AttemptFacts, ReconcileCtx, Rejection, Settlement};
pub use finish::SAME_CREDENTIAL;
pub use operation::Operation;
pub use policy::{Policy, PolicyBuilder};

use crate::class::{AttemptError, Class, Effect};
use crate::metric;
use crate::outcome::{Outcome, OutcomeKind, Verdict};
use state::{Run, Step};
use wait::PolicyBackoff;

impl Policy {
    /// Run a read (or a write that has no settling read: an unknown answer
    /// then ends the operation `unknown` with `may_have_applied: true`).
    pub fn run<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
    ) -> Outcome<T> {
        self.execute(
            op,
            attempt,
            None::<fn(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>>,
            |_: &T| None,
        )
    }

    /// [`Policy::run`], where a value can be the remote's answer rather than
    /// success (a fetch with a ref refused by git's rules): `judge` looks at
    /// the value, and a [`Rejection`] makes the outcome `answered`, keeping
    /// the value.
    pub fn run_judged<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T> {
        self.execute(
            op,
            attempt,
            None::<fn(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>>,
            judge,
        )
    }

    /// Run a write whose unknown answer is settled by `reconcile`, a read.
    ///
    /// `reconcile` is called only after an attempt whose request was
    /// complete and whose answer was not read (a cut, a timeout, a cancel).
    /// **The write is never attempted again after that**, whatever the
    /// reads find: landed is success; not landed, and a read that failed
    /// without an answer (`unjudged` or `unknown`: refused, cut, a 5xx, a
    /// timeout — it told nothing), are read again with backoff (jittered,
    /// capped, each pause at most half the reconcile reserve) while the
    /// deadline allows — bounded by the deadline, not by `max_attempts`, and
    /// stopping about 250 ms before it so the ledger's finish has its moment
    /// — since a server that got the whole request may still be applying
    /// it, and a daemon restarting for a moment must not end the settling.
    /// Landed then is success; still not there at the deadline ends
    /// `unknown` with `may_have_applied: true`, verdict `not-landed` and
    /// `stopped: deadline`; no read answered ends `unknown`, verdict null,
    /// `stopped: deadline`. Moved, and a read
    /// whose failure is an answer (a 404, an `ERR`), end the reads at once.
    /// After the caller's cancel the reads stop at the first read that
    /// answered, or once the reconcile reserve has passed since the cancel.
    /// Every settling read is listed in the outcome's `reconciled.reads` (a
    /// failed one with its cause). The caller's next round acts on what the
    /// remote holds.
    pub fn run_write<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: impl FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    ) -> Outcome<T> {
        self.execute(op, attempt, Some(reconcile), |_: &T| None)
    }

    /// [`Policy::run_write`], where a value can be the remote's answer
    /// rather than success (a push whose report rejected a ref): `judge`
    /// looks at every value the write ends with, and a [`Rejection`] makes
    /// the outcome `answered`, keeping the value.
    pub fn run_write_judged<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: impl FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T> {
        self.execute(op, attempt, Some(reconcile), judge)
    }

    /// Run one operation inside its `operation` span; record its metrics
    /// and log its end.
    fn execute<T, R>(
        &self,
        mut op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: Option<R>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        // A generated id is unique by construction (process, clock, counter):
        // it needs no claim, only its record at the end.
        let generated = op.id.is_none();
        let id = op.id.take().unwrap_or_else(|| self.new_id());
        // OpenTelemetry's names beside ours: the VCS attributes where the
        // remote is a repository (not the forge's API, whose calls are
        // `http-*` or named for what they do to one).
        let git = matches!(op.kind.as_str(), "ls-refs" | "fetch" | "push");
        let head = op.refs.as_deref().and_then(|r| head_ref_name(&op.kind, r));
        let span = tracing::info_span!(
            "operation",
            id = %id,
            kind = %op.kind,
            effect = op.effect.as_str(),
            host = %op.host,
            "vcs.repository.url.full" = git.then_some(op.remote.as_str()),
            "vcs.ref.head.name" = head.filter(|_| git),
        );
        let _entered = span.enter();
        let host = op.host.clone();
        let write = op.effect == Effect::Write;
        let out = self.execute_in_span(op, id, generated, attempt, reconcile, judge);

        let kind = out.operation.kind.clone();
        let result = out.kind.as_str();
        metrics::counter!(metric::OPERATIONS_TOTAL, "kind" => kind.clone(), "result" => result)
            .increment(1);
        metrics::histogram!(metric::OPERATION_DURATION_SECONDS, "kind" => kind.clone(), "result" => result)
            .record(out.elapsed_ms as f64 / 1000.0);
        // A write had an unknown attempt at most once: it is settled, never
        // sent again.
        if write && out.attempts.iter().any(|a| a.class == Some(Class::Unknown)) {
            let verdict = out
                .reconciled
                .as_ref()
                .and_then(|r| r.verdict)
                .map_or("unsettled", Verdict::as_str);
            metrics::counter!(metric::UNKNOWN_WRITES_TOTAL, "host" => host.clone(), "verdict" => verdict)
                .increment(1);
        }
        tracing::info!(
            op = %out.operation.id, kind = %kind, result,
            stopped = out.stopped.map(|s| s.as_str()), attempts = out.attempts.len(),
            elapsed_ms = out.elapsed_ms, recorded = out.recorded, "operation ended"
        );
        if write && out.kind == OutcomeKind::Unknown && out.may_have_applied == Some(true) {
            tracing::warn!(
                op = %out.operation.id, kind = %kind, host = %host,
                verdict = out.reconciled.as_ref().and_then(|r| r.verdict).map(Verdict::as_str),
                "a write ended unknown and may have applied: read what the remote holds before acting"
            );
        }
        out
    }

    /// Run one operation's steps: claim, then attempts (each classified,
    /// an unknown write settled) with waits between them, then finish.
    fn execute_in_span<T, R>(
        &self,
        op: Operation,
        id: String,
        generated: bool,
        mut attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        mut reconcile: Option<R>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let run = Run::new(self, op, id, generated);
        if let Err(rejected) = run.claim() {
            return *rejected;
        }
        let backoff = PolicyBackoff {
            inner: self.exponential(&run.bounds),
            run: &run,
        };
        let sleeper = Arc::clone(&self.sleeper);
        let sleep_cancel = run.cancel.clone();
        let mut n: u32 = 0;
        let result = (|| run.attempt(&mut n, &mut attempt, &mut reconcile, &judge))
            .retry(backoff)
            .sleep(move |d: Duration| sleeper.sleep(d, sleep_cancel.as_atomic()))
            .when(|s: &Step<T>| run.tried_again(s))
            .call();
        run.finish(result, &judge)
    }
}

/// OpenTelemetry's `vcs.ref.head.name` for a git operation naming `refs`
/// as the ledger records them: the one ref a push updates (`[+]<new>:<dst>`
/// gives `<dst>`), the one ref a fetch asks for (`[+]<src>[:<dst>]` gives
/// `<src>`, unless it is a pattern or an object id); none for several refs,
/// for ls-refs (prefixes, not refs) or another kind. (A ref name never
/// holds a `:`.)
fn head_ref_name<'r>(kind: &str, refs: &'r [String]) -> Option<&'r str> {
    let [one] = refs else {
        return None;
    };
    let spec = one.strip_prefix('+').unwrap_or(one);
    let name = match kind {
        "push" => spec.rsplit_once(':').map_or(spec, |(_, dst)| dst),
        "fetch" => {
            let src = spec.split_once(':').map_or(spec, |(src, _)| src);
            let oid = matches!(src.len(), 40 | 64) && src.bytes().all(|b| b.is_ascii_hexdigit());
            if src.contains('*') || oid {
                return None;
            }
            src
        }
        _ => return None,
    };
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::head_ref_name;

    #[test]
    fn the_head_ref_is_the_ref_a_push_updates_or_a_fetch_asks_for_never_a_pattern() {
        let one = |s: &str| vec![s.to_string()];
        let sha = "e642c998c5c870bb05d33dcc1e026c49ec822af2";
        let cases = [
            (
                "push",
                one(&format!("{sha}:refs/heads/feature")),
                Some("refs/heads/feature"),
            ),
            (
                "push",
                one(&format!("+{sha}:refs/heads/main")),
                Some("refs/heads/main"),
            ),
            ("push", one(":refs/heads/gone"), Some("refs/heads/gone")),
            (
                "fetch",
                one("+refs/heads/main:refs/remotes/origin/main"),
                Some("refs/heads/main"),
            ),
            ("fetch", one("main"), Some("main")),
            ("fetch", one("+refs/heads/*:refs/remotes/origin/*"), None),
            ("fetch", one(sha), None),
            ("ls-refs", one("refs/heads/"), None),
            (
                "push",
                vec![format!("{sha}:refs/heads/a"), format!("{sha}:refs/heads/b")],
                None,
            ),
            ("http-get", one("x"), None),
        ];
        for (kind, refs, want) in cases {
            assert_eq!(head_ref_name(kind, &refs), want, "{kind} {refs:?}");
        }
    }
}
