//! The user's configuration, `~/.config/ctxlens/config.toml`
//! (`$XDG_CONFIG_HOME/ctxlens/config.toml` when that is set; `CTXLENS_CONFIG`
//! names another file): the inspector's keys and colours, a default policy
//! file and price overrides. Read once, at start-up; a file that is not
//! there is an empty configuration, one that does not read is an error
//! naming its line, column and key (docs/guide.md, "Configuration").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

use crate::analysis::cost::{Prices, Rates};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub theme: Theme,
    /// An action's keys, replacing its own (`next_call = ["n", "Right"]`).
    #[serde(default)]
    pub keymap: BTreeMap<String, Keys>,
    #[serde(default)]
    pub policy: DefaultPolicy,
    /// Rates by model, over the shipped price table.
    #[serde(default)]
    pub prices: BTreeMap<String, Rates>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Theme {
    #[serde(default)]
    pub color: ColorChoice,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorChoice {
    /// Colour unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultPolicy {
    /// A policy file every command uses when no `--policy` is given.
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// One key or several.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Keys {
    One(String),
    Many(Vec<String>),
}

impl Keys {
    pub fn names(&self) -> Vec<&str> {
        match self {
            Keys::One(key) => vec![key.as_str()],
            Keys::Many(keys) => keys.iter().map(String::as_str).collect(),
        }
    }
}

/// Where the configuration is read from.
pub fn path() -> Option<PathBuf> {
    if let Some(file) = std::env::var_os("CTXLENS_CONFIG").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(file));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("ctxlens").join("config.toml"))
}

static LOADED: OnceLock<Result<Config, String>> = OnceLock::new();

/// The configuration, read on first use.
pub fn get() -> anyhow::Result<&'static Config> {
    LOADED
        .get_or_init(|| match path() {
            Some(path) => read(&path),
            None => Ok(Config::default()),
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Reads the configuration at `path`: none there is the defaults.
pub fn read(path: &Path) -> Result<Config, String> {
    let text = match crate::files::read_text(path, crate::files::SMALL, "the configuration") {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => {
            return Err(format!(
                "{}: cannot read the configuration: {e}",
                path.display()
            ));
        }
    };
    parse(&text).map_err(|e| format!("{}:{e}", path.display()))
}

/// Parses a configuration's text; an error starts "LINE:COLUMN: ".
pub fn parse(text: &str) -> Result<Config, String> {
    let config: Config = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(String::new(), |span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{line}:{column}: ")
        });
        format!("{at}{}", e.message().trim())
    })?;
    for (model, rates) in &config.prices {
        if let Some((key, value)) = rates.invalid() {
            return Err(format!(
                "{}: prices.\"{model}\".{key}: {value} is not a price (dollars per million tokens, 0 or more)",
                line_of(text, key.rsplit('.').next().unwrap_or(key))
            ));
        }
    }
    for (action, keys) in &config.keymap {
        crate::keys::check_binding(action, &keys.names())
            .map_err(|e| format!("{}: keymap.{action}: {e}", line_of(text, action)))?;
    }
    Ok(config)
}

/// "LINE:COLUMN" of the first line that sets `key`, for errors found after parsing.
fn line_of(text: &str, key: &str) -> String {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or("1:1".into(), |i| format!("{}:1", i + 1))
}

/// The shipped price table with the configuration's rates over it.
pub fn prices() -> anyhow::Result<Prices> {
    let mut prices = Prices::shipped();
    for (model, rates) in &get()?.prices {
        prices.models.insert(model.to_lowercase(), *rates);
    }
    Ok(prices)
}

/// A configuration file to start from: every key, commented, with its
/// default (`ctxlens config --print`).
pub fn example() -> String {
    let mut out = String::new();
    let place = path().map_or("~/.config/ctxlens/config.toml".into(), |p| {
        p.display().to_string()
    });
    out.push_str(&format!(
        "# ctxlens's configuration: {place}\n\
         # ($XDG_CONFIG_HOME/ctxlens/config.toml when XDG_CONFIG_HOME is set; CTXLENS_CONFIG names\n\
         # another file). Read at start-up by every command; every key may be left out.\n\n\
         [theme]\n\
         # The inspector's colours: \"auto\" (unless NO_COLOR is set), \"always\" or \"never\".\n\
         color = \"auto\"\n\n\
         [policy]\n\
         # A policy file (see `ctxlens policy`) every command projects with when no --policy\n\
         # is given, instead of each call's recorded policy.\n\
         # file = \"/path/to/policy.toml\"\n\n\
         [keymap]\n\
         # An action's keys, replacing its own: one key or a list. A key is a character or\n\
         # one of Enter, Esc, Tab, BackTab, Backspace, Delete, Insert, Up, Down, Left, Right,\n\
         # Home, End, PageUp, PageDown, Space, F1..F12. The actions, with their keys today:\n"
    ));
    for (action, keys, help) in crate::keys::actions() {
        out.push_str(&format!("# {action} = {keys:?}  # {help}\n"));
    }
    out.push_str(
        "\n# Prices in dollars per million tokens, over the table ctxlens ships (its date is in\n\
         # `ctxlens stats`); a model named here is priced as given. For example:\n\
         # [prices.\"my-model\"]\n\
         # input = 3.0          # input the provider had not cached\n\
         # cached_input = 0.3   # input read from its prompt cache\n\
         # cache_write = 3.75   # input written to the cache\n\
         # cache_write_1h = 6.0 # input written to a cache kept for an hour (absent: cache_write)\n\
         # output = 15.0        # output, reasoning included\n\
         # long_context = { over = 200000, input = 2.0, output = 1.5 }  # optional\n",
    );
    out
}
