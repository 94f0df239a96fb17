//! Sub-commands: serve, migrate, ingest, reindex, token.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use data_plane_embed::Embedder;
use data_plane_ingest::pipeline::{Outcome, Pipeline, Target};
use data_plane_search::KeywordIndex;
use data_plane_search::follower::Follower;
use data_plane_store::content::{self, SourceKind};
use data_plane_store::identity::{self, MembershipRole, Permission};
use data_plane_store::{Db, Scope};
use data_plane_web::fetch::Fetcher;
use data_plane_web::search::WebSearch;

use crate::auth::{JwtKeys, ServiceTokens};
use crate::config::{self, GlobalArgs};
use crate::state::AppState;

/// data-plane: tools for LLM agents over your documents and the web.
#[derive(Debug, Parser)]
#[command(name = "data-plane", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default when no command is given).
    Serve {
        /// Address to listen on.
        #[arg(long, env = "DATA_PLANE_ADDR", default_value = "127.0.0.1:8080")]
        addr: String,
        /// Do not run pending migrations at start.
        #[arg(long)]
        no_migrate: bool,
    },
    /// Apply pending database migrations.
    Migrate,
    /// Load a file or folder (recursively, keeping its folder structure) into a space.
    Ingest {
        /// File or folder to load.
        path: PathBuf,
        /// Space to load into (created when missing).
        #[arg(long)]
        space: String,
        /// Source inside the space [default: the folder's or file's name].
        #[arg(long)]
        source: Option<String>,
        /// Also add this user (by email) to the space as its owner.
        #[arg(long)]
        owner: Option<String>,
    },
    /// Rebuild the keyword index from PostgreSQL.
    Reindex,
    /// Print the registered tools: metadata and OpenAI definition of each.
    Tools {
        /// Print the whole registry as one JSON document instead.
        #[arg(long)]
        json: bool,
        /// Only the tools this agent profile offers (chat, explore,
        /// analyze_document, service, ...), for this deployment's model
        /// (DATA_PLANE_LOCAL_MODEL) with embeddings answering.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Show the remote tool modules: each one's URL, state, tools, last
    /// discovery and last error, as cached in PostgreSQL for every replica.
    Modules {
        /// Discover now (every module, or --module's) and cache the result;
        /// running servers take it up at once.
        #[arg(long)]
        refresh: bool,
        /// Only this module.
        #[arg(long)]
        module: Option<String>,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Create the user if needed and print a bearer token; `token revoke`
    /// invalidates a user's tokens.
    #[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
    Token {
        #[command(subcommand)]
        action: Option<TokenAction>,
        /// The user's email.
        #[arg(long, required = true)]
        user: Option<String>,
        /// Permission level: guest, user, admin or owner [default: user, or the user's current level].
        #[arg(long)]
        role: Option<String>,
        /// Also add the user to this space (created when missing).
        #[arg(long)]
        space: Option<String>,
        /// The user's role in that space: viewer, editor or owner [default: viewer for a new
        /// member; an existing member keeps their role].
        #[arg(long, requires = "space")]
        space_role: Option<String>,
        /// Days until the token expires.
        #[arg(long, default_value_t = 30)]
        days: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenAction {
    /// Invalidate every token issued to the user so far (on every replica,
    /// within a second); tokens printed afterwards work.
    Revoke {
        /// The user's email.
        #[arg(long)]
        email: String,
    },
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let global = cli.global;
    match cli.command.unwrap_or(Command::Serve {
        addr: default_addr(),
        no_migrate: false,
    }) {
        Command::Serve { addr, no_migrate } => serve(&global, &addr, no_migrate).await,
        Command::Migrate => migrate(&global).await,
        Command::Ingest {
            path,
            space,
            source,
            owner,
        } => ingest(&global, &path, &space, source, owner).await,
        Command::Reindex => reindex(&global).await,
        Command::Modules {
            refresh,
            module,
            json,
        } => modules(&global, refresh, module.as_deref(), json).await,
        Command::Tools { json, agent } => tools(json, agent.as_deref(), global.model.is_local()),
        Command::Token {
            action: Some(TokenAction::Revoke { email }),
            ..
        } => revoke(&global, &email).await,
        Command::Token {
            action: None,
            user,
            role,
            space,
            space_role,
            days,
        } => {
            let user = user.context("--user is required")?;
            token(&global, &user, role, space, space_role, days).await
        }
    }
}

fn default_addr() -> String {
    std::env::var("DATA_PLANE_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into())
}

async fn connect(global: &GlobalArgs) -> anyhow::Result<Db> {
    Db::connect(&global.database_url, global.db_pool)
        .await
        .with_context(|| format!("connecting to {}", redact(&global.database_url)))
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..scheme + 3], user, &url[at..])
        }
        _ => url.to_string(),
    }
}

