//! The reads that settle a write ([`Reading`]): GETs with the operation's
//! credential within the settling read's deadline, through the client's
//! [`Wire`]. Below the client: a reading knows the wire and the base URL,
//! not the policy.

use std::time::{Duration, Instant, SystemTime};

use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use sluice_policy::{AttemptError, CancelFlag, Credential, Effect};

use crate::base::resolve;
use crate::classify;
use crate::error::LocalCause;
use crate::exchange::{decode, judge, Answer, HttpResponse, Prepared, Wire};
use crate::local;

/// Reads made while settling a write: GETs with the operation's credential,
/// within the settling read's deadline. The caller's cancel does not stop
/// them (a cancelled write is still settled by reading); its stop (the
/// second level, [`CancelFlag::stop`]) cuts a read in flight and refuses
/// the next.
pub struct Reading<'a> {
    wire: &'a Wire,
    base: &'a Url,
    credential: Option<Credential>,
    deadline: Instant,
    cancel: CancelFlag,
    /// The call's headers, on every read as on the attempts.
    headers: Vec<(String, String)>,
}

impl<'a> Reading<'a> {
    /// A reading through `wire` of paths under `base`, with `credential`
    /// and the call's `headers`, until `deadline`, watching `stop`: the operation's flag as
    /// [`CancelFlag::stops_only`] gives it, never the caller's flag itself
    /// — a cancelled write is still settled by its reads (the deadline and
    /// the reserve bound them), and a cancel would refuse every read at
    /// the host's gate before sending; a stop ends them at once.
    pub(crate) fn new(
        wire: &'a Wire,
        base: &'a Url,
        credential: Option<Credential>,
        deadline: Instant,
        stop: CancelFlag,
        headers: Vec<(String, String)>,
    ) -> Self {
        Reading {
            wire,
            base,
            credential,
            deadline,
            cancel: stop,
            headers,
        }
    }
}

impl Reading<'_> {
    /// What remains of this read's time.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// GET a path under the base URL (or an absolute URL); anything but a
    /// 2xx is an error classed by the table.
    pub fn get(&self, path_or_url: &str) -> Result<HttpResponse, AttemptError> {
        let url = self.resolve(path_or_url)?;
        self.get_answer(&url).map(|a| a.response())
    }

    /// GET and parse JSON.
    pub fn get_json<T: DeserializeOwned>(&self, path_or_url: &str) -> Result<T, AttemptError> {
        let url = self.resolve(path_or_url)?;
        let a = self.get_answer(&url)?;
        decode(Effect::Read, &a)
    }

    /// A path or URL to read, or a local failure with its typed source.
    fn resolve(&self, path_or_url: &str) -> Result<Url, AttemptError> {
        resolve(self.base, path_or_url)
            .map(|(url, _)| url)
            .map_err(|e| {
                let f = local::failure(LocalCause::Url(e));
                classify::failed(
                    f,
                    Effect::Read,
                    &reqwest::header::HeaderMap::new(),
                    SystemTime::now(),
                )
            })
    }

    /// GET one object and parse its JSON (the settling read of a write
    /// whose landing one object shows).
    pub(crate) fn get_json_url<T: DeserializeOwned>(&self, url: &Url) -> Result<T, AttemptError> {
        let a = self.get_answer(url)?;
        decode(Effect::Read, &a)
    }

    /// GET `url` within this read's time; an answer that is not success is
    /// the read's failure.
    pub(crate) fn get_answer(&self, url: &Url) -> Result<Answer, AttemptError> {
        let p = Prepared {
            method: Method::GET,
            url,
            body: None,
        };
        let a = self.wire.exchange(
            &p,
            self.deadline,
            &self.cancel,
            &mut |_| {},
            crate::exchange::ForCall {
                credential: self.credential.as_ref(),
                facts: None,
                headers: &self.headers,
            },
        )?;
        judge(Effect::Read, &a)?;
        Ok(a)
    }
}
