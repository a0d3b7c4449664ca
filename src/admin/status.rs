//! Pure: readiness, the `/status` document and the scrape-time gauges, from the gateway's
//! state now.

use serde_json::{Value, json};

use crate::audit::rfc3339;
use crate::catalog::Item;
use crate::gateway::{InstanceState, UpstreamState};
use crate::layer::budget::PlanSummary;
use crate::telemetry::names;
use crate::upstream::Status;

/// `Ok` when every required upstream is ready and its lists are in the catalog; else the ones
/// that are not.
///
/// # Errors
/// The required upstreams that are not ready, as `name: state` lines (`listing` for one whose
/// handshake is done but whose lists are not in yet; no reasons: probes come from anywhere,
/// `/status` tells why).
pub fn readiness(upstreams: &[UpstreamState]) -> Result<(), Vec<String>> {
    let waiting: Vec<String> = upstreams
        .iter()
        .filter(|u| u.required && !(serving(&u.status) && u.listed))
        .map(|u| match u.status {
            Status::Ready => format!("{}: listing", u.name),
            _ => format!("{}: {}", u.name, state(&u.status)),
        })
        .collect();
    if waiting.is_empty() {
        Ok(())
    } else {
        Err(waiting)
    }
}

/// Whether an upstream in `status` serves: ready, or a lazy one not running by design
/// (listed from its manifest, started by the next request).
fn serving(status: &Status) -> bool {
    matches!(status, Status::Ready | Status::Stopped)
}

fn state(status: &Status) -> &'static str {
    match status {
        Status::Ready => "ready",
        Status::Starting => "starting",
        Status::Down(_) => "down",
        Status::Stopped => "stopped",
    }
}

/// The `/status` document: upstreams (state, era, counts), the plan and tokens of the
/// [`names::DEFAULT_PROFILE`] profile, sessions.
#[must_use]
pub fn document(upstreams: &[UpstreamState], plan: Option<&PlanSummary>, sessions: usize) -> Value {
    let profiles: Vec<(String, PlanSummary)> = plan
        .map(|p| (names::DEFAULT_PROFILE.to_owned(), p.clone()))
        .into_iter()
        .collect();
    document_of_profiles(upstreams, plan.is_some().then_some(&profiles[..]), sessions)
}

/// [`document`] with the plan of every profile (`None`: `[budget]` off).
#[must_use]
pub fn document_of_profiles(
    upstreams: &[UpstreamState],
    profiles: Option<&[(String, PlanSummary)]>,
    sessions: usize,
) -> Value {
    let upstreams: Vec<Value> = upstreams.iter().map(upstream_entry).collect();
    let by_name: serde_json::Map<String, Value> = profiles
        .unwrap_or_default()
        .iter()
        .map(|(name, p)| (name.clone(), profile_entry(p)))
        .collect();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "ready": ready(&upstreams),
        "upstreams": upstreams,
        "budget": { "enabled": profiles.is_some(), "profiles": by_name },
        "sessions_active": sessions,
    })
}

fn upstream_entry(u: &UpstreamState) -> Value {
    let reason = match &u.status {
        Status::Down(reason) => Some(reason.as_str()),
        _ => None,
    };
    json!({
        "name": u.name,
        "transport": u.transport,
        "status": state(&u.status),
        "reason": reason,
        "era": u.era,
        "protocol_version": u.protocol_version,
        "required": u.required,
        "tools": u.counts.0,
        "prompts": u.counts.1,
        "resources": u.counts.2,
        "in_flight": u.in_flight,
        "listed": u.listed,
        "share": if u.per_client { "per_client" } else { "global" },
        "instances": u.instances.iter().map(instance_entry).collect::<Vec<_>>(),
        "start": u.life.start,
        "state": u.life.phase.name(),
        "manifest": u.life.manifest.map(crate::upstream::manifest::SavedBy::name),
        "first_use_ms": u.life.first_use.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        "lazy_starts": u.life.starts,
    })
}

fn instance_entry(i: &InstanceState) -> Value {
    json!({
        "client": i.client,
        "status": state(&i.status),
        "started_at": rfc3339(i.started_at),
        "in_flight": i.in_flight,
        "idle_since": i.idle_since.map(rfc3339),
    })
}

fn profile_entry(p: &PlanSummary) -> Value {
    json!({
        "rung": p.rung,
        "tools": p.tools,
        "exposed": p.exposed,
        "tokens_before": p.tokens_before,
        "tokens_after": p.tokens_after,
        "tokens_saved": p.tokens_before.saturating_sub(p.tokens_after),
        "budget_tokens": p.budget_tokens,
        "per_server": p.per_server.iter().map(|s| json!({
            "server": s.server,
            "tools": s.tools,
            "exposed": s.exposed,
            "tokens_before": s.before,
            "tokens_after": s.after,
        })).collect::<Vec<_>>(),
    })
}

