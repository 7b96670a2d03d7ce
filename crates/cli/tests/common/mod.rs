//! Shared helpers of the CLI's integration tests: run the built binary,
//! serve fixtures with the testkit's daemon and proxy, check JSON documents.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use sluice_testkit::{fixtures, repo, FaultProxy, GitDaemon};

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The single JSON document on stdout.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.stdout.trim_end().lines().count(),
            1,
            "one document on one line: {self:?}"
        );
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// The first line of stderr.
    pub fn first_err_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or("")
    }
}

/// The forge's tokens from the environment (`GH_TOKEN`, else
/// `GITHUB_TOKEN`): removed from every child, so that a test that expects
/// no `Authorization` does not get the token of whoever runs it.
pub const FORGE_TOKEN_VARS: [&str; 2] = ["GH_TOKEN", "GITHUB_TOKEN"];

/// Run `sluice-remote args...` (no stdin, no RUST_LOG, no forge token).
pub fn sluice(args: &[&str]) -> Run {
    sluice_env(args, &[])
}

/// [`sluice`] with `env` set on top.
pub fn sluice_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .env_remove(FORGE_TOKEN_VARS[0])
        .env_remove(FORGE_TOKEN_VARS[1])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `program args` run in `dir` with the tests' deterministic git
/// environment (no system or global config, fixed identity and dates), no
/// proxy variable, no roots file and no RUST_LOG, then `env` on top.
pub fn run_in(program: &str, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(program);
    repo::deterministic_env(&mut cmd);
    cmd.current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .env_remove("SSL_CERT_FILE")
        .env_remove("GIT_SSL_CAINFO");
    for v in FORGE_TOKEN_VARS {
        cmd.env_remove(v);
    }
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        cmd.env_remove(v);
    }
    let out = cmd
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("the program runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `sluice-remote args...` in `dir` (see [`run_in`]).
pub fn sl_in(dir: &Path, args: &[&str]) -> Run {
    run_in(env!("CARGO_BIN_EXE_sluice-remote"), dir, args, &[])
}

/// `git args...` in `dir` (see [`run_in`]).
pub fn git_in(dir: &Path, args: &[&str]) -> Run {
    run_in("git", dir, args, &[])
}

/// A clone of `url` at `to`, made by git.
pub fn clone_of(url: &str, to: &Path) -> PathBuf {
    repo::git(
        to.parent().expect("a parent"),
        &["clone", "-q", url, &to.display().to_string()],
    );
    to.to_path_buf()
}

/// A temporary directory with the `small` fixture served by `git daemon`
/// (as `small.git`) and a fault proxy in front of it.
pub struct World {
    pub dir: tempfile::TempDir,
    pub daemon: GitDaemon,
    pub proxy: FaultProxy,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let srv = dir.path().join("srv");
        std::fs::create_dir_all(&srv).expect("srv");
        fixtures::copy_of("small", &srv.join("small.git")).expect("the small fixture");
        let daemon = GitDaemon::start(&srv).expect("git daemon starts");
        let proxy = FaultProxy::git(daemon.addr()).expect("proxy starts");
        World { dir, daemon, proxy }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The served repository on disk.
    pub fn server(&self) -> PathBuf {
        self.path("srv/small.git")
    }

    /// `git://` straight to the daemon.
    pub fn url(&self) -> String {
        self.daemon.url("small.git")
    }

    /// `git://` through the proxy.
    pub fn proxied(&self) -> String {
        self.proxy.url("small.git")
    }

    /// A bare clone of the served repository, to push from.
    pub fn clone_bare(&self, name: &str) -> PathBuf {
        let to = self.path(name);
        repo::git(
            self.dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &self.server().display().to_string(),
                &to.display().to_string(),
            ],
        );
        to
    }

    /// An empty bare repository, to fetch into.
    pub fn empty(&self, name: &str) -> PathBuf {
        repo::init_bare(&self.path(name)).expect("init")
    }

    /// Receive-pack connections the proxy saw.
    pub fn receive_packs(&self) -> usize {
        self.proxy
            .connections()
            .iter()
            .filter(|c| c.service == Some(sluice_testkit::Service::ReceivePack))
            .count()
    }
}

/// A port on 127.0.0.1 nobody listens on (bound, then released).
pub fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub fn p(path: &Path) -> String {
    path.display().to_string()
}

/// A minimal HTTP/1.1 server on 127.0.0.1 answering every request with
/// `status` and `body`, recording each request head. Stops on drop.
pub struct TinyHttp {
    pub port: u16,
    pub heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TinyHttp {
    pub fn start(status: u16, body: &'static str) -> TinyHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, s) = (Arc::clone(&heads), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => serve(stream, status, body, &h),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TinyHttp {
            port,
            heads,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }
}

fn serve(stream: TcpStream, status: u16, body: &str, heads: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(&line);
    }
    heads.lock().expect("heads").push(head);
    let mut stream = reader.into_inner();
    let reason = if status == 200 { "OK" } else { "Status" };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
    let mut rest = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = stream.read(&mut rest);
}

