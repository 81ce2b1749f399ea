//! A small JSON Schema checker for the keywords `schema/inspect-report.schema.json` uses
//! (`$ref`, `type`, `const`, `enum`, `properties`, `required`, `additionalProperties`, `items`,
//! `minimum`, `maximum`, `oneOf`): the core has no validator crate, and the CLI's tests
//! validate real output with a full one.

use serde_json::Value;

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

pub fn check(root: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        check(root, &root["$defs"][name], v, at, errors);
    }
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => errors.push(format!("{at}: not {t}: {v}")),
        Some(Value::Array(ts)) if !ts.iter().any(|t| type_ok(t.as_str().unwrap_or(""), v)) => {
            errors.push(format!("{at}: none of {ts:?}: {v}"))
        }
        _ => {}
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.contains(v) {
            errors.push(format!("{at}: {v} not in {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            errors.push(format!("{at}: {n} < {min}"));
        }
    }
    if let (Some(max), Some(n)) = (s.get("maximum").and_then(Value::as_f64), v.as_f64()) {
        if n > max {
            errors.push(format!("{at}: {n} > {max}"));
        }
    }
    if let Some(Value::Array(options)) = s.get("oneOf") {
        let matching = options
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                check(root, o, v, at, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{at}: {matching} of oneOf match: {v}"));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or("");
            if !obj.contains_key(r) {
                errors.push(format!("{at}: missing {r}"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in obj {
            let here = format!("{at}.{k}");
            match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                (Some(p), _) => check(root, p, x, &here, errors),
                (None, Some(Value::Bool(false))) => errors.push(format!("{here}: not allowed")),
                (None, Some(extra @ Value::Object(_))) => check(root, extra, x, &here, errors),
                _ => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(root, items, x, &format!("{at}[{i}]"), errors);
        }
    }
}
