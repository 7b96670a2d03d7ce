//! The git commands: `ls-refs`, `fetch` and `push` through sluice-git
//! under the process's policy, their lines printed as git prints them.

use sluice_cli::{contract, human, Common};
use std::sync::Arc;

use sluice_git::{CallOptions, GitClient};
use sluice_policy::{Effect, Outcome, OutcomeKind, Policy};

use crate::progress;
use crate::session::{
    cancel_flag, credentials, emit, git_options, policy, progress_mode, refuse_untrusted,
};

/// `ls-refs <URL|REMOTE> [<PATTERN>...]`: the remote resolved as fetch
/// resolves it ([`sluice_cli::resolve_listing`]), its refs under the
/// prefixes asked, those matching the patterns printed as `git ls-remote`
/// prints them. With `--exit-code`, a listing in which nothing matched is
/// exit 2, its empty value (or document) printed and nothing on stderr.
pub(crate) fn ls_refs(
    common: &Common,
    url: &str,
    patterns: &[String],
    prefixes: &[String],
    exit_code: bool,
) -> anyhow::Result<u8> {
    let (url, https) = sluice_cli::resolve_listing(common, url)?;
    let client = GitClient::new(policy(common)).with_https(https);
    // Credentials and extra headers as fetch and push read them: the
    // repository's configuration when one is found.
    let repo = sluice_cli::open_repo(None).ok();
    let out = client
        .ls_refs_in(&url, prefixes, repo.as_ref(), &git_options(common))
        .map_err(|e| sluice_cli::input_error(&e))?;
    // A server may send more than the prefixes asked (a v0 one ignores
    // them): kept only what they name, then what the patterns match.
    let out = out.map(|refs| {
        refs.into_iter()
            .filter(|r| prefixes.is_empty() || prefixes.iter().any(|p| r.name.starts_with(p)))
            .filter(|r| {
                sluice_cli::ref_matches(&r.name, patterns)
                    || (r.peeled.is_some()
                        && sluice_cli::ref_matches(&format!("{}^{{}}", r.name), patterns))
            })
            .collect::<Vec<_>>()
    });
    let text = out
        .value
        .as_deref()
        .map(|refs| human::ls_refs(refs, patterns));
    let nothing = out.kind == OutcomeKind::Succeeded && text.as_deref().is_some_and(str::is_empty);
    if exit_code && nothing {
        if common.json {
            let out = out.map(|v| contract::ls_refs_value(&v));
            crate::stdout::write(format!("{}\n", contract::document(&out)).as_bytes());
        }
        return Ok(sluice_cli::EXIT_USAGE);
    }
    Ok(emit(
        common,
        out.map(|v| contract::ls_refs_value(&v)),
        text,
        false,
    ))
}

/// `fetch <URL|REMOTE> [<REFSPEC>...]`: the repository opened (or found)
/// and checked, the remote read by name when it is one, the fetch, its
/// lines as git prints them.
pub(crate) fn fetch(
    common: &Common,
    url: &str,
    refspecs: &[String],
    repo: Option<&std::path::Path>,
    options: &sluice_git::FetchOptions,
    tags_given: bool,
) -> anyhow::Result<u8> {
    let repo = match sluice_cli::open_repo(repo) {
        Ok(r) => r,
        Err(sluice_cli::RepoError::Usage(u)) => return Err(u.into()),
        Err(sluice_cli::RepoError::Untrusted(e)) => {
            return Ok(refuse_untrusted(common, "fetch", Effect::Read, url, e))
        }
    };
    let target = sluice_cli::resolve_remote(common, url, &repo, gix::remote::Direction::Fetch)?;
    let https = sluice_cli::https_for_repo(common, &repo, &target.url)?;
    let client = GitClient::new(policy(common)).with_https(https);
    let bar = progress::Bar::new("fetch", quiet_bar(common), progress_mode(common));
    let mut opts = git_options(common);
    if let Some(cb) = bar.callback() {
        opts = opts.progress(cb);
    }
    let out = match &target.remote {
        Some(remote) => {
            let mut options = *options;
            if !tags_given {
                options.tags = remote.tags;
            }
            client.fetch_remote(remote, refspecs, &repo, &options, &opts)
        }
        None => client.fetch_with(&target.url, refspecs, &repo, options, &opts),
    }
    .map_err(|e| sluice_cli::input_error(&e));
    bar.finish();
    let out = out?;
    let view = view_after(&repo);
    let abbrev = |id: &gix::ObjectId| abbreviate(view.as_ref(), id);
    let text = out.value.as_deref().map(|v| {
        human::fetch(
            &out.operation.remote,
            v,
            common.verbose > 0,
            common.quiet,
            &abbrev,
        )
    });
    // git prints its fetch lines on stderr: so do we, before the summary.
    if let Some(t) = text.filter(|_| !common.json) {
        eprint!("{t}");
    }
    Ok(emit(
        common,
        out.map(|v| contract::fetch_value(&v)),
        None,
        true,
    ))
}

