//! The exposures `eval` compares: what a host receives, each made by the real gateway from a
//! policy. An exposure is a name (`flat-20`, `flat-50:high`, `full`, `plan`, `progressive`,
//! `code`, `preselect-5`) and the `[budget]` / `[discover]` settings that make the gateway list
//! it.
//!
//! ```
//! use mcp_budget::eval::exposure::Exposure;
//!
//! let all = Exposure::parse_list("flat-20,flat-50:high,plan,progressive,code,preselect-5")?;
//! assert_eq!(all[1].name(), "flat-50:high");
//! assert_eq!(all[1].flat_size(), Some(50));
//! assert_eq!(all[5].preselect_size(), Some(5));
//! assert!(Exposure::parse_list("flat-0").is_err());
//! # Ok::<(), String>(())
//! ```

use std::fmt;

use toml::{Table, Value};

use crate::compress::Level;

/// The flat sizes of the default list, the baseline every study uses.
pub const FLAT_SIZES: [usize; 3] = [20, 50, 100];

/// The list of exposures run when `--exposures` is not given.
pub const DEFAULT: &str =
    "flat-20,flat-50,flat-100,full,flat-20:medium,flat-20:extreme,plan,progressive,code";

/// One exposure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// `flat-N[:LEVEL]`: one fixed list of N definitions per group of queries, full or
    /// compressed at a level.
    Flat {
        /// Tools per list.
        n: usize,
        /// The compression level (none: as the upstreams gave them).
        level: Option<Level>,
    },
    /// `full[:LEVEL]`: every tool of the catalog (where it fits the model's context).
    Full {
        /// The compression level (none: as the upstreams gave them).
        level: Option<Level>,
    },
    /// `plan`: what `serve` lists for the model's budget.
    Plan,
    /// `progressive`: the meta-tools only, over the whole catalog.
    Progressive,
    /// `code`: the meta-tools and `run_code`.
    Code,
    /// `preselect-K`: per request, the request searched over the whole catalog
    /// ([`crate::llm_api::preselect`], the lexical ranking of `search_tools`) and its best K
    /// tools listed in full, nothing else (no meta-tools): what an LLM API gateway with
    /// `[llm_api] preselect = K` lists for a host without the meta-tools.
    Preselect {
        /// Tools listed per request.
        k: usize,
    },
}

impl Exposure {
    /// Parses one name.
    ///
    /// # Errors
    /// An unknown name, a size below 1 or an unknown level, said with what is accepted.
    pub fn parse(name: &str) -> Result<Self, String> {
        let (base, level) = match name.split_once(':') {
            Some((base, level)) => {
                let level: Level = level.parse().map_err(|_| {
                    format!("{name:?}: unknown level {level:?} (low, medium, high, extreme)")
                })?;
                (base, (level != Level::Off).then_some(level))
            }
            None => (name, None),
        };
        match base {
            "full" => Ok(Self::Full { level }),
            _ if level.is_some() && !base.starts_with("flat-") => Err(format!(
                "{name:?}: a level applies to flat-N and full only ({base} plans its own)"
            )),
            "plan" => Ok(Self::Plan),
            "progressive" => Ok(Self::Progressive),
            "code" => Ok(Self::Code),
            _ => match (
                base.strip_prefix("flat-").map(str::parse::<usize>),
                base.strip_prefix("preselect-").map(str::parse::<usize>),
            ) {
                (Some(Ok(n)), _) if n > 0 => Ok(Self::Flat { n, level }),
                (_, Some(Ok(k))) if k > 0 => Ok(Self::Preselect { k }),
                _ => Err(format!(
                    "{name:?}: unknown exposure (flat-N, flat-N:LEVEL, full, full:LEVEL, plan, \
                     progressive, code, preselect-K; N, K ≥ 1)"
                )),
            },
        }
    }

