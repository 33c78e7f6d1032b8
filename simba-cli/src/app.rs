//! The `simba` command's entry point and dispatch (see the crate docs).

use crate::{
    child, cli, cron, demo, elect, error, events, settings, signals, status, style, supervise,
};
use clap::{CommandFactory, Parser};
use cli::{Cli, Command};
use error::CliError;
use signals::StopSignals;
use simba_backends::{Backend, BackendConfig};
use std::process::ExitCode;

/// Parses the command line, runs one command, and returns simba's exit status.
pub fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(child::GUARD_COMMAND)) {
        let pgid = args.next().unwrap_or_default();
        let deadline = args.next();
        return ExitCode::from(child::guard_main(
            &pgid.to_string_lossy(),
            deadline.as_ref().map(|d| d.to_string_lossy()).as_deref(),
        ));
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(error::EXIT_USAGE));
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return fail(&CliError::Internal(format!(
                "cannot start the runtime: {e}"
            )))
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // Do not wait for stray blocking tasks (e.g. a hung driver call).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&e),
    }
}

fn fail(e: &CliError) -> ExitCode {
    let line = simba_backends::redact(&e.to_string().replace('\n', " "));
    if events::json() {
        let _ = events::emit(
            events::To::Stderr,
            &events::Event::Error {
                message: line,
                exit_code: e.exit_code(),
            },
        );
        return ExitCode::from(e.exit_code());
    }
    let mut err = anstream::stderr();
    let _ = std::io::Write::write_fmt(&mut err, format_args!("simba: {}\n", style::error(&line)));
    ExitCode::from(e.exit_code())
}

/// Runs one command; `Ok` holds the exit code.
async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    // Generated from the command line alone: no configuration is read.
    match &cli.command {
        Command::Completions(args) => return completions(args.shell),
        Command::Man => return man(),
        _ => {}
    }
    let file = match &cli.config {
        Some(path) => settings::read_file(path)?,
        None => settings::FileConfig::default(),
    };
    let url = settings::backend_url(cli.backend.as_deref(), &file);
    match cli.command {
        Command::Status(args) => {
            if let Some(p) = &args.prefix {
                simba_backends::check_prefix(p).map_err(|e| CliError::InvalidPrefix(e.message))?;
            }
            let (backend, _) = connect(&url, false).await?;
            status::status(&*backend, args.prefix.as_deref(), args.json).await?;
            Ok(error::EXIT_OK)
        }
        Command::Watch(args) => {
            let interval = settings::parse_duration("--interval", &args.interval)?;
            if let Some(p) = &args.prefix {
                simba_backends::check_prefix(p).map_err(|e| CliError::InvalidPrefix(e.message))?;
            }
            events::set_json(args.json);
            let (backend, redacted) = connect(&url, false).await?;
            status::watch(&*backend, args.prefix.as_deref(), interval, &redacted).await?;
            Ok(error::EXIT_OK)
        }
        Command::Migrate => {
            let (backend, redacted) = connect(&url, true).await?;
            let mut out = anstream::stdout();
            if backend.name() == "redis" {
                std::io::Write::write_fmt(
                    &mut out,
                    format_args!(
                        "{} nothing to migrate: the redis backend at {redacted} has no schema\n",
                        style::good("ok:")
                    ),
                )?;
                return Ok(error::EXIT_OK);
            }
            std::io::Write::write_fmt(
                &mut out,
                format_args!(
                    "{} the {} schema at {redacted} is ready\n",
                    style::good("ok:"),
                    backend.name()
                ),
            )?;
            Ok(error::EXIT_OK)
        }
        Command::Run(args) => {
            let conflict = args.supervise.conflict_exit_code;
            error::on_conflict(run(&url, &cli.timing, &file, args).await, conflict)
        }
        Command::Lock(args) => {
            let conflict = args.supervise.conflict_exit_code;
            error::on_conflict(lock(&url, &cli.timing, &file, args).await, conflict)
        }
        Command::Cron(args) => {
            simba_core::LeaseName::new(&args.name)?;
            let config = settings::timing(&cli.timing, &file)?;
            let spec = child_spec(&args.child)?;
            let schedule = cron::parse_schedule(&args.schedule, args.tz.as_deref())?;
            let options = cron::CronOptions {
                missed: cron::parse_missed(&args.missed)?,
                hold: settings::parse_duration("--lock-at-least-for", &args.lock_at_least_for)?,
            };
            let retry = ConnectRetry::unless(args.fail_fast, None);
            let (simba, mut signals) = match start(&url, config, retry, None).await? {
                Started::Client(simba, signals) => (simba, signals),
                Started::Stopped(code) => return Ok(code),
            };
            cron::cron(&simba, &args.name, schedule, &spec, &options, &mut signals).await
        }
        Command::Elect(args) => {
            simba_core::LeaseName::new(&args.name)?;
            let config = settings::timing(&cli.timing, &file)?;
            if let Some(p) = &args.proposal {
                simba_backends::SessionMetadata::new()
                    .insert(elect::PROPOSAL_KEY, p.as_str())
                    .map_err(|e| CliError::InvalidProposal(e.to_string()))?;
            }
            events::set_json(args.json);
            let retry = ConnectRetry::unless(args.fail_fast, None);
            let proposal = args.proposal.as_deref();
            let (simba, mut signals) = match start(&url, config, retry, proposal).await? {
                Started::Client(simba, signals) => (simba, signals),
                Started::Stopped(code) => return Ok(code),
            };
            if args.listen {
                drop(signals);
                elect::listen(&simba, &args.name).await
            } else {
                elect::campaign(&simba, &args.name, proposal, &mut signals).await
            }
        }
        Command::Completions(args) => completions(args.shell),
        Command::Man => man(),
        Command::Demo(args) => {
            let lease = settings::parse_duration("--lease", &args.lease)?;
            demo::demo(lease).await
        }
    }
}

