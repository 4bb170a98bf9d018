//! Tokens a session spent, and what they cost.
//!
//! The providers report each answer's [`Usage`]; the runner writes it to the log as a `usage` entry
//! (with the model that reported it), the replay adds the entries up per model ([`UsageByModel`]),
//! and [`UsageByModel::cost`] prices them with the user's `pricing` table. The four counts are
//! disjoint, so a request's whole prompt is `input_tokens + cache_read_tokens + cache_write_tokens`
//! and each count has one price: Anthropic reports them so, and OpenAI's `prompt_tokens` (which
//! includes its cached tokens) is split when it is read.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// Tokens of one answer, or a sum of answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens billed at the full input rate: neither read from nor written to the cache.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's prompt cache (Anthropic's `cache_creation_input_tokens`).
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }

    /// The whole prompt: full-rate, cached and cache-written tokens.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
    }
}

/// Dollars per million tokens of one model, as `pricing[model]` of the Lua config gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Default: the input price (set it: Anthropic bills cache reads at a tenth of it).
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Default: the input price.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// Dollars for `u`.
    pub fn cost(&self, u: &Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
        per(u.input_tokens, self.input)
            + per(u.output_tokens, self.output)
            + per(u.cache_read_tokens, self.cache_read.unwrap_or(self.input))
            + per(u.cache_write_tokens, self.cache_write.unwrap_or(self.input))
    }
}

/// Prices by model name (exact names, as the provider reports them in the log's `model`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Pricing(pub BTreeMap<String, Price>);

impl<'de> Deserialize<'de> for Pricing {
    /// A map, or an empty list: Lua cannot tell `{}` from an empty list, and hands it over as one.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Array(v) if v.is_empty() => Ok(Pricing::default()),
            v => serde_json::from_value(v).map(Pricing).map_err(|e| serde::de::Error::custom(format!("pricing: {e}"))),
        }
    }
}

impl Pricing {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A pricing table written as JSON (`pseudoclaude sessions list --pricing FILE`): an object of
    /// prices by model name, checked as the Lua configuration checks `pricing`, with the same words:
    /// an unknown key (a typo such as `cache_reed`), a missing `input` or `output`, or a price that is
    /// not a number >= 0 is an error naming the entry, e.g. `pricing["gpt-4.1"].output: missing`.
    pub fn from_json(text: &str) -> Result<Pricing, String> {
        use serde_json::Value;
        let value: Value = serde_json::from_str(text).map_err(|e| format!("pricing: not valid JSON: {e}"))?;
        let Value::Object(models) = &value else {
            return Err(format!("pricing: expected an object of prices by model name, got {}", json_type(&value)));
        };
        for (model, price) in models {
            let at = format!("pricing[{model:?}]");
            if model.is_empty() {
                return Err(format!("{at}: keys are model names (non-empty strings), as in provider.model"));
            }
            let Value::Object(keys) = price else {
                return Err(format!(
                    "{at}: expected an object {{\"input\": ..., \"output\": ...}}, got {}",
                    json_type(price)
                ));
            };
            for (key, v) in keys {
                if !PRICE_KEYS.contains(&key.as_str()) {
                    return Err(format!("{at}.{key}: unknown price (known: {})", PRICE_KEYS.join(", ")));
                }
                if !v.as_f64().is_some_and(|n| n >= 0.0 && n.is_finite()) {
                    return Err(format!("{at}.{key}: expected dollars per million tokens (a number >= 0), got {v}"));
                }
            }
            for key in ["input", "output"] {
                if !keys.contains_key(key) {
                    return Err(format!("{at}.{key}: missing (dollars per million tokens)"));
                }
            }
        }
        serde_json::from_value(value).map_err(|e| format!("pricing: {e}"))
    }
}

/// The keys of a [`Price`], as the configuration names them.
const PRICE_KEYS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The usage of a session, per model that reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageByModel(pub BTreeMap<String, Usage>);

impl UsageByModel {
    pub fn is_empty(&self) -> bool {
        self.0.values().all(Usage::is_zero)
    }

    pub fn add(&mut self, model: &str, u: &Usage) {
        self.0.entry(model.to_owned()).or_default().add(u);
    }

    /// Every model's usage, summed.
    pub fn total(&self) -> Usage {
        let mut t = Usage::default();
        for u in self.0.values() {
            t.add(u);
        }
        t
    }

