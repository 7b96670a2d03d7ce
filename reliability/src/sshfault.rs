//! Faults for git over ssh, where a proxy cannot see the conversation: a
//! relay that stands in for the `ssh` command, runs the real one, and cuts,
//! stalls or refuses at a named point of the git conversation it relays.
//!
//! The client runs `GIT_SSH_COMMAND`, which the service soak sets to
//! `exec <ssh-fault> <control dir> ssh -i <key> ... -p <port>`; the client
//! appends its own arguments, the last of which is the remote command
//! (`git-receive-pack '<path>'`). The path names the soak's thread
//! (`.../t<N>/<repo>`), so each thread has its own plan and log in the
//! control directory:
//!
//! * `t<N>.fault` — the plan, `<fault name> <times>`: the next `<times>`
//!   connections of that thread get the fault. A relay claims one use by
//!   renaming the file (atomic), so two relays never take the same use.
//! * `t<N>.log` — one line per milestone, appended as it happens (a relay
//!   killed by the client's watchdog has logged everything up to then):
//!   `<conn> start <service> <fault|->`, `<conn> fired`, `<conn>
//!   advertised`, `<conn> commands-sent`, `<conn> pack-started`, `<conn>
//!   responded`, `<conn> end <pack bytes>`.
//!
//! The faults are the fault proxy's, as far as a relay can do them:
//! [`SshFault::Refuse`] (ssh's own failure: exit 255 before any byte, as a
//! refused TCP connection), [`SshFault::StallBeforeAdvert`],
//! [`SshFault::CutAfterAdvert`], [`SshFault::CutInPushPack`] (at most 20
//! pack bytes forwarded) and [`SshFault::CutBeforeReport`] (everything
//! forwarded to the server, nothing more of its answer back: the server
//! finishes and applies the push, the client sees its connection end).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use sluice_testkit::pktline::{Framer, OwnedPkt};

/// A fault the relay can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SshFault {
    /// Exit 255 at once saying the connection was refused; ssh never runs.
    Refuse,
    /// Run ssh but forward nothing from the server; end when the client
    /// closes its side.
    StallBeforeAdvert,
    /// Forward the advertisement through its flush, then end both sides.
    CutAfterAdvert,
    /// receive-pack: forward the commands and at most 20 pack bytes, then
    /// end both sides.
    CutInPushPack,
    /// Forward everything to the server and the advertisement back, then
    /// nothing more back; end when the server ends.
    CutBeforeReport,
}

impl SshFault {
    /// Every fault.
    pub const ALL: [SshFault; 5] = [
        SshFault::Refuse,
        SshFault::StallBeforeAdvert,
        SshFault::CutAfterAdvert,
        SshFault::CutInPushPack,
        SshFault::CutBeforeReport,
    ];

