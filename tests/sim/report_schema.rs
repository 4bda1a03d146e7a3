//! The JSON report (schema v2) of every shipped scenario, checked two ways: against
//! docs/report.schema.json (the keywords that file uses: type, const, enum, required,
//! properties, additionalProperties, items, anyOf, $ref, minimum), and by a typed round trip
//! (scen::render::json::JsonReport denies unknown fields, so a field the docs do not name fails).
//! Also: `--report FILE` writes the same JSON while the terminal gets the human report.

use crate::common::root;
use scen::render::json::{build, JsonReport};
use scen::suite;
use serde_json::Value;

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("docs/report.schema.json")).expect("schema");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// Errors of `v` against `schema` (the subset of JSON Schema the file uses), with JSON paths.
fn validate(v: &Value, schema: &Value, defs: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        return validate(v, &defs[name], defs, path, errors);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|s| {
            let mut e = Vec::new();
            validate(v, s, defs, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{path}: matches none of anyOf"));
        }
        return;
    }
    if let Some(c) = schema.get("const") {
        if v != c {
            errors.push(format!("{path}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type in schema at {path}"),
        };
        let is = |t: &str| match t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            other => panic!("unknown type {other}"),
        };
        if !types.iter().any(|t| is(t)) {
            errors.push(format!("{path}: {v} is not {types:?}"));
            return;
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_i64), v.as_i64()) {
        if n < min {
            errors.push(format!("{path}: {n} < {min}"));
        }
    }
    if let Some(items) = schema.get("items") {
        for (i, x) in v.as_array().into_iter().flatten().enumerate() {
            validate(x, items, defs, &format!("{path}[{i}]"), errors);
        }
    }
    let Some(obj) = v.as_object() else { return };
    for key in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = key.as_str().expect("required names");
        if !obj.contains_key(key) {
            errors.push(format!("{path}: missing {key}"));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, x) in obj {
        match props.and_then(|p| p.get(k)) {
            Some(s) => validate(x, s, defs, &format!("{path}.{k}"), errors),
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                errors.push(format!("{path}: {k} is not in the schema"))
            }
            None => {}
        }
    }
}