async fn migrate(global: &GlobalArgs) -> anyhow::Result<()> {
    let applied = data_plane_store::migrate::run(&global.owner_url)
        .await
        .with_context(|| format!("migrating {}", redact(&global.owner_url)))?;
    println!("migrations: {applied} applied, schema up to date");
    Ok(())
}

async fn open_embedder(global: &GlobalArgs, db: &Db) -> anyhow::Result<Arc<Embedder>> {
    let embedder =
        Embedder::from_config(&global.embed_config()).context("loading the embedding model")?;
    if let Embedder::Local(local) = &embedder {
        tracing::info!(
            model = local.model_id(),
            arithmetic = local.arithmetic(),
            "local embedding model loaded"
        );
    }
    db.check_embedding_dimension(embedder.dimension()).await?;
    Ok(Arc::new(embedder))
}

fn open_index(global: &GlobalArgs) -> anyhow::Result<KeywordIndex> {
    let dir = global.index_dir();
    KeywordIndex::open_or_create(&dir)
        .with_context(|| format!("opening the keyword index at {}", dir.display()))
}

async fn serve(global: &GlobalArgs, addr: &str, no_migrate: bool) -> anyhow::Result<()> {
    if !no_migrate {
        migrate(global).await?;
    }
    let db = connect(global).await?;
    let embedder = open_embedder(global, &db).await?;
    let index = open_index(global)?;
    let follower = Follower::new(db.clone(), index.clone());

    let jwt = JwtKeys::new(&config::jwt_secret(&global.data_dir)?);
    let services = ServiceTokens::parse(&global.service_tokens)
        .context("reading DATA_PLANE_SERVICE_TOKENS")?;
    let fetch = global.fetch_config()?;
    if !fetch.allow.is_empty() {
        tracing::info!(allow = %global.fetch.fetch_allow, "fetch_web_page may reach these internal hosts");
    }
    let fetcher = Arc::new(Fetcher::new(fetch));
    let web_search = WebSearch::new(&global.web_search.search_config())
        .context("reading the web search configuration")?;
    tracing::info!(providers = ?web_search.configured(), "web search providers configured");
    let mut state = AppState::new(db, index, embedder, jwt, services, fetcher, web_search)?
        .with_chat_limits(
            global.limits.chat_max_concurrent,
            global.limits.chat_turns_per_minute,
        )
        .with_extract_limits(global.extract_limits()?)
        .with_runs(global.runs.runs_config()?)
        .with_allowed_origins(global.allowed_origins()?)
        .with_public_url(global.public_url.as_deref())?;
    if let Some(rerank) = global.rerank.rerank()? {
        tracing::info!(url = %redact(&rerank.reranker.config().url), candidates = rerank.candidates, "search results are reranked");
        state.deps.connect_rerank(rerank);
    }
    if let Some(settings) = global.oidc.settings()? {
        tracing::info!(issuer = %settings.issuer, audience = %settings.audience, "accepting the OpenID provider's tokens");
        let oidc = crate::auth::oidc::Oidc::new(settings)?;
        let warming = oidc.clone();
        tokio::spawn(async move { warming.warm().await });
        state = state.with_oidc(oidc);
    }
    // The follower announces what it applies to the subscriptions here.
    // Until it has caught up with what was written while this replica was
    // away, /readyz says `starting`, so a balancer sends nothing here.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    state.readiness.starting();
    state.runs.pause_claims(true);
    let readiness = state.readiness.clone();
    let caught_up_runs = state.runs.clone();
    let caught_up_index = state.index.clone();
    let follower = follower
        .with_changes(state.document_changes.clone())
        .on_caught_up(move |applied| {
            readiness.index_caught_up();
            caught_up_runs.pause_claims(false);
            tracing::info!(
                applied,
                seq = caught_up_index.last_seq().unwrap_or(0),
                "keyword index caught up"
            );
        });
    let follower_task =
        tokio::spawn(follower.run_batching(stop_rx, Duration::from_millis(global.index_batch_ms)));
    state.deployment.set_local_model(global.model.is_local());
    state.watch_embeddings();
    tracing::info!(
        local_model = global.model.is_local(),
        "deployment facts for agent profiles"
    );
    let modules = global
        .modules
        .modules_config()
        .context("reading the module configuration")?;
    // A rule naming a tool that never passes the gate would never apply:
    // the policy is checked against the gated tools only (every module's
    // tools pass it, known as `module.*` until they are discovered).
    let mut gated: Vec<String> = state
        .registry
        .tools()
        .iter()
        .filter(|t| t.meta.requires_gate)
        .map(|t| t.name.clone())
        .collect();
    gated.extend(modules.modules.iter().map(|m| format!("{}.*", m.name)));
    let gated: Vec<&str> = gated.iter().map(String::as_str).collect();
    if let Some(gate) = global.gate.gate(&gated)? {
        state = state.with_gate(gate)?;
        tracing::info!(
            policy = ?global.gate.gate_policy_file,
            url = ?global.gate.gate_url,
            tools = ?gated,
            "eval gate configured"
        );
    }
    // Modules last: their tools go into the registry the gate is part of.
    state = state.with_modules(modules);
    if !state.modules.is_empty() {
        tracing::info!(modules = ?state.modules.names(), "remote modules configured; discovering in the background");
    }
    state.modules.start();
    // Audit records the database refuses on every retry wait here for a replay.
    state
        .ledger
        .spool_to(global.data_dir.join("audit-spool"))
        .await;
    match global.model.agent_config() {
        Some(mut agent) => {
            tracing::info!(model = %agent.model, url = %agent.base_url, "chat model configured");
            agent.system_prompt = Some(global.model.system_prompt()?);
            if let Some(settings) = global.model.handler_settings() {
                state.connect_model(settings);
            }
            state = state
                .with_agent(agent)
                .context("configuring the chat model")?;
        }
        None => tracing::info!(
            "no chat model configured (DATA_PLANE_MODEL): /v1/chat answers 503, analyze_document and questions to query_documents are off"
        ),
    }
    for tool in state.registry.tools() {
        tracing::info!(
            tool = %tool.name,
            category = ?tool.meta.category,
            definition = %tool.definition_file,
            handler = tool.handler_file,
            "tool loaded"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving");
    // Events are small writes: with Nagle's algorithm on, the first one of a
    // stream waits for the client's delayed ACK (about 40 ms, measured by
    // benches/chat.sh) before it leaves.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let ledger = state.ledger.clone();
    let settings_cache = state.settings_cache.clone();
    let (runs, shutdown) = (state.runs.clone(), state.shutdown.clone());
    let readiness = state.readiness.clone();
    if let Some(metrics_addr) = &global.limits.metrics_addr {
        crate::http::metrics::spawn_listener(metrics_addr, state.clone()).await?;
    }
    let drain = global.runs.drain();
    let (stopping, until) = tokio::sync::watch::channel(None::<tokio::time::Instant>);
    let drain_runs = runs.clone();
    let server =
        axum::serve(listener, crate::http::service(state)).with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!(
                drain_secs = drain.as_secs(),
                "stopping: no new connections; runs go on to their end or are handed over"
            );
            // Not ready: a balancer sends nothing more here. Streams that
            // would stay open end; chat runs end with their streams, as
            // the server waits for open requests.
            readiness.drain();
            drain_runs.drain();
            shutdown.cancel();
            stopping.send_replace(Some(tokio::time::Instant::now() + drain));
        });
    // Open requests may take until the drain ends; chat runs still going
    // then are handed to the other replicas (their streams close, and
    // their clients reattach through the balancer).
    let mut drained = until.clone();
    let drained = async move {
        let at = drained
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|at| *at);
        match at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        served = std::future::IntoFuture::into_future(server) => served?,
        () = drained => {}
    }
    // Chat runs still going (past the drain, or with no reader left to
    // keep a request open) go on elsewhere.
    runs.hand_over(HAND_OVER_RECORDING).await;
    // Tasks have no stream to wait on: they finish by the drain's end, or
    // are stopped.
    let now = tokio::time::Instant::now();
    let left = until.borrow().unwrap_or(now).saturating_duration_since(now);
    runs.finish_calls(left).await;
    // Audit records still queued are written before the process ends.
    ledger.flush().await;
    // Writers of settings stop waiting on this replica.
    settings_cache.end_lease().await;
    let _ = stop_tx.send(true);
    let _ = follower_task.await;
    Ok(())
}

