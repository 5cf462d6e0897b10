//! Repair of the near-JSON answers small local models give, tried
//! after [`super::openai::parse_json_tolerant`] found no JSON and before a
//! retry is spent:
//!
//! - [`repair_json`]: the text with Markdown code fences removed, trailing
//!   commas dropped (`[1, 2,]`), Python literals outside strings read as JSON
//!   (`True`, `False`, `None`), and an answer cut off by the token limit closed
//!   at its last complete value (`{"entities": [{"name": "A"}, {"na` →
//!   `{"entities": [{"name": "A"}]}`).
//! - [`fit_schema`]: a parsed answer fitted to the task's JSON schema without
//!   inventing content: a bare list where the schema wants an object holding a
//!   list is put in that list's property; a missing required list becomes
//!   `[]` and a missing nullable field `null`; properties the schema does not
//!   allow are dropped; list items that break the item schema are dropped and
//!   the valid ones kept (a partial answer is kept rather than parked). A
//!   wrong scalar (`"summary": 42`) is never coerced: the answer stays
//!   invalid and is retried.

use serde_json::{Map, Value};

/// Most cut points tried when closing a truncated answer (from its end).
pub const MAX_CUTS: usize = 200;

/// Near-JSON → JSON, or `None` when nothing here makes it parse.
pub fn repair_json(text: &str) -> Option<Value> {
    let body = strip_fences(text.trim().trim_start_matches('\u{feff}'));
    let start = body.find(['{', '['])?;
    let cleaned = clean(&body[start..]);
    if let Ok(v) = serde_json::from_str::<Value>(&cleaned) {
        return Some(v);
    }
    // the first complete value, when prose follows it
    if let Some(Ok(v)) = serde_json::Deserializer::from_str(&cleaned).into_iter::<Value>().next() {
        return Some(v);
    }
    close_truncated(&cleaned)
}

/// The body of the first fenced block, or the text itself.
fn strip_fences(t: &str) -> &str {
    let Some(open) = t.find("```") else { return t };
    let after = &t[open + 3..];
    let body = after.find('\n').map(|i| &after[i + 1..]).unwrap_or(after);
    body.find("```").map(|e| &body[..e]).unwrap_or(body)
}

/// Drops commas before `}` or `]` and reads `True`/`False`/`None` outside strings.
fn clean(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut in_str = false;
    let mut escaped = false;
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            'T' | 'F' | 'N' => {
                let word: String = chars[i..].iter().take_while(|c| c.is_ascii_alphabetic()).collect();
                let prev_ok = i == 0 || !chars[i - 1].is_ascii_alphanumeric();
                let json = match word.as_str() {
                    "True" => Some("true"),
                    "False" => Some("false"),
                    "None" => Some("null"),
                    _ => None,
                };
                if let (Some(j), true) = (json, prev_ok) {
                    out.push_str(j);
                    i += word.len();
                    continue;
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Closes an answer cut off mid-way: cuts it after its last complete value
/// (or at the last comma) and closes the brackets still open there.
fn close_truncated(t: &str) -> Option<Value> {
    // (byte offset after a cut point, the brackets open there)
    let mut cuts: Vec<(usize, Vec<char>)> = Vec::new();
    let mut stack: Vec<char> = Vec::new();
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in t.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
                cuts.push((i + 1, stack.clone()));
            }
            ',' => cuts.push((i, stack.clone())),
            _ => {}
        }
    }
    for (at, open) in cuts.into_iter().rev().take(MAX_CUTS) {
        if open.is_empty() {
            continue;
        }
        let mut s = t[..at].trim_end().trim_end_matches(',').to_string();
        s.extend(open.iter().rev());
        if let Ok(v) = serde_json::from_str::<Value>(&s) {
            return Some(v);
        }
    }
    None
}

