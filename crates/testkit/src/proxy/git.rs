//! Git mode: one thread per direction per connection, each framing the
//! pkt-lines of its direction to know where the conversation is.
//!
//! Client→server: the request line, then upload-pack requests (all
//! pkt-lines) or receive-pack commands, push options and the raw pack.
//! Server→client: the advertisement (through its flush), then upload-pack
//! responses (v2 sections, v0 ACK/NAK and the side-band pack stream) or
//! receive-pack's report.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};

use super::{connect_upstream, cut, lock, Ctx, Fault, Point, Service};
use crate::pktline::{self, Framer, Pkt};

const READ_BUF: usize = 64 * 1024;
/// Pack bytes forwarded before a cut inside a pack (a pack is at least 32
/// bytes: 12 of header, 20 of trailer).
const PACK_BYTES_BEFORE_CUT: u64 = 20;

type Pending = Arc<Mutex<VecDeque<String>>>;

enum Flow {
    Go,
    Stop,
}

pub(super) fn handle(ctx: &Ctx, client: TcpStream, upstream: SocketAddr) {
    let _ = client.set_nodelay(true);
    let fault = ctx.inner.take_connection_fault();
    ctx.update(|r| r.fault = fault.clone());
    if fault == Some(Fault::Refuse) {
        ctx.fired();
        return; // dropping (and finish's shutdown) closes it
    }

    // The request line.
    let mut framer = Framer::new();
    let mut tmp = vec![0u8; READ_BUF];
    let request = loop {
        match framer.next_frame() {
            Ok(Some(f)) => break f,
            Ok(None) => {}
            Err(_) => return, // not the git protocol
        }
        match (&client).read(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => framer.push(&tmp[..n]),
        }
    };
    let parsed = request
        .pkt
        .as_pkt()
        .data()
        .and_then(pktline::parse_request_line);
    let service = match parsed.as_ref().map(|p| p.service.as_str()) {
        Some("git-upload-pack") => Service::UploadPack,
        Some("git-receive-pack") => Service::ReceivePack,
        Some(other) => Service::OtherGit(other.to_owned()),
        None => Service::OtherGit(String::new()),
    };
    ctx.update(|r| {
        r.service = Some(service.clone());
        r.path = parsed.as_ref().map(|p| p.path.clone());
        r.requested_version = parsed.as_ref().and_then(|p| p.version());
    });
    ctx.milestone(Point::RequestLine);

    match fault {
        Some(Fault::ResetBeforeAdvert) => {
            ctx.fired();
            return;
        }
        Some(Fault::StallBeforeAdvert) => {
            ctx.fired();
            while let Ok(n) = (&client).read(&mut tmp) {
                if n == 0 {
                    break;
                }
            }
            return;
        }
        _ => {}
    }

    let Some(up) = connect_upstream(ctx, upstream) else {
        return;
    };
    if (&up).write_all(&request.raw).is_err() {
        cut(&client, Some(&up));
        return;
    }
    ctx.update(|r| r.bytes_client_to_server += request.raw.len() as u64);

    let pending: Pending = Arc::default();
    let (Ok(up_read), Ok(client_write)) = (up.try_clone(), client.try_clone()) else {
        cut(&client, Some(&up));
        return;
    };
    let s2c = S2c {
        ctx: ctx.clone(),
        up: up_read,
        client: client_write,
        fault: fault.clone(),
        service: service.clone(),
        pending: Arc::clone(&pending),
        state: S2cState::Advert,
        version: None,
        pack_started: false,
        raw_pack_sent: 0,
    };
    let back = std::thread::Builder::new()
        .name(format!("fault-proxy-s2c-{}", ctx.id))
        .spawn(move || s2c.run());
    let back = match back {
        Ok(h) => h,
        Err(_) => {
            cut(&client, Some(&up));
            return;
        }
    };
    let state = match service {
        Service::UploadPack => C2sState::Upload,
        Service::ReceivePack => C2sState::RpCommands {
            first: true,
            push_options: false,
            has_update: false,
        },
        _ => C2sState::Raw,
    };
    let c2s = C2s {
        ctx: ctx.clone(),
        client: &client,
        up: &up,
        fault,
        state,
        pending,
        pack_sent: 0,
    };
    c2s.run(framer.take_pending());
    let _ = back.join();
}

