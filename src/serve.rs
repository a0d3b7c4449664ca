//! `mcp-budget serve`: the process around [`mcp_budget::server`]: tracing, the runtime, the
//! startup summary, signals, and stdin/stdout as the stdio transport.
#![allow(clippy::print_stderr)]

use std::time::Duration;

use mcp_budget::gateway::summary_lines;
use mcp_budget::identity::Gate;
use mcp_budget::policy::client::JwksSource;
use mcp_budget::policy::{LogFormat, Policy};
use mcp_budget::reload::Source;
use mcp_budget::server::{MCP_PATH, Server, Stdio};
use mcp_budget::telemetry::otlp::Exporter;
use tokio_util::sync::CancellationToken;

pub(crate) fn run(
    source: Source,
    policy: Policy,
    ready_timeout: Duration,
    log_format: Option<LogFormat>,
) -> anyhow::Result<()> {
    // Before any upstream starts: what leaves an upstream's process group is re-parented here,
    // to be ended once the server stops.
    if let Err(err) = mcp_budget::upstream::orphans::adopt() {
        eprintln!(
            "warning: processes that leave their upstream's process group will outlive the gateway: {err}"
        );
    }
    // One client on stdio: everything on this thread (a request, its upstream write, the
    // upstream's answer and the reply hand off between tasks, never between threads: no
    // cross-CPU wake-up per hop; see `downstream::stdio` for the path and its figures).
    // Serving HTTP: a worker per core (many clients at once). Blocking work (usage files, the
    // reranker) has its own threads either way.
    let runtime = if policy.downstream.http.is_none() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
    };
    // The exporter sends its batches on this runtime.
    let exporter = {
        let _on_runtime = runtime.enter();
        Exporter::start(&policy.telemetry)?
    };
    let format = log_format
        .or(policy.telemetry.log_format)
        .unwrap_or_default();
    init_tracing(format, exporter.as_ref());
    if exporter.is_some() {
        mcp_budget::telemetry::enable_tracing();
    }
    for warning in policy.warnings() {
        tracing::warn!("policy: {warning}");
    }
    #[cfg(unix)]
    descriptors::raise_and_check(&policy);
    if !policy.downstream.stdio && policy.downstream.http.is_none() {
        anyhow::bail!(
            "nothing to serve: pass --stdio and/or --http ADDR (or set them in [downstream])"
        );
    }
    let result = runtime.block_on(serve(source, policy, ready_timeout));
    // The audit lines of the last calls may still be gathering in a batch: written now.
    mcp_budget::audit::flush_all(Duration::from_secs(2));
    // The upstreams' groups are ended by now: what is left are the processes that left them.
    mcp_budget::upstream::orphans::end();
    // Off the runtime, on a thread of its own, while this thread drives the runtime (a
    // one-thread runtime runs its tasks only inside `block_on`): the last batch is sent on it.
    if let Some(exporter) = exporter {
        let (done, flushed) = tokio::sync::oneshot::channel();
        let flushing = std::thread::Builder::new()
            .name("mcp-budget-otlp-flush".into())
            .spawn(move || {
                exporter.shutdown();
                let _ = done.send(());
            });
        if flushing.is_ok() {
            let _ = runtime.block_on(flushed);
        }
    }
    // Tokio reads stdin on a blocking thread stuck in read(2) until the host writes or closes
    // the pipe; dropping the runtime would wait for it forever (a SIGTERM'd gateway whose host
    // keeps stdin open never exited). Everything that matters is stopped by now.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

/// The check of every reloaded policy: its clients replace the running ones (their keys read
/// from the environment again), so a reload that takes a client's rights away takes effect at
/// once. A `jwks_url` keeps the keys fetched for it; another JWKS source needs a restart.
fn reload_clients(
    gate: Gate,
    jwks: Option<JwksSource>,
) -> impl Fn(&Policy) -> Result<(), String> + Send + 'static {
    move |policy: &Policy| {
        let source = policy.auth.jwt.as_ref().map(|j| j.jwks.clone());
        if source != jwks {
            return Err(
                "[auth.jwt] jwks_file / jwks_url changed: restart the gateway to load other keys"
                    .to_owned(),
            );
        }
        let fetched = match &source {
            Some(JwksSource::Url { .. }) => gate.directory().load().jwks(),
            _ => None,
        };
        let directory = policy.directory(fetched).map_err(|e| e.to_string())?;
        gate.directory().store(std::sync::Arc::new(directory));
        Ok(())
    }
}