/// How long a stopping replica waits for the events of the runs it hands
/// over to be recorded.
const HAND_OVER_RECORDING: std::time::Duration = std::time::Duration::from_secs(5);

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

async fn ingest(
    global: &GlobalArgs,
    path: &Path,
    space: &str,
    source: Option<String>,
    owner: Option<String>,
) -> anyhow::Result<()> {
    let root = path
        .canonicalize()
        .with_context(|| format!("{} does not exist", path.display()))?;
    let source_name = match source {
        Some(s) => s,
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "files".to_string()),
    };
    let db = connect(global).await?;
    let embedder = open_embedder(global, &db).await?;

    let mut tx = db.begin(Scope::System).await?;
    let (space_row, created) = identity::ensure_space(&mut tx, space).await?;
    let source_row =
        content::ensure_source(&mut tx, space_row.id, &source_name, SourceKind::Files).await?;
    if let Some(email) = owner {
        let user = identity::upsert_user(&mut tx, &email, None).await?;
        identity::add_member(
            &mut tx,
            space_row.id,
            user.id,
            identity::MembershipRole::Owner,
        )
        .await?;
    }
    tx.commit().await?;
    if created {
        println!("created space {space:?}");
    }

    let files = collect_files(&root)?;
    if files.is_empty() {
        bail!("no files under {}", root.display());
    }
    let base = if root.is_dir() {
        root.clone()
    } else {
        root.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let pipeline = Pipeline::new(db.clone(), embedder).with_limits(global.extract_limits()?);
    let target = Target {
        space_id: space_row.id,
        source_id: source_row.id,
    };
    let progress = Progress::new(files.len());
    let started = Instant::now();
    let mut totals = Totals::default();
    // Files are read as the pipeline asks for them, and the chunks of
    // several are embedded together (docs/ingestion.md).
    let reads = files.iter().map(|file| {
        let rel = file
            .strip_prefix(&base)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        progress.start(&rel);
        (rel, std::fs::read(file))
    });
    pipeline
        .ingest_batch(Scope::System, target, reads, |rel, report| {
            match report {
                Ok(report) => {
                    match report.outcome {
                        Outcome::Created => totals.created += 1,
                        Outcome::Replaced => totals.replaced += 1,
                        Outcome::Unchanged => totals.unchanged += 1,
                    }
                    totals.chunks += report.chunks;
                    totals.embed += report.embed_time;
                }
                Err(e) => {
                    totals.failed += 1;
                    progress.error(rel, &e.to_string());
                }
            }
            progress.done();
        })
        .await
        .context("the ingest stopped (the files reported before were stored)")?;
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "ingested {} files into {space}/{source_name} in {secs:.1}s: {} new, {} replaced, {} unchanged, {} failed; {} chunks embedded in {:.1}s",
        files.len(),
        totals.created,
        totals.replaced,
        totals.unchanged,
        totals.failed,
        totals.chunks,
        totals.embed.as_secs_f64()
    );
    if totals.failed > 0 && totals.failed == files.len() {
        bail!("every file failed");
    }
    Ok(())
}