    /// The name in plans, logs and figures.
    pub fn name(self) -> &'static str {
        match self {
            SshFault::Refuse => "ssh-refuse",
            SshFault::StallBeforeAdvert => "ssh-stall-before-advert",
            SshFault::CutAfterAdvert => "ssh-cut-after-advert",
            SshFault::CutInPushPack => "ssh-cut-in-push-pack",
            SshFault::CutBeforeReport => "ssh-cut-before-report",
        }
    }

    /// The fault named `name`.
    pub fn from_name(name: &str) -> Option<SshFault> {
        SshFault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The plan file of thread `thread`.
pub fn plan_path(ctl: &Path, thread: usize) -> PathBuf {
    ctl.join(format!("t{thread}.fault"))
}

/// The log file of thread `thread`.
pub fn log_path(ctl: &Path, thread: usize) -> PathBuf {
    ctl.join(format!("t{thread}.log"))
}

/// Sets thread `thread`'s plan: `fault` on its next `times` connections
/// (`None`: pass everything through).
pub fn set_plan(ctl: &Path, thread: usize, fault: Option<(SshFault, usize)>) -> io::Result<()> {
    let path = plan_path(ctl, thread);
    match fault {
        Some((f, n)) if n > 0 => {
            let tmp = ctl.join(format!("t{thread}.fault.new"));
            std::fs::write(&tmp, format!("{} {n}\n", f.name()))?;
            std::fs::rename(tmp, path)
        }
        _ => match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// Takes one use of thread `thread`'s plan, if it has one.
fn claim(ctl: &Path, thread: usize, conn: &str) -> Option<SshFault> {
    let path = plan_path(ctl, thread);
    let mine = ctl.join(format!("t{thread}.fault.{conn}"));
    std::fs::rename(&path, &mine).ok()?;
    let text = std::fs::read_to_string(&mine).ok();
    let _ = std::fs::remove_file(&mine);
    let mut words = text.as_deref()?.split_whitespace();
    let fault = SshFault::from_name(words.next()?)?;
    let times: usize = words.next()?.parse().ok()?;
    if times > 1 {
        let tmp = ctl.join(format!("t{thread}.fault.{conn}.rest"));
        if std::fs::write(&tmp, format!("{} {}\n", fault.name(), times - 1)).is_ok() {
            // A plan set meanwhile wins: only put the rest back where none is.
            if !path.exists() {
                let _ = std::fs::rename(&tmp, &path);
            }
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Some(fault)
}

/// One relayed connection, as its log lines tell it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshConn {
    /// The connection's id (pid and start time).
    pub id: String,
    /// `git-upload-pack` or `git-receive-pack`.
    pub service: String,
    /// The fault it was given.
    pub fault: Option<SshFault>,
    /// Whether the fault acted.
    pub fired: bool,
    /// The milestones logged, in order.
    pub milestones: Vec<String>,
    /// Pack bytes forwarded to the server (receive-pack), when it ended.
    pub pack_bytes: Option<u64>,
}

impl SshConn {
    /// Whether `milestone` was logged.
    pub fn passed(&self, milestone: &str) -> bool {
        self.milestones.iter().any(|m| m == milestone)
    }

    /// Whether a whole pack reached the server: pack bytes went out and
    /// the pack was not cut.
    pub fn delivered_pack(&self) -> bool {
        self.service == "git-receive-pack"
            && self.passed("pack-started")
            && !(self.fired && self.fault == Some(SshFault::CutInPushPack))
    }
}

/// Reads thread `thread`'s log: its connections in start order.
pub fn read_log(ctl: &Path, thread: usize) -> Vec<SshConn> {
    let text = std::fs::read_to_string(log_path(ctl, thread)).unwrap_or_default();
    let mut order: Vec<String> = Vec::new();
    let mut conns: BTreeMap<String, SshConn> = BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(id), Some(what)) = (w.next(), w.next()) else {
            continue;
        };
        if what == "start" {
            order.push(id.to_owned());
            let service = w.next().unwrap_or_default().to_owned();
            let fault = w.next().and_then(SshFault::from_name);
            conns.insert(
                id.to_owned(),
                SshConn {
                    id: id.to_owned(),
                    service,
                    fault,
                    ..SshConn::default()
                },
            );
            continue;
        }
        let Some(c) = conns.get_mut(id) else { continue };
        match what {
            "fired" => c.fired = true,
            "end" => c.pack_bytes = w.next().and_then(|n| n.parse().ok()),
            m => c.milestones.push(m.to_owned()),
        }
    }
    order
        .into_iter()
        .filter_map(|id| conns.remove(&id))
        .collect()
}

/// Appends milestone lines to a thread's log.
#[derive(Clone)]
struct Log {
    file: Arc<Mutex<std::fs::File>>,
    conn: String,
}

impl Log {
    fn line(&self, what: &str) {
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write per line: O_APPEND keeps lines of relays running at
        // once whole.
        let _ = f.write_all(format!("{} {what}\n", self.conn).as_bytes());
    }
}

/// The service and thread named by the remote command (the last argument):
/// `git-receive-pack '<...>/t<N>/<repo>'`.
fn parse_target(cmd: &str) -> Option<(String, usize)> {
    let (service, path) = cmd.split_once(' ')?;
    let thread = path
        .trim_matches('\'')
        .split('/')
        .find_map(|c| c.strip_prefix('t')?.parse().ok())?;
    Some((service.to_owned(), thread))
}

fn kill(child: &Mutex<Child>) {
    let mut c = child.lock().unwrap_or_else(|e| e.into_inner());
    let _ = c.kill();
    let _ = c.wait();
}

/// The relay's `main`: `args` are the control directory, then the ssh
/// command and all its arguments. Returns the exit code.
pub fn relay_main(args: &[String]) -> i32 {
    let Some((ctl, ssh)) = args.split_first() else {
        eprintln!("ssh-fault: usage: ssh-fault <control dir> <ssh> <args>...");
        return 2;
    };
    let ctl = Path::new(ctl);
    let Some((service, thread)) = ssh.last().and_then(|c| parse_target(c)) else {
        eprintln!("ssh-fault: the remote command names no soak thread");
        return 2;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let conn = format!("{}-{nanos}", std::process::id());
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(ctl, thread))
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ssh-fault: cannot open the log: {e}");
            return 2;
        }
    };
    let log = Log {
        file: Arc::new(Mutex::new(file)),
        conn: conn.clone(),
    };
    let fault = claim(ctl, thread, &conn);
    log.line(&format!(
        "start {service} {}",
        fault.map_or("-", SshFault::name)
    ));
    if fault == Some(SshFault::Refuse) {
        log.line("fired");
        eprintln!("ssh: connect to host 127.0.0.1: Connection refused");
        return 255;
    }
    let Some((program, rest)) = ssh.split_first() else {
        return 2;
    };
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ssh-fault: cannot run {program}: {e}");
            return 255;
        }
    };
    let mut to_server = child.stdin.take().expect("piped stdin");
    let from_server = child.stdout.take().expect("piped stdout");
    let child = Arc::new(Mutex::new(child));
    let receive = service == "git-receive-pack";

    // Server → client, on a thread of its own.
    let back = {
        let (log, child) = (log.clone(), Arc::clone(&child));
        std::thread::spawn(move || server_to_client(from_server, fault, &log, &child))
    };

    // Client → server, here.
    let mut stdin = io::stdin().lock();
    let mut framer = Framer::new();
    let mut in_pack = !receive;
    let mut pack_bytes: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        let mut framed = Vec::new();
        if !in_pack {
            framer.push(chunk);
            while let Ok(Some(frame)) = framer.next_frame() {
                framed.extend_from_slice(&frame.raw);
                if frame.pkt == OwnedPkt::Flush {
                    log.line("commands-sent");
                    in_pack = true;
                    break;
                }
            }
            if to_server.write_all(&framed).is_err() {
                break;
            }
            if !in_pack {
                continue;
            }
            // What follows the command flush is the pack.
            let rest = framer.take_pending();
            buf[..rest.len()].copy_from_slice(&rest);
            chunk = &buf[..rest.len()];
        }
        if chunk.is_empty() {
            continue;
        }
        if receive && pack_bytes == 0 {
            log.line("pack-started");
        }
        let mut send = chunk;
        let cut = receive && fault == Some(SshFault::CutInPushPack);
        if cut {
            let room = 20u64.saturating_sub(pack_bytes) as usize;
            send = &chunk[..chunk.len().min(room)];
        }
        if to_server.write_all(send).is_err() {
            break;
        }
        let _ = to_server.flush();
        pack_bytes += send.len() as u64;
        if cut && pack_bytes >= 20 {
            log.line("fired");
            log.line(&format!("end {pack_bytes}"));
            kill(&child);
            return 255;
        }
    }
    // The client closed its side (or the server is gone).
    drop(to_server);
    if fault == Some(SshFault::StallBeforeAdvert) {
        kill(&child);
    }
    let code = back.join().unwrap_or(255);
    log.line(&format!("end {pack_bytes}"));
    code
}