fn init_tracing(format: LogFormat, exporter: Option<&Exporter>) {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_BUDGET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let fmt = match format {
        // One object per line, the event's fields at the top level (log shippers index them).
        LogFormat::Json => fmt.json().flatten_event(true).with_span_list(false).boxed(),
        // Hosts capture stderr into log files: colour codes only on a terminal.
        _ => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(exporter.map(Exporter::layer))
        .init();
}

async fn serve(source: Source, policy: Policy, ready_timeout: Duration) -> anyhow::Result<()> {
    let started = tokio::time::Instant::now();
    let shutdown = CancellationToken::new();
    // SIGHUP must not end the gateway while its upstreams start (the default action): the
    // runtime's handler, once installed, stays for the life of the process; the reload watch
    // listens from when the server is up. (No SIGHUP elsewhere.)
    #[cfg(unix)]
    drop(tokio::signal::unix::signal(
        tokio::signal::unix::SignalKind::hangup(),
    )?);
    // Bound before anything starts, as the MCP address is; recording starts with it.
    let admin = match policy.admin.http {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr} ([admin] http): {e}"))?;
            Some((listener, mcp_budget::admin::install_recorder()))
        }
        None => None,
    };
    let llm_api = llm_api_listener(&policy).await?;
    // SIGINT and SIGTERM stop the gateway from now on, while its upstreams start too: the
    // signals' default action would leave their process groups running.
    stop_on_signals(shutdown.clone())?;
    let server = start(policy, ready_timeout, &shutdown).await?;
    if shutdown.is_cancelled() {
        server.stop().await;
        return Ok(());
    }
    // The one server of a drop-in command line that cannot start: nothing would ever be
    // served, so say why and exit non-zero (as mcp-compressor does) instead of serving nothing.
    if let Some(reason) = lone_server_down(&source, &server) {
        server.stop().await;
        anyhow::bail!("{reason}");
    }
    // SIGHUP and edits of the policy's files reload it from now on; the process keeps serving.
    let jwks = server.policy().auth.jwt.as_ref().map(|j| j.jwks.clone());
    let accept = reload_clients(server.gate().clone(), jwks);
    let dropin = source.dropin_note();
    let command_line = source.policy.is_none();
    match mcp_budget::reload::watch(source, server.reloader(), accept, shutdown.clone()) {
        Ok(reloads) => drop(tokio::spawn(reloads)),
        Err(err) => tracing::warn!("Hot reload is off: {err}"),
    }
    print_summary(&server, started, command_line);
    if let Some(note) = dropin {
        eprintln!("  drop-in: {note}");
    }
    log_started(&server, started);
    let policy = server.policy();
    if let Some(addr) = server.local_addr() {
        eprintln!("  listening on http://{addr}{MCP_PATH}");
        match server.sealing_key_id() {
            Some(key) => eprintln!(
                "  sessions: sealed ids (key {key}): they survive restarts and any replica with the key serves them"
            ),
            None => eprintln!(
                "  sessions: in memory: 2025-era sessions end with this process and other replicas do not know them ([sessions] seal_key_env shares them)"
            ),
        }
    }
    if let Some((listener, metrics)) = admin {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("  admin on http://{addr} (/metrics /healthz /readyz /status)");
        }
        let hosts = policy.admin.allowed_hosts.clone();
        let app = mcp_budget::admin::router(server.admin_source(), metrics, hosts);
        tokio::spawn(mcp_budget::admin::serve(listener, app, shutdown.clone()));
    }
    if let Some(llm_api) = llm_api {
        spawn_llm_api(llm_api, policy.llm_api.preselect, &shutdown);
    }
    let stdio = policy.downstream.stdio.then(|| {
        eprintln!("  serving MCP on stdio");
        let (input, output) = stdio_streams();
        Stdio::new(input, output)
    });
    server.serve(None, stdio).await;
    Ok(())
}

/// The `[llm_api]` listener, bound, and its app, when the policy asks for one.
async fn llm_api_listener(
    policy: &Policy,
) -> anyhow::Result<Option<(tokio::net::TcpListener, axum::Router, String)>> {
    let (Some(addr), Some(upstream)) = (policy.llm_api.listen, &policy.llm_api.upstream) else {
        return Ok(None);
    };
    let forward = mcp_budget::llm_api::proxy::Forward::new(upstream)
        .map_err(|e| anyhow::anyhow!("[llm_api] upstream: {e}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} ([llm_api] listen): {e}"))?;
    let options = mcp_budget::llm_api::proxy::options(policy);
    let shown = forward.shown().to_owned();
    let app = mcp_budget::llm_api::proxy::router(options, forward);
    Ok(Some((listener, app, shown)))
}

