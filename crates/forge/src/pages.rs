//! Lists read to their last page: GitHub pages a list answer and names the
//! next page in `Link: <…>; rel="next"`. [`Pages`] follows it within one
//! operation; the pages already read are kept across its attempts, so a
//! page that fails is the attempt's failure and is read again by the next
//! attempt, not the pages before it.

use std::cell::RefCell;
use std::time::{Instant, SystemTime};

use reqwest::header::HeaderMap;
use reqwest::{Method, Url};
use sluice_policy::{AttemptCtx, AttemptError, Credential, Effect};

use crate::classify;
use crate::client::ForgeClient;
use crate::error::ForgeFailure;
use crate::exchange::{judge, Answer, Prepared};
use crate::reading::Reading;

/// The URL of the next page named by a list answer's `Link` headers, if
/// any. A next page on another origin (scheme, host, port) than `current`
/// is refused: the credential goes only where the list was asked for.
pub fn next_page(headers: &HeaderMap, current: &Url) -> Result<Option<Url>, ForgeFailure> {
    for value in headers.get_all("link") {
        let Ok(value) = value.to_str() else { continue };
        for link in value.split(',') {
            let mut parts = link.split(';');
            let target = parts.next().unwrap_or("").trim();
            let is_next = parts.any(|param| {
                let (key, val) = param.split_once('=').unwrap_or((param, ""));
                key.trim().eq_ignore_ascii_case("rel")
                    && val
                        .trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|rel| rel.eq_ignore_ascii_case("next"))
            });
            let Some(target) = target.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else {
                continue;
            };
            if !is_next {
                continue;
            }
            let url = current
                .join(target)
                .map_err(|e| ForgeFailure::ForeignLink {
                    link: format!("{target} ({e})"),
                })?;
            if url.origin() != current.origin() {
                return Err(ForgeFailure::ForeignLink {
                    link: url.to_string(),
                });
            }
            return Ok(Some(url));
        }
    }
    Ok(None)
}

/// A list read page by page to its last page, within one operation.
pub(crate) struct Pages<T> {
    /// The page to read next (`None` once the last page was read).
    next: Option<Url>,
    /// The items of every page read so far.
    items: Vec<T>,
}

impl<T: Clone> Pages<T> {
    /// A list whose first page is `first`.
    pub(crate) fn new(first: Url) -> Self {
        Pages {
            next: Some(first),
            items: Vec::new(),
        }
    }

    /// Read the pages not read yet in this attempt, until `deadline`;
    /// `items` takes one page's answer to its items. Every item of every
    /// page once the last one is read; a failed page is the attempt's
    /// failure, and the next call starts from it.
    pub(crate) fn read(
        &mut self,
        client: &ForgeClient,
        ctx: &mut AttemptCtx<'_>,
        last_cred: &RefCell<Option<Credential>>,
        deadline: Instant,
        items: impl Fn(&Answer) -> Result<Vec<T>, AttemptError>,
    ) -> Result<Vec<T>, AttemptError> {
        while let Some(url) = self.next.clone() {
            let p = Prepared {
                method: Method::GET,
                url: &url,
                body: None,
            };
            let a = client.attempt_exchange_until(ctx, &p, last_cred, deadline)?;
            let (page, next) = page_of(&a, &url, &items)?;
            self.items.extend(page);
            self.next = next;
        }
        Ok(self.items.clone())
    }
}

impl Reading<'_> {
    /// GET every page of a list (`Link: <…>; rel="next"`) within this
    /// read's time; `items` takes one page's answer to its items.
    pub(crate) fn get_all_pages<T>(
        &self,
        url: &Url,
        items: impl Fn(&Answer) -> Result<Vec<T>, AttemptError>,
    ) -> Result<Vec<T>, AttemptError> {
        let mut all = Vec::new();
        let mut next = Some(url.clone());
        while let Some(u) = next {
            let a = self.get_answer(&u)?;
            let (page, n) = page_of(&a, &u, &items)?;
            all.extend(page);
            next = n;
        }
        Ok(all)
    }
}

/// One page's items and the next page's URL, from its answer.
pub(crate) fn page_of<T>(
    a: &Answer,
    url: &Url,
    items: &impl Fn(&Answer) -> Result<Vec<T>, AttemptError>,
) -> Result<(Vec<T>, Option<Url>), AttemptError> {
    judge(Effect::Read, a)?;
    let page = items(a)?;
    let next = next_page(&a.headers, url)
        .map_err(|f| classify::failed(f, Effect::Read, &a.headers, SystemTime::now()))?;
    Ok((page, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn link(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("link", HeaderValue::from_str(v).expect("header"));
        h
    }

    fn url(s: &str) -> Url {
        Url::parse(s).expect("url")
    }

    #[test]
    fn the_next_page_is_read_from_githubs_link_header() {
        let here = url("https://api.github.com/repos/o/r/pulls?per_page=100");
        let h = link(
            r#"<https://api.github.com/repositories/1/pulls?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1/pulls?per_page=100&page=3>; rel="last""#,
        );
        assert_eq!(
            next_page(&h, &here).expect("same origin"),
            Some(url(
                "https://api.github.com/repositories/1/pulls?per_page=100&page=2"
            ))
        );
        let last = link(
            r#"<https://api.github.com/repositories/1/pulls?page=2>; rel="prev", <https://api.github.com/repositories/1/pulls?page=1>; rel="first""#,
        );
        assert_eq!(next_page(&last, &here).expect("no next"), None);
        assert_eq!(next_page(&HeaderMap::new(), &here).expect("none"), None);
        // A relative link is resolved against the page's URL.
        let rel = link(r#"</repos/o/r/pulls?page=2>; rel=next"#);
        assert_eq!(
            next_page(&rel, &here).expect("relative"),
            Some(url("https://api.github.com/repos/o/r/pulls?page=2"))
        );
    }

    #[test]
    fn a_next_page_on_another_host_is_refused() {
        let here = url("https://api.github.com/repos/o/r/pulls");
        let h = link(r#"<https://elsewhere.invalid/steal?page=2>; rel="next""#);
        let f = next_page(&h, &here).expect_err("another host");
        assert!(matches!(f, ForgeFailure::ForeignLink { .. }), "{f:?}");
        let e = classify::failed(f, Effect::Read, &HeaderMap::new(), SystemTime::now());
        assert_eq!(e.class, sluice_policy::Class::Answered);
    }
}
