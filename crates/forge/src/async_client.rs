//! The async facade (the `tokio` feature): [`AsyncForgeClient`], the same
//! calls as [`ForgeClient`] as `async fn`s, each run on tokio's blocking
//! pool.

use std::future::Future;

use sluice_policy::{on_blocking_pool, AttemptError, CallOptions, Outcome, Settlement};

use crate::{
    CheckRun, CheckRunUpdate, CiQuery, CiStatus, ForgeClient, ForgeInputError, GitRef,
    HttpResponse, IssueComment, MergeMethod, MergeResult, Method, NewCheckRun, NewPullRequest,
    PullRequest, Reading, RepoRef,
};

/// The result of every forge call.
type Called<T> = Result<Outcome<T>, ForgeInputError>;

/// [`ForgeClient`]'s calls as `async fn`s, for a program on tokio.
///
/// Each call runs the blocking call on tokio's blocking pool
/// ([`tokio::task::spawn_blocking`]) inside the `tracing` span current
/// where its future is polled (the awaiting caller's, or one given with
/// `.instrument(span)`), so the operation's span sits under the caller's
/// (through `sluice_policy::on_blocking_pool`). Arguments are
/// taken by value (the call runs on another thread).
///
/// # Dropping the future cancels the operation
/// A call's future dropped before it is ready (a `select!` that took
/// another branch, a timeout, an aborted task, a runtime shutting down)
/// raises the operation's cancel flag: the one its [`CallOptions`] give,
/// or one the facade makes when they give none. Give each call its own
/// flag when you give one: dropping the future raises it. The blocking
/// call is not abandoned: it runs on to its bounded end as any cancelled
/// operation does — a read stops waiting at once, a write whose request
/// went out stops waiting for its answer and is settled by reading — and
/// its outcome goes to the ledger and the log (the operation's `info`
/// event), but nothing awaits it. A cancelled operation still holds its
/// blocking thread until that end: one blocking thread per operation in
/// flight, so size the runtime's `max_blocking_threads` for the
/// operations you run at once.
///
/// Must be polled inside a tokio runtime (it calls `spawn_blocking`).
#[derive(Clone, Debug)]
pub struct AsyncForgeClient {
    client: ForgeClient,
}

impl From<ForgeClient> for AsyncForgeClient {
    fn from(client: ForgeClient) -> Self {
        AsyncForgeClient::new(client)
    }
}

impl AsyncForgeClient {
    /// The facade of `client` (clones share its policy, pacing and HTTP
    /// clients).
    pub fn new(client: ForgeClient) -> Self {
        AsyncForgeClient { client }
    }

    /// The blocking client underneath.
    pub fn blocking(&self) -> &ForgeClient {
        &self.client
    }

    /// [`ForgeClient::get_url`], on the blocking pool.
    pub fn get_url(
        &self,
        url: impl Into<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<HttpResponse>> + Send + 'static {
        let (c, url) = (self.client.clone(), url.into());
        on_blocking_pool(opts, move |o| c.get_url(&url, o))
    }

    /// [`ForgeClient::request`], on the blocking pool.
    pub fn request(
        &self,
        method: Method,
        path_or_url: impl Into<String>,
        body: Option<serde_json::Value>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<HttpResponse>> + Send + 'static {
        let (c, path) = (self.client.clone(), path_or_url.into());
        on_blocking_pool(opts, move |o| c.request(method, &path, body.as_ref(), o))
    }

    /// [`ForgeClient::request_write`], on the blocking pool (`reconcile`
    /// runs there too).
    pub fn request_write(
        &self,
        method: Method,
        path_or_url: impl Into<String>,
        body: Option<serde_json::Value>,
        opts: CallOptions,
        reconcile: impl FnMut(&Reading<'_>) -> Result<Settlement<HttpResponse>, AttemptError>
            + Send
            + 'static,
    ) -> impl Future<Output = Called<HttpResponse>> + Send + 'static {
        let (c, path) = (self.client.clone(), path_or_url.into());
        on_blocking_pool(opts, move |o| {
            c.request_write(method, &path, body.as_ref(), o, reconcile)
        })
    }