impl Drop for TinyHttp {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn is_hex40(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 40
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn is_u64(v: &Value) -> bool {
    v.as_u64().is_some()
}

fn one_of(v: &Value, names: &[&str]) -> bool {
    v.as_str().is_some_and(|s| names.contains(&s))
}

/// The forge commands' operation kinds.
pub const FORGE_KINDS: [&str; 7] = [
    "get-pull",
    "merge-pull",
    "update-ref",
    "ci-status",
    "create-check-run",
    "update-check-run",
    "comment",
];

/// Check a document against the contract: every key, the right types,
/// kebab-case enums, integer milliseconds, 40-hex ids; `value` per `kind`.
pub fn check_document(doc: &Value, kind: &str, effect: &str) {
    let obj = doc
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {doc}"));
    for k in [
        "schema",
        "result",
        "operation",
        "deadline_ms",
        "elapsed_ms",
        "may_have_applied",
        "stopped",
        "attempts",
        "reconciled",
        "refused_credentials",
        "previous",
        "remote_messages",
        "remote_messages_dropped",
        "recorded",
        "value",
    ] {
        assert!(obj.contains_key(k), "{k} missing: {doc}");
    }
    assert_eq!(doc["schema"], 2, "{doc}");
    assert!(doc["remote_messages"].is_array(), "{doc}");
    for k in ["lines", "bytes"] {
        assert!(
            doc["remote_messages_dropped"][k].is_u64(),
            "remote_messages_dropped.{k}: {doc}"
        );
    }
    assert!(
        doc["recorded"].is_null() || doc["recorded"].is_boolean(),
        "{doc}"
    );
    assert!(
        one_of(
            &doc["result"],
            &[
                "succeeded",
                "answered",
                "unknown",
                "rejected",
                "local-error"
            ]
        ),
        "{doc}"
    );
    let op = &doc["operation"];
    assert!(op["id"].as_str().is_some_and(|s| !s.is_empty()), "{doc}");
    assert_eq!(op["kind"], kind, "{doc}");
    assert_eq!(op["effect"], effect, "{doc}");
    let remote = op["remote"].as_str().expect("remote is a string");
    assert!(!remote.contains('@'), "user info in remote: {remote}");
    assert!(
        is_u64(&doc["deadline_ms"]) && is_u64(&doc["elapsed_ms"]),
        "{doc}"
    );
    match effect {
        "read" => assert!(doc["may_have_applied"].is_null(), "{doc}"),
        _ => assert!(doc["may_have_applied"].is_boolean(), "{doc}"),
    }
    let stopped = &doc["stopped"];
    assert!(
        stopped.is_null()
            || one_of(
                stopped,
                &[
                    "deadline",
                    "max-attempts",
                    "retry-hint-exceeds-budget",
                    "retry-budget-empty",
                    "credential-refused",
                    "cancelled",
                    "local-error"
                ]
            ),
        "{doc}"
    );
    let attempts = doc["attempts"].as_array().expect("attempts is an array");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["n"].as_u64(), Some(i as u64 + 1), "{doc}");
        assert!(a["phase"].is_string(), "{doc}");
        assert!(
            a["class"].is_null()
                || one_of(
                    &a["class"],
                    &["unjudged", "answered", "unknown", "local-error"]
                ),
            "{doc}"
        );
        assert!(a["cause"].is_null() || a["cause"].is_string(), "{doc}");
        assert_eq!(a["class"].is_null(), a["cause"].is_null(), "{doc}");
        assert!(
            a.get("request_id")
                .is_some_and(|r| r.is_null() || r.is_string()),
            "request_id: {doc}"
        );
        for k in ["remaining_ms", "timeout_ms", "elapsed_ms"] {
            assert!(is_u64(&a[k]), "{k}: {doc}");
        }
        let last = i + 1 == attempts.len();
        if last {
            assert!(a["delay_ms"].is_null(), "{doc}");
        } else {
            assert!(is_u64(&a["delay_ms"]), "{doc}");
        }
    }
    let rec = &doc["reconciled"];
    if !rec.is_null() {
        assert!(
            rec["verdict"].is_null() || one_of(&rec["verdict"], &["landed", "not-landed", "moved"]),
            "{doc}"
        );
        for read in rec["reads"].as_array().expect("reads is an array") {
            // A failed read: verdict null, its cause in words.
            assert!(
                (read["verdict"].is_null() && read["cause"].is_string())
                    || (read["cause"].is_null()
                        && one_of(&read["verdict"], &["landed", "not-landed", "moved"])),
                "{doc}"
            );
        }
        let forge = FORGE_KINDS.contains(&kind);
        for (_, v) in rec["observed"].as_object().expect("observed is an object") {
            // A forge write's read names what it saw in words ("merged":
            // "true"); a push's, an oid or "absent" per ref.
            assert!(
                is_hex40(v) || v == "absent" || (forge && v.is_string()),
                "{doc}"
            );
        }
    }
    for fp in doc["refused_credentials"].as_array().expect("an array") {
        assert!(fp.as_str().is_some_and(|s| s.len() == 12), "{doc}");
    }
    let prev = &doc["previous"];
    if !prev.is_null() {
        assert!(
            one_of(
                &prev["result"],
                &[
                    "succeeded",
                    "answered",
                    "unknown",
                    "local-error",
                    "running",
                    "abandoned"
                ]
            ),
            "{doc}"
        );
        assert!(
            is_u64(&prev["elapsed_ms"]) && prev["attempts"].is_array(),
            "{doc}"
        );
    }
    let value = &doc["value"];
    if value.is_null() {
        return;
    }
    match kind {
        "ls-refs" => {
            for r in value.as_array().expect("ls-refs value is an array") {
                assert!(r["name"].is_string(), "{doc}");
                assert!(r["oid"].is_null() || is_hex40(&r["oid"]), "{doc}");
                assert!(r["peeled"].is_null() || is_hex40(&r["peeled"]), "{doc}");
                assert!(
                    r["symref_target"].is_null() || r["symref_target"].is_string(),
                    "{doc}"
                );
            }
        }
        "fetch" => {
            for r in value.as_array().expect("fetch value is an array") {
                assert!(r["remote_ref"].is_string(), "{doc}");
                assert!(
                    r["local_ref"].is_null() || r["local_ref"].is_string(),
                    "{doc}"
                );
                assert!(is_hex40(&r["oid"]), "{doc}");
                assert!(r["old"].is_null() || is_hex40(&r["old"]), "{doc}");
                assert!(
                    one_of(
                        &r["status"],
                        &[
                            "new",
                            "fast-forward",
                            "forced",
                            "tag-update",
                            "up-to-date",
                            "rejected",
                            "pruned"
                        ]
                    ),
                    "{doc}"
                );
                assert_eq!(r["reason"].is_null(), r["status"] != "rejected", "{doc}");
            }
        }
        "push" => {
            for r in value.as_array().expect("push value is an array") {
                assert!(r["ref"].is_string(), "{doc}");
                assert!(
                    one_of(&r["status"], &["ok", "rejected", "unknown"]),
                    "{doc}"
                );
                assert_eq!(r["reason"].is_null(), r["status"] != "rejected", "{doc}");
                assert!(
                    r["reason"].is_null()
                        || one_of(
                            &r["reason"],
                            &[
                                "stale-info",
                                "non-fast-forward",
                                "fetch-first",
                                "hook-declined",
                                "atomic-push-failed",
                                "failed-to-update-ref",
                                "protected",
                                "other"
                            ]
                        ),
                    "{doc}"
                );
                assert!(r["message"].is_null() || r["message"].is_string(), "{doc}");
                assert!(
                    r["verdict"].is_null()
                        || one_of(&r["verdict"], &["landed", "not-landed", "moved"]),
                    "{doc}"
                );
                assert!(r["old"].is_null() || is_hex40(&r["old"]), "{doc}");
                assert!(r["new"].is_null() || is_hex40(&r["new"]), "{doc}");
            }
        }
        "http-get" => {
            assert!(
                is_u64(&value["status"]) && value["body"].is_string(),
                "{doc}"
            );
        }
        "get-pull" => assert!(is_u64(&value["number"]), "{doc}"),
        "merge-pull" => {
            assert!(value["merged"].is_boolean(), "{doc}");
            assert!(value["sha"].is_null() || is_hex40(&value["sha"]), "{doc}");
        }
        "update-ref" => {
            assert!(value["ref"].is_string(), "{doc}");
            assert!(is_hex40(&value["object"]["sha"]), "{doc}");
        }
        "ci-status" => {
            assert!(value["combined"]["state"].is_string(), "{doc}");
            assert!(value["check_runs"].is_array(), "{doc}");
        }
        "create-check-run" | "update-check-run" => {
            assert!(is_u64(&value["id"]) && value["status"].is_string(), "{doc}");
        }
        "comment" => {
            assert!(is_u64(&value["id"]), "{doc}");
            assert!(
                value["html_url"].is_string() || value["html_url"].is_null(),
                "{doc}"
            );
            let keys: Vec<&String> = value.as_object().expect("an object").keys().collect();
            assert_eq!(keys.len(), 2, "{doc}");
        }
        other => panic!("unknown kind {other}"),
    }
}
