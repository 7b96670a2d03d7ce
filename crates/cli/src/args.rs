//! clap's raw view of the command line and its help: every argument a
//! string (or a flag), checked only by [`crate::config::validate`].

use std::path::{Path, PathBuf};

use clap::{ArgAction, Args, Parser, Subcommand};

/// The exit codes and profiles: the tail of every command's help.
macro_rules! help_tail {
    () => {
        "Exit codes: 0 succeeded · 1 answered (the remote refused; never retried) \
· 2 usage or bad input (nothing sent) · 3 unknown (no answer within the budget; a push may \
have landed: see may_have_applied) · 4 rejected (the operation id was claimed before) \
· 5 local-error (this side failed: a repository, a ledger, a token command).

Profiles (--profile; explicit --deadline/--attempt-timeout/--max-attempts override):
  transfer 15m deadline, 30s per attempt, 4 attempts (the default for fetch and push)
  command  20s deadline, 8s per attempt, 4 attempts (the default for the rest)
  round    30s deadline, 10s per attempt, 5 attempts
  submit   60s deadline, 20s per attempt, 5 attempts
  wait     5m deadline, 30s per attempt, 40 attempts (reading through an outage)

Interrupted: the first SIGINT or SIGTERM stops the operation (a push whose request was \
complete is settled by reading), the second ends that settling too, the third exits at \
once; the outcome is printed and recorded, then the process dies by the signal (130, 143)."
    };
}

/// A command's examples, then [`help_tail!`].
macro_rules! help_with_examples {
    ($examples:literal) => {
        concat!("Examples:\n", $examples, "\n\n", help_tail!())
    };
}

/// The command line as clap sees it: raw strings, checked by [`crate::config::validate`].
#[derive(Parser)]
#[command(
    name = "sluice-remote",
    version,
    about = "Talk to git remotes and forge APIs under one retry policy.",
    long_about = "Talk to git remotes and forge APIs under one retry policy: what the remote \
                  never judged is tried again, what it answered is not, and a write whose \
                  answer was lost is settled by reading.",
    after_help = help_tail!()
)]
pub struct Cli {
    /// The flags every command takes, anywhere on the line.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: CommandArgs,
}

