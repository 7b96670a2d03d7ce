//! The typed calls sluice uses. Each is one policy operation; the writes
//! carry their settling reads:
//!
//! | call | kind | effect | settled by |
//! |---|---|---|---|
//! | [`ForgeClient::get_pull`] | `get-pull` | read | — |
//! | [`ForgeClient::list_pulls_by_head`] | `list-pulls` | read (every page) | — |
//! | [`ForgeClient::ci_status_with`] | `ci-status` | read (the combined status, every page of check runs; with a base branch its protection's required checks and every page of its rules) | — |
//! | [`ForgeClient::find_check_run`] | `find-check-run` | read | — |
//! | [`ForgeClient::create_pull`] | `create-pull` | write | the open pull requests from its head into its base |
//! | [`ForgeClient::create_check_run`] | `create-check-run` | write (reads the head's check runs first: one with its `external_id` is answered as it is) | the head's check runs, by `external_id` |
//! | [`ForgeClient::create_issue_comment`] | `comment` | write (with a caller's id, reads the comments first: one with its marker is answered as found) | the issue's comments since the POST less 60 s, by the marker line `<!-- sluice-operation: <id> -->` |
//! | [`ForgeClient::merge_pull`] | `merge-pull` | write | the pull request: merged with the head checked (landed; the merge commit from the read or the `merged` event), open at it (not landed, unless the compare finds the head in the base: moved), else moved |
//! | [`ForgeClient::update_ref`] | `update-ref` | write (each attempt reads the ref first, holding the host's write slot) | the ref: at the new sha (landed), at the sha read first (not landed), else moved |
//! | [`ForgeClient::update_check_run`] | `update-check-run` | write (each attempt reads the run first, holding the host's write slot) | the check run: the fields sent (landed), the fields read first (not landed), else moved |
//!
//! A write whose request was complete and whose answer was not read is
//! never sent again in its operation; the forge's answers 405, 409 and 422
//! end it `answered` in the forge's words, `may_have_applied: false`.
//!
//! Each call checks its arguments first and returns
//! [`ForgeInputError`] before any request when one cannot mean what the
//! call needs: the repository (owner and name, each ASCII letters, digits,
//! `-`, `_`, `.`), a sha (40 or 64 lowercase hex digits), a ref name
//! (`heads/main` for `update_ref`; a sha, branch or tag for the CI reads;
//! never empty, never with a leading `/` or `refs/`, a valid git ref name),
//! a number (pull request, issue, check run: from 1), a state (`open`,
//! `closed`, `all`) and a head (`branch` or `owner:branch`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use reqwest::{Method, Url};
use serde_json::Value;
use sluice_policy::{AttemptCtx, AttemptError, Class, Credential, Outcome, Settlement};

use crate::ci::{protection_names, ruleset_names, CiQuery, CiStatus};
use crate::client::ForgeClient;
use crate::error::{ForgeFailure, ForgeInputError};
use crate::exchange::{decode, judge, Answer, Prepared};
use crate::gate::Permit;
use crate::input;
use crate::pages::Pages;
use crate::reading::Reading;
use crate::types::{
    CheckRun, CheckRunList, CheckRunUpdate, CombinedStatus, GitRef, IssueComment, MergeMethod,
    MergeResult, NewCheckRun, NewPullRequest, PullRequest, RepoRef,
};
use sluice_policy::CallOptions;
use sluice_policy::Effect;

/// One page of check runs: its items.
fn check_runs_of(a: &Answer) -> Result<Vec<CheckRun>, AttemptError> {
    decode::<CheckRunList>(Effect::Read, a).map(|l| l.check_runs)
}

/// One page of a branch's rules: the names its `required_status_checks`
/// rules require.
fn ruleset_names_of(a: &Answer) -> Result<Vec<String>, AttemptError> {
    decode::<Value>(Effect::Read, a).map(|v| ruleset_names(&v))
}

/// A 403 on a base branch's requirements is the forge's answer (the token
/// may not read them, the plan may not have them): it ends the read
/// `answered` in the forge's words, never counted as a refused credential
/// and bought around. A 403 that is a rate limit stays unjudged.
fn forbidden_is_answered(mut e: AttemptError) -> AttemptError {
    let status = e.source_as::<ForgeFailure>().and_then(ForgeFailure::status);
    if e.class == Class::Answered && status == Some(403) {
        e.auth = None;
    }
    e
}

