//! One cell turned into the JSON value of its field: a value map first, then the field's type with
//! the column's date formats, time zone, decimal separator and currency.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use serde_json::{Value, json};

use super::schema::Kind;

/// How the cells of one column become values.
#[derive(Clone, Debug)]
pub(super) struct Conversion {
    pub kind: Kind,
    /// Cell (trimmed) -> the value to use instead.
    pub values: HashMap<String, String>,
    /// Formats (`%d.%m.%Y`) tried in order before ISO 8601.
    pub formats: Vec<String>,
    pub decimal: char,
    pub currency: Option<String>,
    /// The zone of a time without an offset; without one such a time is refused.
    pub tz: Option<Tz>,
}

impl Conversion {
    /// A column with no rules: ISO dates, RFC 3339 times, money field by field.
    pub(super) fn plain(kind: Kind) -> Self {
        Self { kind, values: HashMap::new(), formats: Vec::new(), decimal: '.', currency: None, tz: None }
    }

    /// The value of a cell; `None` for an empty cell, which leaves the field out.
    pub(super) fn apply(&self, cell: &str) -> Result<Option<Value>, String> {
        let mapped = if self.values.is_empty() { None } else { self.values.get(cell.trim()) };
        let cell = mapped.map_or(cell, String::as_str);
        if cell.is_empty() {
            return Ok(None);
        }
        let bad = |what: &str| format!("{cell:?} is not {what}");
        let value = match &self.kind {
            Kind::Text => json!(cell),
            Kind::Enum(allowed) => {
                if !allowed.iter().any(|a| a == cell) {
                    let unmapped = if self.values.is_empty() || mapped.is_some() {
                        ""
                    } else {
                        " (nor in the column's value map)"
                    };
                    return Err(format!("{cell:?} is not one of {}{unmapped}", allowed.join(", ")));
                }
                json!(cell)
            }
            Kind::Integer => json!(cell.trim().parse::<i64>().map_err(|_| bad("an integer"))?),
            Kind::Number => {
                let text =
                    if self.decimal == '.' { cell.trim().to_string() } else { cell.trim().replace(self.decimal, ".") };
                json!(text.parse::<f64>().map_err(|_| bad("a number"))?)
            }
            Kind::Boolean => match cell.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => json!(true),
                "false" | "0" | "no" => json!(false),
                _ => return Err(bad("true or false")),
            },
            Kind::Date => json!(self.date(cell.trim()).ok_or_else(|| bad(&self.expected("a date", "YYYY-MM-DD")))?),
            Kind::DateTime => json!(self.date_time(cell.trim())?),
            Kind::Money => money(cell, self.decimal, self.currency.as_deref())?,
            Kind::Object(_) => return Err("a column cannot fill an object".to_string()),
        };
        Ok(Some(value))
    }

    fn expected(&self, what: &str, iso: &str) -> String {
        if self.formats.is_empty() {
            format!("{what} ({iso})")
        } else {
            format!("{what} in {}", self.formats.join(" or "))
        }
    }

    fn date(&self, cell: &str) -> Option<String> {
        self.formats
            .iter()
            .map(String::as_str)
            .chain(["%Y-%m-%d"])
            .find_map(|f| NaiveDate::parse_from_str(cell, f).ok())
            .map(|d| d.format("%Y-%m-%d").to_string())
    }

    fn date_time(&self, cell: &str) -> Result<String, String> {
        if DateTime::parse_from_rfc3339(cell).is_ok() {
            return Ok(cell.to_string());
        }
        let iso = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"];
        for format in self.formats.iter().map(String::as_str).chain(iso) {
            if format.contains("%z") || format.contains("%:z") {
                if let Ok(t) = DateTime::parse_from_str(cell, format) {
                    return Ok(t.to_rfc3339());
                }
                continue;
            }
            let naive = NaiveDateTime::parse_from_str(cell, format)
                .ok()
                .or_else(|| NaiveDate::parse_from_str(cell, format).ok().map(|d| d.and_time(chrono::NaiveTime::MIN)));
            let Some(naive) = naive else { continue };
            let Some(tz) = self.tz else {
                return Err(format!("{cell:?} has no offset, and no time zone is known for it"));
            };
            return match tz.from_local_datetime(&naive).earliest() {
                Some(t) => Ok(t.fixed_offset().to_rfc3339()),
                None => Err(format!("{cell:?} does not exist in {tz} (the clocks skip it)")),
            };
        }
        Err(format!("{cell:?} is not {}", self.expected("a time", "RFC 3339, e.g. 2025-06-01T07:30:00Z")))
    }
}

/// Digits after the decimal point of a currency's major unit (ISO 4217).
pub(super) fn minor_digits(currency: &str) -> u32 {
    const NONE: [&str; 17] = [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF",
        "XPF",
    ];
    const THREE: [&str; 7] = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"];
    if NONE.contains(&currency) {
        0
    } else if THREE.contains(&currency) {
        3
    } else {
        2
    }
}

fn symbol_currency(symbol: char) -> Option<&'static str> {
    match symbol {
        '€' => Some("EUR"),
        '£' => Some("GBP"),
        '$' => Some("USD"),
        '¥' => Some("JPY"),
        _ => None,
    }
}

