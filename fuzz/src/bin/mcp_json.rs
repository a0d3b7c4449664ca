//! AFL++ target `mcp_json`: see [`mcp_budget_fuzz::checks::mcp_json`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::mcp_json(data));
}
