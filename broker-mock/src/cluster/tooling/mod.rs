//! Test tooling on a [`Cluster`](super::Cluster): its fault-injection methods
//! (`fault_injection`: partitions, latency, request and disk faults) and corruption
//! injection (`corrupt_inject`: damaging a stored batch, reading corruption events).

mod corrupt_inject;
mod fault_injection;
