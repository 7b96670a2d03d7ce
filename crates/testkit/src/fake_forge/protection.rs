//! What a base branch requires: its classic protection's required status
//! checks (404 when the branch has none, as GitHub answers an unprotected
//! branch) and the rules that apply to it (in pages; none is `[]`).

use serde_json::{json, Value};

use super::github;
use super::{json_reply, message, Reply, Request, State};

/// `GET /repos/{o}/{r}/branches/{b}/protection/required_status_checks`.
pub(super) fn required_status_checks(st: &State, repo: &str, branch: &str) -> Reply {
    match st.protection.get(&(repo.to_string(), branch.to_string())) {
        Some((contexts, checks)) => json_reply(
            200,
            json!({
                "url": format!("https://forge.invalid/repos/{repo}/branches/{branch}/protection/required_status_checks"),
                "strict": true,
                "contexts": contexts,
                "checks": checks
                    .iter()
                    .map(|c| json!({ "context": c, "app_id": 15368 }))
                    .collect::<Vec<_>>(),
            }),
        ),
        None => message(404, "Branch not protected"),
    }
}

/// `GET /repos/{o}/{r}/rules/branches/{b}`: one page of the rules.
pub(super) fn branch_rules(st: &State, req: &Request, repo: &str, branch: &str) -> Reply {
    let rules: Vec<Value> = st
        .rules
        .get(&(repo.to_string(), branch.to_string()))
        .cloned()
        .unwrap_or_default();
    github::page(req, rules, Value::Array)
}
