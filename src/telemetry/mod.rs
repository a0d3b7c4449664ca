//! Observability: metric names ([`names`]), recording ([`record`]), W3C trace context in and
//! out ([`context`]), the spans of a request ([`span`]) and, with the `otlp` feature, the OTLP
//! trace exporter (`otlp`).
//!
//! Both halves are off until switched on, and cost one relaxed atomic load per message while
//! off: metrics once the admin listener installs its recorder ([`record::enable`]), span
//! attributes and trace-context propagation once a trace exporter is set up
//! ([`enable_tracing`]).
//!
//! ```
//! use mcp_budget::telemetry::{names, record};
//! // A no-op until a recorder is installed (`[admin] http`).
//! record::search(0);
//! assert_eq!(names::SEARCHES, "mcp_budget_searches_total");
//! ```

pub mod context;
pub mod http_parent;
pub mod names;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod rank;
pub mod record;
pub mod span;

use std::sync::atomic::{AtomicBool, Ordering};

static TRACING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (set up by whoever installs the exporter): the request span
/// carries the MCP attributes and trace context travels in and out.
#[must_use]
pub fn tracing_on() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Turns on span attributes and trace-context propagation (call once the exporter is in the
/// subscriber).
pub fn enable_tracing() {
    TRACING.store(true, Ordering::Relaxed);
}