/// `simba run`: competes and runs the command while leader.
async fn run(
    url: &str,
    timing: &cli::TimingArgs,
    file: &settings::FileConfig,
    args: cli::RunArgs,
) -> Result<u8, CliError> {
    events::set_json(args.supervise.json);
    // Everything the user can get wrong is refused before any I/O.
    simba_core::LeaseName::new(&args.name)?;
    let config = settings::timing(timing, file)?;
    let spec = child_spec(&args.supervise.child)?;
    let retry = ConnectRetry::unless(args.supervise.fail_fast, None);
    let (simba, mut signals) = match start(url, config, retry, None).await? {
        Started::Client(simba, signals) => (simba, signals),
        Started::Stopped(code) => return Ok(code),
    };
    let options = supervise::RunOptions {
        once: args.once,
        restart: args.restart,
    };
    supervise::run(&simba, &args.name, &spec, &options, &mut signals).await
}

/// `simba lock`: takes the lock, runs the command, releases.
async fn lock(
    url: &str,
    timing: &cli::TimingArgs,
    file: &settings::FileConfig,
    args: cli::LockArgs,
) -> Result<u8, CliError> {
    events::set_json(args.supervise.json);
    simba_core::LeaseName::new(&args.name)?;
    let config = settings::timing(timing, file)?;
    let spec = child_spec(&args.supervise.child)?;
    let wait = args
        .wait
        .as_deref()
        .map(|w| settings::parse_duration("--wait", w))
        .transpose()?;
    let started = tokio::time::Instant::now();
    let retry = ConnectRetry::unless(args.supervise.fail_fast, wait.map(|w| started + w));
    let (simba, mut signals) = match start(url, config, retry, None).await? {
        Started::Client(simba, signals) => (simba, signals),
        Started::Stopped(code) => return Ok(code),
    };
    // The time spent connecting counts against --wait; the error names
    // the --wait asked for (`2s`), not what was left of it.
    let left = wait.map(|w| w.saturating_sub(started.elapsed()));
    match supervise::lock(&simba, &args.name, left, &spec, &mut signals).await {
        Err(CliError::NotAcquired { name, .. }) => Err(CliError::NotAcquired {
            name,
            waited: wait.unwrap_or_default(),
        }),
        other => other,
    }
}

/// `simba completions SHELL`: the completion script, from the clap definition.
fn completions(shell: clap_complete::Shell) -> Result<u8, CliError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "simba", &mut out);
    write_stdout(&out)?;
    Ok(error::EXIT_OK)
}

/// `simba man`: the manual page (roff), from the clap definition.
fn man() -> Result<u8, CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    write_stdout(&out)?;
    Ok(error::EXIT_OK)
}

/// Writes `bytes` on stdout as they are (no styling).
fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, bytes)?;
    std::io::Write::flush(&mut out)?;
    Ok(())
}

fn child_spec(args: &cli::ChildArgs) -> Result<child::ChildSpec, CliError> {
    Ok(child::ChildSpec {
        command: args.command.clone(),
        grace: settings::parse_duration("--grace", &args.grace)?,
    })
}

/// Whether `simba run`/`simba lock`/`simba cron` wait for a backend that cannot be
/// reached (down, or full: no connection to be had).
#[derive(Clone, Copy, Debug)]
struct ConnectRetry {
    enabled: bool,
    /// Give up then (`simba lock --wait`).
    until: Option<tokio::time::Instant>,
}

impl ConnectRetry {
    /// Retry unless `--fail-fast`, giving up at `until`.
    fn unless(fail_fast: bool, until: Option<tokio::time::Instant>) -> Self {
        Self {
            enabled: !fail_fast,
            until,
        }
    }
}

