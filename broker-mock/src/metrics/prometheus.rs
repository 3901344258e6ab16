//! The Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE`
//! lines, one sample per line, label values escaped (`\\`, `\"`, `\n`), and
//! histograms as cumulative `_bucket{le=...}` samples with `_sum` and `_count`.

use std::fmt::Write;

use super::api_names::api_name;
use super::snapshot::{BrokerMetrics, ControllerMetrics};

/// The exposition's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Writes one exposition text.
#[derive(Debug, Default)]
pub(crate) struct Text {
    out: String,
}

/// Escapes a label value: backslash, double quote and line feed.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value as Prometheus reads it (`+Inf` for infinity).
fn number(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_owned()
    } else {
        v.to_string()
    }
}

impl Text {
    /// Starts a metric family: its `HELP` and `TYPE` lines.
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample with its labels (`(name, unescaped value)` pairs).
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
        self
    }

    /// A family with a single unlabelled sample.
    pub(crate) fn single(&mut self, name: &str, kind: &str, help: &str, value: u64) -> &mut Self {
        self.family(name, kind, help)
            .sample(name, &[], value as f64)
    }

    /// The samples of one histogram: cumulative `buckets` as `(upper bound,
    /// count)`, then `_sum` and `_count` (the family must be started with
    /// [`Text::family`]).
    pub(crate) fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) -> &mut Self {
        let bucket = format!("{name}_bucket");
        for (le, n) in buckets {
            let le = number(*le);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, *n as f64);
        }
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, count as f64)
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

impl BrokerMetrics {
    /// The Prometheus text exposition of this snapshot (what the node's
    /// endpoint serves).
    pub fn to_prometheus(&self) -> String {
        broker(self)
    }
}

impl ControllerMetrics {
    /// The Prometheus text exposition of this snapshot (what the controller's
    /// endpoint serves).
    pub fn to_prometheus(&self) -> String {
        controller(self)
    }
}

/// A broker node's exposition.
fn broker(m: &BrokerMetrics) -> String {
    let mut t = Text::default();
    let node = m.node_id.to_string();
    let node = node.as_str();
    t.family(
        "baton_broker_requests_total",
        "counter",
        "Requests by API and version (answered, or closing their connection).",
    );
    for r in &m.requests {
        let (api, version) = (api_name(r.api_key), r.version.to_string());
        let labels = [("node", node), ("api", &api), ("version", &version)];
        t.sample("baton_broker_requests_total", &labels, r.requests as f64);
    }
    t.family(
        "baton_broker_request_errors_total",
        "counter",
        "Responses carrying a non-zero error code at the top level or for a partition.",
    );
    for r in &m.requests {
        let (api, version) = (api_name(r.api_key), r.version.to_string());
        let labels = [("node", node), ("api", &api), ("version", &version)];
        t.sample(
            "baton_broker_request_errors_total",
            &labels,
            r.errors as f64,
        );
    }
    t.family(
        "baton_broker_request_latency_seconds",
        "histogram",
        "Time from a request frame read to its response written, by API.",
    );
    for h in &m.latency {
        let api = api_name(h.api_key);
        t.histogram(
            "baton_broker_request_latency_seconds",
            &[("node", node), ("api", &api)],
            &h.buckets,
            h.sum_seconds,
            h.count,
        );
    }
    let counters: [(&str, &str, u64); 10] = [
        (
            "baton_broker_requests_other_total",
            "Requests with an API key outside the counted range.",
            m.other_requests,
        ),
        (
            "baton_broker_bytes_in_total",
            "Bytes read from connections.",
            m.bytes_in,
        ),
        (
            "baton_broker_bytes_out_total",
            "Bytes written to connections.",
            m.bytes_out,
        ),
        (
            "baton_broker_connections_accepted_total",
            "Connections accepted within the limits.",
            m.connections_accepted,
        ),
        (
            "baton_broker_connections_closed_total",
            "Connections closed.",
            m.connections_closed,
        ),
        (
            "baton_broker_isr_shrinks_total",
            "ISR shrinks proposed by this node as leader.",
            m.isr_shrinks,
        ),
        (
            "baton_broker_isr_expands_total",
            "ISR expansions proposed by this node as leader.",
            m.isr_expands,
        ),
        (
            "baton_broker_repairs_completed_total",
            "Corrupt replicas repaired (caught up with the leader again).",
            m.repairs_completed,
        ),
        (
            "baton_broker_group_rebalances_total",
            "Group rebalances: new classic generations and consumer group epochs.",
            m.group_rebalances,
        ),
        (
            "baton_broker_fenced_producers_total",
            "Requests refused because their producer epoch is fenced.",
            m.fenced_producers,
        ),
    ];
    for (name, help, value) in counters {
        t.family(name, "counter", help)
            .sample(name, &[("node", node)], value as f64);
    }
    t.family(
        "baton_broker_corruption_detected_total",
        "counter",
        "Corrupt batches detected, by where the check ran.",
    );
    for (site, n) in &m.corruption_detected {
        let site = site.label();
        t.sample(
            "baton_broker_corruption_detected_total",
            &[("node", node), ("where", &site)],
            *n as f64,
        );
    }
    let gauges: [(&str, &str, u64); 3] = [
        (
            "baton_broker_connections_open",
            "Connections open now.",
            m.connections_open(),
        ),
        (
            "baton_broker_under_replicated_partitions",
            "Partitions led here with fewer in-sync replicas than assigned.",
            m.under_replicated_partitions(),
        ),
        (
            "baton_broker_offline_partitions",
            "Hosted replicas whose partition has no leader.",
            m.offline_partitions,
        ),
    ];
    for (name, help, value) in gauges {
        t.family(name, "gauge", help)
            .sample(name, &[("node", node)], value as f64);
    }
    let partition_gauges: [(&str, &str); 3] = [
        (
            "baton_broker_partition_log_end_offset",
            "The replica's log end offset.",
        ),
        (
            "baton_broker_partition_high_watermark",
            "The replica's high watermark.",
        ),
        (
            "baton_broker_partition_isr_size",
            "In-sync replicas of the partition, as this node knows them.",
        ),
    ];
    for (i, (name, help)) in partition_gauges.into_iter().enumerate() {
        t.family(name, "gauge", help);
        for p in &m.partitions {
            let index = p.partition.to_string();
            let value = [
                p.log_end_offset as f64,
                p.high_watermark as f64,
                p.isr_size as f64,
            ][i];
            let labels = [
                ("node", node),
                ("topic", p.topic.as_str()),
                ("partition", &index),
            ];
            t.sample(name, &labels, value);
        }
    }
    t.finish()
}

