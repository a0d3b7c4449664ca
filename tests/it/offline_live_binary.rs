//! Offline = live, with the real binary: for each policy in `policies/`, its upstreams replaced
//! by servers that list saved tool lists (`tests/peers/saved_server.py`, tools in shuffled
//! order with shuffled keys), the `tools/list` that `serve` answers equals what `render
//! --policy P --tools …` prints. With the budget on, `render` reads the lists as saved (the
//! plan's canonical order hides the shuffle); with it off, hosts see the upstreams' own order,
//! so `render` reads the shuffled lists the servers serve. The same on the library path (the
//! stack's budget layer, no process): [`offline_live_library`](crate::offline_live_library).

use std::path::Path;

use serde_json::{Map, Value};

use crate::harness::{
    TagGuard, assert_no_leftovers, new_tag, peer_file, root, served_list, venv_bin,
};

/// Saved lists standing in for upstreams; an upstream named after one takes it.
const FIXTURES: [&str; 6] = ["time", "github", "filesystem", "memory", "git", "fetch"];

/// A small deterministic generator (the test must not depend on a crate's RNG).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(self.0 >> 33).unwrap() % n.max(1)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    /// `value` with every object's keys in another order, at every depth.
    fn keys(&mut self, value: Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(String, Value)> = map.into_iter().collect();
                self.shuffle(&mut entries);
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k, self.keys(v)))
                        .collect::<Map<_, _>>(),
                )
            }
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.keys(v)).collect()),
            other => other,
        }
    }
}

fn tools_of(file: &Path) -> Vec<Value> {
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    match saved {
        Value::Object(mut obj) => obj.remove("tools").unwrap().as_array().unwrap().clone(),
        Value::Array(list) => list,
        _ => panic!("not a tools/list result"),
    }
}

/// Writes `orig/<name>.json`, `shuffled/<name>.json` and the policy: `policy`'s text up to its
/// first `[[upstream]]`, then one saved server per upstream name. Returns the policy's path.
fn prepare(dir: &Path, policy: &Path, tag: &str, rng: &mut Lcg) -> (std::path::PathBuf, bool) {
    let loaded = mcp_budget::policy::Policy::load(policy).unwrap();
    let text = std::fs::read_to_string(policy).unwrap();
    let head = text.split("\n[[upstream]]").next().unwrap();
    let mut out = format!("{head}\n");
    let (orig, shuffled) = (dir.join("orig"), dir.join("shuffled"));
    std::fs::create_dir_all(&orig).unwrap();
    std::fs::create_dir_all(&shuffled).unwrap();
    let mut spare = FIXTURES
        .iter()
        .filter(|f| !loaded.upstreams.iter().any(|u| u.name == **f));
    for u in &loaded.upstreams {
        let fixture = if FIXTURES.contains(&u.name.as_str()) {
            u.name.as_str()
        } else {
            spare.next().unwrap()
        };
        let source = root()
            .join("tests/fixtures/toolsets")
            .join(format!("{fixture}.json"));
        let mut tools: Vec<Value> = tools_of(&source).into_iter().map(|t| rng.keys(t)).collect();
        rng.shuffle(&mut tools);
        std::fs::copy(&source, orig.join(format!("{}.json", u.name))).unwrap();
        let served = shuffled.join(format!("{}.json", u.name));
        std::fs::write(&served, serde_json::json!({ "tools": tools }).to_string()).unwrap();
        out += &format!(
            "[[upstream]]\nname = {name:?}\ncommand = {python:?}\nargs = [{server:?}, {file:?}]\n\
             [upstream.env]\nMCPB_IT_TAG = {tag:?}\n\n",
            name = u.name,
            python = venv_bin("python"),
            server = peer_file("saved_server.py"),
            file = served.to_string_lossy(),
        );
    }
    let path = dir.join("policy.toml");
    std::fs::write(&path, out).unwrap();
    (path, loaded.budget.enabled)
}

fn rendered_list(policy: &Path, tools: &Path) -> String {
    let out = crate::harness::cli(["render", "--policy"])
        .arg(policy)
        .arg("--tools")
        .arg(tools)
        .ok();
    // Parsed and written again, as the client side was (key order kept).
    out.json().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_prints_what_serve_lists_for_every_policy() {
    let mut policies: Vec<_> = std::fs::read_dir(root().join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        // A policy with clients serves each its own list, which a render of the whole
        // catalog cannot equal (and needs their keys to start).
        .filter(|p| {
            mcp_budget::policy::Policy::load(p).is_ok_and(|policy| policy.clients.is_empty())
        })
        .collect();
    policies.sort();
    assert!(policies.len() >= 4, "{policies:?}");
    let mut rng = Lcg(12);
    for policy in &policies {
        let tag = new_tag("offline-live");
        let _guard = TagGuard(tag.clone());
        let dir = tempfile::tempdir().unwrap();
        let (path, budget) = prepare(dir.path(), policy, &tag, &mut rng);
        let live = served_list(&path).await;
        let lists = dir.path().join(if budget { "orig" } else { "shuffled" });
        let offline = rendered_list(&path, &lists);
        assert!(
            live == offline,
            "{}: serve and render differ\nserve:  {live:.400}\nrender: {offline:.400}",
            policy.display()
        );
        assert_no_leftovers(&tag).await;
    }
}
