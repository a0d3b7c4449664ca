use serde_json::json;

use super::parse;
use crate::results::toon::decode::decode;
use crate::results::toon::encode;

#[test]
fn yaml_data_reads_as_the_json_it_means() {
    let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: shop
    tier: \"2\"
spec:
  replicas: 3
  ratio: 0.5
  paused: false
  note:
  created: 2024-01-01
  version: 1.2.3
  message: |
    line one # not a comment
    line two
  containers:
    - name: nginx
      image: 'nginx:1.27'
      ports: [80, 443]
    - name: sidecar
      image: busybox
      ports: []
";
    let v = parse(text).expect("YAML data");
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "shop", "tier": "2"}},
            "spec": {"replicas": 3, "ratio": 0.5, "paused": false, "note": null,
                "created": "2024-01-01", "version": "1.2.3",
                "message": "line one # not a comment\nline two\n",
                "containers": [
                    {"name": "nginx", "image": "nginx:1.27", "ports": [80, 443]},
                    {"name": "sidecar", "image": "busybox", "ports": []}]}})
    );
    // And the TOON of it decodes back to the same JSON.
    let toon = encode(&v).unwrap();
    assert_eq!(decode(&toon), Some(v), "{toon}");
    let rows = parse("- id: 1\n  name: Ada\n- id: 2\n  name: Linus\n").unwrap();
    assert_eq!(encode(&rows).unwrap(), "[2]{id,name}:\n  1,Ada\n  2,Linus");
    assert!(parse("---\na: 1\nb: 2\n").is_some());
}

#[test]
fn prose_and_markdown_are_not_yaml() {
    for text in [
        "Just a sentence, nothing more.",
        "Note: one line that looks like a key.",
        "Two lines of prose\nthat fold into one scalar.",
        "# Heading\n\nname: x\nother: y\n",
        "name: x # a comment\nother: y\n",
        "- first bullet\n- second bullet\n",
        "- **Bold**: text\n- other: thing\n",
        "**Name**: Ada\n**Role**: admin\n",
        "Summary:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        "Title: x\nBody: y\n\tindented with a tab\n",
    ] {
        assert_eq!(parse(text), None, "{text:?}");
    }
}

#[test]
fn what_json_cannot_hold_exactly_is_refused() {
    for text in [
        "a: &x 1\nb: *x\n",              // anchor, alias
        "a: !!str 1\nb: 2\n",            // tag
        "a: 1\na: 2\n",                  // a key twice
        "1: one\n2: two\n",              // non-string keys
        "? [a, b]\n: c\nd: e\n",         // complex key
        "a: 1\nb: 2\n---\nc: 3\nd: 4\n", // two documents
        "%YAML 1.2\n---\na: 1\nb: 2\n",  // directive
        "a: yes\nb: no\n",               // YAML 1.1 booleans
        "a: ~\nb: 1\n",
        "a: 0x1f\nb: 1\n",
        "a: 012\nb: 1\n",
        "a: 1e3\nb: 1\n",
        "a: 1.50\nb: 1\n",
        "a: .inf\nb: 1\n",
        "a: +1\nb: 1\n",
        "a: 1_000\nb: 1\n",
        "a: 1:20\nb: 1\n",
        "a: True\nb: 1\n",
        "{a: 1, b: 2}",  // flow at the top
        "a: [1\nb: 2\n", // does not parse
    ] {
        assert_eq!(parse(text), None, "{text:?}");
    }
}
