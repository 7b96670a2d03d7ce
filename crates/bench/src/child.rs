//! The child's side of a measured operation: `sluice-bench child <impl>
//! <op> ...` does the one call in a process of its own and prints its
//! time, for [`crate::measure`] to read with the process's peak memory.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::ops::{self, Impl};

/// The `child` subcommand: `<impl> fetch <url> <dest>`, `<impl> push
/// <url> <local> <branch> <dst>`, `<impl> push-lease <url> <local>
/// <branch> <dst> <oid>`, `<impl> ls-refs <url> <prefix>` or `<impl>
/// fetch-into <url> <dest> <refspec>`. Does the one call, prints
/// `elapsed_us=<n>` on stdout.
pub fn child_main(args: &[String]) -> Result<()> {
    let usage = "usage: sluice-bench child <sluice|libgit2> fetch <url> <dest> | push <url> <local> <branch> <dst> | push-lease <url> <local> <branch> <dst> <oid> | ls-refs <url> <prefix> | fetch-into <url> <dest> <refspec>";
    let imp = args
        .first()
        .and_then(|s| Impl::parse(s))
        .filter(|i| *i != Impl::Git)
        .context(usage)?;
    let op = args.get(1).map(String::as_str).context(usage)?;
    if op == "conc" && imp == Impl::Sluice {
        return crate::concurrent::child_main(&args[2..]);
    }
    // Where the time goes: `SLUICE_BENCH_LOG=<file>` appends the sluice
    // crates' debug events (with timestamps) of every child to that file.
    if let Some(path) = std::env::var_os("SLUICE_BENCH_LOG") {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", PathBuf::from(&path).display()))?;
        tracing_subscriber::fmt()
            .with_env_filter("sluice_git=debug,sluice_policy=debug")
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .init();
    }
    let client = ops::client();
    let opts = ops::call_options();
    let elapsed = match (op, &args[2..]) {
        ("fetch", [url, dest]) => {
            let dest = PathBuf::from(dest);
            let t = Instant::now();
            match imp {
                Impl::Sluice => ops::sluice_fetch(&client, url, &dest, &opts)?,
                _ => ops::libgit2_fetch(url, &dest)?,
            }
            t.elapsed()
        }
        ("push", [url, local, branch, dst]) => {
            let local = PathBuf::from(local);
            let t = Instant::now();
            match imp {
                Impl::Sluice => {
                    ops::sluice_push(&client, url, &local, branch, dst, &opts)?;
                }
                _ => ops::libgit2_push(url, &local, branch, dst)?,
            }
            t.elapsed()
        }
        ("push-lease", [url, local, branch, dst, expect]) => {
            let local = PathBuf::from(local);
            let t = Instant::now();
            match imp {
                Impl::Sluice => {
                    let repo = gix::open(&local).context("gix::open")?;
                    let oid = gix::ObjectId::from_hex(expect.as_bytes())?;
                    ops::sluice_push_leased(
                        &client,
                        url,
                        &repo,
                        branch,
                        dst,
                        sluice_git::Lease::Oid(oid),
                        &opts,
                    )?;
                }
                _ => ops::libgit2_push_leased(
                    url,
                    &local,
                    branch,
                    dst,
                    git2::Oid::from_str(expect)?,
                )?,
            }
            t.elapsed()
        }
        ("ls-refs", [url, prefix]) => {
            let t = Instant::now();
            let n = match imp {
                Impl::Sluice => ops::sluice_ls_prefix(&client, url, prefix, &opts)?,
                _ => ops::libgit2_ls_prefix(url, prefix)?,
            };
            let e = t.elapsed();
            if n == 0 {
                bail!("no ref under {prefix}");
            }
            e
        }
        ("fetch-into", [url, dest, refspec]) => {
            let dest = PathBuf::from(dest);
            let t = Instant::now();
            match imp {
                Impl::Sluice => ops::sluice_fetch_into(&client, url, &dest, refspec, &opts)?,
                _ => ops::libgit2_fetch_into(url, &dest, refspec)?,
            }
            t.elapsed()
        }
        _ => bail!(usage),
    };
    println!("elapsed_us={}", elapsed.as_micros());
    Ok(())
}