#[derive(Default)]
struct Totals {
    created: usize,
    replaced: usize,
    unchanged: usize,
    failed: usize,
    chunks: usize,
    embed: Duration,
}

/// Regular files under `root` (or `root` itself), sorted, hidden entries skipped.
fn collect_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if root.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
    {
        let entry = entry.with_context(|| format!("walking {}", root.display()))?;
        if entry.file_type().is_file() {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

/// A progress bar on a terminal; otherwise a line every tenth of the files,
/// at most 50 apart (logs, CI, `make run`).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    done: std::cell::Cell<usize>,
}

impl Progress {
    fn new(total: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} files, eta {eta} {wide_msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Progress {
            bar,
            total,
            done: std::cell::Cell::new(0),
        }
    }
    fn start(&self, name: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(name.to_string());
        }
    }
    fn error(&self, name: &str, message: &str) {
        let line = format!("skipped {name}: {message}");
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
    fn done(&self) {
        let n = self.done.get() + 1;
        self.done.set(n);
        match &self.bar {
            Some(bar) => bar.inc(1),
            None if n.is_multiple_of((self.total / 10).clamp(1, 50)) || n == self.total => {
                eprintln!("progress: {n}/{} files", self.total)
            }
            None => {}
        }
    }
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

async fn reindex(global: &GlobalArgs) -> anyhow::Result<()> {
    let db = connect(global).await?;
    let index = open_index(global)?;
    let started = Instant::now();
    let follower = Follower::new(db, index.clone());
    let chunks = follower
        .rebuild()
        .await
        .context("rebuilding the keyword index")?;
    println!(
        "rebuilt the keyword index: {chunks} chunks, up to log seq {}, in {:.1}s",
        index.last_seq().unwrap_or(0),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn token(
    global: &GlobalArgs,
    email: &str,
    role: Option<String>,
    space: Option<String>,
    space_role: Option<String>,
    days: u64,
) -> anyhow::Result<()> {
    let permission: Option<Permission> = role.as_deref().map(str::parse).transpose()?;
    let space_role: Option<MembershipRole> = space_role.as_deref().map(str::parse).transpose()?;
    let db = connect(global).await?;
    let mut tx = db.begin(Scope::System).await?;
    let user = identity::upsert_user(&mut tx, email, permission).await?;
    if let Some(space) = space {
        let (space, _) = identity::ensure_space(&mut tx, &space).await?;
        let current = identity::membership_role(&mut tx, space.id, user.id).await?;
        // A token for reading is the default: write and own only when asked.
        match (space_role, current) {
            (Some(role), _) => identity::add_member(&mut tx, space.id, user.id, role).await?,
            (None, None) => {
                identity::add_member(&mut tx, space.id, user.id, MembershipRole::Viewer).await?
            }
            (None, Some(_)) => {}
        }
    }
    let version = identity::token_version(&mut tx, user.id).await?;
    tx.commit().await?;
    let jwt = JwtKeys::new(&config::jwt_secret(&global.data_dir)?);
    let token = jwt.issue_with_version(
        user.id,
        &user.email,
        user.permission,
        version,
        Duration::from_secs(days * 86_400),
    )?;
    println!("{token}");
    Ok(())
}

async fn revoke(global: &GlobalArgs, email: &str) -> anyhow::Result<()> {
    let db = connect(global).await?;
    let mut tx = db.begin(Scope::System).await?;
    let Some(version) = identity::revoke_tokens(&mut tx, email).await? else {
        bail!("no user with email {email:?}");
    };
    tx.commit().await?;
    println!("revoked every token of {email} issued so far (token version is now {version})");
    Ok(())
}

/// `data-plane modules`: the modules as the cache holds them, or as a
/// discovery made now finds them.
async fn modules(
    global: &GlobalArgs,
    refresh: bool,
    only: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let config = global
        .modules
        .modules_config()
        .context("reading the module configuration")?;
    if config.modules.is_empty() {
        println!("no modules configured (DATA_PLANE_MODULES, DATA_PLANE_MODULES_FILE)");
        return Ok(());
    }
    let db = connect(global).await?;
    let registry = Arc::new(data_plane_handlers::offline_registry()?);
    let modules = data_plane_modules::Modules::new(config, registry, db);
    let statuses = if refresh {
        modules.refresh(only).await?
    } else {
        modules.read_cache().await;
        let all = modules.status();
        match only {
            None => all,
            Some(name) => {
                let one: Vec<_> = all.into_iter().filter(|m| m.name == name).collect();
                if one.is_empty() {
                    bail!(data_plane_modules::ModuleError::Unknown {
                        name: name.to_string(),
                        known: modules.names(),
                    });
                }
                one
            }
        }
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "modules": statuses }))?
        );
        return Ok(());
    }
    for m in &statuses {
        let slow = if m.slow { ", slow" } else { "" };
        println!(
            "{}  {}  [{}{slow}, {} ms per call]",
            m.name, m.url, m.state, m.timeout_ms
        );
        if let Some(name) = &m.manifest_name {
            println!(
                "    manifest: {name} {}",
                m.version.as_deref().unwrap_or("(no version)")
            );
        }
        match m.fetched_at {
            Some(at) => println!("    discovered: {at}"),
            None => println!("    discovered: never"),
        }
        if let Some(error) = &m.last_error {
            println!("    last error: {error}");
        }
        println!(
            "    tools: {}",
            if m.tools.is_empty() {
                "none".to_string()
            } else {
                m.tools.join(", ")
            }
        );
        for s in &m.skipped {
            println!("    left out: {s}");
        }
    }
    Ok(())
}