/// Serves the `[llm_api]` listener (`preselect`: its tools per request), saying where.
fn spawn_llm_api(
    (listener, app, upstream): (tokio::net::TcpListener, axum::Router, String),
    preselect: Option<usize>,
    shutdown: &CancellationToken,
) {
    if let Ok(addr) = listener.local_addr() {
        let preselect = match preselect {
            Some(0) => "every tool listed".to_owned(),
            Some(k) => format!("at most {k} tools preselected per request"),
            None => "tools preselected per request as the request's model's profile says \
                     (local models; every tool for the others)"
                .to_owned(),
        };
        eprintln!("  LLM API on http://{addr} (to {upstream}; {preselect})");
    }
    tokio::spawn(mcp_budget::llm_api::proxy::serve(
        listener,
        app,
        shutdown.clone(),
    ));
}

/// Starts the server and waits for its upstreams. A host that closes stdin meanwhile wants the
/// gateway gone now, not after the ready timeout: the same stop as a signal.
async fn start(
    policy: Policy,
    ready_timeout: Duration,
    shutdown: &CancellationToken,
) -> anyhow::Result<Server> {
    let stdin_watch = policy
        .downstream
        .stdio
        .then(|| tokio::spawn(stop_when_stdin_closes(shutdown.clone())));
    // The listen address is bound first: a port in use fails now, before any upstream starts.
    let server = Server::start_listening(policy, ready_timeout, shutdown.clone()).await;
    if let Some(watch) = stdin_watch {
        watch.abort();
    }
    Ok(server?)
}

/// Why the command line's only server is down after the readiness wait, when it is the whole
/// configuration (no `--policy`, no `--mcp-json`).
fn lone_server_down(source: &Source, server: &Server) -> Option<String> {
    if !source.lone_server() {
        return None;
    }
    match server.upstreams() {
        [one] => match &one.status {
            mcp_budget::upstream::Status::Down(reason) => Some(format!(
                "the server {:?} could not start: {reason}",
                one.name
            )),
            _ => None,
        },
        _ => None,
    }
}

/// Cancels `shutdown` when the host closes stdin (its end of the pipe or socket is gone),
/// without reading from it: what the host sent before stays for the stdio transport.
async fn stop_when_stdin_closes(shutdown: CancellationToken) {
    stdin_closed().await;
    tracing::info!("stdin closed while the upstreams started; shutting down");
    shutdown.cancel();
}

/// Resolves once the other end of stdin, a pipe or a Unix socket (Node hosts hand their
/// servers socket pairs), is closed; never for anything else (a terminal, a file: their end
/// shows when the stdio transport reads). Nothing is read from it.
#[cfg(unix)]
async fn stdin_closed() {
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::FileTypeExt;

    // A duplicate of the descriptor: the stdio transport's stays as it is.
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return std::future::pending().await;
    };
    let file = std::fs::File::from(fd);
    let kind = file.metadata().map(|m| m.file_type());
    if kind.as_ref().is_ok_and(FileTypeExt::is_fifo) {
        // Non-blocking already: the stdio transport reads a pipe through the event loop.
        if let Ok(pipe) = tokio::net::unix::pipe::Receiver::from_file(file) {
            // Readable with data waiting is not closed: looked at again shortly.
            while let Ok(ready) = pipe.ready(tokio::io::Interest::READABLE).await {
                if ready.is_read_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    } else if kind.as_ref().is_ok_and(FileTypeExt::is_socket) {
        // Peeked without blocking: the descriptor's own mode (blocking, for tokio's stdin
        // thread) is left alone. Zero bytes is the end; data waiting is looked at again.
        use nix::sys::socket::{MsgFlags, recv};
        let mut byte = [0u8; 1];
        loop {
            let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
            match recv(file.as_raw_fd(), &mut byte, flags) {
                Ok(0) => return,
                Ok(_) | Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(_) => break,
            }
        }
    }
    std::future::pending::<()>().await;
}

/// Elsewhere stdin's end shows when the stdio transport reads it.
#[cfg(not(unix))]
async fn stdin_closed() {
    std::future::pending::<()>().await;
}

/// Cancels `shutdown` at the first SIGINT or SIGTERM.
fn stop_on_signals(shutdown: CancellationToken) -> std::io::Result<()> {
    let terminated = terminated()?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
            () = terminated => tracing::info!("SIGTERM received; shutting down"),
            () = shutdown.cancelled() => return,
        }
        shutdown.cancel();
    });
    Ok(())
}

