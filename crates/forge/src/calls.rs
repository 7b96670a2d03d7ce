//! The typed calls sluice uses. Each is one policy operation; the writes
//! carry their settling reads:
//!
//! | call | kind | effect | settled by |
//! |---|---|---|---|
//! | [`ForgeClient::get_pull`] | `get-pull` | read | — |
//! | [`ForgeClient::list_pulls_by_head`] | `list-pulls` | read (every page) | — |
//! | [`ForgeClient::ci_status`] | `ci-status` | read (the combined status, then every page of check runs) | — |
//! | [`ForgeClient::find_check_run`] | `find-check-run` | read | — |
//! | [`ForgeClient::create_pull`] | `create-pull` | write | the open pull requests from its head into its base |
//! | [`ForgeClient::create_check_run`] | `create-check-run` | write | the ref's check runs, by `external_id` |
//! | [`ForgeClient::create_issue_comment`] | `create-issue-comment` | write | none: an unknown answer ends `unknown`, `may_have_applied: true` |

use std::time::Instant;

use reqwest::{Method, Url};
use sluice_policy::{AttemptError, Outcome, Settlement};

use crate::client::{decode, judge, Answer, CallOptions, ForgeClient, Prepared, Reading};
use crate::pages::Pages;
use crate::types::{
    CheckRun, CheckRunList, CiStatus, CombinedStatus, IssueComment, NewCheckRun, NewPullRequest,
    PullRequest, RepoRef,
};
use sluice_policy::Effect;

