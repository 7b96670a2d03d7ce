//! Credentials for git over http(s) as git finds them, in git's one order
//! (the first that applies):
//!
//! 1. the call's source (`CallOptions::credentials`);
//! 2. the client's default source (`GitClient::with_credentials`);
//! 3. user and password in the URL;
//! 4. git's credential helpers (`credential.helper`, `credential.<url>.*`
//!    with git's URL matching, `credential.username`,
//!    `credential.useHttpPath`), read by gix
//!    (`config::Snapshot::credential_helpers`);
//! 5. askpass (`GIT_ASKPASS`, `core.askPass`, `SSH_ASKPASS`, git's order).
//!
//! (4) and (5) are one [`GitCredentials`] source, bought only once the
//! remote asked: the first request goes without a credential and its 401
//! has the helpers asked `fill` inside the same attempt. The policy tells
//! the source `approve` (`accepted`) after a success and `reject`
//! (`refused`) after a refusal, as git tells its helpers. Never a terminal
//! prompt.
//!
//! `http.extraHeader` lines ([`extra_headers`]) go on every request; when
//! one is `Authorization`, nothing in (1)–(5) is asked. A URL's user name
//! without a password is the user name for (1), (2), (4) and (5); when none
//! of them applies it is sent as a token of `x-access-token` (GitHub's
//! `https://TOKEN@host`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gix::bstr::ByteSlice;
use gix::credentials::helper::{Action, Cascade, NextAction};
use gix::credentials::protocol::Context;
use secrecy::SecretString;
use sluice_policy::{Credential, CredentialError, CredentialSource};

/// git's credential helpers and askpass for one URL, as a
/// [`CredentialSource`] bought after the remote's first 401. A purchase is
/// bounded by what remains of the operation and by its cancel flag: a
/// helper or askpass that does not answer in time fails the purchase (it is
/// left to end on its own).
#[derive(Debug)]
pub struct GitCredentials {
    inner: Arc<Helpers>,
}

/// What [`GitCredentials`] asks, shared with the thread a bounded purchase
/// runs on.
struct Helpers {
    /// The helpers that apply to the URL (gix's cascade).
    cascade: Mutex<Cascade>,
    /// The `get` request: the URL (with `credential.username` applied).
    context: Context,
    /// The askpass program, when one is configured.
    askpass: Option<std::path::PathBuf>,
    /// What each credential handed out was, by fingerprint: told `store`
    /// or `erase` when the policy says it was accepted or refused.
    given: Mutex<HashMap<String, NextAction>>,
}

impl std::fmt::Debug for Helpers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let helpers = self
            .cascade
            .lock()
            .map(|c| c.programs.len())
            .unwrap_or_default();
        f.debug_struct("Helpers")
            .field("helpers", &helpers)
            .field("askpass", &self.askpass.is_some())
            .finish_non_exhaustive()
    }
}

/// No prompt from gix's cascade: askpass is run here, and a terminal never.
fn no_prompt() -> gix::prompt::Options {
    gix::prompt::Options {
        mode: gix::prompt::Mode::Disable,
        askpass: None,
    }
}

impl GitCredentials {
    /// The helpers and askpass git's configuration gives `url` (an http(s)
    /// URL with its user name, without a password): `repo`'s configuration
    /// when there is one, else the system and global files. `None` when
    /// neither a helper nor askpass is configured, or the configuration
    /// cannot be read.
    pub(crate) fn for_url(repo: Option<&gix::Repository>, url: gix::Url) -> Option<Self> {
        let read = match repo {
            Some(repo) => repo.config_snapshot().credential_helpers(url),
            None => {
                let config = gix::config::File::from_globals().ok()?;
                gix::config::credential_helpers(
                    url,
                    &config,
                    true,
                    |_| true,
                    gix::open::permissions::Environment::all(),
                    false,
                )
            }
        };
        let (cascade, action, prompt) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "git's credential configuration could not be read");
                return None;
            }
        };
        let askpass = prompt.askpass.filter(|p| !p.as_os_str().is_empty());
        if cascade.programs.is_empty() && askpass.is_none() {
            return None;
        }
        let context = action.context().cloned()?;
        Some(GitCredentials {
            inner: Arc::new(Helpers {
                cascade: Mutex::new(cascade),
                context,
                askpass,
                given: Mutex::default(),
            }),
        })
    }
}

impl Helpers {
    /// Tell the helpers `store` or `erase` for the credential `fingerprint`.
    fn tell(&self, fingerprint: &str, store: bool) {
        let Some(next) = self
            .given
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fingerprint)
        else {
            return;
        };
        let action = if store { next.store() } else { next.erase() };
        let mut cascade = self.cascade.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = cascade.invoke(action, no_prompt()) {
            tracing::debug!(error = %e, store, "a credential helper failed");
        }
    }

    /// Ask the askpass program for `field` ("Username", "Password") of
    /// `ctx`, with git's prompt as its one argument.
    fn ask(
        &self,
        program: &std::path::Path,
        ctx: &Context,
        field: &str,
    ) -> Result<String, CredentialError> {
        // git's words: `Username for 'https://host': `, the user name in
        // the password's.
        let mut described = format!("{}://", ctx.protocol.as_deref().unwrap_or_default());
        if let (Some(u), "Password") = (&ctx.username, field) {
            described.push_str(u);
            described.push('@');
        }
        described.push_str(ctx.host.as_deref().unwrap_or_default());
        if let Some(path) = ctx.path.as_ref().filter(|p| !p.is_empty()) {
            described.push('/');
            described.push_str(&path.to_str_lossy());
        }
        let prompt = format!("{field} for '{described}': ");
        let out = std::process::Command::new(program)
            .arg(&prompt)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| {
                CredentialError::new(format!("could not run askpass {}: {e}", program.display()))
            })?;
        if !out.status.success() {
            return Err(CredentialError::new(format!(
                "askpass {} exited with {}",
                program.display(),
                out.status
            )));
        }
        let mut text = String::from_utf8(out.stdout)
            .map_err(|_| CredentialError::new("askpass printed non-UTF-8"))?;
        while text.ends_with('\n') || text.ends_with('\r') {
            text.pop();
        }
        Ok(text)
    }
}

