//! Start-up cost: from spawning `sluice-remote ls-refs <URL>` to the first
//! byte of its request reaching the server, over git://, http:// and
//! https:// (issue 19: https within 2× git://).
//!
//! The "server" is a listener on 127.0.0.1 that notes when the first byte
//! of a connection arrives and then closes it (the command fails; only its
//! start matters). For https the fault proxy ends TLS with a certificate of
//! a CA made for the run (`--ca-file`, so the platform's roots are loaded
//! too, as in a real run), and the listener behind it sees the first byte
//! of the HTTP request after the handshake; a last row takes the first byte
//! of the TLS ClientHello itself (start-up without the handshake's round
//! trip). The schemes alternate in a rotating order; medians and ranges are
//! printed.
//!
//! ```sh
//! cargo build --release -p sluice-remote --bin sluice-remote --example startup
//! target/release/examples/startup 30
//! ```

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sluice_testkit::{FaultProxy, ServerCert, TestPki};

/// A listener that sends the arrival time of each connection's first byte.
fn first_byte_listener() -> (std::net::SocketAddr, mpsc::Receiver<Instant>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut b = [0u8; 1];
            if let Ok(1) = stream.read(&mut b) {
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        }
    });
    (addr, rx)
}

fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/startup → target/<profile>/sluice-remote
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("sluice-remote"))
        .expect("a target directory");
    assert!(
        bin.exists(),
        "build the binary first: cargo build --release -p sluice-remote"
    );
    bin
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let bin = binary();
    let pki = TestPki::new().expect("pki");
    let ca = pki.ca_file().to_path_buf();

    let (git_addr, git_rx) = first_byte_listener();
    let (http_addr, http_rx) = first_byte_listener();
    let (tls_addr, tls_rx) = first_byte_listener();
    let (hello_addr, hello_rx) = first_byte_listener();
    let proxy = FaultProxy::https(tls_addr, &pki.server(ServerCert::Good)).expect("proxy");

    let cases: Vec<(&str, String, &mpsc::Receiver<Instant>)> = vec![
        ("git://", format!("git://{git_addr}/r.git"), &git_rx),
        ("http://", format!("http://{http_addr}/r.git"), &http_rx),
        ("https://", proxy.http_url("/r.git"), &tls_rx),
        (
            "https:// (ClientHello)",
            format!("https://{hello_addr}/r.git"),
            &hello_rx,
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for round in 0..=runs {
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let (_, url, rx) = &cases[i];
            while rx.try_recv().is_ok() {}
            let start = Instant::now();
            let mut child = Command::new(&bin)
                .args(["ls-refs", url, "--max-attempts", "1", "--ca-file"])
                .arg(&ca)
                .env_remove("HTTPS_PROXY")
                .env_remove("https_proxy")
                .env_remove("http_proxy")
                .env_remove("ALL_PROXY")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            let first = rx.recv_timeout(Duration::from_secs(10));
            let _ = child.wait();
            let Ok(first) = first else {
                panic!("no request byte from {url}");
            };
            if round > 0 {
                times[i].push(first.duration_since(start).as_secs_f64() * 1e3);
            }
        }
    }
    println!("process start → first request byte, {runs} runs each (ms):");
    let mut git_median = 0.0;
    for (i, (name, _, _)) in cases.iter().enumerate() {
        let v = &mut times[i];
        let (lo, hi) = (
            v.iter().cloned().fold(f64::MAX, f64::min),
            v.iter().cloned().fold(0.0, f64::max),
        );
        let m = median(v);
        if i == 0 {
            git_median = m;
        }
        println!(
            "  {name:23} median {m:6.2}  ({lo:.2}–{hi:.2})  {:.2}× git://",
            m / git_median
        );
    }
}
