//! Conditional reads: the last answer to a GET is kept with its `ETag`,
//! per URL and credential (by fingerprint, never the secret), at most
//! [`CAPACITY`] of them, the least recently used evicted. The next GET of
//! that URL with that credential sends `If-None-Match`; a `304 Not
//! Modified` is answered from what was kept (on GitHub it costs no
//! rate-limit point).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use reqwest::header::HeaderMap;

/// The most answers kept.
pub const CAPACITY: usize = 1_000;

/// What a GET's answer is kept by: its URL and the credential's
/// fingerprint (none without a credential).
type Key = (String, Option<String>);

/// A kept answer.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    /// The `ETag` it came with.
    pub(crate) etag: String,
    /// Its status.
    pub(crate) status: u16,
    /// Its headers.
    pub(crate) headers: HeaderMap,
    /// Its body.
    pub(crate) body: String,
}

/// The kept answers of one client, shared by its threads.
#[derive(Debug, Default)]
pub(crate) struct ETags {
    inner: Mutex<Lru>,
}

#[derive(Debug, Default)]
struct Lru {
    /// Each key's answer and when it was last used.
    map: HashMap<Key, (Kept, u64)>,
    /// Keys by when they were last used.
    order: BTreeMap<u64, Key>,
    /// The use counter.
    tick: u64,
}

impl Lru {
    fn touch(&mut self, key: &Key) -> Option<&Kept> {
        self.tick += 1;
        let tick = self.tick;
        let (_, used) = self.map.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key.clone());
        self.map.get(key).map(|(k, _)| k)
    }
}

impl ETags {
    /// The answer kept for `url` with the credential `fingerprint`, if any
    /// (it becomes the most recently used).
    pub(crate) fn get(&self, url: &str, fingerprint: Option<&str>) -> Option<Kept> {
        let key = (url.to_string(), fingerprint.map(str::to_string));
        let mut lru = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        lru.touch(&key).cloned()
    }

    /// Keep `kept` for `url` with the credential `fingerprint`, evicting the
    /// least recently used answer when [`CAPACITY`] are kept.
    pub(crate) fn put(&self, url: &str, fingerprint: Option<&str>, kept: Kept) {
        let key = (url.to_string(), fingerprint.map(str::to_string));
        let mut lru = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((_, used)) = lru.map.insert(key.clone(), (kept, tick)) {
            lru.order.remove(&used);
        }
        lru.order.insert(tick, key);
        while lru.map.len() > CAPACITY {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.map.remove(&oldest);
        }
    }

    /// How many answers are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().expect("etags").map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(etag: &str) -> Kept {
        Kept {
            etag: etag.into(),
            status: 200,
            headers: HeaderMap::new(),
            body: "{}".into(),
        }
    }

    #[test]
    fn answers_are_kept_per_url_and_credential() {
        let e = ETags::default();
        e.put("https://h/a", Some("fp1"), kept("\"a1\""));
        assert_eq!(
            e.get("https://h/a", Some("fp1")).expect("kept").etag,
            "\"a1\""
        );
        assert!(
            e.get("https://h/a", Some("fp2")).is_none(),
            "another credential"
        );
        assert!(e.get("https://h/a", None).is_none(), "no credential");
        assert!(e.get("https://h/b", Some("fp1")).is_none(), "another URL");
        e.put("https://h/a", Some("fp1"), kept("\"a2\""));
        assert_eq!(
            e.get("https://h/a", Some("fp1")).expect("kept").etag,
            "\"a2\""
        );
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn at_most_a_thousand_are_kept_and_the_least_recently_used_goes() {
        let e = ETags::default();
        for i in 0..CAPACITY {
            e.put(&format!("https://h/{i}"), None, kept("x"));
        }
        // Use the oldest: the second oldest is now the least recently used.
        assert!(e.get("https://h/0", None).is_some());
        e.put("https://h/new", None, kept("y"));
        assert_eq!(e.len(), CAPACITY);
        assert!(e.get("https://h/0", None).is_some(), "used lately: kept");
        assert!(
            e.get("https://h/1", None).is_none(),
            "least recently used: evicted"
        );
        assert!(e.get("https://h/new", None).is_some());
    }
}
