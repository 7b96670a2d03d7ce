//! The async facade (`AsyncGitClient`) inside a tokio runtime: a dropped
//! future cancels its operation, whose outcome still reaches the ledger;
//! the operation's span sits under the caller's.

use crate::common;

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use sluice_git::{AsyncGitClient, GitClient, PushOptions};
use sluice_policy::{
    Claim, ClaimRequest, FinishRequest, Ledger, LedgerError, MemoryLedger, Policy, PreviousResult,
    ProgressRequest,
};
use sluice_testkit::capture::Capture;
use sluice_testkit::{repo, Fault, FaultProxy};

/// A memory ledger that reports every finish (id, result, when).
struct Finishes {
    inner: MemoryLedger,
    tx: Mutex<mpsc::Sender<(String, PreviousResult, Instant)>>,
}

impl Ledger for Finishes {
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        self.inner.claim(req)
    }
    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        let r = self.inner.finish(req);
        let _ =
            self.tx
                .lock()
                .expect("tx")
                .send((req.id.to_string(), req.run.result, Instant::now()));
        r
    }
    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        self.inner.progress(req)
    }
}

/// An async client whose ledger reports its finishes.
fn reporting_client() -> (
    AsyncGitClient,
    mpsc::Receiver<(String, PreviousResult, Instant)>,
) {
    let (tx, rx) = mpsc::channel();
    let ledger = Arc::new(Finishes {
        inner: MemoryLedger::new(),
        tx: Mutex::new(tx),
    });
    let policy = Arc::new(Policy::builder().ledger(ledger).build());
    (AsyncGitClient::new(GitClient::new(policy)), rx)
}

/// A multi-threaded runtime (what `#[tokio::main]` builds) whose threads,
/// the blocking pool's included, log to `capture`.
fn runtime(capture: &Capture) -> tokio::runtime::Runtime {
    let dispatch = tracing::Dispatch::new(capture.subscriber());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(8)
        .enable_all()
        .on_thread_start(move || {
            // Kept for the thread's life.
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        })
        .build()
        .expect("runtime")
}

#[test]
fn a_dropped_ls_refs_future_cancels_its_stalled_operation_which_ends_within_a_second() {
    let w = World::new();
    w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault_always(Fault::StallBeforeAdvert);
    let capture = Capture::new();
    let rt = runtime(&capture);
    let (client, finishes) = reporting_client();
    let url = proxy.url("s.git");
    let task = rt.spawn(async move {
        let caller = tracing::info_span!("caller", request = "r-1");
        let _entered = caller.enter();
        let fut = client.ls_refs(
            url,
            Vec::new(),
            // Far longer than the test: only the cancel can end it soon.
            quick(60_000, 30_000, 3).id("async-ls-refs"),
        );
        drop(_entered);
        tracing::Instrument::instrument(fut, caller).await
    });
    // The request is at the server, which says nothing.
    let t0 = Instant::now();
    while proxy.connections().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "never connected");
        std::thread::sleep(Duration::from_millis(5));
    }
    task.abort();
    let dropped = Instant::now();
    let (id, result, at) = finishes
        .recv_timeout(Duration::from_secs(30))
        .expect("the operation finished");
    assert_eq!(id, "async-ls-refs");
    assert_eq!(result, PreviousResult::Unknown);
    let took = at.duration_since(dropped);
    eprintln!("ls-refs finished {took:?} after its future was dropped");
    assert!(
        took < Duration::from_secs(1),
        "ended {took:?} after the drop"
    );
    let aborted = rt.block_on(task).expect_err("aborted");
    assert!(aborted.is_cancelled());
    // The operation's events sit under the caller's span.
    let events = capture.events();
    let finished: Vec<_> = events
        .iter()
        .filter(|e| e.spans.iter().any(|s| s.name == "operation"))
        .collect();
    assert!(!finished.is_empty(), "no event in the operation's span");
    for e in finished {
        assert_eq!(e.spans[0].name, "caller", "{e:?}");
        assert_eq!(e.span_field("caller", "request"), Some("r-1"));
    }
}

#[test]
fn a_dropped_push_future_after_its_pack_is_settled_by_reading() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::StallBeforeReport, 1);
    let capture = Capture::new();
    let rt = runtime(&capture);
    let (client, finishes) = reporting_client();
    let url = proxy.url("s.git");
    let repo = open(&local).into_sync();
    let task = rt.spawn(client.push(
        url,
        vec![update(Some(&tip), "refs/heads/main")],
        PushOptions::default(),
        repo,
        quick(20_000, 10_000, 3).id("async-push"),
    ));
    let t0 = Instant::now();
    while repo::rev_parse(&srv, "refs/heads/main").as_deref() != Some(tip.as_str()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the push never landed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    task.abort();
    let dropped = Instant::now();
    let (id, result, at) = finishes
        .recv_timeout(Duration::from_secs(30))
        .expect("the operation finished");
    assert_eq!(id, "async-push");
    // Settled by reading: it landed.
    assert_eq!(result, PreviousResult::Succeeded);
    // On the cancel, not on the 10 s attempt timeout.
    let took = at.duration_since(dropped);
    eprintln!("push finished {took:?} after its future was dropped");
    assert!(
        took < Duration::from_secs(5),
        "ended {took:?} after the drop"
    );
}

#[test]
fn an_awaited_call_returns_its_outcome() {
    let w = World::new();
    let srv = w.small("s.git");
    let capture = Capture::new();
    let rt = runtime(&capture);
    let url = format!("file://{}", srv.display());
    let out = rt.block_on(async {
        let client = AsyncGitClient::new(client());
        let dst = w.path("dst.git");
        let r = empty_repo(&dst).into_sync();
        client
            .fetch(
                url,
                vec!["+refs/heads/*:refs/heads/*".into()],
                r,
                quick(20_000, 10_000, 3),
            )
            .await
            .expect("valid input")
    });
    assert_eq!(out.kind, sluice_policy::OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        repo::rev_parse(&w.path("dst.git"), "refs/heads/main"),
        repo::rev_parse(&srv, "refs/heads/main")
    );
}