/// Resolves when the process is asked to terminate (SIGTERM).
#[cfg(unix)]
fn terminated() -> std::io::Result<impl std::future::Future<Output = ()>> {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        sigterm.recv().await;
    })
}

/// Elsewhere (Windows) Ctrl-C, and stdin's end in stdio mode, are the ways to stop.
#[cfg(not(unix))]
fn terminated() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(std::future::pending())
}

/// The startup summary on stderr: each upstream, then the budget plan.
/// `command_line`: no policy file, so the advice names flags.
fn print_summary(server: &Server, started: tokio::time::Instant, command_line: bool) {
    eprintln!(
        "mcp-budget {} — {} upstream(s) in {} ms",
        env!("CARGO_PKG_VERSION"),
        server.upstreams().len(),
        started.elapsed().as_millis()
    );
    for (name, line) in summary_lines(server.upstreams()) {
        eprintln!("  {name:<20} {line}");
    }
    for upstream in server.upstreams() {
        for warning in &upstream.warnings {
            eprintln!("  {:<20} warning: {warning}", upstream.name);
        }
    }
    for collision in server.collisions() {
        eprintln!("  collision: {collision}");
    }
    let catalog = server.catalog();
    for line in mcp_budget::pin::report::lines(catalog.held(), catalog.names()) {
        eprintln!("  guard: {line}");
    }
    let policy = server.policy();
    let Some(s) = server.plan() else {
        eprintln!("  budget: off (tool lists pass through)");
        return;
    };
    print_plan("", &policy.budget.model, policy, &s, || {
        let why = mcp_budget::cli::report::Why {
            command_line,
            ..mcp_budget::cli::report::from_summary(policy, &s, &catalog)
        };
        eprintln!("  why: {}", mcp_budget::cli::report::reason(&why));
        if let Some(advice) = mcp_budget::cli::report::advice(&why) {
            eprintln!("  to list more: {advice}");
        }
    });
    // What the stdio client really sees, when it is a `[[client]]` with a scope or model of
    // its own (the lines above are the default profile).
    let stdio_client = (policy.downstream.stdio)
        .then_some(policy.downstream.stdio_client.as_deref())
        .flatten();
    if let Some((name, s)) = stdio_client.and_then(|n| server.plan_of(n).map(|s| (n, s))) {
        let spec = policy.clients.iter().find(|c| c.name == name);
        let model = spec
            .and_then(|c| c.model.as_deref())
            .unwrap_or(&policy.budget.model);
        print_plan(
            &format!("stdio client {name:?}: "),
            model,
            policy,
            &s,
            || {},
        );
    }
}

/// One profile's plan in the startup summary: its totals, what `then` prints, then per server.
fn print_plan(
    who: &str,
    model: &str,
    policy: &Policy,
    s: &mcp_budget::layer::budget::PlanSummary,
    then: impl FnOnce(),
) {
    eprintln!(
        "  {who}tools: {} → {} listed; tokens {} → {} ({model} budget {} at {}%) plan {}",
        s.tools,
        s.exposed,
        s.tokens_before,
        s.tokens_after,
        s.budget_tokens,
        f64::from(policy.budget.threshold_bp) / 100.0,
        s.rung
    );
    then();
    for server in &s.per_server {
        eprintln!(
            "    {:<18} tokens {} → {} ({} of {} tools listed)",
            server.server, server.before, server.after, server.exposed, server.tools
        );
    }
}

/// The startup summary as one structured event, for log shippers.
fn log_started(server: &Server, started: tokio::time::Instant) {
    let plan = server.plan();
    let ready = (server.upstreams().iter())
        .filter(|u| u.status == mcp_budget::upstream::Status::Ready)
        .count();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        upstreams = server.upstreams().len(),
        upstreams_ready = ready,
        startup_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        tools = plan.as_ref().map(|p| p.tools),
        listed = plan.as_ref().map(|p| p.exposed),
        tokens_before = plan.as_ref().map(|p| p.tokens_before),
        tokens_after = plan.as_ref().map(|p| p.tokens_after),
        rung = plan.as_ref().map(|p| p.rung.as_str()),
        "Gateway started"
    );
}

