use std::time::Duration;

use super::{Action, FIRST_BACKOFF, HEALTHY_RUN, Lifecycle, MAX_BACKOFF, Step};

const BRIEF: Duration = Duration::from_millis(10);

fn retry(action: Action) -> (String, Duration) {
    match action {
        Action::Retry { reason, retry_in } => (reason, retry_in),
        other => panic!("expected a retry, got {other:?}"),
    }
}

#[test]
fn a_ready_connection_serves_and_its_end_takes_it_down() {
    let mut life = Lifecycle::default();
    assert_eq!(life.on(Step::Ready, BRIEF), Action::Serve);
    let (reason, retry_in) =
        retry(life.on(Step::Lost("the process closed its output".into()), BRIEF));
    assert_eq!(reason, "the process closed its output");
    assert_eq!(retry_in, FIRST_BACKOFF);
}

#[test]
fn failures_in_a_row_back_off_up_to_the_cap() {
    let mut life = Lifecycle::default();
    let waits: Vec<Duration> = (0..8)
        .map(|_| retry(life.on(Step::Failed("refused".into()), BRIEF)).1)
        .collect();
    let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
    assert_eq!(ms, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    assert_eq!(waits.last(), Some(&MAX_BACKOFF));
}

#[test]
fn a_healthy_run_starts_the_ladder_again() {
    let mut life = Lifecycle::default();
    for _ in 0..5 {
        let _ = life.on(Step::Failed("refused".into()), BRIEF);
    }
    assert_eq!(life.on(Step::Ready, BRIEF), Action::Serve);
    let (_, retry_in) = retry(life.on(Step::Lost("gone".into()), HEALTHY_RUN));
    assert_eq!(retry_in, FIRST_BACKOFF);
    // A short-lived connection does not.
    let (_, retry_in) = retry(life.on(Step::Lost("gone".into()), BRIEF));
    assert_eq!(retry_in, FIRST_BACKOFF * 2);
}

#[test]
fn failed_reconnections_still_say_the_connection_was_lost() {
    let mut life = Lifecycle::default();
    let _ = life.on(Step::Ready, BRIEF);
    let _ = life.on(Step::Lost("the connection was lost".into()), BRIEF);
    let (reason, _) = retry(life.on(Step::Failed("connection refused".into()), BRIEF));
    assert_eq!(
        reason,
        "the connection was lost; reconnecting failed: connection refused"
    );
    // The loss is remembered, not chained.
    let (reason, _) = retry(life.on(Step::Failed("timed out".into()), BRIEF));
    assert_eq!(
        reason,
        "the connection was lost; reconnecting failed: timed out"
    );
    // A first start that fails says only why.
    let mut fresh = Lifecycle::default();
    let (reason, _) = retry(fresh.on(Step::Failed("cannot start: no such file".into()), BRIEF));
    assert_eq!(reason, "cannot start: no such file");
}

#[test]
fn shutdown_stops_from_any_state() {
    let mut life = Lifecycle::default();
    assert_eq!(life.on(Step::Shutdown, BRIEF), Action::Stop);
    let _ = life.on(Step::Ready, BRIEF);
    assert_eq!(life.on(Step::Shutdown, BRIEF), Action::Stop);
    let _ = life.on(Step::Failed("x".into()), BRIEF);
    assert_eq!(life.on(Step::Shutdown, BRIEF), Action::Stop);
}
