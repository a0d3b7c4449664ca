//! AFL++ target `stdio_lines`: see [`mcp_budget_fuzz::checks::stdio_lines`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::stdio_lines(data));
}
