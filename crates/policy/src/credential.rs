//! Credential sources and fingerprints.
//!
//! A credential is bought from a [`CredentialSource`] before the first
//! attempt that needs one and again only after a refusal; a refused one is
//! never sent again. Secrets stay in `secrecy` types; only fingerprints (the
//! first 12 hex digits of the secret's SHA-256) reach logs and output.

use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use crate::clock::CancelFlag;

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

/// The first 12 hex digits of the SHA-256 of `secret`.
pub fn fingerprint(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let mut s = String::with_capacity(12);
    for b in &digest[..6] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A secret together with its fingerprint, the user name it goes with
/// when its source named one (a credential helper's `username`), and when
/// its holder should buy a new one (a token that expires: see
/// [`Credential::with_refresh_at`]).
#[derive(Clone)]
pub struct Credential {
    secret: SecretString,
    fingerprint: String,
    refresh_at: Option<SystemTime>,
    user: Option<String>,
}

impl Credential {
    /// Wrap a secret, good until it is refused (no user name: the caller's
    /// default applies — for git over http(s) the URL's user name, else
    /// `x-access-token`).
    pub fn new(secret: SecretString) -> Self {
        let fingerprint = fingerprint(secret.expose_secret());
        Credential {
            secret,
            fingerprint,
            refresh_at: None,
            user: None,
        }
    }

    /// Say that from `at` on (wall clock) this credential is to be replaced
    /// before it is sent again: the policy checks it before every request
    /// ([`AttemptCtx::credential_for_request`](crate::AttemptCtx::credential_for_request))
    /// and buys afresh from the operation's source, so a token that would
    /// expire between two requests of one operation is not sent to be
    /// refused. A GitHub App's installation token sets it to its
    /// `expires_at` less the refresh margin.
    pub fn with_refresh_at(mut self, at: SystemTime) -> Self {
        self.refresh_at = Some(at);
        self
    }

    /// When this credential is to be replaced, if ever.
    pub fn refresh_at(&self) -> Option<SystemTime> {
        self.refresh_at
    }

    /// Whether it is to be replaced at `now`.
    pub fn is_due(&self, now: SystemTime) -> bool {
        self.refresh_at.is_some_and(|at| now >= at)
    }

    /// The same secret, sent with the user name `user`. The fingerprint
    /// stays the secret's.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// The user name the source named, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The secret, for the one place that sends it.
    pub fn secret(&self) -> &SecretString {
        &self.secret
    }

    /// The fingerprint, safe to log.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("fingerprint", &self.fingerprint)
            .field("refresh_at", &self.refresh_at)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Why a source could not give a credential. Buying failed: the attempt is
/// unjudged, not a refusal — unless the source says the remote answered
/// ([`CredentialError::answered`]: trying again cannot mend it) or the
/// failure is on this side ([`CredentialError::local`]).
#[derive(Clone, thiserror::Error)]
#[error("credential source failed: {message}")]
#[non_exhaustive]
pub struct CredentialError {
    /// What happened, without the secret.
    pub message: String,
    /// Whether the failure is on this side and will not mend by trying
    /// again (a token command that cannot start: exit 126/127, or no `sh`;
    /// a GitHub App key that cannot sign). The operation then stops with
    /// `local-error`; any other failure is an unjudged attempt of its own,
    /// phase `credential`.
    pub local: bool,
    /// Whether the remote that sells the credential answered with a
    /// refusal that trying again cannot mend (a GitHub App's token
    /// endpoint answering 401, 403 or 404: a wrong key, app or
    /// installation). The attempt is `answered`, phase `credential`, and
    /// the operation stops there.
    pub answered: bool,
    /// The source's own typed error, when it gave one (reach it with
    /// [`CredentialError::detail_as`]).
    pub detail: Option<Arc<dyn std::error::Error + Send + Sync>>,
    /// The seller's request id (`x-github-request-id`, else
    /// `x-request-id`) when it answered over HTTP: the failed purchase's
    /// attempt keeps it ([`AttemptRecord::request_id`](crate::AttemptRecord::request_id)).
    pub request_id: Option<String>,
}

impl PartialEq for CredentialError {
    /// Equal when the words and the kind are (the typed detail is the same
    /// failure in the source's terms).
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
            && self.local == other.local
            && self.answered == other.answered
    }
}

impl Eq for CredentialError {}

impl std::fmt::Debug for CredentialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialError")
            .field("message", &self.message)
            .field("local", &self.local)
            .field("answered", &self.answered)
            .field("detail", &self.detail)
            .field("request_id", &self.request_id)
            .finish()
    }
}