#[test]
fn every_shipped_scenarios_report_matches_the_schema_and_round_trips() {
    let schema = schema();
    let defs = &schema["$defs"];
    let files = suite::discover(&[root().join("scenarios")], None).expect("scenarios");
    assert!(files.len() > 50, "the shipped scenarios");
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for f in &files {
        let s = scen_core::scenario::load_file(f).expect("loads");
        let r = scen_sim::simulate(&s, None).expect("runs");
        let report = build(&s, &r);
        for rank in &report.ranks {
            // A failed rank's text is its typed failure's text, nothing else.
            assert_eq!(
                rank.error,
                rank.failure.as_ref().map(|f| f.text()),
                "{}",
                f.display()
            );
            if let Some(x) = &rank.failure {
                let v = serde_json::to_value(x).expect("serializes");
                let who = v["by"]["who"].as_str().map(|w| format!(" by {w}"));
                kinds.insert(format!("{}{}", x.kind(), who.unwrap_or_default()));
            }
        }
        let v = serde_json::to_value(&report).expect("serializes");
        let mut errors = Vec::new();
        validate(&v, &schema, defs, "$", &mut errors);
        let back: JsonReport = serde_json::from_value(v.clone()).expect("typed round trip");
        assert_eq!(back, report, "{}: round trip", f.display());
        // 1-based steps everywhere; every rank says its rank.
        for (i, rank) in report.ranks.iter().enumerate() {
            assert_eq!(rank.rank, i);
            if let Some(at) = &rank.at {
                assert_eq!(at.step_label, s.steps[at.step - 1].label());
            }
        }
        assert_eq!(report.passed, r.expectations_hold());
        if !errors.is_empty() {
            failures.push(format!("{}:\n  {}", f.display(), errors.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The shipped corpus exercises each way the simulator ends a rank.
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    assert_eq!(
        kinds,
        // killed by unknown: gloo's size check aborting a rank (mismatch_shape_gloo); exited:
        // a program's sys.exit(3) (gloo_rank_exits_with_code).
        [
            "exited",
            "killed by agent",
            "killed by fault",
            "killed by unknown",
            "raised"
        ],
        "failure kinds"
    );
}

/// The validator is not vacuous: a report with a wrong outcome word, a 0-based step and an
/// unknown field fails it.
/// A tagged send/recv's call carries its tag (gloo pairs by it); an untagged one has none.
#[test]
fn p2p_calls_carry_their_tag() {
    let s =
        scen_core::scenario::load_file(&root().join("scenarios/gloo_send_recv_tags_crossed.toml"))
            .expect("loads");
    let r = scen_sim::simulate(&s, None).expect("runs");
    let v = serde_json::to_value(build(&s, &r)).expect("json");
    let tags: Vec<(String, Value)> = v["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap_or("").to_string(),
                c["tag"].clone(),
            )
        })
        .collect();
    assert!(tags.contains(&("send".into(), Value::from(1))), "{tags:?}");
    assert!(tags.contains(&("recv".into(), Value::from(2))), "{tags:?}");
    let s = scen_core::scenario::load_file(&root().join("scenarios/gloo_send_recv.toml"))
        .expect("loads");
    let r = scen_sim::simulate(&s, None).expect("runs");
    let v = serde_json::to_value(build(&s, &r)).expect("json");
    assert!(v["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .all(|c| c.get("tag").is_none()));
}

#[test]
fn the_schema_check_catches_old_spellings() {
    let schema = schema();
    let s = scen_core::scenario::load_file(&root().join("scenarios/missing_rank_all_reduce.toml"))
        .expect("loads");
    let r = scen_sim::simulate(&s, None).expect("runs");
    let mut v = serde_json::to_value(build(&s, &r)).expect("json");
    v["ranks"][0]["outcome"] = "hung".into();
    v["ranks"][0]["at"]["step"] = 0.into();
    v["ranks"][0]["extra"] = 1.into();
    let mut errors = Vec::new();
    validate(&v, &schema, &schema["$defs"], "$", &mut errors);
    assert_eq!(errors.len(), 3, "{errors:?}");
}

#[test]
fn report_file_gets_json_while_the_terminal_gets_the_human_report() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-report-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).expect("tmp");
    let out_path = dir.join("r.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "scenarios/missing_rank_all_reduce.toml", "--report"])
        .arg(&out_path)
        .current_dir(root())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("expectations: 4/4 hold"), "{human}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).expect("written")).expect("json");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["ranks"][0]["at"]["step_id"], "skipped_by_3");
    assert_eq!(v["ranks"][0]["at"]["step"], 3);
    assert_eq!(v["ranks"][0]["wait"]["group"], "0");
    assert_eq!(v["ranks"][0]["wait"]["group_label"], "WORLD");
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").collect();
    assert_eq!(left.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_input_as_json_names_file_line_column_and_report_refuses_the_input_path() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-report-bad-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).expect("tmp");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[world]\nranks_per_node = \"x\"\n").expect("write");
    let scen = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("runs")
    };
    let out = scen(&["run", "bad.toml", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
    assert_eq!(v["error"]["file"], "bad.toml");
    assert_eq!(v["error"]["line"], 2);
    assert_eq!(v["error"]["column"], 18);
    assert_eq!(v["passed"], false);
    std::fs::copy(
        root().join("scenarios/missing_rank_all_reduce.toml"),
        dir.join("ok.toml"),
    )
    .expect("copy");
    let before = std::fs::read(dir.join("ok.toml")).expect("read");
    let out = scen(&["run", "ok.toml", "--report", "./ok.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to overwrite"));
    assert_eq!(std::fs::read(dir.join("ok.toml")).expect("read"), before);
    let _ = std::fs::remove_dir_all(&dir);
}