/// `push <URL|REMOTE> [+]<SRC>[:<DST>]...`: the repository opened (or
/// found) and checked, the remote read by name when it is one, the
/// updates resolved, the push, the remote-tracking refs of what landed,
/// its lines as git prints them.
pub(crate) fn push(
    common: &Common,
    url: &str,
    specs: &[sluice_git::PushSpec],
    leases: &std::collections::BTreeMap<String, sluice_git::LeaseSpec>,
    repo: Option<&std::path::Path>,
    options: &sluice_git::PushOptions,
    porcelain: bool,
) -> anyhow::Result<u8> {
    let repo = match sluice_cli::open_repo(repo) {
        Ok(r) => r,
        Err(sluice_cli::RepoError::Usage(u)) => return Err(u.into()),
        Err(sluice_cli::RepoError::Untrusted(e)) => {
            let effect = if options.dry_run {
                Effect::Read
            } else {
                Effect::Write
            };
            return Ok(refuse_untrusted(common, "push", effect, url, e));
        }
    };
    let target = sluice_cli::resolve_remote(common, url, &repo, gix::remote::Direction::Push)?;
    let https = sluice_cli::https_for_repo(common, &repo, &target.url)?;
    // A deletion named short (`:side`, `--delete side`) names the remote's
    // ref of that name, as git finds it: the remote's refs are read first.
    let expanded;
    let specs = if sluice_cli::deletes_a_short_name(specs) {
        let names = match remote_names(common, &target.url, https.clone())? {
            Ok(names) => names,
            Err(code) => return Ok(code),
        };
        expanded = sluice_cli::expand_deletions(specs, &names)?;
        &expanded[..]
    } else {
        specs
    };
    let updates = sluice_cli::resolve_updates(specs, leases, &target, &repo)?;
    // Every URL in turn (every `pushurl`, else every `url`), whatever the
    // ones before did, as git pushes: one operation each, ids `<id>`,
    // `<id>#2`, …, and one document.
    let mut outcomes = Vec::with_capacity(target.push_urls.len());
    let mut texts = String::new();
    for (i, push_url) in target.push_urls.iter().enumerate() {
        let https = if i == 0 {
            https.clone()
        } else {
            sluice_cli::https_for_repo(common, &repo, push_url)?
        };
        let client = GitClient::new(policy(common)).with_https(https);
        let bar = progress::Bar::new("push", quiet_bar(common), progress_mode(common));
        let mut opts = git_options(common);
        if let Some(first) = outcomes.first().map(|o: &Outcome<_>| &o.operation) {
            opts = opts.id(format!("{}#{}", first.id, i + 1));
        }
        if let Some(cb) = bar.callback() {
            opts = opts.progress(cb);
        }
        let out = client
            .push(push_url, &updates, options, &repo, &opts)
            .map_err(|e| sluice_cli::input_error(&e));
        bar.finish();
        let out = out?;
        if !options.dry_run {
            update_tracking(&target, &repo, out.value.as_ref());
        }
        if let Some(text) = push_text(common, specs, &repo, &out, porcelain) {
            texts.push_str(&text);
        }
        outcomes.push(out.map(|v| contract::push_value(&v, push_url)));
    }
    let text = outcomes.iter().any(|o| o.value.is_some()).then_some(texts);
    Ok(emit(
        common,
        contract::merge_pushes(outcomes),
        text,
        !porcelain,
    ))
}

