//! Output of the hook tools: `--format=json`, `--format=yaml`, or Juju's
//! default "smart" format (plain strings, `True`/`False`, YAML otherwise).

use crate::sim::error::Result;
use serde_json::Value;

pub fn render(v: &Value, format: Option<&str>) -> Result<String> {
    Ok(match format {
        Some("json") => format!("{}\n", serde_json::to_string(v)?),
        Some("yaml") => yaml(v)?,
        _ => match v {
            Value::Null => String::new(),
            Value::String(s) => format!("{s}\n"),
            Value::Bool(true) => "True\n".into(),
            Value::Bool(false) => "False\n".into(),
            Value::Number(n) => format!("{n}\n"),
            Value::Object(m) if m.is_empty() => String::new(),
            Value::Array(a) if a.is_empty() => String::new(),
            other => yaml(other)?,
        },
    })
}

fn yaml(v: &Value) -> Result<String> {
    Ok(serde_yaml::to_string(v)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats() {
        assert_eq!(render(&json!(true), Some("json")).unwrap(), "true\n");
        assert_eq!(render(&json!(true), None).unwrap(), "True\n");
        assert_eq!(
            render(&json!({"a": "1"}), Some("json")).unwrap(),
            "{\"a\":\"1\"}\n"
        );
        assert_eq!(render(&json!("x"), None).unwrap(), "x\n");
        assert_eq!(render(&json!({"a": "1"}), None).unwrap(), "a: '1'\n");
    }
}