type Input = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Output = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// stdin and stdout of the stdio downstream. Pipes (what hosts give their servers) are read and
/// written through the runtime's event loop: tokio's own stdin/stdout hand every read and every
/// write to a blocking thread, two thread switches per message. Anything else (a terminal, a
/// file), and a stdout that is the same pipe as stderr (non-blocking mode would reach the log
/// writer too), keeps tokio's.
#[cfg(unix)]
fn stdio_streams() -> (Input, Output) {
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use tokio::net::unix::pipe;

    // A duplicate of the descriptor, if it is a pipe; with its (device, inode).
    let pipe_of = |fd: std::os::fd::BorrowedFd<'_>| -> Option<(OwnedFd, (u64, u64))> {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        let meta = file.metadata().ok()?;
        meta.file_type()
            .is_fifo()
            .then(|| (OwnedFd::from(file), (meta.dev(), meta.ino())))
    };
    let input: Input = match pipe_of(std::io::stdin().as_fd())
        .and_then(|(fd, _)| pipe::Receiver::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdin()),
    };
    let stderr = pipe_of(std::io::stderr().as_fd()).map(|(_, id)| id);
    let output: Output = match pipe_of(std::io::stdout().as_fd())
        .filter(|(_, id)| Some(*id) != stderr)
        .and_then(|(fd, _)| pipe::Sender::from_owned_fd(fd).ok())
    {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// Elsewhere (Windows) tokio's own stdin and stdout.
#[cfg(not(unix))]
fn stdio_streams() -> (Input, Output) {
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// The file descriptors the upstreams need, against `RLIMIT_NOFILE`.
#[cfg(unix)]
mod descriptors {
    use mcp_budget::policy::Policy;
    use mcp_budget::policy::share::Share;
    use mcp_budget::policy::upstream::Transport;
    use nix::sys::resource::{Resource, getrlimit, setrlimit};

    /// What the gateway holds per stdio instance: the child's stdin, stdout and stderr pipes,
    /// and its pidfd.
    const PER_STDIO: u64 = 4;
    /// Per HTTP upstream: a connection for requests and one for the GET stream.
    const PER_HTTP: u64 = 2;
    /// The gateway's own: listeners, the runtime, the admin and store connections, accepted
    /// connections of a few clients.
    const BASE: u64 = 64;

    /// Raises the soft limit on open files as far as the policy needs (at most to the hard
    /// limit), then warns when it is still short. Not further: children inherit the soft
    /// limit, and some close every descriptor up to it (Go restores it for children; a
    /// `pre_exec` hook would take `unsafe`, which this crate forbids).
    pub(super) fn raise_and_check(policy: &Policy) {
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            return;
        };
        let needed = needed(policy);
        let target = needed.min(hard);
        let limit = if soft < target && setrlimit(Resource::RLIMIT_NOFILE, target, hard).is_ok() {
            tracing::debug!(from = soft, to = target, "Open-file limit raised");
            target
        } else {
            soft
        };
        if needed > limit {
            tracing::warn!(
                upstreams = policy.upstreams.len(),
                needed,
                limit,
                hard_limit = hard,
                "Too few file descriptors for every upstream: starts will fail with \"too many open files\"; raise the limit (ulimit -n, LimitNOFILE=) or serve fewer upstreams"
            );
        }
    }

    /// The descriptors the policy's upstreams and client connections hold at most, with the
    /// gateway's own.
    fn needed(policy: &Policy) -> u64 {
        let upstreams: u64 = (policy.upstreams.iter())
            .map(|up| {
                let instances = match up.share {
                    Share::PerClient(p) => u64::try_from(p.max_instances.get()).unwrap_or(u64::MAX),
                    _ => 1,
                };
                match up.transport {
                    Transport::Stdio { .. } => PER_STDIO * instances,
                    Transport::Http { .. } => PER_HTTP * instances,
                    _ => 0,
                }
            })
            .sum();
        // Serving HTTP: every client connection the policy admits at once.
        let connections = policy
            .downstream
            .http
            .map_or(0, |_| policy.downstream.max_connections.get());
        BASE + upstreams + u64::try_from(connections).unwrap_or(u64::MAX)
    }
}
