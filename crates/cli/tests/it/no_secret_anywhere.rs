//! No secret in any output: every CLI command (`ls-refs`, `fetch`, `push`,
//! `http get`) down every path (succeeded, answered, refused credential,
//! unknown, rejected, usage error, a failing token command), with a
//! recognisable token given by `--token-command` or as user info in the
//! URL, under `--trace` (once and twice) and `--metrics`, with and without `--json`: the token appears
//! nowhere — stdout, stderr, the JSON document, the ledger file.
//!
//! And a credential is only ever sent to the host it was bought for: an
//! HTTP redirect to another host (git smart HTTP and `http get`) arrives
//! there without it.
//!
//! Through the library, a GitHub App's private key and the installation
//! tokens it buys never reach tracing (at `TRACE`), an outcome's `Debug` or
//! JSON form, or an error.
//!
//! The binary is the one cargo builds for this package's tests
//! (`CARGO_BIN_EXE_sluice-remote`): the test never runs cargo itself, which
//! built every dependency a second time with another feature set.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sluice_testkit::{http_backend, repo, GitDaemon, HttpBackend, RepoBuilder};

const TOKEN: &str = "tok-R3liab1lity-7q3xZ9-SECRET";

/// The `sluice-remote` binary of this build.
fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice-remote"))
}

#[derive(Debug)]
struct Run {
    args: Vec<String>,
    code: i32,
    stdout: String,
    stderr: String,
}

fn sluice(args: &[&str]) -> Run {
    sluice_env(args, &[])
}

