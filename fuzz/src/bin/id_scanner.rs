//! AFL++ target `id_scanner`: see [`mcp_budget_fuzz::checks::id_scanner`].

fn main() {
    afl::fuzz!(|data: &[u8]| mcp_budget_fuzz::checks::id_scanner(data));
}