/// The names a base branch's classic protection requires (`GET
/// …/branches/{b}/protection/required_status_checks`, inside a CI read's
/// attempt). A 404 is no protection, so none required: a value, never a
/// failure, so never a credential refusal however fresh the token.
fn protection_required(
    c: &ForgeClient,
    ctx: &mut AttemptCtx<'_>,
    cred: &RefCell<Option<Credential>>,
    url: &Url,
    deadline: Instant,
) -> Result<Vec<String>, AttemptError> {
    let p = Prepared {
        method: Method::GET,
        url,
        body: None,
    };
    let a = c.attempt_exchange_until(ctx, &p, cred, deadline)?;
    if a.status == 404 {
        return Ok(Vec::new());
    }
    judge(Effect::Read, &a).map_err(forbidden_is_answered)?;
    decode::<Value>(Effect::Read, &a).map(|v| protection_names(&v))
}

impl ForgeClient {
    fn repo_url(&self, repo: &RepoRef, rest: &[&str]) -> Url {
        let mut segs = vec!["repos", repo.owner.as_str(), repo.name.as_str()];
        segs.extend_from_slice(rest);
        self.api_url(&segs)
    }

    /// `owner:branch` for a head given as `branch` or `owner:branch`.
    fn head_label(repo: &RepoRef, head: &str) -> String {
        if head.contains(':') {
            head.to_string()
        } else {
            format!("{}:{head}", repo.owner)
        }
    }

