//! Reading OTLP/JSON: the file's documents, their spans and log records,
//! and OTLP's key/value lists and `AnyValue`s as plain JSON.

use std::path::Path;

use serde_json::{Map, Number, Value};

use crate::import::{Import, json_lines};

/// A span, its attributes read out of OTLP's key/value lists.
pub(super) struct Span {
    /// Where it is, for warnings: "FILE: span ID" or "FILE: line L, span ID".
    pub(super) at: String,
    pub(super) id: String,
    pub(super) trace: String,
    pub(super) parent: String,
    pub(super) name: String,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) attrs: Map<String, Value>,
    pub(super) events: Vec<Event>,
    pub(super) service: Option<String>,
}

/// A span event, or a log record naming the span.
pub(super) struct Event {
    pub(super) name: String,
    pub(super) attrs: Map<String, Value>,
    pub(super) body: Value,
}

/// The file's OTLP documents, each with its line (`None` for a whole-file
/// document).
pub(super) fn documents(
    src: &Path,
    import: &mut Import,
) -> anyhow::Result<Vec<(Option<usize>, Value)>> {
    let bytes = crate::import::read_source(src)?;
    let whole = crate::import::parse_json(crate::import::without_bom(&bytes));
    if let Ok((_, true)) = whole {
        import.warn_file(src, crate::import::LONE_SURROGATE);
    }
    match whole {
        Ok((Value::Array(docs), _)) => {
            import.reads_file(src);
            Ok(docs.into_iter().map(|d| (None, d)).collect())
        }
        Ok((doc, _)) => {
            import.reads_file(src);
            Ok(vec![(None, doc)])
        }
        Err(e) => {
            let lines = json_lines(src, import)?;
            if lines.is_empty() {
                // Neither one document nor lines of them: say why, not "none found".
                anyhow::bail!(
                    "{}: not an OTLP document: not valid JSON ({e})",
                    src.display()
                );
            }
            Ok(lines
                .into_iter()
                .map(|(line, doc)| (Some(line), doc))
                .collect())
        }
    }
}

/// The spans of one document, and its log records keyed by their span.
pub(super) fn collect(
    src: &Path,
    line: Option<usize>,
    doc: &Value,
    spans: &mut Vec<Span>,
    logs: &mut Vec<((String, String), Event)>,
) {
    for resource in list(doc, "resourceSpans") {
        let service = attributes(&resource["resource"]["attributes"])
            .get("service.name")
            .and_then(Value::as_str)
            .map(str::to_string);
        let scopes = list(resource, "scopeSpans").iter();
        let scopes = scopes.chain(list(resource, "instrumentationLibrarySpans"));
        for span in scopes.flat_map(|s| list(s, "spans")) {
            let id = string(&span["spanId"]);
            let name = string(&span["name"]);
            let shown = if id.is_empty() { &name } else { &id };
            let at = match line {
                Some(l) => format!("{}: line {l}, span {shown}", src.display()),
                None => format!("{}: span {shown}", src.display()),
            };
            let events = list(span, "events")
                .iter()
                .map(|e| Event {
                    name: string(&e["name"]),
                    attrs: attributes(&e["attributes"]),
                    body: Value::Null,
                })
                .collect();
            spans.push(Span {
                at,
                trace: string(&span["traceId"]),
                parent: string(&span["parentSpanId"]),
                id,
                name,
                start: nanos(&span["startTimeUnixNano"]),
                end: nanos(&span["endTimeUnixNano"]),
                attrs: attributes(&span["attributes"]),
                events,
                service: service.clone(),
            });
        }
    }
    for resource in list(doc, "resourceLogs") {
        for scope in list(resource, "scopeLogs") {
            for record in list(scope, "logRecords") {
                let attrs = attributes(&record["attributes"]);
                let name = record["eventName"]
                    .as_str()
                    .or_else(|| attrs.get("event.name").and_then(Value::as_str))
                    .unwrap_or("")
                    .to_string();
                let key = (string(&record["traceId"]), string(&record["spanId"]));
                let body = any_value(&record["body"]);
                logs.push((key, Event { name, attrs, body }));
            }
        }
    }
}

/// An OTLP key/value list as a JSON object.
fn attributes(list: &Value) -> Map<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|kv| Some((kv["key"].as_str()?.to_string(), any_value(&kv["value"]))))
        .collect()
}

/// An OTLP `AnyValue` as plain JSON; a 64-bit integer (a string in
/// OTLP/JSON) as a number.
fn any_value(value: &Value) -> Value {
    let Some(typed) = value.as_object() else {
        return value.clone();
    };
    let number = |v: &Value| match v {
        Value::String(s) => s
            .parse::<Number>()
            .map_or_else(|_| v.clone(), Value::Number),
        other => other.clone(),
    };
    if let Some(v) = typed.get("stringValue").or_else(|| typed.get("boolValue")) {
        v.clone()
    } else if let Some(v) = typed.get("intValue").or_else(|| typed.get("doubleValue")) {
        number(v)
    } else if let Some(v) = typed.get("arrayValue") {
        Value::Array(
            v["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(any_value)
                .collect(),
        )
    } else if let Some(v) = typed.get("kvlistValue") {
        Value::Object(attributes(&v["values"]))
    } else {
        typed.get("bytesValue").cloned().unwrap_or(Value::Null)
    }
}

/// The list under `key` (empty when there is none).
fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map_or(&[], Vec::as_slice)
}

/// A time in nanoseconds, recorded as a string or a number (0 when absent).
fn nanos(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_u64().unwrap_or(0),
    }
}

/// A string field (a number's text; empty when absent).
pub(super) fn string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
