//! AFL++ target `modern`: see [`mcp_budget_fuzz::checks::modern`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::modern(data));
}
