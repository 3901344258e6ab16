//! Interop: third-party clients (Python, kcat, Go, Java, JavaScript and Kafka's tools)
//! against `baton-broker`, and Baton against Apache Kafka, one binary so the
//! tool setup (`baton_testkit::tools`) and the helpers compile once.

mod apache_kafka;
mod apache_kafka_util;
mod interop;
mod interop_compaction;
mod interop_confluent_txn;
mod interop_go;
mod interop_go_util;
mod interop_java;
mod interop_java_util;
mod interop_js;
mod interop_txn_util;
