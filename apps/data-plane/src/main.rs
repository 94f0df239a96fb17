//! The `data-plane` binary: command-line entry point and sub-commands.

use clap::Parser;
use data_plane::{cli, config};

fn main() -> std::process::ExitCode {
    // A .env file beside the working directory fills in unset variables.
    let _ = dotenvy::dotenv();
    let args = cli::Cli::parse();
    config::init_tracing(&args.global);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
