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
    fn pricing_reads_a_map_or_an_empty_list() {
        let p: Pricing = serde_json::from_str(r#"{"m":{"input":1,"output":2,"cache_read":0.1}}"#).unwrap();
        assert_eq!(p.0["m"].cache_read, Some(0.1));
        assert!(serde_json::from_str::<Pricing>("[]").unwrap().is_empty());
        assert!(serde_json::from_str::<Pricing>("[1]").is_err());
    }
}
