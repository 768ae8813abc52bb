//! `log`: the hook log, juju-log lines or hook-tool calls, as text or JSON
//! lines.

use crate::sim::error::{bail, Result};
use crate::sim::store::{read_jsonl, ModelDir};
use serde_json::Value;

pub fn print(
    dir: &ModelDir,
    unit: Option<&str>,
    juju_log: bool,
    tool_calls: bool,
    format: &str,
) -> Result<u8> {
    let path = match (juju_log, tool_calls) {
        (true, _) => dir.juju_log(),
        (_, true) => dir.tool_log(),
        _ => dir.hook_log(),
    };
    let records: Vec<Value> = read_jsonl(&path)?
        .into_iter()
        .filter(|r| unit.is_none_or(|u| r["unit"].as_str() == Some(u)))
        .collect();
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    for r in &records {
        match format {
            "json" => println!("{}", serde_json::to_string(r)?),
            "text" if juju_log => println!(
                "{} {} {} {}",
                s(&r["time"]),
                s(&r["unit"]),
                s(&r["level"]),
                s(&r["message"])
            ),
            "text" if tool_calls => {
                let args: Vec<String> = r["args"]
                    .as_array()
                    .map(|a| a.iter().map(s).collect())
                    .unwrap_or_default();
                println!(
                    "{} {} {} {} -> {}",
                    s(&r["time"]),
                    s(&r["unit"]),
                    s(&r["tool"]),
                    args.join(" "),
                    s(&r["exit"])
                );
            }
            "text" => {
                println!(
                    "{} {:<14} {:<36} exit {:<3} {:>6} ms {:>3} calls{}",
                    s(&r["time"]),
                    s(&r["unit"]),
                    s(&r["hook"]),
                    s(&r["exit"]),
                    s(&r["duration_ms"]),
                    s(&r["tool_calls"]),
                    if r["attempt"].as_u64().unwrap_or(1) > 1 {
                        format!(" (attempt {})", s(&r["attempt"]))
                    } else {
                        String::new()
                    }
                );
            }
            other => bail!("unknown format {other:?} (text or json)"),
        }
    }
    Ok(0)
}
