//! Chat runs' flags: grace period, approval timeout, event limit, retention,
//! the lease another replica takes a run over after, the drain of a
//! stopping replica.

use std::time::Duration;

use clap::Args;

/// Chat runs (docs/runs.md): how long one outlives its client, waits for
/// an approval, and is kept.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Seconds a run goes on after its last client went away, waiting for
    /// one to reattach.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_GRACE_SECS",
        global = true,
        default_value_t = 30
    )]
    pub run_grace_secs: u64,

    /// Seconds a call waits for a person's approval before it counts as
    /// denied.
    #[arg(
        long,
        env = "DATA_PLANE_APPROVAL_TIMEOUT_SECS",
        global = true,
        default_value_t = 600
    )]
    pub approval_timeout_secs: u64,

    /// Events one run may send before it is stopped.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_MAX_EVENTS",
        global = true,
        default_value_t = 20_000
    )]
    pub run_max_events: u64,

    /// Hours a finished run's events are kept for replay.
    #[arg(
        long,
        env = "DATA_PLANE_RUN_RETENTION_HOURS",
        global = true,
        default_value_t = 168
    )]
    pub run_retention_hours: u64,

    /// Seconds a replica may go without renewing its hold on a run before
    /// another takes the run over (it renews every third of this).
    #[arg(
        long,
        env = "DATA_PLANE_RUN_LEASE_SECS",
        global = true,
        default_value_t = 10
    )]
    pub run_lease_secs: u64,

    /// Seconds a stopping replica (SIGTERM) lets its chat runs and tasks
    /// go on to their end; chat runs still going then are handed to the
    /// other replicas, tasks are stopped.
    #[arg(
        long,
        env = "DATA_PLANE_DRAIN_SECS",
        global = true,
        default_value_t = 20
    )]
    pub drain_secs: u64,
}

impl RunArgs {
    /// How long a stopping replica lets its runs go on (`DATA_PLANE_DRAIN_SECS`).
    pub fn drain(&self) -> Duration {
        Duration::from_secs(self.drain_secs)
    }

    pub fn runs_config(&self) -> anyhow::Result<data_plane_runs::RunsConfig> {
        for (value, name) in [
            (
                self.approval_timeout_secs,
                "DATA_PLANE_APPROVAL_TIMEOUT_SECS",
            ),
            (self.run_max_events, "DATA_PLANE_RUN_MAX_EVENTS"),
            (self.run_retention_hours, "DATA_PLANE_RUN_RETENTION_HOURS"),
            (self.run_lease_secs, "DATA_PLANE_RUN_LEASE_SECS"),
        ] {
            anyhow::ensure!(value > 0, "{name} must be above 0");
        }
        Ok(data_plane_runs::RunsConfig {
            grace: Duration::from_secs(self.run_grace_secs),
            approval_timeout: Duration::from_secs(self.approval_timeout_secs),
            max_events: self.run_max_events,
            retention: Duration::from_secs(self.run_retention_hours.saturating_mul(3600)),
            lease: Duration::from_secs(self.run_lease_secs),
        })
    }
}