/// Forwards the server's side, applying the faults that act on it. Returns
/// the exit code.
fn server_to_client(
    mut from: impl Read,
    fault: Option<SshFault>,
    log: &Log,
    child: &Mutex<Child>,
) -> i32 {
    let mut out = io::stdout().lock();
    if fault == Some(SshFault::StallBeforeAdvert) {
        log.line("fired");
        // Read and drop the server's words until it ends (it ends when
        // the client gives up and the relay kills it).
        let _ = io::copy(&mut from, &mut io::sink());
        return 255;
    }
    let mut framer = Framer::new();
    let mut advertised = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if advertised {
            if fault == Some(SshFault::CutBeforeReport) {
                continue;
            }
            if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                break;
            }
            continue;
        }
        framer.push(&buf[..n]);
        let mut framed = Vec::new();
        while let Ok(Some(frame)) = framer.next_frame() {
            framed.extend_from_slice(&frame.raw);
            if frame.pkt == OwnedPkt::Flush {
                advertised = true;
                break;
            }
        }
        if out.write_all(&framed).and_then(|_| out.flush()).is_err() {
            break;
        }
        if !advertised {
            continue;
        }
        log.line("advertised");
        match fault {
            Some(SshFault::CutAfterAdvert) => {
                log.line("fired");
                kill(child);
                // Both of the client's pipes end now, as a cut connection.
                std::process::exit(255);
            }
            Some(SshFault::CutBeforeReport) => {
                log.line("fired");
            }
            _ => {
                let rest = framer.take_pending();
                if out.write_all(&rest).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    if fault == Some(SshFault::CutBeforeReport) && advertised {
        // The server ended; the client gets no answer, only the end.
        log.line("end-of-server");
        kill(child);
        std::process::exit(255);
    }
    if advertised {
        log.line("responded");
    }
    let status = child
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .wait()
        .ok()
        .and_then(|s| s.code());
    status.unwrap_or(255)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_command_names_the_service_and_the_thread() {
        assert_eq!(
            parse_target("git-receive-pack '/x/ssh/t3/soak.git'"),
            Some(("git-receive-pack".into(), 3))
        );
        assert_eq!(parse_target("git-upload-pack '/x/y.git'"), None);
    }

    #[test]
    fn a_plan_is_taken_once_per_use_and_then_passes_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        set_plan(dir.path(), 2, Some((SshFault::CutAfterAdvert, 2))).expect("plan");
        assert_eq!(claim(dir.path(), 2, "a"), Some(SshFault::CutAfterAdvert));
        assert_eq!(claim(dir.path(), 2, "b"), Some(SshFault::CutAfterAdvert));
        assert_eq!(claim(dir.path(), 2, "c"), None);
        set_plan(dir.path(), 2, Some((SshFault::Refuse, 1))).expect("plan");
        set_plan(dir.path(), 2, None).expect("cleared");
        assert_eq!(claim(dir.path(), 2, "d"), None);
    }

    #[test]
    fn the_log_is_read_back_per_connection_in_start_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            log_path(dir.path(), 0),
            "b start git-receive-pack ssh-cut-before-report\na start git-upload-pack -\n\
             b advertised\nb commands-sent\nb pack-started\nb fired\na advertised\nb end 300\n",
        )
        .expect("log");
        let conns = read_log(dir.path(), 0);
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[0].id, "b");
        assert!(conns[0].fired && conns[0].delivered_pack());
        assert_eq!(conns[0].pack_bytes, Some(300));
        assert_eq!(conns[1].fault, None);
        assert!(!conns[1].delivered_pack());
    }
}
