//! Interop suite: sluice-git against other implementations' git servers,
//! over every transport.
//!
//! One scenario suite ([`scenarios`]) runs against each [`servers::Row`] —
//! one server × transport, started by the suite on 127.0.0.1 and stopped
//! after: git 2.47's and Debian's git 2.39's `git daemon` (git://), git's
//! http-backend behind lighttpd with basic auth for push (http://), git
//! through OpenSSH's sshd (ssh://), git spawned by the client (file://),
//! dulwich's `TCPGitServer` (git://) and Debian's `jgit daemon` (git://).
//! The results make the table of `vendor-tests/README.md` ([`table`]).
//!
//! The test target `interop` runs it; a server that cannot be found or
//! started fails the suite, never skips.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod gate;
pub mod probe;
pub mod process;
pub mod regressions;
pub mod scenarios;
pub mod servers;
pub mod table;
