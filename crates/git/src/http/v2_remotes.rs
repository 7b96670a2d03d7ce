//! HTTP remotes seen speaking protocol v2 lately ([`V2Remotes`]), so an
//! ls-refs can go in one request (`ls_refs::one_request`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a remote's v2 answer is trusted without asking again.
pub(crate) const FRESH: Duration = Duration::from_secs(300);

/// What a remote seen speaking v2 answered: whether it lists unborn
/// refs, and the base its `info/refs` redirected to, if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeenV2 {
    /// `ls-refs=unborn` was offered.
    pub unborn: bool,
    /// Where the remote's requests go now, when it redirected.
    pub base: Option<String>,
}

/// Remotes seen speaking v2 over HTTP: URL → (when, what it answered).
#[derive(Debug, Default)]
pub(crate) struct V2Remotes(Mutex<HashMap<String, (Instant, SeenV2)>>);

impl V2Remotes {
    /// Whether `url` spoke v2 lately: what it answered.
    pub fn get(&self, url: &str) -> Option<SeenV2> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(url)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, seen)| seen.clone())
    }

    /// `url` answered v2 just now.
    pub fn put(&self, url: &str, seen: SeenV2) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, (at, _)| at.elapsed() < FRESH);
        map.insert(url.to_string(), (Instant::now(), seen));
    }

    /// Ask `url` the long way next time.
    pub fn forget(&self, url: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(url);
    }
}
