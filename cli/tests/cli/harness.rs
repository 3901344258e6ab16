//! The broker a test talks to, and `baton` runs against it with a deadline.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use baton_broker::group::GroupConfig;
use baton_broker::{Broker, BrokerConfig, BrokerHandle};

/// The longest one `baton` run may take before the test fails (generous: a
/// loaded 2-core machine).
const RUN_DEADLINE: Duration = Duration::from_secs(120);

/// An in-process broker, and `baton` pointed at it.
pub struct Baton {
    /// The broker's address.
    pub bootstrap: String,
    broker: Option<BrokerHandle>,
}

/// What one run of `baton` did.
#[derive(Debug)]
pub struct Run {
    /// The exit status.
    pub code: i32,
    /// What it printed.
    pub stdout: String,
    /// What it printed as errors.
    pub stderr: String,
}

impl Run {
    /// Asserts a zero exit status.
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "baton failed: {self:#?}");
        self
    }

    /// Asserts exit status `code`.
    #[track_caller]
    pub fn status(self, code: i32) -> Run {
        assert_eq!(self.code, code, "unexpected status: {self:#?}");
        self
    }

    /// The printed lines.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

impl Baton {
    /// A single broker in memory, groups rebalancing without delay.
    pub async fn start() -> Baton {
        let config = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            groups: GroupConfig {
                initial_rebalance_delay_ms: 0,
                ..GroupConfig::default()
            },
            ..BrokerConfig::in_memory()
        };
        let broker = Broker::start(config).await.expect("the broker starts");
        Baton {
            bootstrap: broker.bootstrap(),
            broker: Some(broker),
        }
    }

    /// Runs `baton ARGS` with an empty stdin.
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with_input(args, b"").await
    }

    /// Runs `baton ARGS` with `input` on stdin.
    pub async fn run_with_input(&self, args: &[&str], input: &[u8]) -> Run {
        run(Some(&self.bootstrap), args, input).await
    }

    /// Stops the broker.
    pub async fn stop(mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await;
        }
    }
}

/// Runs `baton ARGS` (with BATON_BOOTSTRAP set to `bootstrap`, if given) on a
/// blocking thread, killing it past the deadline.
pub async fn run(bootstrap: Option<&str>, args: &[&str], input: &[u8]) -> Run {
    let bootstrap = bootstrap.map(str::to_owned);
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let input = input.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
        cmd.args(&args)
            .env_remove("BATON_BOOTSTRAP")
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(b) = &bootstrap {
            cmd.env("BATON_BOOTSTRAP", b);
        }
        let mut child = cmd.spawn().expect("baton starts");
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let drain = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = r.read_to_end(&mut v);
                String::from_utf8_lossy(&v).into_owned()
            })
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if started.elapsed() > RUN_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "baton {args:?} still ran after {RUN_DEADLINE:?}; stdout {:?}, stderr {:?}",
                    stdout.join().unwrap(),
                    stderr.join().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = writer.join();
        Run {
            code: status.code().unwrap_or(-1),
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    })
    .await
    .expect("the run thread")
}