impl CredentialError {
    /// A purchase that failed (a command that exited non-zero, a mint the
    /// API did not answer): an unjudged attempt.
    pub fn new(message: impl Into<String>) -> Self {
        CredentialError {
            message: message.into(),
            local: false,
            answered: false,
            detail: None,
            request_id: None,
        }
    }

    /// A purchase that cannot be made on this side: stops with `local-error`.
    pub fn local(message: impl Into<String>) -> Self {
        CredentialError {
            local: true,
            ..Self::new(message)
        }
    }

    /// A purchase the seller refused in a way trying again cannot mend:
    /// an `answered` attempt, phase `credential`, that ends the operation.
    pub fn answered(message: impl Into<String>) -> Self {
        CredentialError {
            answered: true,
            ..Self::new(message)
        }
    }

    /// Keep the source's typed error beside the words.
    pub fn with_detail(mut self, detail: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.detail = Some(Arc::new(detail));
        self
    }

    /// Keep the seller's request id (the answer's `x-github-request-id`,
    /// else `x-request-id`).
    pub fn with_request_id(mut self, id: Option<String>) -> Self {
        self.request_id = id;
        self
    }

    /// The source's typed error, when it is an `E`.
    pub fn detail_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.detail.as_deref().and_then(|d| d.downcast_ref::<E>())
    }
}

/// What a credential is bought for: the operation's remote, the headers its
/// caller gives every HTTP request of it, and the purchase's bounds (see
/// [`CredentialSource::credential_for`]).
#[derive(Clone, Copy, Debug)]
pub struct Purchase<'a> {
    remote: &'a str,
    headers: &'a [(String, String)],
    limit: Duration,
    cancel: &'a CancelFlag,
}

impl<'a> Purchase<'a> {
    /// A purchase for the operation on `remote` (its URL, no user info),
    /// bounded by `limit` and `cancel`, with no caller's headers.
    pub fn new(remote: &'a str, limit: Duration, cancel: &'a CancelFlag) -> Self {
        Purchase {
            remote,
            headers: &[],
            limit,
            cancel,
        }
    }

    /// The same purchase with the caller's `headers` (checked where they
    /// were given: [`check_header`](crate::check_header)), in the order
    /// they go on a request.
    pub fn with_headers(mut self, headers: &'a [(String, String)]) -> Self {
        self.headers = headers;
        self
    }

    /// The operation's remote.
    pub fn remote(&self) -> &'a str {
        self.remote
    }

    /// The caller's headers for every HTTP request of the operation to its
    /// host (use [`Purchase::headers_for`] to send them).
    pub fn headers(&self) -> &'a [(String, String)] {
        self.headers
    }

    /// The caller's headers when `url` is on the operation's host (the
    /// same scheme, host and port as its remote), else none: a token
    /// endpoint elsewhere (GitHub's `api.github.com` for a git push to
    /// `github.com`) is not sent them.
    pub fn headers_for(&self, url: &str) -> &'a [(String, String)] {
        if crate::host::same_origin(self.remote, url) {
            self.headers
        } else {
            &[]
        }
    }

    /// How long the purchase may take.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// The operation's cancel flag: the purchase gives up when it is raised.
    pub fn cancel(&self) -> &'a CancelFlag {
        self.cancel
    }
}

/// Where credentials are bought.
pub trait CredentialSource: Send + Sync {
    /// Buy a credential (called before the first attempt that needs one and
    /// after each refusal).
    fn credential(&self) -> Result<Credential, CredentialError>;

    /// Buy a credential within `limit`, giving up as soon as `cancel` is
    /// raised: buying is a remote call too and runs inside the operation's
    /// budget. The policy calls this one; the default calls
    /// [`CredentialSource::credential`] (right for sources that answer at
    /// once, such as a static one).
    fn credential_within(
        &self,
        limit: Duration,
        cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        let _ = (limit, cancel);
        self.credential()
    }

