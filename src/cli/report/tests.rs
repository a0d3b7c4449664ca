use super::*;

fn sonnet(tools: usize, before: usize) -> Why {
    Why {
        model: "claude-sonnet-4-5".into(),
        cap: Some(20),
        ..Why::fitting(tools, before, 4000, 200_000)
    }
}

#[test]
fn a_fitting_plan_says_so_and_asks_for_nothing() {
    let w = sonnet(19, 2583);
    assert_eq!(w.decided_by(), "fits");
    assert_eq!(
        reason(&w),
        "every tool in full (19 tools, 2583 tokens) fits the budget of 4000 tokens (2% of \
         claude-sonnet-4-5's 200000) and the cap of 20 tools"
    );
    assert_eq!(advice(&w), None);
}

#[test]
fn compression_names_the_token_budget_and_the_threshold_that_lists_in_full() {
    let w = Why {
        rung: "uniform".into(),
        level: Some("medium".into()),
        tokens_after: 3500,
        ..sonnet(19, 9000)
    };
    assert_eq!(w.decided_by(), "token_budget");
    assert_eq!(
        reason(&w),
        "token budget: all 19 tools in full take 9000 tokens > the budget of 4000 tokens (2% of \
         claude-sonnet-4-5's 200000); compressed to medium they take 3500"
    );
    assert_eq!(
        advice(&w).unwrap(),
        "[budget] threshold_percent = 4.5 lists every tool in full (9000 tokens)"
    );
    let huge = Why {
        tokens_before: 90_000,
        ..w
    };
    assert!(
        advice(&huge)
            .unwrap()
            .starts_with("no threshold_percent up to 5")
    );
}

#[test]
fn deferral_says_whether_the_cap_or_the_tokens_decided() {
    let capped = Why {
        rung: "hybrid".into(),
        exposed: 17,
        pinned: 2,
        tokens_after: 3900,
        tokens_smallest: Some(6000),
        ..sonnet(41, 20_000)
    };
    assert_eq!(capped.decided_by(), "tool_cap");
    assert_eq!(
        reason(&capped),
        "tool cap: 41 tools > cap 20 for claude-sonnet-4-5; 17 listed (2 pinned) + 3 meta-tools, \
         24 deferred behind search (3900 tokens)"
    );
    let advice_text = advice(&capped).unwrap();
    assert!(
        advice_text.starts_with("[budget] max_tools = 41 and threshold_percent = 3 "),
        "{advice_text}"
    );
    let too_big = Why {
        tokens_smallest: Some(18_500),
        ..capped.clone()
    };
    assert!(
        advice(&too_big).unwrap().ends_with(
            "no max_tools lists all 41 tools, since even compressed they take 18500 tokens, \
             more than threshold_percent = 5 allows"
        ),
        "{}",
        advice(&too_big).unwrap()
    );
    let tokens = Why {
        tools: 15,
        exposed: 5,
        ..capped
    };
    assert_eq!(tokens.decided_by(), "token_budget");
    assert!(
        reason(&tokens)
            .starts_with("token budget: even compressed to extreme all 15 tools take 6000 tokens"),
        "{}",
        reason(&tokens)
    );
    assert!(
        advice(&tokens)
            .unwrap()
            .starts_with("[budget] threshold_percent = 3 lists all 15")
    );
}

#[test]
fn pins_and_fixed_choices_are_named() {
    let pins = Why {
        rung: "hybrid".into(),
        exposed: 10,
        pinned: 10,
        tokens_after: 5000,
        fits: false,
        ..sonnet(15, 9000)
    };
    assert_eq!(pins.decided_by(), "pins");
    assert!(reason(&pins).starts_with("pins: "), "{}", reason(&pins));
    assert!(reason(&pins).ends_with("the 10 pinned tools are always listed in full"));
    assert!(advice(&pins).unwrap().starts_with("pin fewer tools"));
    let fixed = Why {
        rung: "search".into(),
        exposed: 0,
        fixed: Some("mode = \"progressive\"".into()),
        ..sonnet(5, 900)
    };
    assert_eq!(fixed.decided_by(), "fixed");
    assert!(reason(&fixed).starts_with("the policy fixes mode = \"progressive\""));
    // What progressive lists, not "0 tools listed at -".
    assert!(
        reason(&fixed).ends_with("0 listed + 3 meta-tools, 5 deferred behind search (900 tokens)"),
        "{}",
        reason(&fixed)
    );
    assert!(
        advice(&fixed)
            .unwrap()
            .starts_with("remove [budget] mode = \"progressive\"")
    );
    let off = Why {
        enabled: false,
        ..sonnet(5, 900)
    };
    assert!(reason(&off).starts_with("the budget is off"));
}

#[test]
fn a_fixed_level_with_tools_deferred_blames_the_cap_not_the_level() {
    // `-c medium` (or `[budget] level = "medium"`) on 26 tools under a 20-tool cap: the cap
    // deferred the tools, the level only says how the listed ones read.
    let w = Why {
        rung: "hybrid".into(),
        level: Some("medium".into()),
        exposed: 17,
        tokens_after: 3000,
        fixed: Some("level = \"medium\"".into()),
        ..sonnet(26, 9000)
    };
    assert_eq!(w.decided_by(), "tool_cap");
    assert!(
        reason(&w).starts_with("tool cap: 26 tools > cap 20"),
        "{}",
        reason(&w)
    );
}

#[test]
fn on_the_command_line_the_advice_names_flags_not_policy_keys() {
    let capped = Why {
        rung: "hybrid".into(),
        exposed: 17,
        tokens_after: 3900,
        tokens_smallest: Some(6000),
        command_line: true,
        ..sonnet(41, 20_000)
    };
    let text = advice(&capped).unwrap();
    assert!(
        text.starts_with("a policy file with [budget] max_tools = 41 (`mcp-budget init` writes one) and --budget-percent 3 "),
        "{text}"
    );
    let tokens = Why {
        rung: "uniform".into(),
        level: Some("medium".into()),
        tokens_after: 3500,
        command_line: true,
        ..sonnet(19, 9000)
    };
    assert!(
        advice(&tokens)
            .unwrap()
            .starts_with("--budget-percent 4.5 lists every tool in full")
    );
    let fixed = Why {
        rung: "search".into(),
        exposed: 0,
        fixed: Some("mode = \"progressive\"".into()),
        command_line: true,
        ..sonnet(5, 900)
    };
    assert!(reason(&fixed).starts_with("the command line fixes mode = \"progressive\""));
    assert_eq!(
        advice(&fixed).unwrap(),
        "--mode auto lists the tools directly when they fit"
    );
}
