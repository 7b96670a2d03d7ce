//! ssh's own refusals, told from its words: the third exception to "never
//! from text" (ARCHITECTURE.md). OpenSSH keeps an authentication or
//! host-key refusal only as a line on stderr and its exit code 255, the
//! code it also gives a refused or cut connection; the line is what tells
//! an answer (asking again gets the same refusal) from a remote that never
//! judged the call.

/// What ssh refused, read from its stderr when it exited 255 before the
/// remote advertised anything ([`GitError::SshRefused`](crate::GitError::SshRefused)).
///
/// Not exhaustive: another of ssh's refusals may be added.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SshRefusal {
    /// The server refused every credential offered
    /// (`Permission denied (publickey,…).`).
    Authentication,
    /// The server's host key is not the one known for it, or is not known
    /// and may not be added (`Host key verification failed.`).
    HostKey,
}

impl SshRefusal {
    /// The refusal one line of ssh's stderr states, if any.
    pub(crate) fn from_line(line: &str) -> Option<SshRefusal> {
        if line.contains("Permission denied (") {
            Some(SshRefusal::Authentication)
        } else if line.contains("Host key verification failed") {
            Some(SshRefusal::HostKey)
        } else {
            None
        }
    }

    /// A short name for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            SshRefusal::Authentication => "ssh authentication refused",
            SshRefusal::HostKey => "ssh host key verification failed",
        }
    }
}

impl std::fmt::Display for SshRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::SshRefusal;

    #[test]
    fn ssh_refusals_are_told_by_their_words_and_nothing_else_is() {
        assert_eq!(
            SshRefusal::from_line("git@127.0.0.1: Permission denied (publickey)."),
            Some(SshRefusal::Authentication)
        );
        assert_eq!(
            SshRefusal::from_line("Host key verification failed."),
            Some(SshRefusal::HostKey)
        );
        assert_eq!(
            SshRefusal::from_line("ssh: connect to host 127.0.0.1 port 1: Connection refused"),
            None
        );
        assert_eq!(
            SshRefusal::from_line("fatal: Permission denied"),
            None,
            "a remote's own words without ssh's parenthesis"
        );
    }
}
