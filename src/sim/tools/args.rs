//! A small flag parser in the manner of Juju's hook tools: `--flag=value`,
//! `--flag value`, `-r value`, switches, `--` ending the flags, and a lone
//! `-` as a positional argument.

use crate::sim::error::{Result, SimError};
use std::collections::BTreeMap;

/// One flag: its names (the first is the canonical one) and whether it takes
/// a value.
pub struct Flag {
    pub names: &'static [&'static str],
    pub value: bool,
}

pub const fn switch(names: &'static [&'static str]) -> Flag {
    Flag {
        names,
        value: false,
    }
}

pub const fn option(names: &'static [&'static str]) -> Flag {
    Flag { names, value: true }
}

pub const FORMAT: Flag = option(&["format"]);
pub const RELATION: Flag = option(&["r", "relation"]);

#[derive(Debug, Default)]
pub struct Parsed {
    pub values: BTreeMap<&'static str, String>,
    pub positional: Vec<String>,
}

impl Parsed {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }
    pub fn format(&self) -> Option<&str> {
        self.get("format")
    }
}

/// A usage error: Juju's tools exit 2 for these.
pub fn usage(msg: impl Into<String>) -> SimError {
    SimError::new(msg).with_code(2)
}

pub fn parse(args: &[String], flags: &[Flag]) -> Result<Parsed> {
    let mut out = Parsed::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            out.positional.extend(it.by_ref().cloned());
            break;
        }
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            out.positional.push(arg.clone());
            continue;
        };
        if body.is_empty() {
            out.positional.push(arg.clone());
            continue;
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let Some(flag) = flags.iter().find(|f| f.names.contains(&name)) else {
            return Err(usage(format!("flag provided but not defined: {arg}")));
        };
        let value = match (flag.value, inline) {
            (true, Some(v)) => v,
            (true, None) => it
                .next()
                .cloned()
                .ok_or_else(|| usage(format!("flag needs an argument: {arg}")))?,
            (false, None) => String::new(),
            // Juju's tools are Go programs: a switch takes `--flag=<bool>`
            // (ops passes `status-set --application=False`); false unsets it.
            (false, Some(v)) => match parse_bool(&v) {
                Some(true) => String::new(),
                Some(false) => {
                    out.values.remove(flag.names[0]);
                    continue;
                }
                None => {
                    return Err(usage(format!(
                        "invalid boolean value {v:?} for -{name}: parse error"
                    )))
                }
            },
        };
        out.values.insert(flag.names[0], value);
    }
    if let Some(f) = out.format() {
        if !matches!(f, "json" | "yaml" | "smart") {
            return Err(usage(format!(
                "invalid value {f:?} for option --format: unknown format"
            )));
        }
    }
    Ok(out)
}

/// A boolean as Go's strconv.ParseBool reads it.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `k=v` arguments, in order; `k=` keeps the empty value (it deletes).
pub fn key_values(args: &[String]) -> Result<Vec<(String, String)>> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(usage(format!("expected \"key=value\", got {a:?}"))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn forms() {
        let flags = [FORMAT, RELATION, switch(&["app"])];
        let p = parse(
            &s(&["--format=json", "-r", "cluster:0", "--app", "-", "etcd"]),
            &flags,
        )
        .unwrap();
        assert_eq!(p.format(), Some("json"));
        assert_eq!(p.get("r"), Some("cluster:0"));
        assert!(p.has("app"));
        assert_eq!(p.positional, s(&["-", "etcd"]));
        let p = parse(&s(&["--relation", "3", "--", "--x"]), &flags).unwrap();
        assert_eq!(p.get("r"), Some("3"));
        assert_eq!(p.positional, s(&["--x"]));
        assert_eq!(parse(&s(&["--bogus"]), &flags).unwrap_err().code, 2);
        assert!(parse(&s(&["--format=xml"]), &flags).is_err());
    }

    #[test]
    fn switches_take_go_booleans() {
        let flags = [switch(&["application"])];
        for on in [
            "--application",
            "--application=True",
            "--application=true",
            "-application=1",
        ] {
            assert!(
                parse(&s(&[on, "active"]), &flags)
                    .unwrap()
                    .has("application"),
                "{on}"
            );
        }
        for off in [
            "--application=False",
            "--application=false",
            "--application=0",
        ] {
            let p = parse(&s(&[off, "active", "--", "msg"]), &flags).unwrap();
            assert!(!p.has("application"), "{off}");
            assert_eq!(p.positional, s(&["active", "msg"]));
        }
        let e = parse(&s(&["--application=yes"]), &flags).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("invalid boolean value"), "{}", e.message);
    }

    #[test]
    fn kv() {
        assert_eq!(
            key_values(&s(&["a=1", "b="])).unwrap(),
            vec![("a".into(), "1".into()), ("b".into(), "".into())]
        );
        assert!(key_values(&s(&["a"])).is_err());
    }
}