    fn pulls_by_head_url(
        &self,
        repo: &RepoRef,
        head: &str,
        base: Option<&str>,
        state: &str,
    ) -> Url {
        let mut url = self.repo_url(repo, &["pulls"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("head", &Self::head_label(repo, head));
            if let Some(b) = base {
                q.append_pair("base", b);
            }
            q.append_pair("state", state);
            q.append_pair("per_page", "100");
        }
        url
    }

    /// A ref's check runs (`filter`: `latest`, or `all` to see runs that
    /// were re-run too), named `name` when given.
    fn check_runs_url(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        name: Option<&str>,
        filter: &str,
    ) -> Url {
        let mut segs = vec!["commits"];
        segs.extend(git_ref.split('/'));
        segs.push("check-runs");
        let mut url = self.repo_url(repo, &segs);
        {
            let mut q = url.query_pairs_mut();
            if let Some(n) = name {
                q.append_pair("check_name", n);
            }
            q.append_pair("filter", filter);
            q.append_pair("per_page", "100");
        }
        url
    }

    /// `GET /repos/{owner}/{repo}/pulls/{number}`: the pull request as the
    /// forge sent it (read it as a [`PullRequest`] with
    /// `serde_json::from_value` where typed fields are wanted).
    pub fn get_pull(
        &self,
        repo: &RepoRef,
        number: u64,
        opts: &CallOptions,
    ) -> Result<Outcome<serde_json::Value>, ForgeInputError> {
        input::repo(repo)?;
        input::number("pull request", number)?;
        let url = self.repo_url(repo, &["pulls", &number.to_string()]);
        Ok(self.typed_read("get-pull", &url, opts, |c, ctx, cred| {
            let p = Prepared {
                method: Method::GET,
                url: &url,
                body: None,
            };
            let a = c.attempt_exchange(ctx, &p, cred)?;
            judge(Effect::Read, &a)?;
            decode(Effect::Read, &a)
        }))
    }

    /// The pull requests from `head` (`branch`, or `owner:branch`; the
    /// repository's owner when none is given), into `base` when given, in
    /// `state` (`open`, `closed` or `all`): `GET /repos/{owner}/{repo}/pulls`
    /// (every page, `Link: rel="next"`, within the one operation).
    pub fn list_pulls_by_head(
        &self,
        repo: &RepoRef,
        head: &str,
        base: Option<&str>,
        state: &str,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<PullRequest>>, ForgeInputError> {
        input::repo(repo)?;
        input::head(head)?;
        if let Some(b) = base {
            input::ref_name(b, false)?;
        }
        input::state(state)?;
        let url = self.pulls_by_head_url(repo, head, base, state);
        let mut pages = Pages::new(url.clone());
        Ok(self.typed_read("list-pulls", &url, opts, |c, ctx, cred| {
            let deadline = Instant::now() + ctx.timeout;
            pages.read(c, ctx, cred, deadline, |a| {
                decode::<Vec<PullRequest>>(Effect::Read, a)
            })
        }))
    }

    /// The CI status of `git_ref` (a sha, branch or tag) and its verdict,
    /// nothing required but what reported: [`ForgeClient::ci_status_with`]
    /// with [`CiQuery::new`].
    pub fn ci_status(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        opts: &CallOptions,
    ) -> Result<Outcome<CiStatus>, ForgeInputError> {
        self.ci_status_with(repo, git_ref, &CiQuery::new(), opts)
    }

    /// The CI status of `git_ref` (a sha, branch or tag) with its verdict
    /// ([`CiStatus`]): the combined commit status, every check run of every
    /// page (`filter=latest`, `Link: rel="next"`), and, when the query
    /// names a base branch, the names it requires — its classic
    /// protection's (`GET …/branches/{b}/protection/required_status_checks`:
    /// `contexts` and `checks[].context`; a 404 is none, never a refused
    /// credential) and its rulesets' (`GET …/rules/branches/{b}`, every
    /// page: rules of type `required_status_checks`). A 403 on either ends
    /// the read `answered` in the forge's words: never a verdict computed
    /// without the required names. The query's excluded runs are left out
    /// before judging. All within the one operation; what an attempt read
    /// is kept, so a page that fails is read again by the next attempt, not
    /// the reads before it.
    ///
    /// Bad input (`Err`, nothing sent): the repository, the ref, an empty
    /// name, a base branch that is no branch name (`refs/heads/main`), a
    /// name both required and excluded.
    pub fn ci_status_with(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        query: &CiQuery,
        opts: &CallOptions,
    ) -> Result<Outcome<CiStatus>, ForgeInputError> {
        input::repo(repo)?;
        input::ref_name(git_ref, false)?;
        input::ci_query(query)?;
        let mut status_segs = vec!["commits"];
        status_segs.extend(git_ref.split('/'));
        let remote = self.repo_url(repo, &status_segs);
        status_segs.push("status");
        let status_url = self.repo_url(repo, &status_segs);
        let runs_url = self.check_runs_url(repo, git_ref, None, "latest");
        let base = query.base_branch().map(|b| {
            let mut protection = vec!["branches"];
            protection.extend(b.split('/'));
            protection.extend(["protection", "required_status_checks"]);
            let mut rules = vec!["rules", "branches"];
            rules.extend(b.split('/'));
            let mut rules_url = self.repo_url(repo, &rules);
            rules_url.query_pairs_mut().append_pair("per_page", "100");
            (self.repo_url(repo, &protection), rules_url)
        });
        let mut combined: Option<CombinedStatus> = None;
        let mut pages = Pages::new(runs_url);
        let mut protected: Option<Vec<String>> = None;
        let mut rules: Option<Pages<String>> = base.as_ref().map(|(_, u)| Pages::new(u.clone()));
        Ok(self.typed_read("ci-status", &remote, opts, |c, ctx, cred| {
            let deadline = Instant::now() + ctx.timeout;
            if combined.is_none() {
                let p = Prepared {
                    method: Method::GET,
                    url: &status_url,
                    body: None,
                };
                let a = c.attempt_exchange_until(ctx, &p, cred, deadline)?;
                judge(Effect::Read, &a)?;
                combined = Some(decode(Effect::Read, &a)?);
            }
            let check_runs = pages.read(c, ctx, cred, deadline, check_runs_of)?;
            let mut required = query.required_names().to_vec();
            if let (Some((protection_url, _)), Some(rules)) = (&base, rules.as_mut()) {
                if protected.is_none() {
                    let names = protection_required(c, ctx, cred, protection_url, deadline)?;
                    protected = Some(names);
                }
                required.extend(protected.clone().unwrap_or_default());
                let by_rules = rules
                    .read(c, ctx, cred, deadline, ruleset_names_of)
                    .map_err(forbidden_is_answered)?;
                required.extend(by_rules);
            }
            let check_runs = check_runs
                .into_iter()
                .filter(|r| !query.excludes(r))
                .collect();
            Ok(CiStatus::judged(
                combined.clone().expect("read above"),
                check_runs,
                required,
            ))
        }))
    }

    /// The check run on `git_ref` whose `external_id` is `external_id`
    /// (named `name` when given), if any.
    pub fn find_check_run(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        name: Option<&str>,
        external_id: &str,
        opts: &CallOptions,
    ) -> Result<Outcome<Option<CheckRun>>, ForgeInputError> {
        input::repo(repo)?;
        input::ref_name(git_ref, false)?;
        let url = self.check_runs_url(repo, git_ref, name, "all");
        let mut pages = Pages::new(url.clone());
        Ok(
            self.typed_read("find-check-run", &url, opts, |c, ctx, cred| {
                let deadline = Instant::now() + ctx.timeout;
                let runs = pages.read(c, ctx, cred, deadline, check_runs_of)?;
                Ok(runs
                    .into_iter()
                    .find(|r| r.external_id.as_deref() == Some(external_id)))
            }),
        )
    }

    /// `POST /repos/{owner}/{repo}/pulls`. An unknown answer is settled by
    /// listing the open pull requests from its head into its base: one found
    /// is the write landed (GitHub keeps one open pull request per head and
    /// base); none found means it did not land and may be sent again.
    pub fn create_pull(
        &self,
        repo: &RepoRef,
        new: &NewPullRequest,
        opts: &CallOptions,
    ) -> Result<Outcome<PullRequest>, ForgeInputError> {
        input::repo(repo)?;
        input::head(&new.head)?;
        input::ref_name(&new.base, false)?;
        let url = self.repo_url(repo, &["pulls"]);
        let body = serde_json::to_vec(new).unwrap_or_default();
        let p = Prepared {
            method: Method::POST,
            url: &url,
            body: Some(&body),
        };
        let list_url = self.pulls_by_head_url(repo, &new.head, Some(&new.base), "open");
        Ok(self.typed_write(
            "create-pull",
            &p,
            opts,
            Some(
                |r: &Reading<'_>| -> Result<Settlement<PullRequest>, AttemptError> {
                    let pulls = r.get_all_pages(&list_url, |a| {
                        decode::<Vec<PullRequest>>(Effect::Read, a)
                    })?;
                    Ok(match pulls.into_iter().next() {
                        Some(pr) => {
                            let n = pr.number.to_string();
                            Settlement::landed(pr, ForgeClient::observed("pull", n))
                        }
                        None => Settlement::not_landed(ForgeClient::observed("pull", "absent")),
                    })
                },
            ),
        ))
    }

    /// `POST /repos/{owner}/{repo}/check-runs`. The check runs of
    /// `head_sha` named `name` are read first (`filter=all`, every page): a
    /// run with `external_id` on that head is answered as it is (succeeded,
    /// nothing sent), so the same external id given twice makes one check
    /// run. An unknown answer is settled by the same read.
    pub fn create_check_run(
        &self,
        repo: &RepoRef,
        new: &NewCheckRun,
        opts: &CallOptions,
    ) -> Result<Outcome<CheckRun>, ForgeInputError> {
        input::repo(repo)?;
        input::sha(&new.head_sha)?;
        let url = self.repo_url(repo, &["check-runs"]);
        let body = serde_json::to_vec(new).unwrap_or_default();
        let list_url = self.check_runs_url(repo, &new.head_sha, Some(&new.name), "all");
        let external_id = new.external_id.clone();
        let key = format!("check-run:{external_id}");
        let find = |runs: Vec<CheckRun>| {
            runs.into_iter()
                .find(|c| c.external_id.as_deref() == Some(external_id.as_str()))
        };
        let mut pages = Pages::new(list_url.clone());
        Ok(self.typed_write_with(
            "create-check-run",
            &url,
            opts,
            |c, ctx, cred| {
                let deadline = Instant::now() + ctx.timeout;
                if !external_id.is_empty() {
                    let runs = pages.read(c, ctx, cred, deadline, check_runs_of)?;
                    if let Some(run) = find(runs) {
                        tracing::debug!(
                            id = ?run.id,
                            "a check run with this external id exists: nothing sent"
                        );
                        ctx.sent_nothing();
                        return Ok(run);
                    }
                }
                let p = Prepared {
                    method: Method::POST,
                    url: &url,
                    body: Some(&body),
                };
                let a = c.attempt_exchange_until(ctx, &p, cred, deadline)?;
                judge(Effect::Write, &a)?;
                decode(Effect::Write, &a)
            },
            |r| {
                let runs = r.get_all_pages(&list_url, check_runs_of)?;
                Ok(match find(runs) {
                    Some(run) => {
                        let id = run.id.map(|i| i.to_string()).unwrap_or_default();
                        Settlement::landed(run, ForgeClient::observed(&key, id))
                    }
                    None => Settlement::not_landed(ForgeClient::observed(&key, "absent")),
                })
            },
        ))
    }

    /// `POST /repos/{owner}/{repo}/issues/{number}/comments` (pull requests
    /// are issues), operation kind `comment`. The body ends with a marker
    /// line, `<!-- sluice-operation: <id> -->` (GitHub does not render it),
    /// where `<id>` is the operation's id as the outcome and the ledger name
    /// it: the caller's (one holding `--` or `>` is
    /// [`ForgeInputError::MarkerId`]), else the one the policy generated.
    /// With a caller's id the issue's comments are read first (every page):
    /// one carrying the marker is answered as found (succeeded, nothing
    /// sent, `may_have_applied: false`), so an id asked again — even of
    /// another process, with no ledger between them — posts nothing. A lost
    /// answer is settled by reading the comments (every page, `since` the
    /// POST less 60 s) for the marker.
    pub fn create_issue_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
        opts: &CallOptions,
    ) -> Result<Outcome<IssueComment>, ForgeInputError> {
        input::repo(repo)?;
        input::number("issue", number)?;
        let given = opts.operation_id().is_some();
        if let Some(id) = opts.operation_id() {
            if id.contains("--") || id.contains('>') {
                return Err(ForgeInputError::MarkerId(id.to_string()));
            }
        }
        let n = number.to_string();
        let url = self.repo_url(repo, &["issues", &n, "comments"]);
        let mut list_url = url.clone();
        list_url.query_pairs_mut().append_pair("per_page", "100");
        // The marker of the operation's id, known once its first attempt
        // runs (the id may be the policy's).
        let marker: RefCell<String> = RefCell::new(String::new());
        let marked = |c: &IssueComment| {
            let m = marker.borrow();
            c.body.lines().any(|l| l.trim() == m.as_str())
        };
        let comments_of = |a: &Answer| decode::<Vec<IssueComment>>(Effect::Read, a);
        let posted: RefCell<Option<std::time::SystemTime>> = RefCell::new(None);
        let mut pages = Pages::new(list_url.clone());
        Ok(self.typed_write_with(
            "comment",
            &url,
            opts,
            |c, ctx, cred| {
                let deadline = Instant::now() + ctx.timeout;
                marker.replace(format!("<!-- sluice-operation: {} -->", ctx.operation_id()));
                if given {
                    let comments = pages.read(c, ctx, cred, deadline, comments_of)?;
                    if let Some(found) = comments.into_iter().find(|c| marked(c)) {
                        tracing::debug!(
                            id = found.id,
                            "a comment with this marker exists: nothing sent"
                        );
                        ctx.sent_nothing();
                        return Ok(found);
                    }
                }
                let json = comment_json(body, &marker.borrow());
                let p = Prepared {
                    method: Method::POST,
                    url: &url,
                    body: Some(&json),
                };
                posted.replace(Some(std::time::SystemTime::now()));
                let a = c.attempt_exchange_until(ctx, &p, cred, deadline)?;
                judge(Effect::Write, &a)?;
                decode(Effect::Write, &a)
            },
            |r| {
                let mut since_url = list_url.clone();
                if let Some(at) = *posted.borrow() {
                    let since = at - std::time::Duration::from_secs(60);
                    since_url.query_pairs_mut().append_pair(
                        "since",
                        &humantime::format_rfc3339_seconds(since).to_string(),
                    );
                }
                let comments = r.get_all_pages(&since_url, comments_of)?;
                Ok(match comments.into_iter().find(|c| marked(c)) {
                    Some(found) => {
                        let id = found.id.to_string();
                        Settlement::landed(found, ForgeClient::observed("comment", id))
                    }
                    None => Settlement::not_landed(ForgeClient::observed("comment", "absent")),
                })
            },
        ))
    }
}

