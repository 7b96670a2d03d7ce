//! The metrics every operation records, through the `metrics` facade.
//!
//! The library installs no recorder: a service installs its own (a
//! Prometheus exporter, say), and without one every call here costs a
//! branch. [`describe`] gives the recorder installed a description and a
//! unit for each name.
//!
//! Labels: `kind` is the operation's kind (`ls-refs`, `fetch`, `push`,
//! `http-get`, ...); `host` is the remote's host, with its port when not the
//! default, never a path or user info; `result` is the outcome's
//! (`succeeded`, `answered`, `unknown`, `rejected`, `local-error`); `class`
//! is an attempt's (`unjudged`, `answered`, `unknown`, `local-error`, or
//! `succeeded` for an attempt that returned a value); `verdict` is the
//! settling read's (`landed`, `not-landed`, `moved`, or `unsettled` when no
//! read answered).

/// Counter `{kind, result}`: operations ended, rejected ones included.
pub const OPERATIONS_TOTAL: &str = "sluice_remote_operations_total";
/// Counter `{host, kind, class}`: attempts ended (a failed credential
/// purchase is an attempt of its own).
pub const ATTEMPTS_TOTAL: &str = "sluice_remote_attempts_total";
/// Histogram `{kind, result}`, seconds: an operation's elapsed time (its
/// outcome's `elapsed_ms`).
pub const OPERATION_DURATION_SECONDS: &str = "sluice_remote_operation_duration_seconds";
/// Histogram `{host, kind}`, seconds: one attempt's time, from its start
/// (after any credential purchase) to its end.
pub const ATTEMPT_DURATION_SECONDS: &str = "sluice_remote_attempt_duration_seconds";
/// Gauge `{host}`: tokens in the host's retry budget, set each time the
/// budget is spent, credited or drained (refill is counted then).
pub const RETRY_BUDGET_TOKENS: &str = "sluice_remote_retry_budget_tokens";
/// Counter `{host, verdict}`: writes that had an attempt end `unknown`
/// (the request complete, its answer not read), by what settled them.
pub const UNKNOWN_WRITES_TOTAL: &str = "sluice_remote_unknown_writes_total";
/// Counter `{host}`: credentials the remote refused (any 401; a 403/404
/// within the fresh window of buying), each refusal once.
pub const CREDENTIAL_REFUSALS_TOTAL: &str = "sluice_remote_credential_refusals_total";
/// Counter `{host}`: forge reads answered `304 Not Modified` (a conditional
/// read answered from the answer kept; GitHub counts no rate-limit point).
pub const NOT_MODIFIED_TOTAL: &str = "sluice_remote_not_modified_total";

/// Count one forge read from `host` answered `304 Not Modified`
/// ([`NOT_MODIFIED_TOTAL`]): for a layer that records no metric of its own.
pub fn not_modified(host: &str) {
    metrics::counter!(NOT_MODIFIED_TOTAL, "host" => host.to_string()).increment(1);
}

/// Histogram `{host}`, seconds: how long a forge write waited at its
/// host's write gate (writes one at a time, each at least the write
/// spacing after the previous one ended) before it could be sent; every
/// pass is recorded, a zero wait included. The wait counts against the
/// attempt's time.
pub const GATE_WAIT_SECONDS: &str = "sluice_remote_gate_wait_seconds";
/// Counter `{host}`: retries refused because the host's retry budget
/// (token bucket) was empty — the operation stopped `retry-budget-empty`.
pub const RETRY_BUDGET_REFUSALS_TOTAL: &str = "sluice_remote_retry_budget_refusals_total";

/// Record one pass through `host`'s write gate after `waited`
/// ([`GATE_WAIT_SECONDS`]): for the forge layer, which records no metric
/// of its own.
pub fn gate_wait(host: &str, waited: std::time::Duration) {
    metrics::histogram!(GATE_WAIT_SECONDS, "host" => host.to_string()).record(waited.as_secs_f64());
}

/// Histogram `{result}`, seconds: one maintenance run of a repository
/// (packs consolidated after a fetch, or `maintain` called), by its result:
/// `consolidated`, `not-needed`, `skipped` (another process held
/// `gc.pid`), `off` (turned off by the configuration) or `failed`.
pub const MAINTENANCE_SECONDS: &str = "sluice_remote_maintenance_seconds";
/// Counter `{result}`: maintenance runs ended, by result (as
/// [`MAINTENANCE_SECONDS`]).
pub const MAINTENANCE_TOTAL: &str = "sluice_remote_maintenance_total";

/// Count one maintenance run that ended with `result` after `elapsed`
/// ([`MAINTENANCE_SECONDS`], [`MAINTENANCE_TOTAL`]): for the git layer,
/// which records no metric of its own.
pub fn maintenance(result: &'static str, elapsed: std::time::Duration) {
    metrics::counter!(MAINTENANCE_TOTAL, "result" => result).increment(1);
    metrics::histogram!(MAINTENANCE_SECONDS, "result" => result).record(elapsed.as_secs_f64());
}

/// Every metric name, in the order above.
pub const ALL: [&str; 12] = [
    OPERATIONS_TOTAL,
    ATTEMPTS_TOTAL,
    OPERATION_DURATION_SECONDS,
    ATTEMPT_DURATION_SECONDS,
    RETRY_BUDGET_TOKENS,
    UNKNOWN_WRITES_TOTAL,
    CREDENTIAL_REFUSALS_TOTAL,
    NOT_MODIFIED_TOTAL,
    GATE_WAIT_SECONDS,
    RETRY_BUDGET_REFUSALS_TOTAL,
    MAINTENANCE_SECONDS,
    MAINTENANCE_TOTAL,
];

/// Describe every metric (unit and words) to the recorder installed now.
/// Call it once after installing a recorder; recording works without it.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        OPERATIONS_TOTAL,
        Unit::Count,
        "operations ended, by kind and result"
    );
    describe_counter!(
        ATTEMPTS_TOTAL,
        Unit::Count,
        "attempts ended, by host, kind and class"
    );
    describe_histogram!(
        OPERATION_DURATION_SECONDS,
        Unit::Seconds,
        "an operation's elapsed time, by kind and result"
    );
    describe_histogram!(
        ATTEMPT_DURATION_SECONDS,
        Unit::Seconds,
        "one attempt's time, by host and kind"
    );
    describe_gauge!(
        RETRY_BUDGET_TOKENS,
        Unit::Count,
        "tokens in the host's retry budget"
    );
    describe_counter!(
        UNKNOWN_WRITES_TOTAL,
        Unit::Count,
        "writes whose answer was not read, by host and settling verdict"
    );
    describe_counter!(
        CREDENTIAL_REFUSALS_TOTAL,
        Unit::Count,
        "credentials refused by the remote, by host"
    );
    describe_counter!(
        NOT_MODIFIED_TOTAL,
        Unit::Count,
        "forge reads answered 304 Not Modified, by host"
    );
    describe_histogram!(
        GATE_WAIT_SECONDS,
        Unit::Seconds,
        "a forge write's wait at its host's write gate, by host"
    );
    describe_counter!(
        RETRY_BUDGET_REFUSALS_TOTAL,
        Unit::Count,
        "retries refused by an empty retry budget, by host"
    );
    describe_histogram!(
        MAINTENANCE_SECONDS,
        Unit::Seconds,
        "one maintenance run of a repository (packs consolidated), by result"
    );
    describe_counter!(
        MAINTENANCE_TOTAL,
        Unit::Count,
        "maintenance runs of repositories, by result"
    );
}
