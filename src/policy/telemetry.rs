//! `[telemetry]` (log format, OTLP trace export) and `[admin]` (the metrics and health
//! listener).
//!
//! ```toml
//! [telemetry]
//! log_format = "json"                       # "text" (default) | "json"
//! otlp_endpoint = "http://127.0.0.1:4318"   # OTLP/HTTP base URL; default: OTEL_* env, else off
//! service_name = "mcp-budget"               # default: OTEL_SERVICE_NAME, else "mcp-budget"
//! sample_ratio = 0.25                       # of root spans; default: OTEL_TRACES_SAMPLER*, else 1
//!
//! [admin]
//! http = "127.0.0.1:9464"                   # /metrics /healthz /readyz /status; default: off
//! ```
//!
//! The standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_SERVICE_NAME` and `OTEL_TRACES_SAMPLER(_ARG)` variables apply where a key is not set.

use std::net::SocketAddr;

use serde::Deserialize;

use super::problems::{At, Section};

/// `[telemetry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawTelemetry {
    /// `"text"` or `"json"` (one object per line). Default: `"text"`; `--log-format` overrides.
    pub log_format: Option<String>,
    /// OTLP/HTTP endpoint traces are sent to (`/v1/traces` is appended to a base URL).
    /// Default: none (the `OTEL_EXPORTER_OTLP_*` variables, else no export).
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans. Default: `OTEL_SERVICE_NAME`, else `mcp-budget`.
    pub service_name: Option<String>,
    /// Share of root spans sampled, 0 to 1 (child spans follow their parent). Default:
    /// `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`, else 1.
    pub sample_ratio: Option<f64>,
}

/// `[admin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RawAdmin {
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`, `/status`), e.g.
    /// `"127.0.0.1:9464"`. Default: none (no listener, no metrics recorded).
    pub http: Option<String>,
    /// Host names accepted in the `Host` header besides `localhost`, `127.0.0.1` and `[::1]`
    /// (say the name a Prometheus or a kubelet uses). Default: none.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines (tracing's default format).
    #[default]
    Text,
    /// One JSON object per line (fields flattened, span context included).
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("{other:?} is not one of \"text\", \"json\"")),
        }
    }
}

/// `[telemetry]`, validated.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TelemetryPolicy {
    /// The log format (`None`: not set in the policy; the flag or the default decides).
    pub log_format: Option<LogFormat>,
    /// The OTLP/HTTP endpoint, when the policy names one.
    pub otlp_endpoint: Option<String>,
    /// `service.name`, when the policy names one.
    pub service_name: Option<String>,
    /// The root sampling ratio, when the policy sets one.
    pub sample_ratio: Option<f64>,
}

/// `[admin]`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct AdminPolicy {
    /// Where the admin listener binds; `None`: no admin listener.
    pub http: Option<SocketAddr>,
    /// Extra host names accepted in `Host`.
    pub allowed_hosts: Vec<String>,
}

impl Section for RawTelemetry {
    type Valid = TelemetryPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> TelemetryPolicy {
        let log_format = at.parse("log_format", self.log_format.as_deref(), str::parse);
        if let Some(url) = &self.otlp_endpoint {
            match url.parse::<http::Uri>() {
                Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => {}
                _ => at.push_at(
                    "otlp_endpoint",
                    format!(
                        "\"{}\" is not an http(s) URL such as http://127.0.0.1:4318",
                        crate::redact::Url(url)
                    ),
                ),
            }
        }
        if self
            .service_name
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            at.push_at("service_name", "must not be empty");
        }
        if let Some(r) = self.sample_ratio {
            if !(0.0..=1.0).contains(&r) {
                at.push_at("sample_ratio", format!("{r} is not between 0 and 1"));
            }
        }
        TelemetryPolicy {
            log_format,
            otlp_endpoint: self.otlp_endpoint,
            service_name: self.service_name,
            sample_ratio: self.sample_ratio,
        }
    }
}

impl Section for RawAdmin {
    type Valid = AdminPolicy;
    type Context<'c> = ();

    fn validate(self, (): (), mut at: At<'_>) -> AdminPolicy {
        let http = at.parse("http", self.http.as_deref(), |a| {
            a.parse::<SocketAddr>()
                .map_err(|e| format!("not a socket address such as 127.0.0.1:9464: {e}"))
        });
        AdminPolicy {
            http,
            allowed_hosts: self.allowed_hosts,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{ConfigError, Policy};

    fn problems(text: &str) -> Vec<String> {
        match Policy::from_toml_str(text, "t.toml") {
            Err(ConfigError::Invalid { problems, .. }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_off() {
        let policy = Policy::from_toml_str("version = 1\n", "t.toml").unwrap();
        assert_eq!(policy.admin.http, None);
        assert_eq!(policy.telemetry, super::TelemetryPolicy::default());
    }

    #[test]
    fn every_problem_is_reported_with_its_line() {
        let shown = problems(
            "version = 1\n[telemetry]\nlog_format = \"xml\"\notlp_endpoint = \"udp://x\"\n\
             service_name = \" \"\nsample_ratio = 1.5\n[admin]\nhttp = \"nine\"\n",
        );
        assert_eq!(
            shown,
            [
                "line 3: telemetry.log_format: \"xml\" is not one of \"text\", \"json\"",
                "line 4: telemetry.otlp_endpoint: \"udp://x\" is not an http(s) URL such as http://127.0.0.1:4318",
                "line 5: telemetry.service_name: must not be empty",
                "line 6: telemetry.sample_ratio: 1.5 is not between 0 and 1",
                "line 8: admin.http: not a socket address such as 127.0.0.1:9464: invalid socket address syntax",
            ]
        );
    }

    #[test]
    fn valid_sections_are_kept() {
        let policy = Policy::from_toml_str(
            "version = 1\n[telemetry]\nlog_format = \"json\"\notlp_endpoint = \"http://127.0.0.1:4318\"\n\
             sample_ratio = 0.5\n[admin]\nhttp = \"127.0.0.1:9464\"\n\
             [[upstream]]\nname = \"a\"\ncommand = \"x\"\nrequired = false\n\
             [[upstream]]\nname = \"b\"\ncommand = \"y\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(policy.telemetry.log_format, Some(super::LogFormat::Json));
        assert_eq!(policy.telemetry.sample_ratio, Some(0.5));
        assert_eq!(policy.admin.http, Some("127.0.0.1:9464".parse().unwrap()));
        let required: Vec<bool> = policy.upstreams.iter().map(|u| u.required).collect();
        assert_eq!(required, [false, true]);
    }
}
