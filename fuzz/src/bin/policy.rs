//! AFL++ target `policy`: see [`mcp_budget_fuzz::checks::policy`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::policy(data));
}
