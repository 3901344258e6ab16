//! Integration tests of the `baton` client against an in-process `Cluster`:
//! replication, failover, durability, rolling restarts, corruption and the chaos
//! suite, one binary so the helpers (`baton_testkit`) compile once.

mod acl;
mod chaos;
mod chaos_faults;
mod chaos_readme;
mod compaction;
mod corruption_cluster;
mod corruption_consumer;
mod disk_faults;
mod durability;
mod exactly_once;
mod failover;
mod follower_fetch;
mod metrics;
mod reassign;
mod replication;
mod rolling;
mod scram;
mod secured;
mod truncation;
mod unclean;
