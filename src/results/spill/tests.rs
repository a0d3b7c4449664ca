use serde_json::{Value, json};

use super::*;

fn chars(t: &str) -> usize {
    t.len()
}

fn words(t: &str) -> usize {
    t.split_whitespace().count()
}

/// Reads every page from offset 0 by following the notes; the pages joined.
fn read_all(stored: &Stored, id: &str, read: &Read) -> String {
    let mut out = String::new();
    let mut read = read.clone();
    for _ in 0..10_000 {
        let page = read_page(stored, id, &read, &chars).unwrap();
        out.push_str(page["content"][0]["text"].as_str().unwrap());
        let footer = page["content"][1]["text"].as_str().unwrap();
        if footer.ends_with("the end]") {
            return out;
        }
        let next = footer
            .split(" read_result ")
            .nth(1)
            .unwrap()
            .trim_end_matches(']');
        let next: Value = serde_json::from_str(next).unwrap();
        read.offset = usize::try_from(next["offset"].as_u64().unwrap()).unwrap();
    }
    panic!("no end");
}

#[test]
fn a_result_ten_times_over_is_all_read_back_by_its_pages() {
    let items: Vec<Value> = (0..200)
        .map(|i| json!({"id": i, "title": format!("issue number {i}"), "état": "ouvert"}))
        .collect();
    let text = serde_json::to_string_pretty(&json!({"items": items, "total": 200})).unwrap();
    let max = text.len() / 10;
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    let spill = spill_result(&result, max, &chars).unwrap();
    assert_eq!(spill.total, text.len());
    let shown = spill.head_into(&mut result, "r7", max, &chars);
    let content = result["content"].as_array().unwrap();
    assert!(shown > 0 && shown <= max);
    let note = content[1]["text"].as_str().unwrap();
    assert!(note.contains("{\"id\":\"r7\",\"offset\":"), "{note}");
    assert!(
        note.contains("items (array of 200 objects {id,title,état})"),
        "{note}"
    );
    assert!(chars(content[0]["text"].as_str().unwrap()) + chars(note) <= max + 2);
    let stored = Stored::new("gh__list", spill, max, ResultFormat::Off);
    assert_eq!(read_all(&stored, "r7", &Read::default()), text);
}

#[test]
fn pointers_and_substrings_select() {
    let v = json!({"items": [{"id": 1, "t": "Alpha"}, {"id": 2, "t": "beta"}, {"id": 3, "t": "alphabet"}]});
    let spill = Spill {
        text: v.to_string(),
        json: Some(v),
        total: 99,
    };
    let stored = Stored::new("t", spill, 1000, ResultFormat::Toon);
    let page = |read: Read| {
        let page = read_page(&stored, "r1", &read, &chars).unwrap();
        page["content"][0]["text"].as_str().unwrap().to_owned()
    };
    let at = |p: &str| Read {
        pointer: Some(p.into()),
        ..Read::default()
    };
    assert_eq!(page(at("/items/1/t")), "beta");
    let alpha = Read {
        contains: Some("ALPHA".into()),
        ..at("/items")
    };
    assert_eq!(page(alpha), "[2]{id,t}:\n  1,Alpha\n  3,alphabet");
    let missing = read_page(&stored, "r1", &at("/nope"), &words);
    assert!(matches!(missing, Err(ReadError::Pointer(m)) if m.contains("object, 1 keys: items")));
    let lines = Spill {
        text: "one\ntwo\nthree".into(),
        json: None,
        total: 3,
    };
    let stored = Stored::new("t", lines, 1000, ResultFormat::Off);
    let t = Read {
        contains: Some("t".into()),
        ..Read::default()
    };
    let only = read_page(&stored, "r2", &t, &words).unwrap();
    assert_eq!(only["content"][0]["text"], "two\nthree");
}

#[test]
fn arguments_are_checked() {
    assert!(matches!(Read::of(&json!({})), Err(ReadError::Arguments(_))));
    let negative = Read::of(&json!({"id": "r1", "offset": -1}));
    assert!(matches!(negative, Err(ReadError::Arguments(_))));
    let (id, read) = Read::of(&json!({"id": "r1", "offset": 5, "contains": "x"})).unwrap();
    assert_eq!(
        (id.as_str(), read.offset, read.contains.as_deref()),
        ("r1", 5, Some("x"))
    );
}

#[test]
fn fitting_results_are_not_spilled() {
    let r = json!({"content": [{"type": "text", "text": "short"}]});
    assert_eq!(spill_result(&r, 100, &chars), None);
    assert_eq!(spill_result(&json!({"content": []}), 0, &chars), None);
}

#[test]
fn a_stored_result_reads_back_whole_from_its_shared_text() {
    let text = r#"{"items": [{"t": "alpha"}, {"t": "beta"}]}"#;
    let parsed = Spill {
        text: text.to_owned(),
        json: serde_json::from_str(text).ok(),
        total: 99,
    };
    let structured = Spill {
        text: "two items".to_owned(),
        json: Some(json!({"items": [1, 2]})),
        total: 99,
    };
    let plain = Spill {
        text: "just text\n".repeat(3),
        json: None,
        total: 99,
    };
    for (spill, format) in [
        (parsed, ResultFormat::Toon),
        (structured, ResultFormat::Json),
        (plain, ResultFormat::Off),
    ] {
        let stored = Stored::new("files__read", spill, 40, format);
        let shared = stored.to_shared();
        assert_eq!(
            Stored::from_shared(&shared).as_ref(),
            Some(&stored),
            "{shared}"
        );
    }
    let parsed = Stored::new(
        "t",
        Spill {
            text: text.to_owned(),
            json: serde_json::from_str(text).ok(),
            total: 1,
        },
        1,
        ResultFormat::Off,
    );
    assert!(
        !parsed.to_shared().contains(r#""json":{"#),
        "JSON parsed from the text is not written twice"
    );
    assert_eq!(Stored::from_shared("{}"), None);
    assert_eq!(Stored::from_shared("not json"), None);
}