/// A cluster controller's exposition.
fn controller(m: &ControllerMetrics) -> String {
    let mut t = Text::default();
    let rows: [(&str, &str, &str, u64); 7] = [
        (
            "baton_controller_leader_elections_total",
            "counter",
            "Partition changes giving a partition a new live leader.",
            m.leader_elections,
        ),
        (
            "baton_controller_unclean_leader_elections_total",
            "counter",
            "Leaders elected from outside the ISR.",
            m.unclean_leader_elections,
        ),
        (
            "baton_controller_isr_shrinks_total",
            "counter",
            "Partition changes removing replicas from an ISR.",
            m.isr_shrinks,
        ),
        (
            "baton_controller_isr_expands_total",
            "counter",
            "Partition changes adding replicas to an ISR.",
            m.isr_expands,
        ),
        (
            "baton_controller_offline_partitions",
            "gauge",
            "Partitions without a leader.",
            m.offline_partitions,
        ),
        (
            "baton_controller_partitions",
            "gauge",
            "Partitions.",
            m.partitions,
        ),
        (
            "baton_controller_active_brokers",
            "gauge",
            "Registered brokers not fenced.",
            m.active_brokers,
        ),
    ];
    for (name, kind, help, value) in rows {
        t.single(name, kind, help, value);
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("line\nbreak"), "line\\nbreak");
        let mut t = Text::default();
        t.family("m", "gauge", "Help with \\ and\nnewline.").sample(
            "m",
            &[("topic", "we\"ird\\\n")],
            1.0,
        );
        assert_eq!(
            t.finish(),
            "# HELP m Help with \\\\ and\\nnewline.\n# TYPE m gauge\nm{topic=\"we\\\"ird\\\\\\n\"} 1\n"
        );
    }

    #[test]
    fn histograms_have_cumulative_buckets_sum_and_count() {
        let mut t = Text::default();
        t.family("lat", "histogram", "Latency.").histogram(
            "lat",
            &[("api", "Fetch")],
            &[(0.5, 1), (1.0, 3), (f64::INFINITY, 4)],
            2.25,
            4,
        );
        assert_eq!(
            t.finish(),
            "# HELP lat Latency.\n# TYPE lat histogram\n\
             lat_bucket{api=\"Fetch\",le=\"0.5\"} 1\n\
             lat_bucket{api=\"Fetch\",le=\"1\"} 3\n\
             lat_bucket{api=\"Fetch\",le=\"+Inf\"} 4\n\
             lat_sum{api=\"Fetch\"} 2.25\n\
             lat_count{api=\"Fetch\"} 4\n"
        );
    }

    #[test]
    fn controller_text_names_every_counter() {
        let text = ControllerMetrics {
            leader_elections: 2,
            isr_shrinks: 1,
            ..Default::default()
        }
        .to_prometheus();
        assert!(text.contains("\nbaton_controller_leader_elections_total 2\n"));
        assert!(text.contains("\nbaton_controller_isr_shrinks_total 1\n"));
        assert_eq!(text.matches("# TYPE").count(), 7);
    }
}
