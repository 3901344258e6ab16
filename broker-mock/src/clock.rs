//! The wall clock the broker stamps records and group deadlines with.

/// Wall-clock milliseconds since the Unix epoch, from the process's environment
/// ([`baton_env::now_ms`]: the system clock unless a simulation installed its own).
pub(crate) fn now_ms() -> i64 {
    baton_env::now_ms()
}