/// A comment's request body: the text, then its marker line (after a blank
/// line, unless the text is empty or ends a line).
fn comment_json(body: &str, marker: &str) -> Vec<u8> {
    let text = if body.is_empty() || body.ends_with('\n') {
        format!("{body}{marker}")
    } else {
        format!("{body}\n\n{marker}")
    };
    serde_json::to_vec(&serde_json::json!({ "body": text })).unwrap_or_default()
}

impl ForgeClient {
    /// `PUT /repos/{owner}/{repo}/pulls/{number}/merge` with `sha`, the
    /// head the caller checked (the forge answers 409 when the head moved),
    /// and the method. The value's `sha` is the merge commit: from the
    /// PUT's answer when it came. An unknown answer is settled by reading
    /// the pull request (`GET …/pulls/{number}`): merged with that head is
    /// landed, its `sha` the read's `merge_commit_sha` when present, else
    /// the last `merged` event's `commit_id` (`GET …/issues/{number}/events`,
    /// every page; REST 2026-03-10 removes `merge_commit_sha`, and no
    /// verdict depends on it); merged with no sha readable yet is read
    /// again while the deadline allows, then landed with `sha: None` —
    /// never not landed. Open at that head is not landed (read again: the
    /// forge may still be merging) unless `GET …/compare/{base}...{head}`
    /// finds the head already in the base (`behind` or `identical`: the git
    /// side merged while the pull request reads open), which is moved;
    /// merged at another head, closed unmerged, or the head moved is moved.
    /// Never sent twice once it may have applied.
    pub fn merge_pull(
        &self,
        repo: &RepoRef,
        number: u64,
        sha: &str,
        method: MergeMethod,
        opts: &CallOptions,
    ) -> Result<Outcome<MergeResult>, ForgeInputError> {
        input::repo(repo)?;
        input::number("pull request", number)?;
        input::sha(sha)?;
        let n = number.to_string();
        let url = self.repo_url(repo, &["pulls", &n, "merge"]);
        let pull_url = self.repo_url(repo, &["pulls", &n]);
        let mut events_url = self.repo_url(repo, &["issues", &n, "events"]);
        events_url.query_pairs_mut().append_pair("per_page", "100");
        let compare_url =
            |base: &str| self.repo_url(repo, &["compare", &format!("{base}...{sha}")]);
        let body = serde_json::to_vec(&serde_json::json!({ "sha": sha, "merge_method": method }))
            .expect("a JSON object of two strings serialises");
        let p = Prepared {
            method: Method::PUT,
            url: &url,
            body: Some(&body),
        };
        Ok(self.typed_write(
            "merge-pull",
            &p,
            opts,
            Some(
                |r: &Reading<'_>| -> Result<Settlement<MergeResult>, AttemptError> {
                    let pull: Value = r.get_json_url(&pull_url)?;
                    settle_merge(r, &pull, sha, &events_url, &compare_url)
                },
            ),
        ))
    }

    /// `PATCH /repos/{owner}/{repo}/git/refs/{git_ref}` (`git_ref` as
    /// `heads/main`) to `sha`, forced when `force`. Each attempt reads the
    /// ref first (`GET …/git/ref/{git_ref}`, in the same operation) once it
    /// holds the host's write slot, under that slot, so a wait at the gate
    /// never makes the baseline stale and a retried PATCH has a fresh one; an
    /// unknown answer's settling read tells the three apart: at `sha` is
    /// landed, at the sha read first is not landed, anything else (absent
    /// included) is moved.
    pub fn update_ref(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        sha: &str,
        force: bool,
        opts: &CallOptions,
    ) -> Result<Outcome<GitRef>, ForgeInputError> {
        input::repo(repo)?;
        input::ref_name(git_ref, true)?;
        input::sha(sha)?;
        let mut segs = vec!["git", "refs"];
        segs.extend(git_ref.split('/'));
        let url = self.repo_url(repo, &segs);
        segs[1] = "ref";
        let read_url = self.repo_url(repo, &segs);
        let body = serde_json::to_vec(&serde_json::json!({ "sha": sha, "force": force }))
            .expect("a JSON object of a string and a bool serialises");
        let before: RefCell<Option<String>> = RefCell::new(None);
        let key = format!("refs/{git_ref}");
        Ok(self.typed_write_with(
            "update-ref",
            &url,
            opts,
            |c, ctx, cred| {
                let deadline = Instant::now() + ctx.timeout;
                // The baseline is read once this attempt may write, under
                // the same pass through the gate: a wait at the gate never
                // comes between it and the PATCH, and a retried PATCH
                // reads a fresh one.
                let permit = c.hold_write_gate(&url, deadline, ctx)?;
                let read: GitRef = read_json_held(c, ctx, cred, &read_url, deadline, &permit)?;
                before.replace(Some(read.object.sha));
                let p = Prepared {
                    method: Method::PATCH,
                    url: &url,
                    body: Some(&body),
                };
                let a = c.attempt_exchange_held(ctx, &p, cred, deadline, &permit)?;
                judge(Effect::Write, &a)?;
                decode(Effect::Write, &a)
            },
            |r| {
                let now: GitRef = r.get_json_url(&read_url)?;
                let observed = ForgeClient::observed(&key, now.object.sha.clone());
                // No baseline read means no attempt got as far as its
                // PATCH: nothing was sent, so a ref not at `sha` is
                // not-landed, never moved by somebody else.
                let first = before.borrow().clone();
                Ok(if now.object.sha == sha {
                    Settlement::landed(now, observed)
                } else if first.as_ref().is_none_or(|f| now.object.sha == *f) {
                    Settlement::not_landed(observed)
                } else {
                    let cause = format!(
                        "{key} is at {}, neither {sha} (this update) nor {} (read before it): moved by somebody else",
                        now.object.sha,
                        first.unwrap_or_default()
                    );
                    Settlement::moved(None, observed, cause)
                })
            },
        ))
    }

    /// `PATCH /repos/{owner}/{repo}/check-runs/{id}` with the fields of
    /// `update`. Each attempt reads the check run first (`GET
    /// …/check-runs/{id}`, in the same operation) once it holds the host's
    /// write slot, under that slot; an unknown answer's
    /// settling read finds the fields sent (landed), the fields read first
    /// (not landed), or other values (moved: somebody else updated it).
    pub fn update_check_run(
        &self,
        repo: &RepoRef,
        id: u64,
        update: &CheckRunUpdate,
        opts: &CallOptions,
    ) -> Result<Outcome<CheckRun>, ForgeInputError> {
        input::repo(repo)?;
        input::number("check run", id)?;
        let url = self.repo_url(repo, &["check-runs", &id.to_string()]);
        let sent = serde_json::to_value(update).expect("a check-run update serialises");
        let body = serde_json::to_vec(&sent).expect("a JSON value serialises");
        let before: RefCell<Option<Value>> = RefCell::new(None);
        let key = format!("check-run:{id}");
        Ok(self.typed_write_with(
            "update-check-run",
            &url,
            opts,
            |c, ctx, cred| {
                let deadline = Instant::now() + ctx.timeout;
                // As update_ref's: the baseline under the write's pass,
                // fresh for every attempt.
                let permit = c.hold_write_gate(&url, deadline, ctx)?;
                let read: Value = read_json_held(c, ctx, cred, &url, deadline, &permit)?;
                before.replace(Some(read));
                let p = Prepared {
                    method: Method::PATCH,
                    url: &url,
                    body: Some(&body),
                };
                let a = c.attempt_exchange_held(ctx, &p, cred, deadline, &permit)?;
                judge(Effect::Write, &a)?;
                decode(Effect::Write, &a)
            },
            |r| {
                let now: Value = r.get_json_url(&url)?;
                let first = before.borrow().clone();
                Ok(settle_check_run(&now, &sent, first.as_ref(), &key))
            },
        ))
    }
}

