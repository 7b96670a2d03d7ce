//! The bridge the async facades stand on (the `tokio` feature): a blocking
//! call run on tokio's blocking pool, cancelled when its future is dropped.

use std::future::Future;

use crate::{CallOptions, CancelFlag};

/// Run `call` on tokio's blocking pool ([`tokio::task::spawn_blocking`])
/// inside the `tracing` span current where the returned future is first
/// polled (so `.instrument(span)` on it works), with a cancel flag in its
/// options that is raised when the returned future is dropped before it
/// is ready.
///
/// The flag is the one `opts` gives, or one made here when it gives none
/// (so give each call its own flag: dropping one future raises it for
/// every call that shares it). A dropped future does not stop the blocking
/// call at once: the call sees its cancel flag and runs on to its own
/// bounded end on its thread, and nothing awaits it — its outcome still
/// goes to the ledger and the log. A panic in `call` is resumed in the
/// awaiting task.
///
/// `sluice_git::AsyncGitClient` and `sluice_forge::AsyncForgeClient` run
/// every call through this; a caller with a client of its own can too.
///
/// # Panics
/// When awaited outside a tokio runtime with a blocking pool, as
/// [`tokio::task::spawn_blocking`] does; and when the runtime shuts down
/// before the blocking call starts (the future is then being dropped too).
pub fn on_blocking_pool<T: Send + 'static>(
    opts: CallOptions,
    call: impl FnOnce(&CallOptions) -> T + Send + 'static,
) -> impl Future<Output = T> + Send + 'static {
    let (opts, flag) = match opts.cancel_flag().cloned() {
        Some(flag) => (opts, flag),
        None => {
            let flag = CancelFlag::new();
            (opts.cancel(&flag), flag)
        }
    };
    async move {
        // The span current where the future is polled (an `.instrument(..)`
        // on it, or the async fn awaiting it), not where it was made.
        let span = tracing::Span::current();
        let mut armed = CancelOnDrop(Some(flag));
        let task = tokio::task::spawn_blocking(move || span.in_scope(|| call(&opts)));
        let done = task.await;
        armed.0 = None;
        match done {
            Ok(v) => v,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // A blocking task is cancelled only when its runtime shuts
                // down before it starts: this future is being dropped too.
                Err(e) => panic!("the blocking call never ran: {e}"),
            },
        }
    }
}

/// Raises its flag when dropped still armed.
struct CancelOnDrop(Option<CancelFlag>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.cancel();
        }
    }
}