    /// Buy a credential for one operation: [`CredentialSource::credential_within`]
    /// with the operation's facts beside it — its remote and the headers
    /// its caller gave every HTTP request of it
    /// ([`CallOptions::header`](crate::CallOptions::header), and a client
    /// builder's own). The policy calls this one, before an attempt, after
    /// a refusal, when a held credential is due, and inside an attempt on
    /// a [`Challenge`]. A source that buys over HTTP puts
    /// [`Purchase::headers_for`] its request's URL on that request: the
    /// headers go only to the operation's host. The default ignores the
    /// facts and calls [`CredentialSource::credential_within`].
    fn credential_for(&self, purchase: &Purchase<'_>) -> Result<Credential, CredentialError> {
        self.credential_within(purchase.limit(), purchase.cancel())
    }

    /// Told when the remote refused the credential with this fingerprint, so
    /// a caching source can drop it and mint afresh next time. The default
    /// does nothing. (git's credential helpers are told `reject` here.)
    fn refused(&self, _fingerprint: &str) {}

    /// Told when an attempt holding the credential with this fingerprint
    /// succeeded: the remote took it. The default does nothing. (git's
    /// credential helpers are told `approve` here, as git tells them.)
    fn accepted(&self, _fingerprint: &str) {}

    /// Whether the credential is bought only once the remote asked for one:
    /// the operation's first request goes without it, and the first 401
    /// answering it has the credential bought inside that same attempt
    /// ([`crate::Challenge`]) and the request sent again with it — git's way
    /// with its credential helpers and askpass. After that it is bought as
    /// any source's (again only after a refusal). The default is `false`:
    /// bought before the first attempt.
    fn after_challenge(&self) -> bool {
        false
    }
}

/// A credential bought inside an attempt, when the remote asked for one
/// (a source that answers [`CredentialSource::after_challenge`]): the
/// attempt's transport calls [`Challenge::fill`] on the first 401 answering
/// a request sent without a credential, and sends the request again with
/// what it gives. The policy then holds that credential as if it had been
/// bought before the attempt: a refusal of it is the credential class's
/// (the source told, the credential never sent again, another bought after
/// the settle pause), a success tells the source it was accepted.
#[derive(Clone)]
pub struct Challenge {
    source: Arc<dyn CredentialSource>,
    limit: Duration,
    cancel: CancelFlag,
    remote: String,
    headers: Arc<[(String, String)]>,
    bought: Arc<std::sync::Mutex<Option<Result<Credential, CredentialError>>>>,
}

impl std::fmt::Debug for Challenge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Challenge")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Challenge {
    /// A challenge answered from `source`, bounded by `limit` and `cancel`,
    /// for the operation on `remote` whose caller gave `headers`.
    pub(crate) fn new(
        source: Arc<dyn CredentialSource>,
        limit: Duration,
        cancel: CancelFlag,
        remote: &str,
        headers: &[(String, String)],
    ) -> Self {
        Challenge {
            source,
            limit,
            cancel,
            remote: remote.to_string(),
            headers: headers.into(),
            bought: Default::default(),
        }
    }

    /// Buy the credential (once per attempt: later calls give the first
    /// purchase's result again).
    pub fn fill(&self) -> Result<Credential, CredentialError> {
        let mut bought = self.bought.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = bought.as_ref() {
            return r.clone();
        }
        let purchase =
            Purchase::new(&self.remote, self.limit, &self.cancel).with_headers(&self.headers);
        let r = self.source.credential_for(&purchase);
        *bought = Some(r.clone());
        r
    }

    /// What [`Challenge::fill`] bought, if it was called.
    pub(crate) fn take(&self) -> Option<Result<Credential, CredentialError>> {
        self.bought.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A fixed secret. A refusal of it stands at once: the source can only
/// return the refused secret again.
pub struct StaticSource(Credential);

impl StaticSource {
    /// A source that always returns `secret`.
    pub fn new(secret: SecretString) -> Self {
        StaticSource(Credential::new(secret))
    }

    /// A source that always returns `credential` (its user name kept).
    pub fn of(credential: Credential) -> Self {
        StaticSource(credential)
    }
}

impl std::fmt::Debug for StaticSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StaticSource").field(&self.0).finish()
    }
}

