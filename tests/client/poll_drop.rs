//! Dropping a future after its k-th poll, for k = 1, 2, 3, …: [`polls`] yields
//! the k to try (every k up to 16, then growing by half each step, and a panic
//! past [`MAX_POLLS`]), and [`poll_at_most`] drives a fresh future with a real
//! waker for at most k polls, waiting between two polls until the future is
//! woken (the runtime meanwhile runs the broker's and the client's tasks, so
//! I/O progresses), and drops it if it is still pending.
//!
//! Each poll after the first therefore follows a wake-up: the k-th poll is the
//! future's k-th point of progress, not a spurious re-poll.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;

/// The most polls any covered future may need; a future still pending after
/// that many wake-ups fails the test.
pub const MAX_POLLS: usize = 2_000;

/// How long a pending future may go unwoken before the test fails (generous: a
/// noisy machine, and a broker answering on its own schedule).
const STALL: Duration = Duration::from_secs(60);

/// The waker handed to the driven future: a wake-up stores a permit.
struct Wakeup(Notify);

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.notify_one();
    }
}

/// Polls `fut` at most `k` times, each poll after the first once it was woken,
/// and returns its output if it completed; otherwise drops it (still pending
/// after its k-th poll) and returns `None`. A future left unwoken for a minute
/// fails the test, naming `what`.
pub async fn poll_at_most<F: Future>(what: &str, k: usize, fut: F) -> Option<F::Output> {
    let wakeup = Arc::new(Wakeup(Notify::new()));
    let waker = Waker::from(wakeup.clone());
    let mut fut = pin!(fut);
    for i in 1..=k {
        // A context per poll, so that this future is `Send` when `fut` is.
        if let Poll::Ready(out) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            eprintln!("{what}: completed at poll {i} (of at most {k})");
            return Some(out);
        }
        if i < k {
            tokio::time::timeout(STALL, wakeup.0.notified())
                .await
                .unwrap_or_else(|_| panic!("{what}: pending after poll {i}, never woken"));
        }
    }
    None
}

/// The numbers of polls to drop a future after, for a loop that stops (with
/// `break`) at the first k whose future completed: 1 to 16, then each half as
/// large again as the last. Asking past [`MAX_POLLS`] panics, naming `what`.
pub fn polls(what: &str) -> Polls {
    Polls {
        what: what.to_string(),
        next: 1,
    }
}

/// The iterator of [`polls`].
pub struct Polls {
    what: String,
    next: usize,
}

impl Iterator for Polls {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let k = self.next;
        assert!(
            k <= MAX_POLLS,
            "{}: still pending after {MAX_POLLS} polls",
            self.what
        );
        self.next = if k < 16 { k + 1 } else { k + k / 2 };
        Some(k)
    }
}
