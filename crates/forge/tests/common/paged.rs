//! A paged fake of the few GitHub reads the paging tests need, on
//! 127.0.0.1: a head's combined status, its check runs (`per_page`
//! respected, `Link: <…>; rel="next"` to the last page) and the pull
//! requests from a head, with one page that fails once. Every request is
//! logged (path and query) where a test can count it. Stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the fake holds and how it misbehaves.
#[derive(Default)]
struct State {
    /// Every request's path and query, in order.
    log: Vec<String>,
    /// How many check runs the head has.
    check_runs: usize,
    /// How many open pull requests the head has.
    pulls: usize,
    /// The check-run page answered 502 the first time it is asked for.
    fail_once: Option<usize>,
    /// How many reads were answered 304.
    not_modified: usize,
}

/// The paged fake; stops when dropped.
pub struct PagedForge {
    url: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PagedForge {
    /// A fake whose head has `check_runs` check runs and `pulls` open pull
    /// requests; check-run page `fail_once` (from 1) fails once with 502.
    pub fn start(check_runs: usize, pulls: usize, fail_once: Option<usize>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State {
            check_runs,
            pulls,
            fail_once,
            ..State::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, halt, base) = (Arc::clone(&state), Arc::clone(&stop), url.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    serve(conn, &st, &base);
                }
            }
        });
        PagedForge {
            url,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// The API's base URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// How many reads were answered `304 Not Modified`.
    pub fn not_modified(&self) -> usize {
        self.state.lock().expect("state").not_modified
    }

    /// Every request's path and query, in order.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().expect("state").log.clone()
    }
}

impl Drop for PagedForge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The value of `key` in a query string.
fn param(query: &str, key: &str) -> Option<usize> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// Answer one request on its own connection (`Connection: close`).
fn serve(conn: TcpStream, state: &Mutex<State>, base: &str) {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    // Read the head to its end (no bodies: GETs only).
    let mut if_none_match = None;
    loop {
        let mut h = String::new();
        match reader.read_line(&mut h) {
            Ok(0) | Err(_) => break,
            Ok(_) if h == "\r\n" => break,
            Ok(_) => {
                if let Some((k, v)) = h.split_once(':') {
                    if k.trim().eq_ignore_ascii_case("if-none-match") {
                        if_none_match = Some(v.trim().to_string());
                    }
                }
            }
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let mut st = state.lock().expect("state");
    st.log.push(target.clone());
    let per_page = param(query, "per_page").unwrap_or(30).max(1);
    let page = param(query, "page").unwrap_or(1).max(1);
    let mut etag = None;
    let (status, body, total) = if path.ends_with("/pulls/7") {
        // One pull request that never changes, with its ETag.
        etag = Some(PULL_ETAG);
        if if_none_match.as_deref() == Some(PULL_ETAG) {
            st.not_modified += 1;
            (304, String::new(), None)
        } else {
            (200, pull_json(7), None)
        }
    } else if path.ends_with("/status") {
        let body = r#"{"state":"success","sha":"1111111111111111111111111111111111111111","total_count":0,"statuses":[]}"#;
        (200, body.to_string(), None)
    } else if path.ends_with("/check-runs") {
        if st.fail_once == Some(page) {
            st.fail_once = None;
            (502, r#"{"message":"Server Error"}"#.to_string(), None)
        } else {
            let runs: Vec<String> = page_range(st.check_runs, per_page, page)
                .map(|i| {
                    // Decoded only by the fields a call uses: no head_sha.
                    format!(r#"{{"id":{i},"name":"check-{i}","status":"completed","conclusion":"success","external_id":"ext-{i}"}}"#)
                })
                .collect();
            let body = format!(
                r#"{{"total_count":{},"check_runs":[{}]}}"#,
                st.check_runs,
                runs.join(",")
            );
            (200, body, Some(st.check_runs))
        }
    } else if path.ends_with("/pulls") {
        let pulls: Vec<String> = page_range(st.pulls, per_page, page)
            .map(pull_json)
            .collect();
        (200, format!("[{}]", pulls.join(",")), Some(st.pulls))
    } else {
        (404, r#"{"message":"Not Found"}"#.to_string(), None)
    };
    drop(st);
    let mut head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(tag) = etag {
        head.push_str(&format!("etag: {tag}\r\n"));
    }
    if let Some(total) = total {
        if page * per_page < total {
            let mut next = format!("{base}{path}?");
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| !kv.starts_with("page=") && !kv.is_empty())
                .collect();
            next.push_str(&kept.join("&"));
            next.push_str(&format!("&page={}", page + 1));
            head.push_str(&format!("link: <{next}>; rel=\"next\"\r\n"));
        }
    }
    head.push_str("\r\n");
    let mut conn = reader.into_inner();
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
    let _ = conn.flush();
    let mut rest = [0u8; 64];
    let _ = conn.read(&mut rest);
}

/// The 1-based item numbers of page `page`.
fn page_range(total: usize, per_page: usize, page: usize) -> impl Iterator<Item = usize> {
    let start = (page - 1) * per_page;
    (start..total.min(start + per_page)).map(|i| i + 1)
}

/// The ETag of pull request 7.
const PULL_ETAG: &str = "\"pr7-v1\"";

/// Pull request `i`, as GitHub gives it (the fields the calls use).
fn pull_json(i: usize) -> String {
    format!(
        r#"{{"number":{i},"state":"open","title":"pr {i}","head":{{"ref":"feature","sha":"2222222222222222222222222222222222222222"}},"base":{{"ref":"main","sha":"1111111111111111111111111111111111111111"}},"merged":false,"html_url":"x"}}"#
    )
}
