//! Clients built inside an async runtime (what `#[tokio::main]` runs the
//! service's code in): building one never panics, and what the builder
//! checks is still checked there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use secrecy::SecretString;
use sluice_forge::{
    AsyncForgeClient, CallOptions, ForgeClient, ForgeError, GitHubAppSource, Method,
};
use sluice_policy::OutcomeKind;
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

const KEY: &str = include_str!("../data/test-only-app-key.pem");

/// `body` run as `#[tokio::main]` runs `main`: inside a multi-threaded
/// runtime, on the thread that entered it.
fn in_runtime<T>(body: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(body)
}

#[test]
fn a_forge_client_and_an_app_source_built_inside_a_runtime_do_not_panic_and_still_work() {
    let forge = FakeForge::start().expect("fake forge");
    let url = forge.url();
    let (client, source) = in_runtime(async {
        let source = Arc::new(
            GitHubAppSource::new(&url, "4242", 99, &SecretString::from(KEY.to_string()))
                .expect("app source")
                .with_https(&sluice_https::HttpsConfig::new())
                .expect("app source with https"),
        );
        let client = ForgeClient::builder(&url)
            .policy(policy(Duration::from_millis(10)))
            .bounds(exercise())
            .github_app(Arc::clone(&source))
            .build()
            .expect("client");
        // A client built and dropped inside the runtime too.
        drop(ForgeClient::new(&url).expect("second client"));
        (client, source)
    });
    // Built there, they work: the App buys its token, the call succeeds.
    let out = client
        .request(Method::GET, "/zen", None, &CallOptions::new())
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(source.mint_count(), 1);
    assert_eq!(forge.arrivals(Endpoint::AccessToken).len(), 1);
}

#[test]
fn what_a_builder_checks_is_still_checked_inside_a_runtime() {
    in_runtime(async {
        let e = ForgeClient::new("not a url").expect_err("bad base");
        assert!(matches!(e, ForgeError::InvalidUrl(_)), "{e:?}");
        let e = GitHubAppSource::new(
            "https://api.github.com",
            "4242",
            99,
            &SecretString::from("not a key".to_string()),
        )
        .expect_err("bad key");
        assert!(matches!(e, ForgeError::Key(_)), "{e:?}");
        // Trust roots read in the runtime, the clients built with them
        // (the TLS configuration is made in `build()`, on its own thread).
        let pki = sluice_testkit::tls::TestPki::new().expect("pki");
        let https = sluice_https::HttpsConfig::new()
            .with_ca_file(pki.ca_file())
            .expect("ca file");
        ForgeClient::builder("https://api.github.com")
            .https(https.clone())
            .build()
            .expect("client with a CA file");
        GitHubAppSource::new(
            "https://api.github.com",
            "4242",
            99,
            &SecretString::from(KEY.to_string()),
        )
        .expect("app source")
        .with_https(&https)
        .expect("app source with a CA file");
    });
}

/// A memory ledger that reports every finish (id, result, when).
struct Finishes {
    inner: sluice_policy::MemoryLedger,
    tx: std::sync::Mutex<std::sync::mpsc::Sender<(String, sluice_policy::PreviousResult, Instant)>>,
}

impl sluice_policy::Ledger for Finishes {
    fn claim(
        &self,
        req: &sluice_policy::ClaimRequest<'_>,
    ) -> Result<sluice_policy::Claim, sluice_policy::LedgerError> {
        self.inner.claim(req)
    }
    fn finish(
        &self,
        req: &sluice_policy::FinishRequest<'_>,
    ) -> Result<(), sluice_policy::LedgerError> {
        let r = self.inner.finish(req);
        let _ =
            self.tx
                .lock()
                .expect("tx")
                .send((req.id.to_string(), req.run.result, Instant::now()));
        r
    }
}