impl CredentialSource for GitCredentials {
    /// `fill`: the helpers in order until one gives a user name and a
    /// password, then askpass for what is still missing.
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.inner.fill()
    }

    /// [`GitCredentials::credential`] within `limit`, given up when
    /// `cancel` is raised.
    fn credential_within(
        &self,
        limit: std::time::Duration,
        cancel: &sluice_policy::CancelFlag,
    ) -> Result<Credential, CredentialError> {
        let started = std::time::Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let inner = Arc::clone(&self.inner);
        std::thread::Builder::new()
            .name("credential-helpers".into())
            .spawn(move || {
                let _ = tx.send(inner.fill());
            })
            .map_err(|e| CredentialError::local(format!("could not ask the helpers: {e}")))?;
        loop {
            let left = limit.saturating_sub(started.elapsed());
            if cancel.is_cancelled() || left.is_zero() {
                return Err(CredentialError::new(
                    "git's credential helpers or askpass did not answer in time",
                ));
            }
            // The cancel flag is a plain atomic: looked at every 20 ms.
            match rx.recv_timeout(left.min(std::time::Duration::from_millis(20))) {
                Ok(r) => return r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(CredentialError::new("the credential helpers' thread ended"))
                }
            }
        }
    }

    fn refused(&self, fingerprint: &str) {
        self.inner.refused(fingerprint);
    }

    fn accepted(&self, fingerprint: &str) {
        self.inner.accepted(fingerprint);
    }

    fn after_challenge(&self) -> bool {
        true
    }
}

impl Helpers {
    fn fill(&self) -> Result<Credential, CredentialError> {
        let got = {
            let mut cascade = self.cascade.lock().unwrap_or_else(|p| p.into_inner());
            if cascade.programs.is_empty() {
                None
            } else {
                match cascade.invoke(Action::Get(self.context.clone()), no_prompt()) {
                    Ok(Some(outcome)) => Some(outcome),
                    Ok(None) => None,
                    Err(e) => {
                        tracing::debug!(error = %e, "the credential helpers gave no credential");
                        None
                    }
                }
            }
        };
        let (user, password, next) = match got {
            Some(o) => (o.identity.username, o.identity.password, o.next),
            None => {
                let Some(program) = &self.askpass else {
                    return Err(CredentialError::new(
                        "git's credential helpers gave none, and no askpass is configured",
                    ));
                };
                let mut ctx = self.context.clone();
                if ctx.destructure_url_in_place(false).is_err() {
                    return Err(CredentialError::new("the URL cannot be asked about"));
                }
                let user = match ctx.username.clone() {
                    Some(u) => u,
                    None => self.ask(program, &ctx, "Username")?,
                };
                ctx.username = Some(user.clone());
                let password = self.ask(program, &ctx, "Password")?;
                ctx.password = Some(password.clone());
                ctx.url = None;
                (user, password, NextAction::from(ctx))
            }
        };
        if password.is_empty() {
            return Err(CredentialError::new("the credential found has no password"));
        }
        let c = Credential::new(SecretString::from(password)).with_user(user);
        self.given
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.fingerprint().to_string(), next);
        Ok(c)
    }

    /// `reject`, as git tells its helpers (a `store` helper erases its
    /// entry).
    fn refused(&self, fingerprint: &str) {
        self.tell(fingerprint, false);
    }

    /// `approve`, as git tells its helpers.
    fn accepted(&self, fingerprint: &str) {
        self.tell(fingerprint, true);
    }
}

/// The `http.extraHeader` lines git's configuration gives `url`, split at
/// their first `:`, in git's order: every `http` section that applies (no
/// URL, or git's URL matching) in the order of the configuration; an empty
/// value drops the ones before it.
pub(crate) fn extra_headers(config: &gix::config::File, url: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(sections) = config.sections_by_name("http") else {
        return out;
    };
    for section in sections {
        if let Some(sub) = section.header().subsection_name() {
            if !crate::http_config::url_matches(&sub.to_str_lossy(), url) {
                continue;
            }
        }
        for v in section.values("extraHeader") {
            let v = v.to_str_lossy();
            if v.trim().is_empty() {
                out.clear();
            } else if let Some((k, v)) = v.split_once(':') {
                out.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

/// What git's configuration adds to an http(s) call: the extra headers,
/// and where a credential comes from when the call's order reaches git's
/// helpers.
pub(crate) struct HttpAuth {
    pub extra_headers: Vec<(String, String)>,
    pub helpers: Option<Arc<GitCredentials>>,
}

impl HttpAuth {
    /// Read for `url` (with its user name, without a password) from
    /// `repo`'s configuration, else the system and global files.
    pub fn read(repo: Option<&gix::Repository>, url: &gix::Url) -> HttpAuth {
        let shown = url.to_bstring().to_string();
        let extra_headers = match repo {
            Some(r) => extra_headers(&r.config_snapshot(), &shown),
            None => gix::config::File::from_globals()
                .map(|c| extra_headers(&c, &shown))
                .unwrap_or_default(),
        };
        let authorization = extra_headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        let helpers = if authorization {
            None
        } else {
            GitCredentials::for_url(repo, url.clone()).map(Arc::new)
        };
        HttpAuth {
            extra_headers,
            helpers,
        }
    }
}