/// What git prints for one URL's push: ids abbreviated as git does,
/// forced updates told from fast-forwards; porcelain when asked.
fn push_text(
    common: &Common,
    specs: &[sluice_git::PushSpec],
    repo: &gix::Repository,
    out: &Outcome<sluice_git::PushReport>,
    porcelain: bool,
) -> Option<String> {
    let view = view_after(repo);
    let abbrev = |id: &gix::ObjectId| abbreviate(view.as_ref(), id);
    let fast_forward = |old: gix::ObjectId, new: gix::ObjectId| {
        view.as_ref()
            .and_then(|v| v.merge_base(old, new).ok().flatten())
            .is_some_and(|base| base.detach() == old)
    };
    let full_src = |src: &str| {
        view.as_ref()
            .and_then(|v| v.find_reference(src).ok())
            .map(|r| r.name().as_bstr().to_string())
            .unwrap_or_else(|| src.to_string())
    };
    out.value.as_ref().map(|r| {
        let lines = human::push_lines(specs, r, &abbrev, &fast_forward, &full_src);
        if porcelain {
            // git says `Done` once the exchange completed, rejections
            // or not; not when its answer is unknown.
            let done = matches!(out.kind, OutcomeKind::Succeeded | OutcomeKind::Answered);
            human::push_porcelain(&out.operation.remote, &lines, done)
        } else {
            human::push(
                &out.operation.remote,
                &lines,
                common.verbose > 0,
                common.quiet,
            )
        }
    })
}

/// The names of the remote's refs, for deletions named short: listed
/// under the command's bounds, credentials and https settings but outside
/// its ledger (the operation id names the push, not this read). A listing
/// that did not succeed ends the command: its outcome printed, its exit
/// code the `Err`.
fn remote_names(
    common: &Common,
    url: &str,
    https: sluice_git::HttpsConfig,
) -> anyhow::Result<Result<Vec<String>, u8>> {
    let client = GitClient::new(Arc::new(Policy::builder().build())).with_https(https);
    let mut opts = CallOptions::new()
        .bounds(common.bounds)
        .cancel(cancel_flag());
    if let Some(c) = credentials(common) {
        opts = opts.credentials(c);
    }
    let out = client
        .ls_refs(url, &[], &opts)
        .map_err(|e| sluice_cli::input_error(&e))?;
    if out.kind != OutcomeKind::Succeeded {
        return Ok(Err(emit(
            common,
            out.map(|v| contract::ls_refs_value(&v)),
            None,
            true,
        )));
    }
    let refs = out.value.unwrap_or_default();
    Ok(Ok(refs.into_iter().map(|r| r.name).collect()))
}

/// No progress bar: `-q` asked for none, or tracing writes to stderr.
fn quiet_bar(common: &Common) -> bool {
    common.quiet || common.trace > 0
}

/// After a push, the remote-tracking refs of the refs that landed, as git
/// updates them, of the target's configured remote (the one a value-less
/// `--lease` read; its configuration not read again). A tracking ref that
/// cannot be written is said on stderr; the push's outcome stands.
pub(crate) fn update_tracking(
    target: &sluice_cli::Target,
    repo: &gix::Repository,
    report: Option<&sluice_git::PushReport>,
) {
    let Some(report) = report else {
        return;
    };
    let Some(remote) = &target.remote else {
        return;
    };
    let Some(view) = view_after(repo) else {
        return;
    };
    if let Err(e) = remote.update_tracking_refs(&view, &report.refs) {
        eprintln!(
            "warning: the push landed, but the remote-tracking refs of {:?} were not updated: {e}",
            remote.name
        );
    }
}

/// A view of `repo` opened after the operation, so the objects it brought
/// are seen (`None` when it cannot be opened: ids are then not shortened
/// against the repository).
pub(crate) fn view_after(repo: &gix::Repository) -> Option<gix::Repository> {
    gix::open_opts(repo.git_dir(), repo.open_options().clone()).ok()
}

/// `id` abbreviated as git abbreviates it (core.abbrev, auto length).
pub(crate) fn abbreviate(view: Option<&gix::Repository>, id: &gix::ObjectId) -> String {
    match view {
        Some(v) => gix::prelude::ObjectIdExt::attach(*id, v)
            .shorten_or_id()
            .to_string(),
        None => id.to_hex_with_len(7).to_string(),
    }
}