/// The flags every command takes, anywhere on the line (raw); a command's
/// help shows them after its own, under their own heading.
#[derive(Args, Default)]
#[command(next_help_heading = "Global options (anywhere on the line)")]
pub struct GlobalArgs {
    /// The operation's overall deadline (`500ms`, `12s`, `5m`); sleeps count.
    #[arg(long, global = true, value_name = "DUR")]
    pub deadline: Option<String>,
    /// The hard deadline of one attempt, capped by what remains.
    #[arg(long, global = true, value_name = "DUR")]
    pub attempt_timeout: Option<String>,
    /// The most attempts (not retries), at least 1.
    #[arg(long, global = true, value_name = "N", allow_negative_numbers = true)]
    pub max_attempts: Option<String>,
    /// Named bounds: transfer (the default for fetch and push), command
    /// (the default for the rest), round, submit or wait.
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// The operation id (generated when not given); asked again with the
    /// same --ledger, rejected (without --ledger: only within this process).
    #[arg(long, global = true, value_name = "ID")]
    pub operation_id: Option<String>,
    /// Where operation ids are claimed: a file (SQLite, shared by the
    /// processes of one machine) or a `postgres://` URL (shared by replicas;
    /// also their retry budget).
    #[arg(long, global = true, value_name = "FILE|URL")]
    pub ledger: Option<PathBuf>,
    /// http(s) only: a command run with `sh -c` whose trimmed stdout is the token.
    #[arg(long, global = true, value_name = "CMD")]
    pub token_command: Option<String>,
    /// Keep a --token-command's result this long, across runs (default 0:
    /// run once per operation); a refused token is dropped at once.
    #[arg(long, global = true, value_name = "DUR")]
    pub token_ttl: Option<String>,
    /// A GitHub App's id (with --app-key and --installation-id): its
    /// installation tokens, bought and replaced before they expire, for
    /// the forge and for git over https; not with --token-command.
    #[arg(long, global = true, value_name = "ID")]
    pub app_id: Option<String>,
    /// The GitHub App's private key: a path to its PEM file (never the key
    /// itself).
    // Hyphen values taken, so that a PEM pasted here is refused by the
    // validation (which never echoes it) rather than quoted by clap.
    #[arg(long, global = true, value_name = "FILE", allow_hyphen_values = true)]
    pub app_key: Option<PathBuf>,
    /// The GitHub App's installation id.
    #[arg(long, global = true, value_name = "ID")]
    pub installation_id: Option<String>,
    /// The least pause before a credential bought after a refusal (default 5s).
    #[arg(long, global = true, value_name = "DUR")]
    pub settle: Option<String>,
    /// https: trust roots (PEM) added to the platform's; repeatable.
    /// SSL_CERT_FILE replaces the platform's, as in curl and git.
    #[arg(long = "ca-file", global = true, value_name = "PEM", action = ArgAction::Append)]
    pub ca_files: Vec<PathBuf>,
    /// This proxy for every http(s) request (default: HTTPS_PROXY, HTTP_PROXY
    /// and NO_PROXY, as curl reads them).
    #[arg(long, global = true, value_name = "URL", conflicts_with = "no_proxy")]
    pub proxy: Option<String>,
    /// No proxy, whatever the environment says.
    #[arg(long, global = true)]
    pub no_proxy: bool,
    /// Progress of fetch and push on stderr, even when it is not a terminal.
    #[arg(long, global = true, conflicts_with = "no_progress")]
    pub progress: bool,
    /// No progress (the default when stderr is not a terminal).
    #[arg(long = "no-progress", global = true)]
    pub no_progress: bool,
    /// Print one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// forge: the REST API's base, http:// or https://, its path kept
    /// (default: GitHub's, api.github.com over https).
    #[arg(long, global = true, value_name = "URL")]
    pub api: Option<String>,
    /// git's verbose lines: the refs a fetch or push left as they were
    /// (`= [up to date]`), and no more.
    #[arg(short = 'v', long = "verbose", global = true, action = ArgAction::Count)]
    pub verbose: u8,
    /// No progress, no summary of a succeeded outcome, no lines for refs
    /// that were updated or up to date (the remote's words, refused refs and
    /// every other outcome's summary still printed); no effect with --json.
    #[arg(short = 'q', long = "quiet", global = true)]
    pub quiet: bool,
    /// Tracing to stderr: debug for the sluice crates (twice: trace);
    /// RUST_LOG, when set, chooses what is traced, with or without it.
    #[arg(long, global = true, action = ArgAction::Count)]
    pub trace: u8,
    /// The run's metrics, summed up on stderr at exit.
    #[arg(long, global = true)]
    pub metrics: bool,
    /// Run as if started in DIR (as git's -C: repeatable, each relative to
    /// the one before; applied before anything else is read, so relative
    /// paths resolve against it).
    #[arg(short = 'C', global = true, value_name = "DIR", action = ArgAction::Append)]
    pub dirs: Vec<String>,
}

impl std::fmt::Debug for GlobalArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token command may hold a literal secret: never shown.
        f.debug_struct("GlobalArgs")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("profile", &self.profile)
            .field("operation_id", &self.operation_id)
            .field("ledger", &self.ledger.as_deref().map(ledger_shown))
            .field(
                "token_command",
                &self.token_command.as_ref().map(|_| "<hidden>"),
            )
            .field("token_ttl", &self.token_ttl)
            .field("app_id", &self.app_id)
            .field("app_key", &self.app_key)
            .field("installation_id", &self.installation_id)
            .field("settle", &self.settle)
            .field("ca_files", &self.ca_files)
            .field("proxy", &self.proxy.as_deref().map(sluice_git::redact))
            .field("no_proxy", &self.no_proxy)
            .field("json", &self.json)
            .field("api", &self.api.as_deref().map(sluice_git::redact))
            .field("verbose", &self.verbose)
            .field("quiet", &self.quiet)
            .field("trace", &self.trace)
            .field("metrics", &self.metrics)
            .field("dirs", &self.dirs)
            .field("progress", &self.progress)
            .finish()
    }
}