// ---------------------------------------------------------------------------
// client → server

enum C2sState {
    /// upload-pack: pkt-lines only.
    Upload,
    /// receive-pack: (shallow lines and) commands until the flush.
    RpCommands {
        first: bool,
        push_options: bool,
        has_update: bool,
    },
    /// receive-pack: push options until the flush.
    RpPushOptions { has_update: bool },
    /// receive-pack: the raw pack.
    RpPack,
    /// Nothing more to learn: forward as is.
    Raw,
}

struct C2s<'a> {
    ctx: Ctx,
    client: &'a TcpStream,
    up: &'a TcpStream,
    fault: Option<Fault>,
    state: C2sState,
    pending: Pending,
    pack_sent: u64,
}

impl C2s<'_> {
    fn run(mut self, mut buf: Vec<u8>) {
        let mut tmp = vec![0u8; READ_BUF];
        loop {
            if let Flow::Stop = self.process(&mut buf) {
                return;
            }
            match self.client.read(&mut tmp) {
                Ok(0) => {
                    let _ = self.up.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                Err(_) => {
                    cut(self.client, Some(self.up));
                    return;
                }
            }
        }
    }

    fn process(&mut self, buf: &mut Vec<u8>) -> Flow {
        let cut_in_pack = self.fault == Some(Fault::CutInPushPack);
        let mut out = Vec::new();
        let mut marks = Vec::new();
        let mut cut_now = false;
        let mut pos = 0;
        while pos < buf.len() {
            match self.state {
                C2sState::Raw => {
                    out.extend_from_slice(&buf[pos..]);
                    pos = buf.len();
                }
                C2sState::RpPack => {
                    let rest = &buf[pos..];
                    if self.pack_sent == 0 {
                        marks.push(Point::PackStarted);
                    }
                    let take = if cut_in_pack {
                        rest.len()
                            .min((PACK_BYTES_BEFORE_CUT - self.pack_sent) as usize)
                    } else {
                        rest.len()
                    };
                    out.extend_from_slice(&rest[..take]);
                    self.pack_sent += take as u64;
                    pos += take;
                    if cut_in_pack && self.pack_sent >= PACK_BYTES_BEFORE_CUT {
                        cut_now = true;
                        break;
                    }
                }
                _ => match pktline::parse(&buf[pos..]) {
                    Err(_) => self.state = C2sState::Raw,
                    Ok(None) => break,
                    Ok(Some((pkt, used))) => {
                        self.on_pkt(pkt, &mut marks);
                        out.extend_from_slice(&buf[pos..pos + used]);
                        pos += used;
                    }
                },
            }
        }
        buf.drain(..pos);
        if !out.is_empty() {
            if self.up.write_all(&out).is_err() {
                cut(self.client, Some(self.up));
                return Flow::Stop;
            }
            let pack = self.pack_sent;
            self.ctx.update(|r| {
                r.bytes_client_to_server += out.len() as u64;
                r.pack_bytes_client_to_server = pack;
            });
        }
        for m in marks {
            self.ctx.milestone(m);
        }
        if cut_now {
            self.ctx.fired();
            cut(self.client, Some(self.up));
            return Flow::Stop;
        }
        Flow::Go
    }

    fn on_pkt(&mut self, pkt: Pkt<'_>, marks: &mut Vec<Point>) {
        match (&mut self.state, pkt) {
            (C2sState::Upload, Pkt::Data(d)) => {
                if let Some(cmd) = d.strip_prefix(b"command=") {
                    let cmd = String::from_utf8_lossy(pktline::trim_newline(cmd)).into_owned();
                    lock(&self.pending).push_back(cmd);
                }
            }
            (C2sState::Upload, Pkt::Flush) => marks.push(Point::CommandsSent),
            (
                C2sState::RpCommands {
                    first,
                    push_options,
                    has_update,
                },
                Pkt::Data(d),
            ) => {
                if d.starts_with(b"shallow ") {
                    return;
                }
                let (line, caps) = match d.iter().position(|&b| b == 0) {
                    Some(i) => (&d[..i], Some(&d[i + 1..])),
                    None => (d, None),
                };
                if *first {
                    *first = false;
                    if let Some(caps) = caps {
                        *push_options = pktline::trim_newline(caps)
                            .split(|&b| b == b' ')
                            .any(|c| c == b"push-options");
                    }
                }
                let line = pktline::trim_newline(line);
                if let Some(new) = line.split(|&b| b == b' ').nth(1) {
                    if new.iter().any(|&b| b != b'0') {
                        *has_update = true;
                    }
                }
            }
            (
                C2sState::RpCommands {
                    first,
                    push_options,
                    has_update,
                },
                Pkt::Flush,
            ) => {
                marks.push(Point::CommandsSent);
                self.state = if *first {
                    // No command at all: nothing will follow.
                    C2sState::Raw
                } else if *push_options {
                    C2sState::RpPushOptions {
                        has_update: *has_update,
                    }
                } else if *has_update {
                    C2sState::RpPack
                } else {
                    C2sState::Raw
                };
            }
            (C2sState::RpPushOptions { has_update }, Pkt::Flush) => {
                self.state = if *has_update {
                    C2sState::RpPack
                } else {
                    C2sState::Raw
                };
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// server → client

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S2cState {
    /// The advertisement, until its flush.
    Advert,
    /// upload-pack v2 responses.
    UploadV2 {
        in_packfile: bool,
        saw_packfile: bool,
    },
    /// upload-pack v0/v1 responses.
    UploadV0,
    /// upload-pack v0 without side-band: the raw pack.
    RawPack,
    /// receive-pack's report.
    Receive,
    /// Read and throw away.
    Discard,
    /// Forward as is.
    Raw,
}

struct S2c {
    ctx: Ctx,
    up: TcpStream,
    client: TcpStream,
    fault: Option<Fault>,
    service: Service,
    pending: Pending,
    state: S2cState,
    version: Option<u8>,
    pack_started: bool,
    raw_pack_sent: u64,
}

impl S2c {
    fn run(mut self) {
        let mut buf = Vec::new();
        let mut tmp = vec![0u8; READ_BUF];
        loop {
            match (&self.up).read(&mut tmp) {
                Ok(0) => return self.on_eof(),
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
                Err(_) => {
                    if self.state == S2cState::Discard
                        && self.fault == Some(Fault::StallBeforeReport)
                    {
                        return;
                    }
                    cut(&self.client, Some(&self.up));
                    return;
                }
            }
            if let Flow::Stop = self.process(&mut buf) {
                return;
            }
        }
    }

    fn on_eof(&mut self) {
        match (&self.fault, self.state) {
            (Some(Fault::CutBeforeReport), S2cState::Discard) => cut(&self.client, Some(&self.up)),
            (Some(Fault::StallBeforeReport), S2cState::Discard) => {
                // Keep the client open; the client→server side ends the
                // connection when the client closes.
            }
            _ => {
                let _ = self.client.shutdown(Shutdown::Write);
            }
        }
    }

    /// Writes `out` to the client, counts it, then records `marks`.
    fn send(&mut self, out: &mut Vec<u8>, marks: &mut Vec<Point>) -> bool {
        if !out.is_empty() {
            let ok = match self.ctx.throttle() {
                Some(rate) => throttled_write(&self.client, out, rate, self.ctx.stopper()),
                None => (&self.client).write_all(out).is_ok(),
            };
            if !ok {
                cut(&self.client, Some(&self.up));
                return false;
            }
            let n = out.len() as u64;
            self.ctx.update(|r| r.bytes_server_to_client += n);
            out.clear();
        }
        for m in marks.drain(..) {
            self.ctx.milestone(m);
        }
        true
    }

    fn trickle(&mut self, bytes: &[u8], every: std::time::Duration) -> bool {
        for b in bytes {
            if self.ctx.stopper().sleep(every) {
                cut(&self.client, Some(&self.up));
                return false;
            }
            if (&self.client).write_all(&[*b]).is_err() {
                cut(&self.client, Some(&self.up));
                return false;
            }
            self.ctx.update(|r| r.bytes_server_to_client += 1);
        }
        true
    }

    fn cut_now(&mut self, out: &mut Vec<u8>, marks: &mut Vec<Point>) -> Flow {
        self.send(out, marks);
        self.ctx.fired();
        cut(&self.client, Some(&self.up));
        Flow::Stop
    }

    fn process(&mut self, buf: &mut Vec<u8>) -> Flow {
        let mut out = Vec::new();
        let mut marks = Vec::new();
        let mut pos = 0;
        let cut_in_pack = self.fault == Some(Fault::CutInFetchPack);
        while pos < buf.len() {
            match self.state {
                S2cState::Raw => {
                    out.extend_from_slice(&buf[pos..]);
                    pos = buf.len();
                }
                S2cState::Discard => {
                    let n = (buf.len() - pos) as u64;
                    self.ctx.update(|r| r.discarded_server_bytes += n);
                    pos = buf.len();
                }
                S2cState::RawPack => {
                    let rest = &buf[pos..];
                    if cut_in_pack {
                        let take = rest
                            .len()
                            .min((PACK_BYTES_BEFORE_CUT - self.raw_pack_sent) as usize);
                        out.extend_from_slice(&rest[..take]);
                        self.raw_pack_sent += take as u64;
                        pos += take;
                        if self.raw_pack_sent >= PACK_BYTES_BEFORE_CUT {
                            buf.drain(..pos);
                            return self.cut_now(&mut out, &mut marks);
                        }
                    } else {
                        out.extend_from_slice(rest);
                        pos = buf.len();
                    }
                }
                S2cState::Advert
                | S2cState::UploadV2 { .. }
                | S2cState::UploadV0
                | S2cState::Receive => {
                    let rest = &buf[pos..];
                    if self.state == S2cState::UploadV0 {
                        if rest.len() < 4 && b"PACK".starts_with(rest) {
                            break;
                        }
                        if rest.starts_with(b"PACK") {
                            self.state = S2cState::RawPack;
                            marks.push(Point::PackStarted);
                            continue;
                        }
                    }
                    let (pkt, used) = match pktline::parse(rest) {
                        Err(_) => {
                            self.state = S2cState::Raw;
                            continue;
                        }
                        Ok(None) => break,
                        Ok(Some(x)) => x,
                    };
                    let raw = &buf[pos..pos + used];
                    if let Pkt::Data(d) = pkt {
                        if let Some(msg) = d.strip_prefix(b"ERR ") {
                            let msg =
                                String::from_utf8_lossy(pktline::trim_newline(msg)).into_owned();
                            self.ctx.update(|r| r.server_error = Some(msg));
                        }
                    }
                    match self.state {
                        S2cState::Advert => {
                            if self.version.is_none() {
                                let v = match pkt {
                                    Pkt::Data(b"version 2\n") | Pkt::Data(b"version 2") => 2,
                                    Pkt::Data(b"version 1\n") | Pkt::Data(b"version 1") => 1,
                                    _ => 0,
                                };
                                self.version = Some(v);
                                self.ctx.update(|r| r.protocol_version = Some(v));
                            }
                            if let Some(Fault::TrickleAdvert { every }) = self.fault {
                                if !self.send(&mut out, &mut marks) {
                                    return Flow::Stop;
                                }
                                self.ctx.fired();
                                if !self.trickle(raw, every) {
                                    return Flow::Stop;
                                }
                            } else {
                                out.extend_from_slice(raw);
                            }
                            pos += used;
                            if pkt == Pkt::Flush {
                                marks.push(Point::Advertised);
                                match self.fault {
                                    Some(Fault::CutAfterAdvert) => {
                                        buf.drain(..pos);
                                        return self.cut_now(&mut out, &mut marks);
                                    }
                                    Some(Fault::CutBeforeReport)
                                    | Some(Fault::StallBeforeReport) => {
                                        if !self.send(&mut out, &mut marks) {
                                            return Flow::Stop;
                                        }
                                        self.ctx.fired();
                                        self.state = S2cState::Discard;
                                    }
                                    _ => {
                                        self.state = match (&self.service, self.version) {
                                            (Service::UploadPack, Some(2)) => S2cState::UploadV2 {
                                                in_packfile: false,
                                                saw_packfile: false,
                                            },
                                            (Service::UploadPack, _) => S2cState::UploadV0,
                                            (Service::ReceivePack, _) => S2cState::Receive,
                                            _ => S2cState::Raw,
                                        }
                                    }
                                }
                            }
                        }
                        S2cState::UploadV2 {
                            in_packfile,
                            saw_packfile,
                        } => match pkt {
                            Pkt::Data(b"packfile\n") | Pkt::Data(b"packfile") => {
                                self.state = S2cState::UploadV2 {
                                    in_packfile: true,
                                    saw_packfile: true,
                                };
                                out.extend_from_slice(raw);
                                pos += used;
                            }
                            Pkt::Data(d)
                                if in_packfile
                                    && pktline::sideband(d).is_some_and(|(b, _)| b == 1) =>
                            {
                                if !self.pack_started {
                                    self.pack_started = true;
                                    marks.push(Point::PackStarted);
                                    if cut_in_pack {
                                        let keep = used.min(4 + 1 + PACK_BYTES_BEFORE_CUT as usize);
                                        out.extend_from_slice(&raw[..keep]);
                                        buf.drain(..pos + used);
                                        return self.cut_now(&mut out, &mut marks);
                                    }
                                }
                                out.extend_from_slice(raw);
                                pos += used;
                            }
                            Pkt::Flush => {
                                let cmd = lock(&self.pending).pop_front();
                                if in_packfile {
                                    marks.push(Point::PackComplete);
                                    marks.push(Point::Responded);
                                } else if cmd.as_deref() != Some("fetch") || saw_packfile {
                                    marks.push(Point::Responded);
                                }
                                self.pack_started = false;
                                self.state = S2cState::UploadV2 {
                                    in_packfile: false,
                                    saw_packfile: false,
                                };
                                out.extend_from_slice(raw);
                                pos += used;
                            }
                            _ => {
                                out.extend_from_slice(raw);
                                pos += used;
                            }
                        },
                        S2cState::UploadV0 => {
                            match pkt {
                                Pkt::Data(d)
                                    if !self.pack_started
                                        && pktline::sideband(d).is_some_and(|(b, _)| b == 1) =>
                                {
                                    self.pack_started = true;
                                    marks.push(Point::PackStarted);
                                    if cut_in_pack {
                                        let keep = used.min(4 + 1 + PACK_BYTES_BEFORE_CUT as usize);
                                        out.extend_from_slice(&raw[..keep]);
                                        buf.drain(..pos + used);
                                        return self.cut_now(&mut out, &mut marks);
                                    }
                                }
                                Pkt::Flush if self.pack_started => {
                                    self.pack_started = false;
                                    marks.push(Point::PackComplete);
                                    marks.push(Point::Responded);
                                }
                                _ => {}
                            }
                            out.extend_from_slice(raw);
                            pos += used;
                        }
                        S2cState::Receive => {
                            if pkt == Pkt::Flush {
                                marks.push(Point::Responded);
                            }
                            out.extend_from_slice(raw);
                            pos += used;
                        }
                        _ => unreachable!("pkt states only"),
                    }
                }
            }
        }
        buf.drain(..pos);
        if !self.send(&mut out, &mut marks) {
            return Flow::Stop;
        }
        Flow::Go
    }
}

/// Writes `data` at no more than `rate` bytes a second (in pieces of a
/// tenth of a second's worth): a slow link, for transfers that take longer
/// than an attempt timeout while they keep moving.
fn throttled_write(
    client: &TcpStream,
    data: &[u8],
    rate: u64,
    stopper: &crate::net::Stopper,
) -> bool {
    let piece = ((rate / 10).max(1)) as usize;
    for chunk in data.chunks(piece) {
        if stopper.is_stopped() {
            return false;
        }
        let start = std::time::Instant::now();
        if (&*client).write_all(chunk).is_err() {
            return false;
        }
        let due = std::time::Duration::from_secs_f64(chunk.len() as f64 / rate as f64);
        if let Some(rest) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    true
}
