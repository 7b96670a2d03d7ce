//! What an operator reads: eight pushes on eight threads through one client,
//! three of their first connections stalled until the watchdog cuts them,
//! under one capturing subscriber installed for the process (as a service
//! does). Every event of the policy and the git crate — the watchdog's, on
//! its own thread, included — is attributed to its operation and attempt.
//! One test in its own binary: the subscriber is global.

mod common;

use std::collections::BTreeMap;

use common::*;
use sluice_policy::{Class, OutcomeKind};
use sluice_testkit::{repo, Capture, Fault, FaultProxy};

#[test]
fn eight_concurrent_pushes_have_every_event_in_their_own_operation_and_attempt() {
    let capture = Capture::new();
    tracing::subscriber::set_global_default(capture.subscriber()).expect("the only subscriber");
    let w = World::new();
    let srv = w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let locals: Vec<(std::path::PathBuf, String)> = (0..8)
        .map(|i| {
            let local = local_clone(&srv, &w.path(&format!("local-{i}.git")));
            let tip = repo::commit_on(&local, &format!("t{i}"), &format!("work {i}"));
            (local, tip)
        })
        .collect();
    proxy.set_fault(Fault::StallBeforeAdvert, 3);
    let client = client();
    let url = proxy.url("s.git");
    let outcomes: BTreeMap<String, sluice_policy::Outcome<sluice_git::PushReport>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = locals
                .iter()
                .enumerate()
                .map(|(i, (local, tip))| {
                    let (client, url) = (&client, &url);
                    std::thread::Builder::new()
                        .name(format!("push-{i}"))
                        .spawn_scoped(scope, move || {
                            let id = format!("push-{i}");
                            let opts = (quick(60_000, 2_000, 4)).id(id.clone());
                            let t = update(Some(tip), &format!("refs/heads/t{i}"));
                            let out = push_by(client, url, t, local, &opts);
                            (id, out)
                        })
                        .expect("thread")
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("push thread"))
                .collect()
        });
    let mut cut = 0;
    for (id, out) in &outcomes {
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{id}: {:?} {:?}",
            out.error,
            out.attempts
        );
        cut += out.attempts.len() - 1;
    }
    assert_eq!(cut, 3, "three first connections stalled");

    let events: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.target.starts_with("sluice"))
        .collect();
    let mut packs_sent: BTreeMap<String, usize> = BTreeMap::new();
    let mut watchdog_cuts: BTreeMap<String, usize> = BTreeMap::new();
    for e in &events {
        let ops: Vec<_> = e.spans.iter().filter(|s| s.name == "operation").collect();
        assert_eq!(ops.len(), 1, "every event in one operation: {e:?}");
        let id = ops[0].fields.get("id").expect("an id").clone();
        assert_eq!(
            ops[0].fields.get("host").map(String::as_str),
            Some(proxy.addr().to_string().as_str()),
            "{e:?}"
        );
        assert_eq!(ops[0].fields.get("kind").map(String::as_str), Some("push"));
        // An event on a push thread is that push's; on another thread (the
        // watchdog's), it is the attempt's that started the thread.
        if let Some(i) = e.thread.strip_prefix("push-") {
            assert_eq!(id, format!("push-{i}"), "{e:?}");
        } else {
            assert_eq!(e.thread, "sluice-watchdog", "{e:?}");
        }
        let out = &outcomes[&id];
        if e.target.starts_with("sluice_git") {
            let n: usize = e
                .span_field("attempt", "n")
                .unwrap_or_else(|| panic!("a git event outside an attempt: {e:?}"))
                .parse()
                .expect("n");
            let attempt = &out.attempts[n - 1];
            match e.message.as_str() {
                "pack sent" => {
                    assert_eq!(n, out.attempts.len(), "{e:?}");
                    assert_eq!(attempt.class, None);
                    *packs_sent.entry(id.clone()).or_default() += 1;
                }
                "attempt timed out: cutting it" => {
                    assert_eq!(attempt.class, Some(Class::Unjudged), "{e:?}");
                    assert_eq!(attempt.phase, "connect");
                    *watchdog_cuts.entry(id.clone()).or_default() += 1;
                }
                _ => {}
            }
        }
        if e.message == "attempt failed" {
            assert_eq!(e.span_field("attempt", "class"), Some("unjudged"), "{e:?}");
            assert_eq!(e.span_field("attempt", "phase"), Some("connect"), "{e:?}");
        }
        if e.message == "attempt succeeded" {
            assert_eq!(e.span_field("attempt", "class"), Some("succeeded"), "{e:?}");
            assert_eq!(e.span_field("attempt", "phase"), Some("reported"), "{e:?}");
        }
    }
    for (id, out) in &outcomes {
        assert_eq!(packs_sent.get(id), Some(&1), "one pack sent by {id}");
        assert_eq!(
            watchdog_cuts.get(id).copied().unwrap_or(0),
            out.attempts.len() - 1,
            "each stalled attempt of {id} cut by its own watchdog"
        );
        assert!(
            events.iter().any(|e| e.message == "pack counted"
                && e.span_field("operation", "id") == Some(id)),
            "{id} counted its pack"
        );
    }
}
