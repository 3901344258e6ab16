//! Integration tests of the `baton-kafka` client against the in-process broker, one
//! binary so the helpers (`baton_testkit`) compile once. The tests that install
//! a counting `#[global_allocator]` (`client_consumer_bounds.rs`,
//! `client_hostile_broker.rs`) stay in binaries of their own.

mod acl;
mod admin;
mod admin_configs;
mod admin_groups;
mod cancel_every_poll;
mod cancellation;
mod compaction;
mod compression;
mod connection;
mod consumer;
mod delete_records;
mod fetch_session;
mod group;
mod group_consumer_protocol;
mod group_failover;
mod group_interop;
mod group_join;
mod idempotence;
mod large_values;
mod oauth;
mod partition_admin;
mod partitioner;
mod poll_drop;
mod producer;
mod retry;
mod roundtrip;
mod scram_admin;
mod security;
mod service;
mod transactions;
