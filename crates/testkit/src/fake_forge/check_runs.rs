//! Check runs: the list of a head's (by name, in pages), a new one, one
//! read by id, and one updated by id (reads lagging the update when told).

use std::time::Instant;

use serde_json::{json, Value};

use super::github::{self, run_key};
use super::{body_json, json_reply, message, missing, str_field, Endpoint, Reply, Request, State};

/// `GET /repos/{o}/{r}/commits/{ref}/check-runs?check_name=&filter=`, one
/// page of it, each run as reads see it: with `filter=all` every run, else
/// (`latest`, GitHub's default) the latest of each name (the highest id).
pub(super) fn list_check_runs(st: &State, req: &Request, repo: &str, git_ref: &str) -> Reply {
    let name = req.query("check_name");
    let all = req.query("filter").as_deref() == Some("all");
    let mut runs: Vec<Value> = st
        .check_runs
        .get(repo)
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    let id = r["id"].as_u64().unwrap_or(0);
                    st.github.seen(&run_key(id), r)
                })
                .filter(|r| r["head_sha"] == git_ref)
                .filter(|r| name.as_ref().is_none_or(|n| r["name"] == n.as_str()))
                .collect()
        })
        .unwrap_or_default();
    if !all {
        let id = |r: &Value| r["id"].as_u64().unwrap_or(0);
        let newest: Vec<bool> = runs
            .iter()
            .map(|r| !runs.iter().any(|o| o["name"] == r["name"] && id(o) > id(r)))
            .collect();
        let mut keep = newest.into_iter();
        runs.retain(|_| keep.next().unwrap_or(true));
    }
    let total = runs.len();
    github::page(
        req,
        runs,
        |page| json!({ "total_count": total, "check_runs": page }),
    )
}

/// `POST /repos/{o}/{r}/check-runs` with `name` and `head_sha`.
pub(super) fn create_check_run(
    st: &mut State,
    req: &Request,
    repo: &str,
    started: Instant,
) -> Reply {
    let Some(b) = body_json(req) else {
        return message(400, "Problems parsing JSON");
    };
    let (Some(name), Some(head_sha)) = (str_field(&b, "name"), str_field(&b, "head_sha")) else {
        return missing("name/head_sha");
    };
    st.next_id += 1;
    let id = st.next_id;
    let run = json!({
        "id": id,
        "name": name,
        "head_sha": head_sha,
        "status": str_field(&b, "status").unwrap_or("queued"),
        "conclusion": b.get("conclusion").cloned().unwrap_or(Value::Null),
        "external_id": b.get("external_id").cloned().unwrap_or(Value::Null),
        "details_url": b.get("details_url").cloned().unwrap_or(Value::Null),
        "html_url": format!("https://forge.invalid/{repo}/runs/{id}"),
    });
    let key = format!("check-run:{repo}:{}", run["external_id"]);
    st.check_runs
        .entry(repo.to_string())
        .or_default()
        .push(run.clone());
    github::record(st, Endpoint::CreateCheckRun, key, started);
    json_reply(201, run)
}

/// `GET /repos/{o}/{r}/check-runs/{id}`.
pub(super) fn get_check_run(st: &State, repo: &str, id: u64) -> Reply {
    match st
        .check_runs
        .get(repo)
        .and_then(|rs| rs.iter().find(|r| r["id"] == id))
    {
        Some(r) => json_reply(200, st.github.seen(&run_key(id), r)),
        None => message(404, "Not Found"),
    }
}

/// `PATCH /repos/{o}/{r}/check-runs/{id}`: the fields given are set; a
/// conclusion without a status completes the run, as GitHub does.
pub(super) fn update_check_run(
    st: &mut State,
    req: &Request,
    repo: &str,
    id: u64,
    started: Instant,
) -> Reply {
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&req.body) else {
        return message(400, "Problems parsing JSON");
    };
    let Some(run) = st
        .check_runs
        .get_mut(repo)
        .and_then(|rs| rs.iter_mut().find(|r| r["id"] == id))
    else {
        return message(404, "Not Found");
    };
    if let Some(s) = b.get("status").and_then(Value::as_str) {
        if !matches!(s, "queued" | "in_progress" | "completed") {
            return json_reply(
                422,
                json!({ "message": "Validation Failed", "errors": [{ "field": "status", "code": "invalid" }] }),
            );
        }
    }
    let prior = run.clone();
    for field in [
        "name",
        "status",
        "conclusion",
        "details_url",
        "external_id",
        "output",
        "completed_at",
    ] {
        if let Some(v) = b.get(field) {
            run[field] = v.clone();
        }
    }
    if b.contains_key("conclusion") && !b.contains_key("status") {
        run["status"] = json!("completed");
    }
    let now = run.clone();
    let key = run_key(id);
    st.github.lag(&key, prior);
    github::record(st, Endpoint::UpdateCheckRun, key, started);
    json_reply(200, now)
}