#[test]
fn the_async_facade_answers_an_awaited_call_and_a_dropped_one_cancels_its_operation() {
    let forge = FakeForge::start().expect("fake forge");
    let (tx, finishes) = std::sync::mpsc::channel();
    let ledger = Arc::new(Finishes {
        inner: sluice_policy::MemoryLedger::new(),
        tx: std::sync::Mutex::new(tx),
    });
    let policy = Arc::new(sluice_policy::Policy::builder().ledger(ledger).build());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let url = forge.url();
    let client = rt.block_on(async {
        AsyncForgeClient::new(
            ForgeClient::builder(&url)
                .policy(policy)
                .bounds(exercise())
                .build()
                .expect("client"),
        )
    });
    // Awaited: the outcome comes back.
    let out = rt
        .block_on(client.request(Method::GET, "/zen", None, CallOptions::new().id("zen-1")))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let (id, _, _) = finishes
        .recv_timeout(Duration::from_secs(30))
        .expect("finish");
    assert_eq!(id, "zen-1");
    // Dropped while the forge says nothing: the operation is cancelled
    // and ends at once, its outcome in the ledger.
    forge.set(Endpoint::Zen, Behaviour::Delay(Duration::from_secs(120)));
    let task = rt.spawn(client.request(Method::GET, "/zen", None, CallOptions::new().id("zen-2")));
    assert!(forge.wait_for_arrivals(Endpoint::Zen, 2, Duration::from_secs(30)));
    task.abort();
    let dropped = Instant::now();
    let (id, result, at) = finishes
        .recv_timeout(Duration::from_secs(30))
        .expect("finish");
    assert_eq!(id, "zen-2");
    assert_eq!(result, sluice_policy::PreviousResult::Unknown);
    let took = at.duration_since(dropped);
    eprintln!("the forge read finished {took:?} after its future was dropped");
    assert!(
        took < Duration::from_secs(1),
        "ended {took:?} after the drop"
    );
    assert!(
        forge.completions(Endpoint::Zen).len() < 2,
        "{}",
        forge.log_text()
    );
}

/// What a service's `main` under `#[tokio::main]` does first: build its
/// App source and its clients, then await a call (the attribute on this
/// function builds the runtime and runs the body on it, as it does on
/// `main`).
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_main(url: String) -> (Arc<GitHubAppSource>, OutcomeKind) {
    let source = Arc::new(
        GitHubAppSource::new(&url, "4242", 99, &SecretString::from(KEY.to_string()))
            .expect("app source"),
    );
    let client = AsyncForgeClient::new(
        ForgeClient::builder(&url)
            .policy(policy(Duration::from_millis(10)))
            .bounds(exercise())
            .github_app(Arc::clone(&source))
            .build()
            .expect("client"),
    );
    let out = client
        .request(Method::GET, "/zen", None, CallOptions::new().id("main-zen"))
        .await
        .expect("valid input");
    (source, out.kind)
}

#[test]
fn clients_and_an_app_source_built_in_a_tokio_main_work_there() {
    let forge = FakeForge::start().expect("fake forge");
    let (source, kind) = a_service_main(forge.url());
    assert_eq!(kind, OutcomeKind::Succeeded);
    assert_eq!(source.mint_count(), 1);
    assert_eq!(forge.arrivals(Endpoint::Zen).len(), 1);
}

#[test]
fn an_async_forge_calls_operation_span_sits_under_the_callers_span() {
    let forge = FakeForge::start().expect("fake forge");
    // A 5xx first: the operation has two attempts, each logged.
    forge.set(Endpoint::Zen, Behaviour::Fail5xxThenOk(1));
    let capture = sluice_testkit::capture::Capture::new();
    let dispatch = tracing::Dispatch::new(capture.subscriber());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            // Kept for the thread's life: the blocking pool's threads too.
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        })
        .build()
        .expect("runtime");
    let url = forge.url();
    // Spawned: the caller's span is made on a runtime thread, whose
    // subscriber is the capture (the thread in `block_on` has none).
    let task = rt.spawn(async move {
        let client = AsyncForgeClient::new(
            ForgeClient::builder(&url)
                .policy(policy(Duration::from_millis(10)))
                .bounds(exercise())
                .build()
                .expect("client"),
        );
        let caller = tracing::info_span!("caller", request = "r-7");
        tracing::Instrument::instrument(
            client.request(Method::GET, "/zen", None, CallOptions::new().id("span-zen")),
            caller,
        )
        .await
        .expect("valid input")
    });
    let out = rt.block_on(task).expect("the task ran");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(out.attempts.len(), 2, "{out:?}");
    let events = capture.events();
    let in_operation: Vec<_> = events
        .iter()
        .filter(|e| e.spans.iter().any(|s| s.name == "operation"))
        .collect();
    assert!(!in_operation.is_empty(), "no event in the operation's span");
    for e in &in_operation {
        assert_eq!(e.spans[0].name, "caller", "{e:?}");
        assert_eq!(e.span_field("caller", "request"), Some("r-7"));
    }
    // Both attempts' events are there, under the caller's span.
    assert!(
        in_operation
            .iter()
            .any(|e| e.spans.iter().any(|s| s.name == "attempt")),
        "no attempt span under the caller: {in_operation:?}"
    );
}
