//! AFL++ target `policy`: see [`mcp_budget_fuzz::checks::policy`].

fn main() {
    mcp_budget_fuzz::checks::warm_up();
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::policy(data));
}