/// One GET inside a write's attempt (the baseline a write reads first),
/// under the write's pass through the gate: a failure is the attempt's,
/// classed as a read's.
fn read_json_held<T: serde::de::DeserializeOwned>(
    c: &ForgeClient,
    ctx: &mut AttemptCtx<'_>,
    cred: &RefCell<Option<Credential>>,
    url: &Url,
    deadline: Instant,
    permit: &Arc<Permit>,
) -> Result<T, AttemptError> {
    let p = Prepared {
        method: Method::GET,
        url,
        body: None,
    };
    let a = c.attempt_exchange_held(ctx, &p, cred, deadline, permit)?;
    judge(Effect::Read, &a)?;
    decode(Effect::Read, &a)
}

/// The verdict of a merge's settling read of the pull request `pull`, for
/// a merge asked at head `sha`: the merge commit from the read or from the
/// issue's `merged` event when merged at that head; the comparison of the
/// head with the base when still open at it.
fn settle_merge(
    r: &Reading<'_>,
    pull: &Value,
    sha: &str,
    events_url: &Url,
    compare_url: &dyn Fn(&str) -> Url,
) -> Result<Settlement<MergeResult>, AttemptError> {
    let head = pull["head"]["sha"].as_str().unwrap_or("");
    let merged = pull["merged"].as_bool().unwrap_or(false);
    let open = pull["state"] == "open";
    let mut observed = BTreeMap::from([
        ("merged".to_string(), merged.to_string()),
        ("head".to_string(), head.to_string()),
    ]);
    if merged && head == sha {
        let merge_sha = match pull["merge_commit_sha"].as_str() {
            Some(s) if !s.is_empty() => Some(s.to_string()),
            _ => merged_event_commit(r, events_url)?,
        };
        if let Some(s) = &merge_sha {
            observed.insert("sha".into(), s.clone());
        }
        let known = merge_sha.is_some();
        let landed = Settlement::landed(
            MergeResult {
                merged: true,
                sha: merge_sha,
            },
            observed,
        );
        // Merged at the head checked: landed, whatever else is read; the
        // merge commit may only show later.
        return Ok(if known {
            landed
        } else {
            landed.and_read_again()
        });
    }
    if open && head == sha {
        let base = pull["base"]["ref"].as_str().unwrap_or("");
        let status = match r.get_json_url::<Value>(&compare_url(base)) {
            Ok(c) => c["status"].as_str().unwrap_or("").to_string(),
            // The comparison cannot be made (a base gone): it tells
            // nothing either way; the pull request's read stands.
            Err(e) if e.class == sluice_policy::Class::Answered => String::new(),
            Err(e) => return Err(e),
        };
        if !status.is_empty() {
            observed.insert("compare".into(), status.clone());
        }
        if matches!(status.as_str(), "behind" | "identical") {
            return Ok(Settlement::moved(
                None,
                observed,
                format!(
                    "the head {sha} is already in {base} while the pull request reads open (compare: {status}): the merge may have applied on the git side"
                ),
            ));
        }
        return Ok(Settlement::not_landed(observed));
    }
    let cause = if merged {
        format!("the pull request was merged at head {head}, not {sha}: moved by somebody else")
    } else if !open {
        "the pull request was closed unmerged: moved by somebody else".to_string()
    } else {
        format!("the pull request's head moved from {sha} to {head}: moved by somebody else")
    };
    Ok(Settlement::moved(None, observed, cause))
}

