//! The forge's protocol phases: `connect` → `request-sent` →
//! `response-headers` → `body`.

/// The forge's protocol phases, in order: `connect` → `request-sent` →
/// `response-headers` → `body`. An attempt's phase is the last one it
/// completed; `connect` is the starting state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ForgePhase {
    /// Nothing completed yet (a refused connection reports this).
    Connect,
    /// A connection was made and the request handed to it: from here the
    /// request may be complete on the server.
    RequestSent,
    /// The status line and headers were read.
    ResponseHeaders,
    /// The whole body was read.
    Body,
}

impl ForgePhase {
    /// The kebab-case name used in outcomes.
    pub const fn as_str(self) -> &'static str {
        match self {
            ForgePhase::Connect => "connect",
            ForgePhase::RequestSent => "request-sent",
            ForgePhase::ResponseHeaders => "response-headers",
            ForgePhase::Body => "body",
        }
    }
}

impl std::fmt::Display for ForgePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
