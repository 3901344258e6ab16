//! Tests of `baton-broker` over TCP with raw request frames
//! (`baton_testkit::wire`): every API, hostile input, limits, groups, idempotence
//! and the in-process cluster, one binary so the helpers compile once. The tests
//! that install a counting `#[global_allocator]` (`alloc_bound.rs`,
//! `create_topics_limits.rs`) stay in binaries of their own.

mod binary_config;
mod cluster_controller;
mod cluster_leader;
mod cluster_processes;
mod cluster_transactions;
mod compaction;
mod consumer_groups;
mod fetch_from_follower;
mod fetch_sessions;
mod group_failover;
mod groups;
mod idempotence;
mod limits;
mod listeners;
mod malformed;
mod metrics_endpoint;
mod node_clock;
mod oauth;
mod produce_in_place;
mod proxy;
mod retention;
mod sasl;
mod scram_admin;
mod server;
mod tls;
mod transactions;
mod transactions_log;
mod txn_offsets;
mod unsupported_requests;
