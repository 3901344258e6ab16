//! Registering handles at the installed recorder, with the client's labels.

use ::metrics::{Key, Label, Level, Metadata};

/// Where the metrics come from (the facade's metadata).
const TARGET: &str = "baton_kafka";

fn metadata() -> &'static Metadata<'static> {
    static META: Metadata<'static> = Metadata::new(TARGET, Level::INFO, Some(module_path!()));
    &META
}

/// The `client_id` label of a client's metrics.
pub(crate) fn client_label(client_id: &str) -> Label {
    Label::new("client_id", client_id.to_string())
}

/// Registers a counter under `name` with `labels` at the installed recorder.
pub(crate) fn counter(name: &'static str, labels: Vec<Label>) -> ::metrics::Counter {
    ::metrics::with_recorder(|r| r.register_counter(&Key::from_parts(name, labels), metadata()))
}

/// Registers a gauge under `name` with `labels` at the installed recorder.
pub(crate) fn gauge(name: &'static str, labels: Vec<Label>) -> ::metrics::Gauge {
    ::metrics::with_recorder(|r| r.register_gauge(&Key::from_parts(name, labels), metadata()))
}

/// Registers a histogram under `name` with `labels` at the installed recorder.
pub(crate) fn histogram(name: &'static str, labels: Vec<Label>) -> ::metrics::Histogram {
    ::metrics::with_recorder(|r| r.register_histogram(&Key::from_parts(name, labels), metadata()))
}

/// A duration in milliseconds, for histograms.
pub(crate) fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