    /// The models that reported usage and have no price in `pricing` (why [`UsageByModel::cost`] is
    /// `None`).
    pub fn unpriced<'a>(&'a self, pricing: &'a Pricing) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(|(m, u)| !u.is_zero() && !pricing.0.contains_key(*m)).map(|(m, _)| m.as_str())
    }

    /// Dollars spent, when every model that reported usage has a price: a partial sum would pass for
    /// the whole. `None` too when nothing was reported.
    pub fn cost(&self, pricing: &Pricing) -> Option<f64> {
        let mut total = 0.0;
        let mut any = false;
        for (model, u) in self.0.iter().filter(|(_, u)| !u.is_zero()) {
            total += pricing.0.get(model)?.cost(u);
            any = true;
        }
        any.then_some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage { input_tokens: input, output_tokens: output, cache_read_tokens: read, cache_write_tokens: write }
    }

    #[test]
    fn cost_prices_each_count_and_needs_every_model() {
        let price = Price { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: Some(3.75) };
        let pricing = Pricing(BTreeMap::from([("m".to_string(), price)]));
        let mut by = UsageByModel::default();
        by.add("m", &u(1_000_000, 100_000, 2_000_000, 400_000));
        let cost = by.cost(&pricing).unwrap();
        assert!((cost - (3.0 + 1.5 + 0.6 + 1.5)).abs() < 1e-9, "{cost}");
        by.add("other", &u(1, 0, 0, 0));
        assert_eq!(by.cost(&pricing), None, "a model without a price makes the sum unknown");
        assert_eq!(UsageByModel::default().cost(&pricing), None);
        // Cache prices default to the input price.
        let plain = Price { input: 2.0, output: 0.0, cache_read: None, cache_write: None };
        assert!((plain.cost(&u(0, 0, 500_000, 500_000)) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn pricing_from_json_checks_every_entry_as_the_configuration_does() {
        let p = Pricing::from_json(r#"{"m": {"input": 3, "output": 15, "cache_read": 0.3}}"#).unwrap();
        assert_eq!(p.0["m"], Price { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: None });
        assert!(Pricing::from_json("{}").unwrap().is_empty());
        for (text, why) in [
            ("[]", "pricing: expected an object of prices by model name, got an array"),
            ("{\"m\": 3}", "pricing[\"m\"]: expected an object {\"input\": ..., \"output\": ...}, got a number"),
            ("{\"m\": {\"input\": 1}}", "pricing[\"m\"].output: missing (dollars per million tokens)"),
            (
                "{\"m\": {\"input\": 1, \"output\": -2}}",
                "pricing[\"m\"].output: expected dollars per million tokens (a number >= 0), got -2",
            ),
            (
                "{\"m\": {\"input\": \"1\", \"output\": 2}}",
                "pricing[\"m\"].input: expected dollars per million tokens (a number >= 0), got \"1\"",
            ),
            (
                "{\"m\": {\"input\": 1, \"output\": 2, \"cache_reed\": 1}}",
                "pricing[\"m\"].cache_reed: unknown price (known: input, output, cache_read, cache_write)",
            ),
            ("{\"\": {\"input\": 1, \"output\": 2}}", "pricing[\"\"]: keys are model names"),
            ("{\"m\": ", "pricing: not valid JSON: EOF while parsing"),
        ] {
            let err = Pricing::from_json(text).unwrap_err();
            assert!(err.starts_with(why), "{text}: {err}");
        }
    }

    #[test]
    fn unpriced_names_the_models_that_make_a_cost_unknown() {
        let pricing = Pricing(BTreeMap::from([("a".to_string(), Price::default())]));
        let mut by = UsageByModel::default();
        by.add("a", &u(1, 1, 0, 0));
        by.add("b", &u(1, 0, 0, 0));
        by.add("c", &Usage::default());
        assert_eq!(by.unpriced(&pricing).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn pricing_reads_a_map_or_an_empty_list() {
        let p: Pricing = serde_json::from_str(r#"{"m":{"input":1,"output":2,"cache_read":0.1}}"#).unwrap();
        assert_eq!(p.0["m"].cache_read, Some(0.1));
        assert!(serde_json::from_str::<Pricing>("[]").unwrap().is_empty());
        assert!(serde_json::from_str::<Pricing>("[1]").is_err());
    }
}