/// One page of check runs: its items.
fn check_runs_of(a: &Answer) -> Result<Vec<CheckRun>, AttemptError> {
    decode::<CheckRunList>(Effect::Read, a).map(|l| l.check_runs)
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

    fn check_runs_url(&self, repo: &RepoRef, git_ref: &str, name: Option<&str>) -> Url {
        let mut segs = vec!["commits"];
        segs.extend(git_ref.split('/'));
        segs.push("check-runs");
        let mut url = self.repo_url(repo, &segs);
        {
            let mut q = url.query_pairs_mut();
            if let Some(n) = name {
                q.append_pair("check_name", n);
            }
            q.append_pair("filter", "all");
            q.append_pair("per_page", "100");
        }
        url
    }

    /// `GET /repos/{owner}/{repo}/pulls/{number}`.
    pub fn get_pull(&self, repo: &RepoRef, number: u64, opts: CallOptions) -> Outcome<PullRequest> {
        let url = self.repo_url(repo, &["pulls", &number.to_string()]);
        self.typed_read("get-pull", &url, &opts, |c, ctx, cred| {
            let p = Prepared {
                method: Method::GET,
                url: &url,
                body: None,
            };
            let a = c.attempt_exchange(ctx, &p, cred)?;
            judge(Effect::Read, &a)?;
            decode(Effect::Read, &a)
        })
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
        opts: CallOptions,
    ) -> Outcome<Vec<PullRequest>> {
        let url = self.pulls_by_head_url(repo, head, base, state);
        let mut pages = Pages::new(url.clone());
        self.typed_read("list-pulls", &url, &opts, |c, ctx, cred| {
            let deadline = Instant::now() + ctx.timeout;
            pages.read(c, ctx, cred, deadline, |a| {
                decode::<Vec<PullRequest>>(Effect::Read, a)
            })
        })
    }

    /// The CI status of `git_ref` (a sha, branch or tag): the combined
    /// commit status and every check run of every page (`Link:
    /// rel="next"`), within the one operation. What an attempt read is kept:
    /// a page that fails is read again by the next attempt, not the pages
    /// (or the combined status) before it.
    pub fn ci_status(&self, repo: &RepoRef, git_ref: &str, opts: CallOptions) -> Outcome<CiStatus> {
        let mut status_segs = vec!["commits"];
        status_segs.extend(git_ref.split('/'));
        let remote = self.repo_url(repo, &status_segs);
        status_segs.push("status");
        let status_url = self.repo_url(repo, &status_segs);
        let runs_url = self.check_runs_url(repo, git_ref, None);
        let mut combined: Option<CombinedStatus> = None;
        let mut pages = Pages::new(runs_url);
        self.typed_read("ci-status", &remote, &opts, |c, ctx, cred| {
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
            Ok(CiStatus {
                combined: combined.clone().expect("read above"),
                check_runs,
            })
        })
    }

    /// The check run on `git_ref` whose `external_id` is `external_id`
    /// (named `name` when given), if any.
    pub fn find_check_run(
        &self,
        repo: &RepoRef,
        git_ref: &str,
        name: Option<&str>,
        external_id: &str,
        opts: CallOptions,
    ) -> Outcome<Option<CheckRun>> {
        let url = self.check_runs_url(repo, git_ref, name);
        self.typed_read("find-check-run", &url, &opts, |c, ctx, cred| {
            let p = Prepared {
                method: Method::GET,
                url: &url,
                body: None,
            };
            let a = c.attempt_exchange(ctx, &p, cred)?;
            judge(Effect::Read, &a)?;
            let list: CheckRunList = decode(Effect::Read, &a)?;
            Ok(list
                .check_runs
                .into_iter()
                .find(|r| r.external_id.as_deref() == Some(external_id)))
        })
    }

    /// `POST /repos/{owner}/{repo}/pulls`. An unknown answer is settled by
    /// listing the open pull requests from its head into its base: one found
    /// is the write landed (GitHub keeps one open pull request per head and
    /// base); none found means it did not land and may be sent again.
    pub fn create_pull(
        &self,
        repo: &RepoRef,
        new: &NewPullRequest,
        opts: CallOptions,
    ) -> Outcome<PullRequest> {
        let url = self.repo_url(repo, &["pulls"]);
        let body = serde_json::to_vec(new).unwrap_or_default();
        let p = Prepared {
            method: Method::POST,
            url: &url,
            body: Some(&body),
        };
        let list_url = self.pulls_by_head_url(repo, &new.head, Some(&new.base), "open");
        self.typed_write(
            "create-pull",
            &p,
            &opts,
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
        )
    }

    /// `POST /repos/{owner}/{repo}/check-runs`. An unknown answer is settled
    /// by listing the check runs of `head_sha` named `name` and looking for
    /// `external_id`.
    pub fn create_check_run(
        &self,
        repo: &RepoRef,
        new: &NewCheckRun,
        opts: CallOptions,
    ) -> Outcome<CheckRun> {
        let url = self.repo_url(repo, &["check-runs"]);
        let body = serde_json::to_vec(new).unwrap_or_default();
        let p = Prepared {
            method: Method::POST,
            url: &url,
            body: Some(&body),
        };
        let list_url = self.check_runs_url(repo, &new.head_sha, Some(&new.name));
        let external_id = new.external_id.clone();
        self.typed_write(
            "create-check-run",
            &p,
            &opts,
            Some(
                |r: &Reading<'_>| -> Result<Settlement<CheckRun>, AttemptError> {
                    let runs = r.get_all_pages(&list_url, check_runs_of)?;
                    let key = format!("check-run:{external_id}");
                    Ok(
                        match runs
                            .into_iter()
                            .find(|c| c.external_id.as_deref() == Some(external_id.as_str()))
                        {
                            Some(run) => {
                                let id = run.id.to_string();
                                Settlement::landed(run, ForgeClient::observed(&key, id))
                            }
                            None => Settlement::not_landed(ForgeClient::observed(&key, "absent")),
                        },
                    )
                },
            ),
        )
    }

    /// `POST /repos/{owner}/{repo}/issues/{number}/comments` (pull requests
    /// are issues). No settling read: a comment cannot be told from an
    /// identical earlier one, so an unknown answer ends `unknown` with
    /// `may_have_applied: true`.
    pub fn create_issue_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
        opts: CallOptions,
    ) -> Outcome<IssueComment> {
        let url = self.repo_url(repo, &["issues", &number.to_string(), "comments"]);
        let json = serde_json::to_vec(&serde_json::json!({ "body": body })).unwrap_or_default();
        let p = Prepared {
            method: Method::POST,
            url: &url,
            body: Some(&json),
        };
        self.typed_write(
            "create-issue-comment",
            &p,
            &opts,
            None::<fn(&Reading<'_>) -> Result<Settlement<IssueComment>, AttemptError>>,
        )
    }
}