/// The commands (raw).
#[derive(Subcommand, Debug)]
pub enum CommandArgs {
    /// List the remote's refs (printed like `git ls-remote`).
    #[command(after_help = help_with_examples!("  sluice-remote ls-refs origin main              (a configured remote, refs ending in /main)
  sluice-remote ls-refs https://github.com/org/repo.git --heads
  sluice-remote ls-refs git://127.0.0.1/repo.git 'v1.*' --tags --exit-code
  sluice-remote ls-refs git://127.0.0.1/repo.git --prefix refs/pull/ --json --profile wait"))]
    LsRefs {
        /// The remote: a URL (git://, http(s)://, ssh://, file://), a path,
        /// or a configured remote's name (`origin`) of the repository found
        /// from the working directory.
        #[arg(value_name = "URL|REMOTE")]
        url: String,
        /// Only refs equal to a pattern or ending in `/<PATTERN>`, globs
        /// allowed (as `git ls-remote`'s patterns); matched on this side.
        #[arg(value_name = "PATTERN")]
        patterns: Vec<String>,
        /// A literal ref prefix (`refs/heads/`) asked of the remote;
        /// repeatable; no `*`.
        #[arg(long = "prefix", value_name = "P")]
        prefixes: Vec<String>,
        /// Branches only (`refs/heads/`, asked of the remote as a prefix).
        #[arg(long, visible_alias = "branches")]
        heads: bool,
        /// Tags only (`refs/tags/`, asked of the remote as a prefix).
        #[arg(long)]
        tags: bool,
        /// Exit 2 when no ref matched (its empty value still printed,
        /// nothing on stderr), as `git ls-remote --exit-code`.
        #[arg(long)]
        exit_code: bool,
    },
    /// Fetch refspecs into a local repository.
    #[command(after_help = help_with_examples!("  sluice-remote fetch origin                  (its fetch lines, in the repository found from here)
  sluice-remote fetch https://github.com/org/repo.git '+refs/heads/*:refs/remotes/origin/*' --repo . --prune
  sluice-remote fetch git://127.0.0.1/repo.git refs/heads/main:refs/heads/main --repo repo.git --no-tags
  sluice-remote fetch ssh://git@host/repo.git 'refs/tags/*:refs/tags/*' --repo . -v"))]
    Fetch {
        /// The remote: a URL, or a configured remote's name (`origin`).
        #[arg(value_name = "URL|REMOTE")]
        url: String,
        /// What to fetch (`+refs/heads/*:refs/remotes/origin/*`); none: a
        /// remote's `fetch` lines, or a URL's `HEAD` (into FETCH_HEAD).
        #[arg(value_name = "REFSPEC")]
        refspecs: Vec<String>,
        /// The local repository (default: found from the working
        /// directory, as git finds it).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// Delete local refs in a glob refspec's destination whose remote
        /// ref is gone (as `git fetch --prune`).
        #[arg(long, short = 'p')]
        prune: bool,
        /// Fetch every tag of the remote too (`refs/tags/*:refs/tags/*`).
        #[arg(long, short = 't', conflicts_with = "no_tags")]
        tags: bool,
        /// Fetch no tag the refspecs do not name (default: tags pointing
        /// into what was fetched).
        #[arg(long = "no-tags", short = 'n')]
        no_tags: bool,
        /// Stop a pack larger than this on the wire (answered, nothing
        /// written; default: no limit).
        #[arg(long, value_name = "BYTES")]
        max_pack_size: Option<u64>,
        /// Stop a pack with an object larger than this inflated (answered,
        /// nothing written; default: no limit).
        #[arg(long, value_name = "BYTES")]
        max_object_size: Option<u64>,
    },
    /// Push revisions of a local repository.
    #[command(after_help = help_with_examples!("  sluice-remote push origin main --lease main  (origin/main's value expected; origin/main updated once it landed)
  sluice-remote push https://github.com/org/repo.git HEAD:main --repo . --operation-id land-1234 --ledger ops.db
  sluice-remote push git://127.0.0.1/repo.git HEAD:refs/heads/topic --repo . --lease topic=absent
  sluice-remote push ssh://git@host/repo.git main --repo . --lease main        (expects origin/main's value)
  sluice-remote push origin --delete old-topic v0.9               (the remote's refs of those names)
  sluice-remote push https://github.com/org/repo.git :refs/heads/old --repo . --porcelain
  sluice-remote push git://127.0.0.1/repo.git HEAD:main --repo . --dry-run --json"))]
    Push {
        /// The remote: a URL, or a configured remote's name (`origin`).
        #[arg(value_name = "URL|REMOTE")]
        url: String,
        /// `[+]SRC:DST` (`+` forces; `:DST` deletes; DST full, or short
        /// (`main`) taking the kind of SRC: a branch or a tag; a short one
        /// to delete names the remote's ref of that name); with --delete,
        /// the refs to delete.
        #[arg(value_name = "[+]SRC:DST", required = true)]
        specs: Vec<String>,
        /// Delete every ref listed (`main`, `v1` or a full name), as git's
        /// `push --delete`; not with `SRC:DST`.
        #[arg(long, short = 'd')]
        delete: bool,
        /// The local repository the sources are read from (default: found
        /// from the working directory, as git finds it).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// `DST=OID` (full or abbreviated), `DST=absent`, or `DST` alone (what
        /// the remote-tracking ref of the remote named, or configured with
        /// URL, holds): what the remote ref must hold (implies force).
        #[arg(long = "lease", value_name = "DST[=OID|=absent]")]
        leases: Vec<String>,
        /// All refs or none.
        #[arg(long)]
        atomic: bool,
        /// A push option (`-o` of git push); repeatable.
        #[arg(long = "push-option", value_name = "S")]
        push_options: Vec<String>,
        /// Everything up to the commands, nothing sent: what would happen
        /// (a read; refuses --operation-id).
        #[arg(long)]
        dry_run: bool,
        /// git's porcelain output (`To <url>`, one `<flag>\t<from>:<to>\t<summary>`
        /// line per ref, `Done`); not with --json.
        #[arg(long)]
        porcelain: bool,
    },
    /// HTTP calls through the forge client.
    #[command(after_help = help_with_examples!("  sluice-remote http get https://api.github.com/zen --token-command 'cat token.txt'
  sluice-remote http get https://api.github.com/repos/org/repo/pulls/1 --json --profile round"))]
    Http {
        /// The HTTP method.
        #[command(subcommand)]
        method: HttpArgs,
    },
    /// The forge's typed calls (GitHub's REST API): a write whose answer
    /// was lost is settled by reading, never sent again.
    #[command(after_help = help_with_examples!("  sluice-remote forge get-pull octo/repo 42 --json
  sluice-remote forge merge-pull octo/repo 42 --sha 0123456789abcdef0123456789abcdef01234567 --api https://ghe.example/api/v3"))]
    Forge {
        /// The call.
        #[command(subcommand)]
        call: ForgeArgs,
    },
    /// Read the operation ledger (`--ledger FILE`): what ran under an id.
    #[command(after_help = help_with_examples!("  sluice-remote ledger show land-1234 --ledger ops.db
  sluice-remote ledger list --since 2h --ledger ops.db --json"))]
    Ledger {
        /// `show <ID>` or `list [--since DUR]`.
        #[command(subcommand)]
        what: LedgerArgs,
    },
    /// Shell completions for `sluice-remote`, generated from its own
    /// definitions: load them in your shell's startup file.
    #[command(after_help = "Examples:
  sluice-remote completions bash > ~/.local/share/bash-completion/completions/sluice-remote
  sluice-remote completions zsh > ~/.zfunc/_sluice-remote
  sluice-remote completions fish > ~/.config/fish/completions/sluice-remote.fish")]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// The man page (roff), generated from the same definitions as the help.
    #[command(after_help = "Example:
  sluice-remote man > ~/.local/share/man/man1/sluice-remote.1 && man sluice-remote")]
    Man,
    /// Show, on loopback, what the retry policy does (needs only git).
    #[command(
        help_template = "{about-with-newline}\n{usage-heading} {usage}\n\nOptions:\n      --trace    Tracing to stderr\n      --metrics  The run's metrics on stderr at exit\n  -C <DIR>       Run as if started in DIR\n  -h, --help     Print help\n\n{after-help}",
        after_help = "demo chooses its own bounds and prints prose: it takes no other option.\n\nExample:\n  cargo run --release -p sluice-remote -- demo"
    )]
    Demo,
}

