//! AFL++ target `param_headers`: see [`mcp_budget_fuzz::checks::param_headers_target`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::param_headers_target(data));
}