/// Fits `v` to `schema` as described in the module docs; returns `v`
/// unchanged where no rule applies.
pub fn fit_schema(schema: &Value, v: Value) -> Value {
    match (types(schema).first().copied(), v) {
        (Some("object"), Value::Array(items)) => {
            // a bare list: into the list property whose item schema the most items fit
            let best = properties(schema)
                .filter(|(_, s)| types(s).contains(&"array"))
                .map(|(name, s)| {
                    let item = s.get("items").cloned().unwrap_or(Value::Bool(true));
                    let fits = items.iter().filter(|x| jsonschema::is_valid(&item, &fit_schema(&item, (*x).clone()))).count();
                    (name.clone(), fits)
                })
                .filter(|(_, fits)| *fits > 0)
                .max_by_key(|(_, fits)| *fits);
            match best {
                Some((name, _)) => {
                    let mut m = Map::new();
                    m.insert(name, Value::Array(items));
                    fit_schema(schema, Value::Object(m))
                }
                None => Value::Array(items),
            }
        }
        (Some("object"), Value::Object(mut m)) => {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                m.retain(|k, _| schema.get("properties").and_then(|p| p.get(k)).is_some());
            }
            for (name, s) in properties(schema) {
                if let Some(x) = m.remove(name) {
                    m.insert(name.clone(), fit_schema(s, x));
                }
            }
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if m.contains_key(name) {
                    continue;
                }
                let s = schema.get("properties").and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                if types(s).contains(&"array") {
                    m.insert(name.to_string(), Value::Array(Vec::new()));
                } else if types(s).contains(&"null") {
                    m.insert(name.to_string(), Value::Null);
                }
            }
            Value::Object(m)
        }
        (Some("array"), Value::Array(items)) => {
            let item = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            Value::Array(
                items
                    .into_iter()
                    .map(|x| fit_schema(&item, x))
                    .filter(|x| jsonschema::is_valid(&item, x))
                    .collect(),
            )
        }
        (_, v) => v,
    }
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema.get("properties").and_then(Value::as_object).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn extract_schema() -> Value {
        serde_json::from_str(include_str!("../../prompts/extract_entities_relations.schema.json")).unwrap()
    }

    #[test]
    fn trailing_commas_fences_and_python_literals() {
        let v = repair_json("```json\n{\"a\": [1, 2,], \"b\": True, \"c\": None, \"d\": \"x, ]\",}\n```").unwrap();
        assert_eq!(v, json!({"a": [1, 2], "b": true, "c": null, "d": "x, ]"}));
        // a word merely containing True is left alone (and then is no JSON)
        assert!(repair_json("{\"a\": IsTrue}").is_none());
    }

    #[test]
    fn a_truncated_answer_is_closed_at_its_last_complete_value() {
        let v = repair_json(r#"{"entities": [{"name": "Dana", "type": "person", "aliases": []}, {"name": "Bus"#).unwrap();
        assert_eq!(v, json!({"entities": [{"name": "Dana", "type": "person", "aliases": []}]}));
        let v = repair_json(r#"{"summary": "Dana moved to Busan.", "langu"#).unwrap();
        assert_eq!(v, json!({"summary": "Dana moved to Busan."}));
        assert!(repair_json("no json here").is_none());
        assert!(repair_json("{\"summary\": \"cut inside the only stri").is_none());
    }

    #[test]
    fn a_bare_list_and_missing_lists_fit_the_schema() {
        let s = extract_schema();
        let v = fit_schema(&s, json!([{"name": "Dana", "type": "person"}, {"name": "Busan", "type": "place", "aliases": ["부산"]}]));
        assert!(jsonschema::is_valid(&s, &v), "{v}");
        assert_eq!(v["entities"].as_array().unwrap().len(), 2);
        assert_eq!(v["relations"], json!([]));
        let v = fit_schema(&s, json!([{"source": "Dana", "predicate": "lives_in", "target": "Busan"}]));
        assert!(jsonschema::is_valid(&s, &v), "{v}");
        assert_eq!(v["relations"][0]["valid_from"], Value::Null);
    }

    #[test]
    fn invalid_items_are_dropped_and_the_valid_ones_kept() {
        let s = extract_schema();
        let v = fit_schema(
            &s,
            json!({"entities": [{"name": "Dana", "type": "person", "aliases": [], "confidence": 0.9}, {"name": "", "type": "x", "aliases": []}, "Busan"],
                   "relations": [{"source": "Dana", "predicate": "lives_in"}], "notes": "extra"}),
        );
        assert!(jsonschema::is_valid(&s, &v), "{v}");
        assert_eq!(v, json!({"entities": [{"name": "Dana", "type": "person", "aliases": []}], "relations": []}));
    }

    #[test]
    fn a_wrong_scalar_is_not_coerced() {
        let s: Value = serde_json::from_str(include_str!("../../prompts/summarize.schema.json")).unwrap();
        let v = fit_schema(&s, json!({"summary": 42, "language": "English"}));
        assert!(!jsonschema::is_valid(&s, &v));
    }
}