/// Whether every rendered upstream entry that is `required` is `ready`.
fn ready(entries: &[Value]) -> bool {
    entries.iter().all(|u| {
        let serving = u["status"] == "ready" || u["status"] == "stopped";
        u["required"] != true || (serving && u["listed"] != false)
    })
}

/// Each profile's last rung, so the rung left behind reads 0.
static LAST_RUNG: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Sets the gauges that are state, not events: upstream up and in flight, per-client
/// instances (of `share = "per_client"` upstreams), tools, tokens
/// before / after / saved per server of the [`names::DEFAULT_PROFILE`] profile, its plan
/// rung, sessions, build info.
pub fn set_gauges(upstreams: &[UpstreamState], plan: Option<&PlanSummary>, sessions: usize) {
    let profiles: Vec<(String, PlanSummary)> = plan
        .map(|p| (names::DEFAULT_PROFILE.to_owned(), p.clone()))
        .into_iter()
        .collect();
    set_gauges_of_profiles(upstreams, &profiles, sessions);
}

/// [`set_gauges`] with the tokens and rung of every profile (empty: `[budget]` off).
#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
pub fn set_gauges_of_profiles(
    upstreams: &[UpstreamState],
    profiles: &[(String, PlanSummary)],
    sessions: usize,
) {
    use metrics::gauge;
    for u in upstreams {
        let up = if u.status == Status::Ready { 1.0 } else { 0.0 };
        gauge!(names::UPSTREAM_UP, names::SERVER => u.name.clone()).set(up);
        for phase in crate::upstream::Phase::ALL {
            let labels = [
                (names::SERVER, u.name.clone()),
                (names::STATE, phase.name().to_owned()),
                (names::START, u.life.start.to_owned()),
            ];
            let on = if phase == u.life.phase { 1.0 } else { 0.0 };
            gauge!(names::UPSTREAM_STATE, &labels).set(on);
        }
        gauge!(names::UPSTREAM_IN_FLIGHT, names::SERVER => u.name.clone()).set(u.in_flight as f64);
        gauge!(names::TOOLS, names::SERVER => u.name.clone()).set(u.counts.0 as f64);
        if u.per_client {
            gauge!(names::UPSTREAM_INSTANCES, names::SERVER => u.name.clone())
                .set(u.instances.len() as f64);
        }
    }
    let mut last = crate::lock::lock(&LAST_RUNG);
    for (profile, p) in profiles {
        for s in &p.per_server {
            let labels = [
                (names::SERVER, s.server.clone()),
                (names::PROFILE, profile.clone()),
            ];
            gauge!(names::TOKENS_BEFORE, &labels).set(s.before as f64);
            gauge!(names::TOKENS_AFTER, &labels).set(s.after as f64);
            gauge!(names::TOKENS_SAVED, &labels).set(s.before.saturating_sub(s.after) as f64);
        }
        match last.iter_mut().find(|(name, _)| name == profile) {
            Some((_, rung)) if *rung != p.rung => {
                let old = std::mem::replace(rung, p.rung.clone());
                gauge!(names::PLAN_RUNG, names::PROFILE => profile.clone(), names::RUNG => old)
                    .set(0.0);
            }
            Some(_) => {}
            None => last.push((profile.clone(), p.rung.clone())),
        }
        gauge!(names::PLAN_RUNG, names::PROFILE => profile.clone(), names::RUNG => p.rung.clone())
            .set(1.0);
    }
    gauge!(names::SESSIONS_ACTIVE).set(sessions as f64);
    gauge!(names::BUILD_INFO, names::VERSION => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Why the guard holds tools (the `reason` label of [`names::TOOLS_QUARANTINED`]).
const QUARANTINE_REASONS: [&str; 3] = ["changed", "unknown", "steering"];

/// The quarantine gauge of each kind, and the reasons it holds that kind for (prompts and
/// templates are pinned, not quarantined for steering).
const QUARANTINE_GAUGES: [(Item, &str, &[&str]); 3] = [
    (Item::Tool, names::TOOLS_QUARANTINED, &QUARANTINE_REASONS),
    (
        Item::Prompt,
        names::PROMPTS_QUARANTINED,
        &["changed", "unknown"],
    ),
    (
        Item::Template,
        names::RESOURCE_TEMPLATES_QUARANTINED,
        &["changed", "unknown"],
    ),
];

/// Sets the quarantine gauges: tools, prompts and resource templates held per upstream and
/// reason, every reason of every upstream (0 once released), so a series never lingers at
/// its last count.
#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
pub fn set_quarantine_gauges(catalog: &crate::catalog::Catalog) {
    for (server, held) in catalog.names().iter().zip(catalog.held()) {
        for (kind, gauge, reasons) in QUARANTINE_GAUGES {
            for &reason in reasons {
                let n = held
                    .quarantined
                    .iter()
                    .filter(|q| q.kind == kind && q.reason == reason)
                    .count();
                metrics::gauge!(gauge, names::SERVER => server.clone(), names::REASON => reason)
                    .set(n as f64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn per_client_instances_are_listed_with_their_client_state_and_times() {
        let mut shared = UpstreamState::new("github", Status::Ready);
        shared.per_client = true;
        let started = UNIX_EPOCH + Duration::from_secs(1_764_614_096);
        let idle = InstanceState::new("alice", Status::Ready, started);
        let mut busy = InstanceState::new("bob", Status::Starting, started);
        (busy.in_flight, busy.idle_since) = (2, None);
        shared.instances = vec![idle, busy];
        let doc = document(&[shared], None, 0);
        let up = &doc["upstreams"][0];
        assert_eq!(up["share"], "per_client");
        assert_eq!(
            up["instances"],
            json!([
                {"client": "alice", "status": "ready", "started_at": "2025-12-01T18:34:56.000Z",
                 "in_flight": 0, "idle_since": "2025-12-01T18:34:56.000Z"},
                {"client": "bob", "status": "starting", "started_at": "2025-12-01T18:34:56.000Z",
                 "in_flight": 2, "idle_since": null},
            ])
        );
    }

    #[test]
    fn a_lazy_upstream_not_running_is_ready_and_shows_its_state_and_manifest() {
        let mut lazy = up("memory", Status::Stopped, true);
        lazy.life.start = "lazy";
        lazy.life.phase = crate::upstream::Phase::ManifestKnown;
        lazy.life.manifest = Some(crate::upstream::manifest::SavedBy::Pin);
        assert_eq!(readiness(std::slice::from_ref(&lazy)), Ok(()));
        let doc = document(&[lazy], None, 0);
        let entry = &doc["upstreams"][0];
        assert_eq!(doc["ready"], true);
        assert_eq!(
            (
                &entry["status"],
                &entry["start"],
                &entry["state"],
                &entry["manifest"]
            ),
            (
                &json!("stopped"),
                &json!("lazy"),
                &json!("manifest_known"),
                &json!("pin")
            )
        );
        assert_eq!(entry["first_use_ms"], Value::Null);
    }

    fn up(name: &str, status: Status, required: bool) -> UpstreamState {
        let mut state = UpstreamState::new(name, status);
        state.required = required;
        state
    }

    #[test]
    fn readiness_waits_for_required_upstreams_only_and_tells_no_reasons() {
        let ups = [
            up("a", Status::Ready, true),
            up("b", Status::Down("secret.internal refused".into()), true),
            up("c", Status::Starting, false),
        ];
        assert_eq!(readiness(&ups), Err(vec!["b: down".to_owned()]));
        assert_eq!(readiness(&ups[..1]), Ok(()));
        assert_eq!(readiness(&[up("c", Status::Starting, false)]), Ok(()));
        // Ready, but the lists of its connection not fetched yet: not ready.
        let mut listing = up("a", Status::Ready, true);
        listing.listed = false;
        assert_eq!(
            readiness(&[listing.clone()]),
            Err(vec!["a: listing".to_owned()])
        );
        assert_eq!(
            document(&[listing], None, 0)["upstreams"][0]["listed"],
            false
        );
    }

    #[test]
    fn the_status_document_tells_states_reasons_and_the_plan() {
        let ups = [up("a", Status::Down("gone".into()), false)];
        let plan = PlanSummary {
            per_server: vec![crate::listing::ServerTokens {
                server: "a".into(),
                tools: 3,
                exposed: 1,
                before: 300,
                after: 80,
            }],
            rung: "hybrid".into(),
            tools: 3,
            exposed: 1,
            tokens_before: 300,
            tokens_after: 120,
            budget_tokens: 150,
        };
        let doc = document(&ups, Some(&plan), 2);
        assert_eq!(doc["upstreams"][0]["share"], "global");
        assert_eq!(doc["upstreams"][0]["instances"], json!([]));
        assert_eq!(doc["ready"], true);
        assert_eq!(doc["upstreams"][0]["status"], "down");
        assert_eq!(doc["upstreams"][0]["reason"], "gone");
        let default = &doc["budget"]["profiles"]["default"];
        assert_eq!(default["tokens_saved"], 180);
        assert_eq!(default["per_server"][0]["tokens_after"], 80);
        assert_eq!(doc["sessions_active"], 2);
        let mut alice = plan.clone();
        alice.tokens_before = 100;
        let profiles = [("default".to_owned(), plan), ("alice".to_owned(), alice)];
        let doc = document_of_profiles(&ups, Some(&profiles), 0);
        let profiles = &doc["budget"]["profiles"];
        assert_eq!(profiles["default"]["tokens_before"], 300);
        assert_eq!(profiles["alice"]["tokens_before"], 100);
        assert_eq!(profiles["alice"]["tokens_saved"], 0);
    }
}