    /// [`ForgeClient::get_pull`], on the blocking pool.
    pub fn get_pull(
        &self,
        repo: RepoRef,
        number: u64,
        opts: CallOptions,
    ) -> impl Future<Output = Called<serde_json::Value>> + Send + 'static {
        let c = self.client.clone();
        on_blocking_pool(opts, move |o| c.get_pull(&repo, number, o))
    }

    /// [`ForgeClient::list_pulls_by_head`], on the blocking pool.
    pub fn list_pulls_by_head(
        &self,
        repo: RepoRef,
        head: impl Into<String>,
        base: Option<String>,
        state: impl Into<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<Vec<PullRequest>>> + Send + 'static {
        let (c, head, state) = (self.client.clone(), head.into(), state.into());
        on_blocking_pool(opts, move |o| {
            c.list_pulls_by_head(&repo, &head, base.as_deref(), &state, o)
        })
    }

    /// [`ForgeClient::ci_status`], on the blocking pool.
    pub fn ci_status(
        &self,
        repo: RepoRef,
        git_ref: impl Into<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<CiStatus>> + Send + 'static {
        self.ci_status_with(repo, git_ref, CiQuery::default(), opts)
    }

    /// [`ForgeClient::ci_status_with`], on the blocking pool.
    pub fn ci_status_with(
        &self,
        repo: RepoRef,
        git_ref: impl Into<String>,
        query: CiQuery,
        opts: CallOptions,
    ) -> impl Future<Output = Called<CiStatus>> + Send + 'static {
        let (c, git_ref) = (self.client.clone(), git_ref.into());
        on_blocking_pool(opts, move |o| c.ci_status_with(&repo, &git_ref, &query, o))
    }

    /// [`ForgeClient::find_check_run`], on the blocking pool.
    pub fn find_check_run(
        &self,
        repo: RepoRef,
        git_ref: impl Into<String>,
        name: Option<String>,
        external_id: impl Into<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<Option<CheckRun>>> + Send + 'static {
        let c = self.client.clone();
        let (git_ref, external_id) = (git_ref.into(), external_id.into());
        on_blocking_pool(opts, move |o| {
            c.find_check_run(&repo, &git_ref, name.as_deref(), &external_id, o)
        })
    }

    /// [`ForgeClient::create_pull`], on the blocking pool.
    pub fn create_pull(
        &self,
        repo: RepoRef,
        new: NewPullRequest,
        opts: CallOptions,
    ) -> impl Future<Output = Called<PullRequest>> + Send + 'static {
        let c = self.client.clone();
        on_blocking_pool(opts, move |o| c.create_pull(&repo, &new, o))
    }

    /// [`ForgeClient::create_check_run`], on the blocking pool.
    pub fn create_check_run(
        &self,
        repo: RepoRef,
        new: NewCheckRun,
        opts: CallOptions,
    ) -> impl Future<Output = Called<CheckRun>> + Send + 'static {
        let c = self.client.clone();
        on_blocking_pool(opts, move |o| c.create_check_run(&repo, &new, o))
    }

    /// [`ForgeClient::create_issue_comment`], on the blocking pool.
    pub fn create_issue_comment(
        &self,
        repo: RepoRef,
        number: u64,
        body: impl Into<String>,
        opts: CallOptions,
    ) -> impl Future<Output = Called<IssueComment>> + Send + 'static {
        let (c, body) = (self.client.clone(), body.into());
        on_blocking_pool(opts, move |o| {
            c.create_issue_comment(&repo, number, &body, o)
        })
    }

    /// [`ForgeClient::merge_pull`], on the blocking pool.
    pub fn merge_pull(
        &self,
        repo: RepoRef,
        number: u64,
        sha: impl Into<String>,
        method: MergeMethod,
        opts: CallOptions,
    ) -> impl Future<Output = Called<MergeResult>> + Send + 'static {
        let (c, sha) = (self.client.clone(), sha.into());
        on_blocking_pool(opts, move |o| c.merge_pull(&repo, number, &sha, method, o))
    }

    /// [`ForgeClient::update_ref`], on the blocking pool.
    pub fn update_ref(
        &self,
        repo: RepoRef,
        git_ref: impl Into<String>,
        sha: impl Into<String>,
        force: bool,
        opts: CallOptions,
    ) -> impl Future<Output = Called<GitRef>> + Send + 'static {
        let (c, git_ref, sha) = (self.client.clone(), git_ref.into(), sha.into());
        on_blocking_pool(opts, move |o| c.update_ref(&repo, &git_ref, &sha, force, o))
    }

    /// [`ForgeClient::update_check_run`], on the blocking pool.
    pub fn update_check_run(
        &self,
        repo: RepoRef,
        id: u64,
        update: CheckRunUpdate,
        opts: CallOptions,
    ) -> impl Future<Output = Called<CheckRun>> + Send + 'static {
        let c = self.client.clone();
        on_blocking_pool(opts, move |o| c.update_check_run(&repo, id, &update, o))
    }
}