/// `49,00`, `49.00 €`, `EUR 1.234,50`, `-5` in major units: a `Money` object in minor units.
pub(super) fn money(cell: &str, decimal: char, default_currency: Option<&str>) -> Result<Value, String> {
    let mut text = cell.trim();
    let mut currency: Option<String> = None;
    if let Some(c) = text.chars().next().filter(|c| symbol_currency(*c).is_some()) {
        currency = symbol_currency(c).map(str::to_string);
        text = text[c.len_utf8()..].trim_start();
    } else if let Some(c) = text.chars().last().filter(|c| symbol_currency(*c).is_some()) {
        currency = symbol_currency(c).map(str::to_string);
        text = text[..text.len() - c.len_utf8()].trim_end();
    }
    let code = |s: &str| s.len() == 3 && s.chars().all(|c| c.is_ascii_alphabetic());
    if currency.is_none() {
        if let Some((head, rest)) = text.split_once(char::is_whitespace).filter(|(h, _)| code(h)) {
            currency = Some(head.to_ascii_uppercase());
            text = rest.trim();
        } else if let Some((rest, tail)) = text.rsplit_once(char::is_whitespace).filter(|(_, t)| code(t)) {
            currency = Some(tail.to_ascii_uppercase());
            text = rest.trim();
        }
    }
    let currency = match currency.or_else(|| default_currency.map(str::to_string)) {
        Some(c) => c,
        None => {
            return Err(format!(
                "{cell:?} names no currency, and the column has none (`currency` in the mapping file)"
            ));
        }
    };
    let thousands = if decimal == ',' { '.' } else { ',' };
    let digits: String =
        text.chars().filter(|c| !matches!(c, ' ' | '\u{a0}' | '\u{202f}' | '\'') && *c != thousands).collect();
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, digits.as_str()),
    };
    let (whole, fraction) = digits.split_once(decimal).unwrap_or((digits, ""));
    let places = minor_digits(&currency);
    let numeric = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !numeric(whole) || !numeric(fraction) {
        return Err(format!("{cell:?} is not an amount (decimal separator {decimal:?})"));
    }
    if fraction.len() > places as usize {
        return Err(format!("{cell:?} has more decimals than {currency} has ({places})"));
    }
    let scale = 10i64.pow(places);
    let padded = format!("{fraction:0<width$}", width = places as usize);
    let amount = whole
        .parse::<i64>()
        .ok()
        .and_then(|w| w.checked_mul(scale))
        .and_then(|w| w.checked_add(padded.parse::<i64>().unwrap_or(0)))
        .ok_or_else(|| format!("{cell:?} is too large an amount"))?;
    Ok(json!({"amount": if negative { -amount } else { amount }, "currency": currency}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_in_major_units() {
        let eur = Some("EUR");
        assert_eq!(money("49,00", ',', eur), Ok(json!({"amount": 4900, "currency": "EUR"})));
        assert_eq!(money("1.234,5 €", ',', None), Ok(json!({"amount": 123450, "currency": "EUR"})));
        assert_eq!(money("USD 12.99", '.', eur), Ok(json!({"amount": 1299, "currency": "USD"})));
        assert_eq!(money("1500 JPY", '.', None), Ok(json!({"amount": 1500, "currency": "JPY"})));
        assert_eq!(money("-5", '.', eur), Ok(json!({"amount": -500, "currency": "EUR"})));
        assert!(money("49,001", ',', eur).unwrap_err().contains("more decimals"));
        assert!(money("4x", ',', eur).unwrap_err().contains("not an amount"));
        assert!(money("49", ',', None).unwrap_err().contains("no currency"));
    }

    #[test]
    fn dates_and_times_follow_the_formats_then_iso() {
        let mut c = Conversion::plain(Kind::Date);
        c.formats = vec!["%d.%m.%Y".into()];
        assert_eq!(c.apply("12.04.1980"), Ok(Some(json!("1980-04-12"))));
        assert_eq!(c.apply("1980-04-12"), Ok(Some(json!("1980-04-12"))));
        assert_eq!(c.apply("31.02.1980").unwrap_err(), "\"31.02.1980\" is not a date in %d.%m.%Y");
        let mut t = Conversion::plain(Kind::DateTime);
        t.formats = vec!["%d.%m.%Y %H:%M".into()];
        assert!(t.apply("01.06.2025 07:30").unwrap_err().contains("no time zone"));
        t.tz = Some(chrono_tz::Europe::Berlin);
        assert_eq!(t.apply("01.06.2025 07:30"), Ok(Some(json!("2025-06-01T07:30:00+02:00"))));
        assert_eq!(t.apply("2025-06-01T07:30:00Z"), Ok(Some(json!("2025-06-01T07:30:00Z"))));
    }

    #[test]
    fn value_maps_come_before_the_type() {
        let mut c = Conversion::plain(Kind::Enum(vec!["active".into(), "inactive".into()]));
        c.values.insert("Aktiv".into(), "active".into());
        assert_eq!(c.apply(" Aktiv "), Ok(Some(json!("active"))));
        assert_eq!(c.apply("inactive"), Ok(Some(json!("inactive"))));
        assert!(c.apply("Gesperrt").unwrap_err().contains("value map"));
    }
}