impl CredentialSource for StaticSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        Ok(self.0.clone())
    }
}

/// A command run with `sh -c`; its stdout, trimmed, is the secret. A command
/// that fails or prints nothing is a [`CredentialError`].
#[derive(Debug, Clone)]
pub struct CommandSource {
    command: String,
}

impl CommandSource {
    /// A source running `command` through `sh -c` on every purchase.
    pub fn new(command: impl Into<String>) -> Self {
        CommandSource {
            command: command.into(),
        }
    }
}

impl CredentialSource for CommandSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.credential_within(Duration::from_secs(24 * 3600), &CancelFlag::new())
    }

    /// Runs the command in a process group of its own; when `limit` runs
    /// out or `cancel` is raised, the whole group is killed (a `sleep` the
    /// command started included) and the purchase fails.
    fn credential_within(
        &self,
        limit: Duration,
        cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        use std::io::Read;
        use std::os::unix::process::CommandExt;
        let started = Instant::now();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| CredentialError::local(format!("could not run the token command: {e}")))?;
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        // The reader ends when every holder of the pipe is gone: the
        // command's whole group exits, or is killed below.
        std::thread::Builder::new()
            .name("token-command".into())
            .spawn(move || {
                let mut out = Vec::new();
                let r = stdout.read_to_end(&mut out).map(|_| out);
                let _ = tx.send(r);
            })
            .map_err(|e| CredentialError::local(format!("could not run the token command: {e}")))?;
        let out = loop {
            let left = limit.saturating_sub(started.elapsed());
            if cancel.is_cancelled() || left.is_zero() {
                kill_group(&mut child);
                return Err(CredentialError::new(if cancel.is_cancelled() {
                    "the token command was stopped: the operation was cancelled".to_string()
                } else {
                    format!(
                        "the token command was stopped after {} ms: no time was left",
                        started.elapsed().as_millis()
                    )
                }));
            }
            // The cancel flag is a plain atomic: looked at every 20 ms.
            match rx.recv_timeout(left.min(Duration::from_millis(20))) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(std::io::Error::other("the reader thread ended"))
                }
            }
        };
        let status = child.wait().map_err(|e| {
            CredentialError::local(format!("could not wait for the token command: {e}"))
        })?;
        let out =
            out.map_err(|e| CredentialError::new(format!("reading the token command: {e}")))?;
        if !status.success() {
            // sh's own codes: 126 found but not executable, 127 not found.
            return Err(match status.code() {
                Some(code @ (126 | 127)) => CredentialError::local(format!(
                    "the token command cannot start (exit {code}: {})",
                    if code == 127 {
                        "not found"
                    } else {
                        "not executable"
                    }
                )),
                _ => CredentialError::new(format!("the token command exited with {status}")),
            });
        }
        let text = String::from_utf8(out)
            .map_err(|_| CredentialError::new("the token command printed non-UTF-8"))?;
        let token = text.trim();
        if token.is_empty() {
            return Err(CredentialError::new("the token command printed nothing"));
        }
        Ok(Credential::new(SecretString::from(token.to_string())))
    }
}

