//! AFL++ target `message`: see [`mcp_budget_fuzz::checks::message`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::message(data));
}