/// How [`start`] ended.
enum Started {
    /// Connected, with the stop signals installed before connecting.
    Client(simba_tokio::Simba, StopSignals),
    /// A stop signal came first: the exit status for it.
    Stopped(u8),
}

/// Installs the stop signals and connects the client of `simba run`,
/// `lock`, `cron` and `elect` (see [`client`]), unless a stop signal comes
/// first.
async fn start(
    url: &str,
    config: simba_core::SimbaConfig,
    retry: ConnectRetry,
    proposal: Option<&str>,
) -> Result<Started, CliError> {
    let mut signals = StopSignals::install();
    let first = tokio::select! {
        simba = client(url, config, retry, proposal) => Ok(simba?),
        sig = signals.recv() => Err(sig),
    };
    Ok(match first {
        Ok(simba) => Started::Client(simba, signals),
        Err(sig) => Started::Stopped(signals::stopped_code(sig, None)),
    })
}

/// The first pause between connection attempts; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(250);
/// The longest pause between connection attempts.
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Connects, retrying with back-off while the backend is unavailable or
/// times out (server down, or full: "too many clients"), and saying so on
/// stderr once per kind of failure, and once when connected. Each attempt
/// holds at most the connection budget of one node, and gives it back
/// before the pause.
async fn connect_retrying(url: &str, retry: ConnectRetry) -> Result<Box<dyn Backend>, CliError> {
    settings::make_default_dir(url);
    let config = BackendConfig::parse(url)?.with_create_schema(true);
    let redacted = config.redacted_url();
    let mut pause = RETRY_FIRST;
    let mut said: Option<simba_core::BackendErrorKind> = None;
    loop {
        let e = match config.connect().await {
            Ok(backend) => {
                if said.is_some() {
                    note(&format!("connected to {redacted}"));
                }
                return Ok(backend);
            }
            Err(e) => e,
        };
        let transient = matches!(
            e.kind,
            simba_core::BackendErrorKind::Unavailable | simba_core::BackendErrorKind::Timeout
        );
        let now = tokio::time::Instant::now();
        let next = now + pause;
        if !retry.enabled || !transient || retry.until.is_some_and(|u| next > u) {
            return Err(CliError::from_backend(&e));
        }
        if said != Some(e.kind) {
            note(&format!(
                "cannot connect ({}); retrying with back-off up to every {} (--fail-fast to exit instead)",
                simba_backends::redact(&e.to_string()),
                crate::style::human(RETRY_MAX)
            ));
            said = Some(e.kind);
        }
        tokio::time::sleep_until(next).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// Prints one progress line on stderr (with `--json`, a `note` event).
fn note(text: &str) {
    if events::json() {
        let _ = events::emit(
            events::To::Stderr,
            &events::Event::Note {
                message: text.to_owned(),
            },
        );
        return;
    }
    let mut err = anstream::stderr();
    let _ = std::io::Write::write_fmt(&mut err, format_args!("{} {text}\n", style::dim("simba:")));
}

/// Connects to the backend (see [`connect_retrying`]) and builds a client on it.
/// `proposal` (`simba elect`) is published as the session's `proposal`
/// metadata.
async fn client(
    url: &str,
    config: simba_core::SimbaConfig,
    retry: ConnectRetry,
    proposal: Option<&str>,
) -> Result<simba_tokio::Simba, CliError> {
    let backend = connect_retrying(url, retry).await?;
    let mut builder = simba_tokio::builder_dyn(std::sync::Arc::from(backend)).config(config);
    if let Some(p) = proposal {
        builder = builder.metadata(elect::PROPOSAL_KEY, p);
    }
    builder.build().map_err(|e| match e {
        simba_tokio::Error::Metadata(e) => CliError::InvalidProposal(e.to_string()),
        other => CliError::Internal(other.to_string()),
    })
}

/// Parses `url` and connects, creating the tables if `create_schema`.
/// Returns the backend and its redacted URL.
///
/// # Errors
/// [`CliError::BadUrl`] for a bad URL, [`CliError::Backend`] if the backend
/// cannot be reached or its tables are missing.
async fn connect(url: &str, create_schema: bool) -> Result<(Box<dyn Backend>, String), CliError> {
    if create_schema {
        settings::make_default_dir(url);
    }
    let config = BackendConfig::parse(url)?.with_create_schema(create_schema);
    let redacted = config.redacted_url();
    let backend = config.connect().await.map_err(|e| {
        let err = CliError::from_backend(&e);
        match err {
            // Said in the CLI's words, not the library's.
            CliError::Backend(msg) if !create_schema && msg.contains("missing") => {
                CliError::Backend(format!(
                    "no Simba tables at {redacted} (nothing has used this backend yet, or it \
                     uses another table prefix); `simba migrate` creates them, and `simba run` \
                     or `simba lock` create them on first use"
                ))
            }
            other => other,
        }
    })?;
    Ok((backend, redacted))
}
