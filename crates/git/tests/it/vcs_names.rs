//! OpenTelemetry's VCS names on a git operation's span: a push over a real
//! `git daemon` carries `vcs.repository.url.full` (the remote, without user
//! info) and `vcs.ref.head.name` (the ref it updates) on its `operation`
//! span, beside the span's own fields.

use crate::common;

use common::*;
use sluice_policy::OutcomeKind;
use sluice_testkit::capture::Capture;
use sluice_testkit::repo;

#[test]
fn a_pushs_operation_span_names_the_repository_without_user_info_and_the_ref() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "feature", "new work");
    let plain = w.daemon.url("s.git");
    let with_user = plain.replacen("git://", "git://someone@", 1);
    assert_ne!(with_user, plain, "{plain}");
    let capture = Capture::new();
    let out = tracing::subscriber::with_default(capture.subscriber(), || {
        push(
            &with_user,
            update(Some(&tip), "refs/heads/feature"),
            &local,
            &quick(20_000, 10_000, 3).id("vcs-names"),
        )
    });
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{:?} {:?}",
        out.error,
        out.attempts
    );
    let events = capture.events();
    let spans: Vec<_> = events
        .iter()
        .filter_map(|e| e.span("operation"))
        .filter(|s| s.fields.get("id").map(String::as_str) == Some("vcs-names"))
        .collect();
    assert!(!spans.is_empty(), "no event in the push's span: {events:?}");
    for s in spans {
        assert_eq!(
            s.fields.get("vcs.repository.url.full"),
            Some(&plain),
            "{s:?}"
        );
        assert_eq!(
            s.fields.get("vcs.ref.head.name").map(String::as_str),
            Some("refs/heads/feature"),
            "{s:?}"
        );
        assert_eq!(s.fields.get("kind").map(String::as_str), Some("push"));
    }
}