/// `ledger show <ID>` | `ledger list [--since <DUR>]` (raw).
#[derive(Subcommand, Debug)]
pub enum LedgerArgs {
    /// One id: when it was claimed, and how its run ended (or `running`).
    #[command(after_help = help_with_examples!("  sluice-remote ledger show land-1234 --ledger ops.db --json"))]
    Show {
        /// The operation id.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Every id claimed within `--since` (default 1d), oldest first.
    #[command(after_help = help_with_examples!("  sluice-remote ledger list --since 30m --ledger ops.db"))]
    List {
        /// How far back (`30m`, `1d`).
        #[arg(long, value_name = "DUR")]
        since: Option<String>,
    },
}

/// `http` subcommands (raw).
#[derive(Subcommand, Debug)]
pub enum HttpArgs {
    /// GET an absolute http(s) URL.
    #[command(after_help = help_with_examples!("  sluice-remote http get https://api.github.com/zen"))]
    Get {
        /// The URL; user info in it is a static credential.
        #[arg(value_name = "URL")]
        url: String,
    },
}

/// `forge` subcommands (raw).
#[derive(Subcommand, Debug)]
pub enum ForgeArgs {
    /// Read a pull request (printed as the forge sent it with --json).
    #[command(after_help = help_with_examples!("  sluice-remote forge get-pull octo/repo 42 --token-command 'cat token.txt' --json"))]
    GetPull {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The pull request's number.
        #[arg(value_name = "N")]
        number: String,
    },
    /// Merge a pull request at the head you checked; a lost answer is
    /// settled by reading the pull request, never by merging again.
    #[command(after_help = help_with_examples!("  sluice-remote forge merge-pull octo/repo 42 --sha 0123456789abcdef0123456789abcdef01234567 --method squash"))]
    MergePull {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The pull request's number.
        #[arg(value_name = "N")]
        number: String,
        /// The head commit the caller checked (40 hex digits).
        #[arg(long, value_name = "OID")]
        sha: String,
        /// merge (the default), squash or rebase.
        #[arg(long, value_name = "METHOD")]
        method: Option<String>,
    },
    /// Move a ref (`heads/main`) to a commit; the ref is read first, so a
    /// lost answer's settling read tells landed, not landed and moved apart.
    #[command(after_help = help_with_examples!("  sluice-remote forge update-ref octo/repo heads/main --sha 0123456789abcdef0123456789abcdef01234567"))]
    UpdateRef {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The ref, as `heads/main` (a leading `refs/` is dropped).
        #[arg(value_name = "REF")]
        git_ref: String,
        /// The commit to move it to (40 hex digits).
        #[arg(long, value_name = "OID")]
        sha: String,
        /// Move it even when that is not a fast-forward.
        #[arg(long)]
        force: bool,
    },
    /// A ref's CI and its verdict (success, pending, failure): the combined
    /// status, every check run of all pages (the latest of each name), the
    /// names required and those missing.
    #[command(after_help = help_with_examples!("  sluice-remote forge ci-status octo/repo 0123456789abcdef0123456789abcdef01234567 --base main --exclude sluice --json"))]
    CiStatus {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// A sha, branch or tag.
        #[arg(value_name = "REF")]
        git_ref: String,
        /// Require this status context or check run name (repeatable): until
        /// one reports it, the verdict is pending.
        #[arg(long = "require", value_name = "NAME")]
        require: Vec<String>,
        /// Also require what this base branch requires (its protection's
        /// and its rulesets' required checks): `main`, not `refs/heads/main`.
        #[arg(long, value_name = "BRANCH")]
        base: Option<String>,
        /// Leave the check runs of this name out before judging (the
        /// caller's own; repeatable).
        #[arg(long = "exclude", value_name = "NAME")]
        exclude: Vec<String>,
    },
    /// Create a check run; a lost answer is settled by finding its
    /// external id among the head's check runs.
    #[command(after_help = help_with_examples!("  sluice-remote forge create-check-run octo/repo --name sluice --head-sha 0123456789abcdef0123456789abcdef01234567 --external-id land-42"))]
    CreateCheckRun {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The check run's name.
        #[arg(long, value_name = "S")]
        name: String,
        /// The commit it checks (40 hex digits).
        #[arg(long, value_name = "OID")]
        head_sha: String,
        /// Your own id for it, unique per check run.
        #[arg(long, value_name = "S")]
        external_id: String,
        /// queued, in_progress or completed.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// success, failure, neutral, cancelled, skipped, timed_out, ...
        #[arg(long, value_name = "S")]
        conclusion: Option<String>,
    },
    /// Comment on an issue or pull request; the body ends with a marker
    /// line naming the operation, by which a lost answer is settled (and,
    /// with --operation-id, a comment already made is found, not posted
    /// again).
    #[command(after_help = help_with_examples!("  sluice-remote forge comment octo/repo 42 --body 'landed as 0123456' --operation-id land-42"))]
    Comment {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The or pull request's number.
        #[arg(value_name = "N")]
        number: String,
        /// The comment's text.
        #[arg(long, value_name = "TEXT")]
        body: String,
    },
    /// Update a check run's status or conclusion; the run is read first.
    #[command(after_help = help_with_examples!("  sluice-remote forge update-check-run octo/repo 4711 --conclusion success"))]
    UpdateCheckRun {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The check run's id.
        #[arg(value_name = "ID")]
        id: String,
        /// queued, in_progress or completed.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// success, failure, neutral, cancelled, skipped, timed_out, ...
        #[arg(long, value_name = "S")]
        conclusion: Option<String>,
    },
}

/// `--ledger` as it may be printed: a PostgreSQL URL without its user info
/// and query (a password may be in either).
pub(crate) fn ledger_shown(path: &Path) -> String {
    match path.to_str().filter(|s| sluice_ledger::is_postgres_url(s)) {
        Some(url) => {
            let url = url.split('?').next().unwrap_or(url);
            match (url.find("://"), url.rfind('@')) {
                (Some(s), Some(at)) if at > s => format!("{}://{}", &url[..s], &url[at + 1..]),
                _ => url.to_string(),
            }
        }
        None => path.display().to_string(),
    }
}