/// Prints the registry without connecting to anything: the handlers are
/// joined with their definitions exactly as at start-up.
fn tools(as_json: bool, agent: Option<&str>, local_model: bool) -> anyhow::Result<()> {
    let registry = data_plane_handlers::offline_registry()?;
    let deployment = data_plane_registry::Deployment {
        local_model,
        embedding_ok: true,
    };
    let allowed = match agent {
        Some(name) => Some(
            registry
                .resolve_profile(name, deployment)
                .map_err(|e| anyhow::anyhow!("--agent: {e}"))?,
        ),
        None => None,
    };
    let every = registry.tools();
    let shown: Vec<&Arc<data_plane_registry::ToolEntry>> = every
        .iter()
        .filter(|t| allowed.as_ref().is_none_or(|a| a.contains(&t.name)))
        .collect();
    let profile = agent.and_then(|name| registry.profile(name));
    if as_json {
        let all: Vec<serde_json::Value> = shown
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "definition_file": t.definition_file,
                    "handler_file": t.handler_file,
                    "metadata": t.metadata(),
                    "definition": *t.definition,
                })
            })
            .collect();
        let document = match profile {
            Some(p) => serde_json::json!({ "agent": p, "tools": all }),
            None => serde_json::json!(all),
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(());
    }
    if let Some(p) = profile {
        println!("agent profile {} ({})", p.name(), p.file);
        println!("    {}", p.spec.description);
        println!(
            "    model: {}; tool search: {}; tool mode: {:?}\n",
            if local_model { "local" } else { "not local" },
            p.spec.tool_search,
            p.spec.tool_mode
        );
    }
    for t in shown {
        let m = &t.meta;
        println!(
            "{}  ({:?}, {:?} cost, needs {:?})",
            t.name, m.category, m.cost, m.permission
        );
        println!("    annotations: {}", t.annotations.flags());
        println!("    {}", m.short_description);
        println!("    offered when: {}", m.available_when);
        if !m.aliases.is_empty() {
            println!("    aliases: {}", m.aliases.join(", "));
        }
        println!("    timeout: {} ms", m.timeout.as_millis());
        println!("    {} + {}", t.definition_file, t.handler_file);
        println!("{}\n", serde_json::to_string_pretty(&t.definition)?);
    }
    Ok(())
}