/// [`sluice`] with `env` on top (`GH_TOKEN` and `GITHUB_TOKEN` removed
/// first, so that the tests never see the token of whoever runs them).
fn sluice_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(bin())
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .envs(env.iter().copied())
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    Run {
        args: args.iter().map(|s| s.to_string()).collect(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Where a secret showed, if anywhere.
fn leaks(secret: &str, run: &Run, ledger: Option<&Path>) -> Vec<String> {
    let mut out = Vec::new();
    if run.stdout.contains(secret) {
        out.push(format!("stdout of {:?}: {}", run.args, run.stdout));
    }
    if run.stderr.contains(secret) {
        let line = run
            .stderr
            .lines()
            .find(|l| l.contains(secret))
            .unwrap_or_default();
        out.push(format!("stderr of {:?}: {line}", run.args));
    }
    if let Some(l) = ledger {
        if std::fs::read_to_string(l).is_ok_and(|t| t.contains(secret)) {
            out.push(format!("ledger after {:?}", run.args));
        }
    }
    out
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A recording HTTP/1.1 server on 127.0.0.1: every request's head (and
/// body) is kept; `route(path)` gives the answer.
struct Recorder {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Route = Arc<dyn Fn(&str) -> (u16, Vec<(String, String)>, String) + Send + Sync>;

impl Recorder {
    fn start(route: Route) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (Arc::clone(&requests), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => serve(stream, &route, &r),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Recorder {
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("requests").clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(stream: TcpStream, route: &Route, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    let _ = reader.read_exact(&mut body);
    head.push_str(&String::from_utf8_lossy(&body));
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    requests.lock().expect("requests").push(head);
    let (status, headers, body) = route(&path);
    let mut stream = reader.into_inner();
    let mut out = format!(
        "HTTP/1.1 {status} Status\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    let _ = stream.write_all(out.as_bytes());
}

struct World {
    dir: tempfile::TempDir,
    http: HttpBackend,
    daemon: GitDaemon,
}

fn world() -> World {
    assert!(
        http_backend::find_lighttpd().is_some(),
        "lighttpd is not installed (apt-get install -y lighttpd)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = dir.path().join("srv");
    RepoBuilder::new()
        .branch("main", 3)
        .build(&srv.join("small.git"))
        .expect("served repository");
    let http = HttpBackend::start_with_auth(&srv, "x-access-token", TOKEN).expect("lighttpd");
    let daemon = GitDaemon::start(&srv).expect("daemon");
    World { dir, http, daemon }
}

impl World {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn token_command(&self, token: &str, tail: &str) -> String {
        let file = self.path(&format!("token-{}.txt", token.len()));
        std::fs::write(&file, format!("{token}\n")).expect("token file");
        format!("cat '{}'{tail}", p(&file))
    }

    fn clone_bare(&self, name: &str) -> PathBuf {
        let to = self.path(name);
        repo::git(
            self.dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &p(&self.path("srv").join("small.git")),
                &p(&to),
            ],
        );
        to
    }
}

#[test]
fn no_command_and_no_failure_path_shows_the_token_even_with_tracing() {
    let w = world();
    let ledger = w.path("ledger.json");
    let l = p(&ledger);
    let cmd = w.token_command(TOKEN, "");
    let wrong = "tok-Wr0ng-4k2j-SECRET";
    let wrong_cmd = w.token_command(wrong, "");
    let failing_cmd = w.token_command(TOKEN, "; exit 1");
    let url = w.http.url("small.git");
    let with_info = w.http.url_with_credentials("small.git");
    assert!(with_info.contains(TOKEN));
    let dead = format!("http://127.0.0.1:{}/git/small.git", dead_port());
    let dead_info = format!(
        "http://x-access-token:{TOKEN}@127.0.0.1:{}/git/small.git",
        dead_port()
    );
    let local = w.clone_bare("local.git");
    repo::commit_on(&local, "main", "pushed under the secrets test");
    let behind = w.clone_bare("behind.git");
    let fetch_into = w.path("fetch.git");
    repo::init_bare(&fetch_into).expect("init");
    let api = Recorder::start(Arc::new(|path: &str| match path {
        "/ok" => (200, vec![], "{\"fine\":true}".into()),
        "/missing" => (404, vec![], "{\"message\":\"Not Found\"}".into()),
        "/busy" => (503, vec![("Retry-After".into(), "0".into())], String::new()),
        _ => (401, vec![], "{\"message\":\"Bad credentials\"}".into()),
    }));
    let api_url = |path: &str| format!("http://127.0.0.1:{}{path}", api.port);
    let api_info = |path: &str| format!("http://u:{TOKEN}@127.0.0.1:{}{path}", api.port);
    let (lo, fo, po) = (p(&local), p(&fetch_into), p(&behind));

    // (expected exit code, arguments after the common ones)
    let mut cases: Vec<(i32, Vec<String>)> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    for (creds, u) in [("cmd", url.as_str()), ("info", with_info.as_str())] {
        let c: Vec<String> = if creds == "cmd" {
            s(&["--token-command", &cmd])
        } else {
            Vec::new()
        };
        let mut with = |code: i32, rest: &[&str]| {
            let mut v = c.clone();
            v.extend(s(rest));
            cases.push((code, v));
        };
        with(0, &["ls-refs", u]);
        with(0, &["ls-refs", u, "--prefix", "refs/heads/"]);
        with(
            0,
            &["fetch", u, "+refs/heads/*:refs/remotes/o/*", "--repo", &fo],
        );
        with(0, &["push", u, "main:refs/heads/main", "--repo", &lo]);
        // Answered: non-fast-forward decided locally, a missing ref to
        // delete, a missing repository.
        with(1, &["push", u, "main~1:refs/heads/main", "--repo", &po]);
        with(
            1,
            &[
                "push",
                u,
                "main:refs/heads/main",
                "--lease",
                "refs/heads/main=0000000000000000000000000000000000000001",
                "--repo",
                &lo,
            ],
        );
    }
    // A refused token stands (answered), only its fingerprint shown.
    cases.push((
        1,
        s(&[
            "--settle",
            "0s",
            "--token-command",
            &wrong_cmd,
            "push",
            &url,
            "main:refs/heads/x",
            "--repo",
            &lo,
        ]),
    ));
    // (reads need no credential on this server: the wrong one is sent, and
    // accepted)
    cases.push((
        0,
        s(&[
            "--settle",
            "0s",
            "--token-command",
            &wrong_cmd,
            "ls-refs",
            &url,
        ]),
    ));
    // A missing repository (404 right after buying: the credential class;
    // the same token again: the refusal stands).
    let missing = w.http.url("nope.git");
    cases.push((
        1,
        s(&[
            "--settle",
            "0s",
            "--token-command",
            &cmd,
            "ls-refs",
            &missing,
        ]),
    ));
    // A token command that prints the token and fails: unjudged, unknown.
    cases.push((
        3,
        s(&[
            "--deadline",
            "500ms",
            "--token-command",
            &failing_cmd,
            "ls-refs",
            &url,
        ]),
    ));
    // Unknown: nobody listens.
    for u in [dead.as_str(), dead_info.as_str()] {
        cases.push((
            3,
            s(&["--deadline", "500ms", "--token-command", &cmd, "ls-refs", u]),
        ));
        cases.push((
            3,
            s(&[
                "--deadline",
                "500ms",
                "--token-command",
                &cmd,
                "push",
                u,
                "main:refs/heads/main",
                "--repo",
                &lo,
            ]),
        ));
        cases.push((
            3,
            s(&[
                "--deadline",
                "500ms",
                "--token-command",
                &cmd,
                "fetch",
                u,
                "+refs/heads/*:refs/remotes/o/*",
                "--repo",
                &fo,
            ]),
        ));
    }
    // http get: fine, missing, refused, busy until the deadline, dead.
    for (code, path) in [(0, "/ok"), (1, "/missing"), (1, "/denied"), (3, "/busy")] {
        cases.push((
            code,
            s(&[
                "--deadline",
                "1s",
                "--settle",
                "0s",
                "--token-command",
                &cmd,
                "http",
                "get",
                &api_url(path),
            ]),
        ));
        cases.push((
            code,
            s(&[
                "--deadline",
                "1s",
                "--settle",
                "0s",
                "http",
                "get",
                &api_info(path),
            ]),
        ));
    }
    cases.push((
        3,
        s(&[
            "--deadline",
            "500ms",
            "--token-command",
            &cmd,
            "http",
            "get",
            &format!("http://127.0.0.1:{}/x", dead_port()),
        ]),
    ));
    // Rejected: an operation id used twice (the first run of the pair
    // claims it, every later run is rejected).
    cases.push((
        4,
        s(&[
            "--operation-id",
            "once",
            "--token-command",
            &cmd,
            "ls-refs",
            &url,
        ]),
    ));
    // git:// with user info (no credential is sent over git://).
    let git_info = format!("git://u:{TOKEN}@{}/small.git", w.daemon.addr());
    cases.push((0, s(&["ls-refs", &git_info])));

    let mut found = Vec::new();
    let mut ran = 1;
    let first = sluice(&[
        "--trace",
        "--trace",
        "--metrics",
        "--json",
        "--ledger",
        &l,
        "--operation-id",
        "once",
        "--token-command",
        &cmd,
        "ls-refs",
        &url,
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    found.extend(leaks(TOKEN, &first, Some(&ledger)));
    for (code, rest) in &cases {
        for common in [
            &["--trace", "--metrics", "--json"][..],
            &["--trace", "--trace", "--metrics"][..],
        ] {
            let mut args: Vec<&str> = common.to_vec();
            args.extend(["--ledger", l.as_str()]);
            args.extend(rest.iter().map(String::as_str));
            let run = sluice(&args);
            ran += 1;
            assert_eq!(run.code, *code, "{run:?}");
            if common.contains(&"--json") {
                let doc: serde_json::Value = serde_json::from_str(&run.stdout)
                    .unwrap_or_else(|e| panic!("one JSON document ({e}): {run:?}"));
                assert!(!doc.to_string().contains(TOKEN));
            }
            found.extend(leaks(TOKEN, &run, Some(&ledger)));
            found.extend(leaks(wrong, &run, Some(&ledger)));
        }
    }
    println!("{ran} runs, {} leaks", found.len());
    assert!(found.is_empty(), "the token showed:\n{}", found.join("\n"));
}

/// Usage errors (exit 2) that name a URL carrying user info. Bug F: the
/// git URL checker quotes gix's parse error, which quotes the whole URL.
/// Bug F2: both redactions take the user info to end at the first `/`, so
/// a token with a raw `/` is shown whole.
#[test]
fn a_usage_error_about_a_url_never_shows_its_user_info() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo_dir = dir.path().join("r.git");
    repo::init_bare(&repo_dir).expect("init");
    let r = p(&repo_dir);
    let bad_urls = [
        format!("http://x-access-token:{TOKEN}@"),
        format!("ssh://u:{TOKEN}@"),
        format!("git://u:{TOKEN}@h:99999999/r.git"),
        format!("git://u:{TOKEN}@/r.git"),
        format!("https://{TOKEN}@/"),
        format!("https://x-access-token:{TOKEN}@exa mple.com/r.git"),
        format!("http://x:{TOKEN}@host:port/r.git"),
        // A token with a raw `/` (base64): bug F2, both checkers.
        format!("https://x:ab/{TOKEN}@host/r.git"),
    ];
    let mut found = Vec::new();
    for u in &bad_urls {
        for args in [
            vec!["--trace", "--metrics", "ls-refs", u.as_str()],
            vec![
                "--trace",
                "--metrics",
                "--json",
                "fetch",
                u.as_str(),
                "+refs/heads/*:refs/o/*",
                "--repo",
                &r,
            ],
            vec![
                "--trace",
                "--trace",
                "--metrics",
                "push",
                u.as_str(),
                "main:refs/heads/main",
                "--repo",
                &r,
            ],
            vec!["--trace", "--metrics", "http", "get", u.as_str()],
        ] {
            let run = sluice(&args);
            assert_eq!(run.code, 2, "{run:?}");
            found.extend(leaks(TOKEN, &run, None));
        }
    }
    assert!(found.is_empty(), "the token showed:\n{}", found.join("\n"));
}

/// A credential goes only to the host it was bought for: a redirect to
/// another host (`localhost` instead of `127.0.0.1`, another port) arrives
/// without it — for `http get` (the forge client) and for git's smart
/// HTTP, with the token from `--token-command` and from the URL.
#[test]
fn a_redirect_to_another_host_never_carries_the_credential() {
    let elsewhere = Recorder::start(Arc::new(|_: &str| (404, vec![], "no".into())));
    let target = format!("http://localhost:{}", elsewhere.port);
    let t = target.clone();
    let origin = Recorder::start(Arc::new(move |path: &str| {
        (
            302,
            vec![("Location".into(), format!("{t}{path}"))],
            String::new(),
        )
    }));
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("token.txt");
    std::fs::write(&file, TOKEN).expect("token");
    let cmd = format!("cat '{}'", p(&file));
    let plain = |path: &str| format!("http://127.0.0.1:{}{path}", origin.port);
    let info = |path: &str| {
        format!(
            "http://x-access-token:{TOKEN}@127.0.0.1:{}{path}",
            origin.port
        )
    };
    let runs = [
        sluice(&[
            "--deadline",
            "3s",
            "--token-command",
            &cmd,
            "http",
            "get",
            &plain("/api/thing"),
        ]),
        sluice(&["--deadline", "3s", "http", "get", &info("/api/thing")]),
        sluice(&[
            "--deadline",
            "3s",
            "--token-command",
            &cmd,
            "ls-refs",
            &plain("/git/r.git"),
        ]),
        sluice(&["--deadline", "3s", "ls-refs", &info("/git/r.git")]),
    ];
    for run in &runs {
        assert!(leaks(TOKEN, run, None).is_empty(), "{run:?}");
    }
    let at_origin = origin.requests();
    let at_elsewhere = elsewhere.requests();
    println!(
        "{} requests at the origin, {} followed the redirect elsewhere",
        at_origin.len(),
        at_elsewhere.len()
    );
    // The origin got the credential (it was bought for it)...
    assert!(
        at_origin
            .iter()
            .any(|h| h.to_ascii_lowercase().contains("authorization:")),
        "{at_origin:#?}"
    );
    // ...the other host never did.
    assert!(!at_elsewhere.is_empty(), "no redirect was followed");
    for h in &at_elsewhere {
        assert!(
            !h.to_ascii_lowercase().contains("authorization:"),
            "credential sent to another host:\n{h}"
        );
        assert!(!h.contains(TOKEN));
    }
}

/// `GH_TOKEN` and `GITHUB_TOKEN` are the forge's (gh's order): git over
/// http never sends them, nor does `http get` (a URL anywhere).
#[test]
fn gh_token_and_github_token_never_reach_git_nor_http_get() {
    let server = Recorder::start(Arc::new(|_: &str| (404, vec![], "no".into())));
    let url = |path: &str| format!("http://127.0.0.1:{}{path}", server.port);
    for var in ["GH_TOKEN", "GITHUB_TOKEN"] {
        let env = [(var, TOKEN)];
        let runs = [
            sluice_env(&["--deadline", "3s", "ls-refs", &url("/git/r.git")], &env),
            sluice_env(
                &["--deadline", "3s", "http", "get", &url("/api/thing")],
                &env,
            ),
        ];
        for run in &runs {
            assert!(leaks(TOKEN, run, None).is_empty(), "{run:?}");
        }
    }
    let seen = server.requests();
    assert!(seen.len() >= 4, "{seen:#?}");
    for h in &seen {
        assert!(
            !h.to_ascii_lowercase().contains("authorization:"),
            "a forge token sent:\n{h}"
        );
        assert!(!h.contains(TOKEN));
    }
}

/// The GitHub App's flags serve git over http too: its installation token
/// goes as basic auth, user `x-access-token`, and appears in no output.
#[test]
fn a_github_apps_installation_token_is_gits_credential_over_http() {
    use sluice_testkit::fake_forge::FakeForge;
    let forge = FakeForge::start().expect("fake forge");
    let token = "ghs_appTokenForGit_SECRET";
    forge.script_app_tokens([token]);
    let git = Recorder::start(Arc::new(|_: &str| (404, vec![], "no".into())));
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("app.pem");
    std::fs::write(&key, APP_KEY).expect("key");
    let run = sluice(&[
        "--deadline",
        "3s",
        "ls-refs",
        &format!("http://127.0.0.1:{}/git/r.git", git.port),
        "--app-id",
        "4242",
        "--app-key",
        &p(&key),
        "--installation-id",
        "99",
        "--api",
        &forge.url(),
    ]);
    assert!(leaks(token, &run, None).is_empty(), "{run:?}");
    assert_eq!(forge.minted_fingerprints().len(), 1, "{run:?}");
    let basic = base64(format!("x-access-token:{token}").as_bytes());
    let seen = git.requests();
    assert!(!seen.is_empty(), "{run:?}");
    assert!(
        seen.iter()
            .any(|h| h.to_ascii_lowercase().contains("authorization: basic ")
                && h.contains(&basic)),
        "{seen:#?}"
    );
}

/// Standard base64 with padding (what basic auth sends).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The forge crate's test-only key (never used anywhere real).
const APP_KEY: &str = include_str!("../../../forge/tests/data/test-only-app-key.pem");

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[test]
fn a_github_app_key_and_its_tokens_never_reach_tracing_outcomes_or_errors() {
    use sluice_forge::{ForgeClient, GitHubAppSource, Method};
    use sluice_policy::{CredentialSource, Policy};
    use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

    let forge = FakeForge::start().expect("fake forge");
    let tokens = ["ghs_appTokenRefused_SECRET", "ghs_appTokenLive_SECRET"];
    forge.script_app_tokens(tokens);
    forge.set(
        Endpoint::Zen,
        Behaviour::Token {
            valid: vec![tokens[1].into()],
        },
    );
    let key = secrecy::SecretString::from(APP_KEY.to_string());
    let source = Arc::new(GitHubAppSource::new(&forge.url(), "4242", 99, &key).expect("app"));
    let client = ForgeClient::builder(&forge.url())
        .policy(Arc::new(
            Policy::builder().settle(Duration::from_millis(100)).build(),
        ))
        .github_app(Arc::clone(&source))
        .build()
        .expect("client");
    let logs = Captured::default();
    let sub = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let mut shown = Vec::new();
    tracing::subscriber::with_default(sub, || {
        for path in ["/zen", "/missing-endpoint"] {
            let out = client
                .request(Method::GET, path, None, &sluice_forge::CallOptions::new())
                .expect("request");
            shown.push(format!("{out:?}"));
            shown.push(serde_json::to_string(&out.clone().map(|_| ())).expect("json"));
            if let Some(e) = &out.error {
                shown.push(format!("{e} {e:?}"));
            }
        }
        shown.push(format!("{source:?}"));
        shown.push(format!("{client:?}"));
        match source.credential() {
            Ok(c) => shown.push(format!("{c:?}")),
            Err(e) => shown.push(format!("{e} {e:?}")),
        }
        // A key that is not a key: the error names the problem, not the text.
        let bad = secrecy::SecretString::from(format!("{}garbage", &APP_KEY[..200]));
        if let Err(e) = GitHubAppSource::new(&forge.url(), "4242", 99, &bad) {
            shown.push(format!("{e} {e:?}"));
        }
    });
    shown.push(String::from_utf8_lossy(&logs.0.lock().expect("log")).into_owned());
    let everything = shown.join("\n");
    assert!(!everything.is_empty());
    // Any line of the key's body, and every token bought.
    let key_lines: Vec<&str> = APP_KEY
        .lines()
        .filter(|l| l.len() > 20 && !l.starts_with("-----"))
        .collect();
    assert!(!key_lines.is_empty());
    for l in key_lines {
        assert!(!everything.contains(l), "a line of the key showed");
    }
    for t in tokens {
        assert!(!everything.contains(t), "{t} showed:\n{everything}");
    }
    assert!(!everything.contains("BEGIN RSA"));
}
