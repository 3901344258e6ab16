//! `baton`: a command-line Kafka client on the Baton SDK, in the spirit of kcat
//! and Apache Kafka's scripts. `baton --help` lists the commands; the exit
//! statuses are in [`error::Status`].

mod args;
mod check;
mod connect;
mod consume;
mod error;
mod format;
mod groups;
mod produce;
mod time;
mod topics;

use std::process::ExitCode;
use std::time::Duration;

use baton_kafka::Admin;
use clap::Parser;

use args::{Cli, Command};
use error::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; usage errors to stderr
            // with status 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(error::Status::Usage as u8)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("baton: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli));
    // Background tasks (fetchers, metadata refresh) end with the runtime.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("baton: {e}");
            e.exit_code()
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let client = connect::connect(&cli.connection).await?;
    let admin =
        Admin::new(&client).with_operation_timeout(Duration::from_secs(cli.connection.timeout));
    match cli.command {
        Command::Produce(a) => produce::run(&client, a).await,
        Command::Consume(a) => consume::run(&client, a).await,
        Command::Topics(c) => topics::run(&client, &admin, c).await,
        Command::Cluster(c) => topics::cluster(&admin, c).await,
        Command::Groups(c) => groups::run(&client, &admin, c).await,
        Command::Check(a) => check::run(&client, a).await,
    }
}
