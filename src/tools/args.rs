//! Reading a tool call's JSON arguments, with errors worded for the model.

use serde_json::{Map, Value};

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// The arguments must be a JSON object; `null` counts as an empty one.
    pub fn new(tool: &str, v: &'a Value) -> Result<Args<'a>, String> {
        match v {
            Value::Object(map) => Ok(Args { map }),
            Value::Null => Ok(Args { map: &EMPTY }),
            other => Err(format!(
                "the arguments of {tool} must be a JSON object, got {}: {}",
                kind(other),
                super::fs::cut_str(&other.to_string(), 200)
            )),
        }
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&'a str, String> {
        self.str_opt(key)?.ok_or_else(|| format!("missing argument `{key}` (a string)"))
    }

    /// An optional string (`null` counts as absent).
    pub fn str_opt(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("argument `{key}` must be a string, got {}", kind(other))),
        }
    }

    /// An optional boolean; also accepts `"true"` and `"false"`, which models sometimes send.
    pub fn bool_opt(&self, key: &str) -> Result<Option<bool>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(other) => Err(format!("argument `{key}` must be a boolean, got {}", kind(other))),
        }
    }

    /// An optional non-negative integer; also accepts `12.0` and `"12"`, which models sometimes send.
    pub fn uint_opt(&self, key: &str) -> Result<Option<u64>, String> {
        let bad = |v: &Value| format!("argument `{key}` must be a non-negative integer, got {}", v);
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v @ Value::Number(n)) => {
                if let Some(u) = n.as_u64() {
                    Ok(Some(u))
                } else {
                    match n.as_f64() {
                        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 1e18 => Ok(Some(f as u64)),
                        _ => Err(bad(v)),
                    }
                }
            }
            Some(v @ Value::String(s)) => s.trim().parse::<u64>().map(Some).map_err(|_| bad(v)),
            Some(v) => Err(bad(v)),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_and_numbers() {
        let v = json!({"path": "a", "n": 3, "f": 4.0, "s": "5", "neg": -1, "b": true});
        let a = Args::new("t", &v).unwrap();
        assert_eq!(a.str("path").unwrap(), "a");
        assert_eq!(a.str("nope").unwrap_err(), "missing argument `nope` (a string)");
        assert_eq!(a.str("n").unwrap_err(), "argument `n` must be a string, got a number");
        assert_eq!(a.uint_opt("n").unwrap(), Some(3));
        assert_eq!(a.uint_opt("f").unwrap(), Some(4));
        assert_eq!(a.uint_opt("s").unwrap(), Some(5));
        assert_eq!(a.uint_opt("x").unwrap(), None);
        assert!(a.uint_opt("neg").is_err());
        assert!(a.uint_opt("b").is_err());
        assert_eq!(a.bool_opt("b").unwrap(), Some(true));
        assert_eq!(a.bool_opt("x").unwrap(), None);
        assert_eq!(a.bool_opt("n").unwrap_err(), "argument `n` must be a boolean, got a number");
    }

    #[test]
    fn not_an_object() {
        assert!(Args::new("t", &json!(null)).is_ok());
        let e = Args::new("read_file", &json!("{broken")).err().unwrap();
        assert_eq!(e, "the arguments of read_file must be a JSON object, got a string: \"{broken\"");
    }
}