    /// Parses a comma-separated list (`levels` stands for `flat-20:` each level).
    ///
    /// # Errors
    /// The first name that does not parse; an empty list.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, String> {
        let mut all = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "levels" {
                all.extend(Level::ALL.iter().skip(1).map(|&l| Self::Flat {
                    n: FLAT_SIZES[0],
                    level: Some(l),
                }));
            } else {
                all.push(Self::parse(name)?);
            }
        }
        if all.is_empty() {
            return Err("no exposure given".to_owned());
        }
        Ok(all)
    }

    /// Its name, as parsed.
    #[must_use]
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// N for a flat exposure.
    #[must_use]
    pub fn flat_size(&self) -> Option<usize> {
        match self {
            Self::Flat { n, .. } => Some(*n),
            _ => None,
        }
    }

    /// K for a `preselect-K` exposure.
    #[must_use]
    pub fn preselect_size(&self) -> Option<usize> {
        match self {
            Self::Preselect { k } => Some(*k),
            _ => None,
        }
    }

    /// Sets in `policy` (a policy file's table) the `[budget]` and `[discover]` keys that make
    /// the gateway list this exposure. `plan` keeps what the policy says.
    pub fn apply(&self, policy: &mut Table) {
        let (enabled, mode, level, code) = match self {
            Self::Flat { level: None, .. }
            | Self::Full { level: None }
            | Self::Preselect { .. } => (false, None, None, false),
            Self::Flat { level: Some(l), .. } | Self::Full { level: Some(l) } => {
                (true, Some("full"), Some(l.as_str()), false)
            }
            Self::Plan => return,
            Self::Progressive => (true, Some("progressive"), None, false),
            Self::Code => (true, Some("progressive"), None, true),
        };
        let budget = section(policy, "budget");
        budget.insert("enabled".into(), Value::Boolean(enabled));
        if let Some(mode) = mode {
            budget.insert("mode".into(), Value::String(mode.into()));
        }
        if let Some(level) = level {
            budget.insert("level".into(), Value::String(level.into()));
        }
        if code {
            section(policy, "discover").insert("code_mode".into(), Value::Boolean(true));
        }
    }
}

/// The section `key` of `policy` (a policy file's table), made when missing (replacing a
/// non-table value).
pub fn section<'t>(policy: &'t mut Table, key: &str) -> &'t mut Table {
    let slot = policy
        .entry(key.to_owned())
        .or_insert_with(|| Value::Table(Table::new()));
    if !slot.is_table() {
        *slot = Value::Table(Table::new());
    }
    match slot {
        Value::Table(t) => t,
        _ => unreachable!("made a table above"),
    }
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (base, level) = match self {
            Self::Flat { n, level } => (format!("flat-{n}"), level),
            Self::Full { level } => ("full".to_owned(), level),
            Self::Plan => return f.write_str("plan"),
            Self::Progressive => return f.write_str("progressive"),
            Self::Code => return f.write_str("code"),
            Self::Preselect { k } => return write!(f, "preselect-{k}"),
        };
        match level {
            Some(level) => write!(f, "{base}:{}", level.as_str()),
            None => f.write_str(&base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_default_list_parses() {
        for exposure in Exposure::parse_list(DEFAULT).unwrap() {
            assert_eq!(Exposure::parse(&exposure.name()).unwrap(), exposure);
        }
        assert_eq!(Exposure::parse_list("levels").unwrap().len(), 4);
        assert_eq!(Exposure::parse("flat-20:off").unwrap().name(), "flat-20");
        let preselect = Exposure::parse("preselect-5").unwrap();
        assert_eq!(preselect, Exposure::Preselect { k: 5 });
        assert_eq!(Exposure::parse(&preselect.name()).unwrap(), preselect);
    }

    #[test]
    fn bad_names_say_what_is_accepted() {
        for bad in [
            "flat",
            "flat-x",
            "flat--1",
            "plan:high",
            "flat-20:huge",
            "everything",
            "preselect-0",
            "preselect-x",
            "preselect-5:high",
        ] {
            let err = Exposure::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(Exposure::parse_list(" , ").is_err());
    }

    #[test]
    fn each_exposure_sets_the_budget_it_needs() {
        let mut policy: Table = toml::from_str("[budget]\nmodel = \"gpt-4o\"\n").unwrap();
        Exposure::parse("code").unwrap().apply(&mut policy);
        assert_eq!(policy["budget"]["mode"].as_str(), Some("progressive"));
        assert_eq!(policy["budget"]["model"].as_str(), Some("gpt-4o"));
        assert_eq!(policy["discover"]["code_mode"].as_bool(), Some(true));
        let mut flat = Table::new();
        Exposure::parse("flat-20").unwrap().apply(&mut flat);
        assert_eq!(flat["budget"]["enabled"].as_bool(), Some(false));
        let mut preselect = Table::new();
        Exposure::Preselect { k: 5 }.apply(&mut preselect);
        assert_eq!(preselect["budget"]["enabled"].as_bool(), Some(false));
        let mut plan = Table::new();
        Exposure::Plan.apply(&mut plan);
        assert!(plan.is_empty());
    }
}
