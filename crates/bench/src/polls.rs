//! `sluice-bench poll-points [--polls N]`: the rate-limit points 1,000
//! polls of an unchanged pull request spend, with conditional reads (one
//! shared `ForgeClient`, which keeps each answer's `ETag` and sends
//! `If-None-Match`: GitHub answers `304` without counting it) and without
//! them (a fresh client per poll, so nothing is kept), against the
//! testkit's fake GitHub, which counts a point for every answer but a
//! `304`. Prints one line per way and the saving.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_forge::{CallOptions, ForgeClient, RepoRef};
use sluice_policy::{Bounds, OutcomeKind};
use sluice_testkit::fake_forge::FakeForge;

/// What one way of polling cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollCost {
    /// Rate-limit points the forge counted.
    pub points: u64,
    /// `304`s the forge answered.
    pub not_modified: u64,
    /// Wall time of all the polls.
    pub elapsed: Duration,
}

fn client(forge: &FakeForge) -> Result<ForgeClient> {
    ForgeClient::builder(&forge.url())
        .bounds(Bounds::new(
            Duration::from_secs(10),
            Duration::from_secs(5),
            2,
        ))
        .build()
        .context("a client of the fake forge")
}

/// Poll pull request 1 `polls` times, sharing one client (`shared`) or
/// building one per poll.
pub fn poll(polls: usize, shared: bool) -> Result<PollCost> {
    let forge = FakeForge::start().context("the fake forge")?;
    let n = forge.add_pull("bench/repo", "feature", "main", &"a".repeat(40));
    let repo = RepoRef::new("bench", "repo");
    forge.set_rate_limit(
        5_000,
        std::time::SystemTime::now() + Duration::from_secs(3600),
    );
    let one = client(&forge)?;
    let started = Instant::now();
    for i in 0..polls {
        let fresh;
        let c = if shared {
            &one
        } else {
            fresh = client(&forge)?;
            &fresh
        };
        let out = c.get_pull(&repo, n, &CallOptions::new())?;
        if out.kind != OutcomeKind::Succeeded {
            bail!("poll {i} ended {}: {:?}", out.kind.as_str(), out.error);
        }
    }
    Ok(PollCost {
        points: forge.rate_limit_points(),
        not_modified: forge.not_modified(),
        elapsed: started.elapsed(),
    })
}

/// The `poll-points` subcommand.
pub fn main(args: &[String]) -> Result<()> {
    let mut polls = 1_000;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--polls" => {
                polls = it
                    .next()
                    .context("--polls needs a value")?
                    .parse()
                    .context("--polls")?
            }
            other => bail!("unknown argument {other:?} (poll-points [--polls N])"),
        }
    }
    let with = poll(polls, true)?;
    let without = poll(polls, false)?;
    for (name, c) in [("with conditional reads", with), ("without", without)] {
        println!(
            "{polls} polls of an unchanged pull request, {name}: {} points, {} answered 304, {:.1} ms",
            c.points,
            c.not_modified,
            c.elapsed.as_secs_f64() * 1e3
        );
    }
    println!(
        "points saved: {} of {} ({:.1}%)",
        without.points - with.points.min(without.points),
        without.points,
        100.0 * (without.points.saturating_sub(with.points)) as f64 / without.points.max(1) as f64
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditional_reads_spend_one_point_where_plain_polls_spend_one_each() {
        let with = poll(20, true).expect("with");
        let without = poll(20, false).expect("without");
        assert_eq!(with.points, 1, "{with:?}");
        assert_eq!(with.not_modified, 19, "{with:?}");
        assert_eq!(without.points, 20, "{without:?}");
        assert_eq!(without.not_modified, 0);
    }
}
