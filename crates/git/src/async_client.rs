//! The async facade (the `tokio` feature): [`AsyncGitClient`], the same
//! calls as [`GitClient`] as `async fn`s, each run on tokio's blocking pool.

use std::future::Future;

use sluice_policy::{on_blocking_pool, CallOptions, Outcome};

use crate::{
    FetchOptions, FetchedRef, GitClient, InputError, NamedRemote, PushOptions, PushReport,
    RefUpdate, RemoteRef,
};

/// [`GitClient`]'s calls as `async fn`s, for a program on tokio.
///
/// Each call runs the blocking call on tokio's blocking pool
/// ([`tokio::task::spawn_blocking`]) inside the `tracing` span current
/// where its future is polled (the awaiting caller's, or one given with
/// `.instrument(span)`), so the operation's span sits under the caller's
/// (through `sluice_policy::on_blocking_pool`). Arguments are
/// taken by value (the call runs on another thread); fetch and push take a
/// [`gix::ThreadSafeRepository`] (`repo.into_sync()`, or
/// `gix::ThreadSafeRepository::open`), opened on the blocking thread with
/// `to_thread_local`.
///
/// # Dropping the future cancels the operation
/// A call's future dropped before it is ready (a `select!` that took
/// another branch, a timeout, an aborted task, a runtime shutting down)
/// raises the operation's cancel flag: the one its [`CallOptions`] give,
/// or one the facade makes when they give none. Give each call its own
/// flag when you give one: dropping the future raises it. The blocking
/// call is not abandoned: it runs on to its bounded end as any cancelled
/// operation does — between attempts it stops at once, a transfer is cut,
/// a write whose request was complete is settled by reading — and its
/// outcome goes to the ledger and the log (the operation's `info` event),
/// but nothing awaits it. A cancelled operation still holds its blocking
/// thread until that end: one blocking thread per operation in flight, so
/// size the runtime's `max_blocking_threads` for the operations you run
/// at once.
///
/// Must be polled inside a tokio runtime (it calls `spawn_blocking`).
#[derive(Clone, Debug)]
pub struct AsyncGitClient {
    client: GitClient,
}

impl From<GitClient> for AsyncGitClient {
    fn from(client: GitClient) -> Self {
        AsyncGitClient::new(client)
    }
}

impl AsyncGitClient {
    /// The facade of `client` (clones share its policy, retry budgets and
    /// HTTP clients).
    pub fn new(client: GitClient) -> Self {
        AsyncGitClient { client }
    }

    /// The blocking client underneath.
    pub fn blocking(&self) -> &GitClient {
        &self.client
    }

    /// [`GitClient::ls_refs`], on the blocking pool.
    pub fn ls_refs(
        &self,
        url: impl Into<String>,
        prefixes: Vec<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Result<Outcome<Vec<RemoteRef>>, InputError>> + Send + 'static {
        let (c, url) = (self.client.clone(), url.into());
        on_blocking_pool(opts, move |o| c.ls_refs(&url, &prefixes, o))
    }

    /// [`GitClient::fetch`], on the blocking pool.
    pub fn fetch(
        &self,
        url: impl Into<String>,
        refspecs: Vec<String>,
        repo: gix::ThreadSafeRepository,
        opts: CallOptions,
    ) -> impl Future<Output = Result<Outcome<Vec<FetchedRef>>, InputError>> + Send + 'static {
        self.fetch_with(url, refspecs, repo, FetchOptions::default(), opts)
    }

    /// [`GitClient::fetch_with`], on the blocking pool.
    pub fn fetch_with(
        &self,
        url: impl Into<String>,
        refspecs: Vec<String>,
        repo: gix::ThreadSafeRepository,
        fetch: FetchOptions,
        opts: CallOptions,
    ) -> impl Future<Output = Result<Outcome<Vec<FetchedRef>>, InputError>> + Send + 'static {
        let (c, url) = (self.client.clone(), url.into());
        on_blocking_pool(opts, move |o| {
            c.fetch_with(&url, &refspecs, &repo.to_thread_local(), &fetch, o)
        })
    }

    /// [`GitClient::fetch_remote`], on the blocking pool.
    pub fn fetch_remote(
        &self,
        remote: NamedRemote,
        refspecs: Vec<String>,
        repo: gix::ThreadSafeRepository,
        fetch: FetchOptions,
        opts: CallOptions,
    ) -> impl Future<Output = Result<Outcome<Vec<FetchedRef>>, InputError>> + Send + 'static {
        let c = self.client.clone();
        on_blocking_pool(opts, move |o| {
            c.fetch_remote(&remote, &refspecs, &repo.to_thread_local(), &fetch, o)
        })
    }

    /// [`GitClient::push`], on the blocking pool.
    pub fn push(
        &self,
        url: impl Into<String>,
        updates: Vec<RefUpdate>,
        options: PushOptions,
        repo: gix::ThreadSafeRepository,
        opts: CallOptions,
    ) -> impl Future<Output = Result<Outcome<PushReport>, InputError>> + Send + 'static {
        let (c, url) = (self.client.clone(), url.into());
        on_blocking_pool(opts, move |o| {
            c.push(&url, &updates, &options, &repo.to_thread_local(), o)
        })
    }
}