/// Kill the command's process group (it leads one of its own) and reap it.
fn kill_group(child: &mut std::process::Child) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_twelve_hex_digits_of_sha256() {
        // sha256("abc") = ba7816bf8f01cfea...
        assert_eq!(fingerprint("abc"), "ba7816bf8f01");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let c = Credential::new(SecretString::from("hunter2-token".to_string()));
        let s = StaticSource::new(SecretString::from("hunter2-token".to_string()));
        assert!(!format!("{c:?}{s:?}").contains("hunter2"));
    }

    #[test]
    fn command_source_trims_stdout_and_fails_on_error() {
        let c = CommandSource::new("printf '  tok-1\\n'")
            .credential()
            .expect("runs");
        assert_eq!(c.secret().expose_secret(), "tok-1");
        assert!(CommandSource::new("exit 3").credential().is_err());
        assert!(CommandSource::new("true").credential().is_err());
        assert!(!CommandSource::new("exit 3").credential().unwrap_err().local);
    }

    #[test]
    fn a_command_that_cannot_start_is_a_local_failure() {
        let e = CommandSource::new("/nonexistent/token-command")
            .credential()
            .unwrap_err();
        assert!(e.local, "{e}");
        assert!(e.message.contains("127"), "{e}");
    }

    #[test]
    fn a_hanging_command_is_killed_when_its_limit_runs_out_or_on_cancel() {
        let t0 = Instant::now();
        let e = CommandSource::new("sleep 30; echo tok")
            .credential_within(Duration::from_millis(300), &CancelFlag::new())
            .unwrap_err();
        assert!(!e.local);
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        let cancel = CancelFlag::new();
        cancel.cancel();
        let t0 = Instant::now();
        let e = CommandSource::new("sleep 30; echo tok")
            .credential_within(Duration::from_secs(60), &cancel)
            .unwrap_err();
        assert!(e.message.contains("cancelled"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    }
}

/// Where a URL's user info is, its `@` included, so that messages can leave
/// it out: `https://user:secret@host/r.git` → the span of `user:secret@`.
///
/// Cautious on purpose, since it serves error messages about URLs that may
/// not parse: a password holding a raw `/` (`https://u:a/b@host/r`) still
/// counts as user info when what precedes the first `/` cannot be a
/// `host:port`. Without a scheme (`user@host:path`), the user info is what
/// precedes the last `@` before the first `/`.
pub fn user_info_span(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    if let Some(at) = authority.rfind('@') {
        return Some(start..start + at + 1);
    }
    let first_at = rest.find('@')?;
    let port_like = match authority.rsplit_once(':') {
        Some((_, port)) => port.is_empty() || port.bytes().all(|b| b.is_ascii_digit()),
        None => true,
    };
    if start == 0 || port_like {
        return None;
    }
    let end = rest[first_at..]
        .find('/')
        .map_or(rest.len(), |i| first_at + i);
    let at = rest[..end].rfind('@')?;
    Some(start..start + at + 1)
}

/// `text` with every occurrence of `url`'s user info (as written, and
/// percent-decoded) replaced by `***`, for messages that may quote the URL.
pub fn scrub_user_info(text: &str, url: &str) -> String {
    let Some(span) = user_info_span(url) else {
        return text.to_string();
    };
    let info = &url[span.start..span.end - 1];
    let mut out = text.to_string();
    let mut needles = vec![info.to_string()];
    let decoded = percent_decode(info);
    if decoded != info {
        needles.push(decoded);
    }
    // Each part alone too (gix may quote the user or the password apart).
    for part in info.split(':').filter(|p| p.len() >= 4) {
        needles.push(part.to_string());
        needles.push(percent_decode(part));
    }
    // As `{:?}` writes them, too.
    let escaped: Vec<String> = needles
        .iter()
        .map(|n| n.escape_debug().to_string())
        .filter(|e| !needles.contains(e))
        .collect();
    needles.extend(escaped);
    needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in needles.iter().filter(|n| !n.is_empty()) {
        out = out.replace(n.as_str(), "***");
    }
    out
}

/// `%XX` escapes decoded (exactly two hex digits each; anything else is
/// kept as written), lossily as UTF-8: a URL's user info as it is sent.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn user_info_is_found_where_a_password_could_hide() {
        fn span(u: &str) -> Option<&str> {
            user_info_span(u).map(|r| &u[r])
        }
        assert_eq!(span("https://u:p@h/r.git"), Some("u:p@"));
        assert_eq!(span("https://TOKEN@h"), Some("TOKEN@"));
        assert_eq!(span("https://x:ab/secret@host/r.git"), Some("x:ab/secret@"));
        assert_eq!(span("https://h/x@y"), None);
        assert_eq!(span("https://h:8080/x@y"), None);
        assert_eq!(span("git@host:o/r.git"), Some("git@"));
        assert_eq!(span("/srv/r.git"), None);
    }

    #[test]
    fn scrubbing_removes_the_user_info_as_written_and_decoded() {
        let url = "ssh://someone:Zq7p%2FSECRET@";
        let msg = "could not parse \"ssh://someone:Zq7p/SECRET@\" (Zq7p%2FSECRET)";
        let s = scrub_user_info(msg, url);
        assert!(!s.contains("SECRET"), "{s}");
    }
}