/// The `commit_id` of the issue's last `merged` event (every page), if
/// any has one.
fn merged_event_commit(r: &Reading<'_>, url: &Url) -> Result<Option<String>, AttemptError> {
    let events = r.get_all_pages(url, |a| decode::<Vec<Value>>(Effect::Read, a))?;
    Ok(events
        .iter()
        .rev()
        .filter(|e| e["event"] == "merged")
        .find_map(|e| e["commit_id"].as_str().filter(|s| !s.is_empty()))
        .map(str::to_string))
}

/// Whether every field of `sent` is in `read` with the same value
/// (objects compared field by field, so a read may hold more).
fn holds(read: &Value, sent: &Value) -> bool {
    match (read, sent) {
        (Value::Object(r), Value::Object(s)) => s
            .iter()
            .all(|(k, v)| holds(r.get(k).unwrap_or(&Value::Null), v)),
        (r, s) => r == s,
    }
}

/// The verdict of a check-run update's settling read `now`, for the
/// fields `sent`, the run read first being `first`.
fn settle_check_run(
    now: &Value,
    sent: &Value,
    first: Option<&Value>,
    key: &str,
) -> Settlement<CheckRun> {
    let mut observed = BTreeMap::new();
    if let Value::Object(fields) = sent {
        for k in fields.keys() {
            let v = &now[k.as_str()];
            let shown = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            observed.insert(format!("{key}.{k}"), shown);
        }
    }
    if holds(now, sent) {
        return match serde_json::from_value::<CheckRun>(now.clone()) {
            Ok(run) => Settlement::landed(run, observed),
            Err(e) => Settlement::moved(
                None,
                observed,
                format!("the check run read is not one this client can read: {e}"),
            ),
        };
    }
    // No baseline read means no attempt got as far as its PATCH: nothing
    // was sent, so a check run without the fields sent is not-landed,
    // never updated by somebody else.
    let unchanged = match (sent, first) {
        (_, None) => true,
        (Value::Object(fields), Some(first)) => {
            fields.keys().all(|k| now[k.as_str()] == first[k.as_str()])
        }
        _ => false,
    };
    if unchanged {
        Settlement::not_landed(observed)
    } else {
        Settlement::moved(
            None,
            observed,
            "the check run holds neither the fields sent nor those read before: updated by somebody else"
                .to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::settle_check_run;
    use serde_json::json;
    use sluice_policy::Verdict;

    fn run(status: &str) -> serde_json::Value {
        json!({
            "id": 44,
            "name": "ci",
            "head_sha": "a".repeat(40),
            "status": status,
            "conclusion": null
        })
    }

    #[test]
    fn a_check_run_update_whose_baseline_read_never_answered_is_not_landed_not_moved() {
        let sent = json!({"status": "completed"});
        let now = run("in_progress");
        let s = settle_check_run(&now, &sent, None, "check-run:44");
        assert_eq!(s.verdict, Verdict::NotLanded, "{s:?}");
        // With a baseline read that differs from what is there now, it moved.
        let first = run("queued");
        let s = settle_check_run(&now, &sent, Some(&first), "check-run:44");
        assert_eq!(s.verdict, Verdict::Moved, "{s:?}");
        let s = settle_check_run(&run("completed"), &sent, None, "check-run:44");
        assert_eq!(s.verdict, Verdict::Landed, "{s:?}");
    }
}
