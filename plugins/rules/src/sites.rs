//! The site catalog: spoken names of web sites and the URL each one opens.
//!
//! The catalog is a TOML file holding an array of `[[site]]` tables with `name`, `url` and
//! optional `aliases` (see `data/sites.toml`, which is also the built-in default). Loading
//! checks every entry and reports problems with the file and line they come from.

use crate::text::{compact, is_hostname, join_spoken_dots, line_of, normalize, strip_word_prefix};
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

/// The catalog compiled into the plugin.
pub const BUILTIN_TOML: &str = include_str!("../../../data/sites.toml");

/// How the built-in catalog is named in messages.
pub const BUILTIN_NAME: &str = "data/sites.toml (built in)";

/// One web site the router can open by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The name as written in the catalog ("YouTube"), used in messages and sent as
    /// `ensure_url`'s `site`, which the desktop plugin looks for in browser window titles.
    pub name: String,
    /// The URL to open.
    pub url: String,
    /// The site's search template (`{q}`: the form-encoded query), for "search \<site\>
    /// for X".
    pub search: Option<String>,
    /// Its pages people ask for by name: normalised words ("pull requests") → the page's
    /// URL on the site ("https://github.com/pulls"), for "show me my github notifications".
    pub pages: Vec<(String, String)>,
    /// Normalised name, aliases and (for a URL without a path) the host, with and without
    /// `www.`: the exact forms an utterance is compared with.
    keys: Vec<String>,
    /// Normalised `web_names`: names of the site only where the web is meant
    /// ([`Catalog::lookup_web`]).
    web_keys: Vec<String>,
}

impl Site {
    /// The normalised forms an utterance is compared with: name, aliases, host.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
}

/// The largest site catalog read.
pub const MAX_CATALOG_BYTES: u64 = 4 * 1024 * 1024;

/// Every site of one catalog file, in file order.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    sites: Vec<Site>,
    /// Where the catalog came from, for health and error messages.
    source: String,
}

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file could not be read.
    #[error("cannot read the site catalog {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not have the catalog's shape. The TOML error
    /// names the line and column.
    #[error("invalid site catalog {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// An entry is well-formed TOML but unusable.
    #[error("invalid site catalog {path}, line {line}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the offending value.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    site: Vec<SiteEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteEntry {
    name: Spanned<String>,
    url: Spanned<String>,
    #[serde(default)]
    aliases: Vec<Spanned<String>>,
    search: Option<Spanned<String>>,
    #[serde(default)]
    web_names: Vec<Spanned<String>>,
    /// Page name → a path on the site (starting with `/`).
    #[serde(default)]
    pages: std::collections::BTreeMap<String, Spanned<String>>,
}

impl Catalog {
    /// The catalog compiled into the plugin (`data/sites.toml`).
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::parse(BUILTIN_TOML, BUILTIN_NAME)
    }

    /// Read and parse a catalog file (a regular file of at most [`MAX_CATALOG_BYTES`]).
    pub fn load(path: &Path) -> Result<Catalog, CatalogError> {
        let shown = path.display().to_string();
        let text = utter_protocol::files::read_regular_file(path, MAX_CATALOG_BYTES).map_err(
            |source| CatalogError::Read {
                path: shown.clone(),
                source,
            },
        )?;
        Catalog::parse(&text, &shown)
    }

    /// Parse catalog text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Catalog, CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| CatalogError::Parse {
            path: source.to_owned(),
            source: e,
        })?;
        let invalid = |span: std::ops::Range<usize>, message: String| CatalogError::Invalid {
            path: source.to_owned(),
            line: line_of(text, span.start),
            message,
        };
        let mut sites: Vec<Site> = Vec::with_capacity(file.site.len());
        // Which site claimed each spoken name, to refuse ambiguous catalogs.
        let mut claimed: Vec<(String, String)> = Vec::new();
        for entry in file.site {
            let name = entry.name.get_ref().trim().to_owned();
            if normalize(&name).is_empty() {
                return Err(invalid(
                    entry.name.span(),
                    "site name must contain a letter or digit".into(),
                ));
            }
            let url = entry.url.get_ref().trim().to_owned();
            let Some(host) = url_host(&url) else {
                return Err(invalid(
                    entry.url.span(),
                    format!(
                        "site {name:?}: url {url:?} must be http:// or https:// followed by a \
                         host name"
                    ),
                ));
            };
            let mut keys = Vec::new();
            let mut web_keys = Vec::new();
            let named = std::iter::once(&entry.name).chain(&entry.aliases);
            for (web, spoken) in named
                .map(|s| (false, s))
                .chain(entry.web_names.iter().map(|s| (true, s)))
            {
                let key = normalize(spoken.get_ref());
                if key.is_empty() {
                    return Err(invalid(
                        spoken.span(),
                        format!("site {name:?}: alias {:?} has no letters", spoken.get_ref()),
                    ));
                }
                if let Some((_, owner)) = claimed.iter().find(|(k, _)| *k == key) {
                    return Err(invalid(
                        spoken.span(),
                        format!("{key:?} names both {owner:?} and {name:?}"),
                    ));
                }
                claimed.push((key.clone(), name.clone()));
                if web {
                    web_keys.push(key);
                } else {
                    keys.push(key);
                }
            }
            if url_has_no_path(&url) {
                keys.push(host.clone());
                if let Some(bare) = host.strip_prefix("www.") {
                    keys.push(bare.to_owned());
                }
            }
            let search = match &entry.search {
                None => None,
                Some(template) => {
                    let value = template.get_ref().trim();
                    if let Some(problem) = check_search_template(value) {
                        return Err(invalid(
                            template.span(),
                            format!("site {name:?}: search: {problem}"),
                        ));
                    }
                    Some(value.to_owned())
                }
            };
            let mut pages = Vec::new();
            for (page, path) in &entry.pages {
                let key = normalize(page);
                let value = path.get_ref().trim();
                if key.is_empty()
                    || !value.starts_with('/')
                    || value.starts_with("//")
                    || value.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(invalid(
                        path.span(),
                        format!(
                            "site {name:?}: page {page:?} needs words and a path on the site starting with /"
                        ),
                    ));
                }
                pages.push((key, format!("{}{value}", url.trim_end_matches('/'))));
            }
            sites.push(Site {
                name,
                url,
                search,
                pages,
                keys,
                web_keys,
            });
        }
        Ok(Catalog {
            sites,
            source: source.to_owned(),
        })
    }

    /// The sites, in file order.
    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// Where the catalog came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The site a spoken target names, if any. `target` is [`normalize`]d text such as
    /// `the youtube website` or `hacker news`; a leading "the"/"my", a trailing "website",
    /// "site", "page" or "dot com", spaces inside names and spoken dots are all tolerated.
    pub fn lookup(&self, target: &str) -> Option<&Site> {
        let forms = site_forms(target);
        // Exact keys first for every form, then the space-insensitive comparison, so that an
        // exact name is never beaten by a looser match on another site.
        for form in &forms {
            if let Some(site) = self.sites.iter().find(|s| s.keys.iter().any(|k| k == form)) {
                return Some(site);
            }
        }
        for form in &forms {
            let wanted = compact(form);
            if let Some(site) = self
                .sites
                .iter()
                .find(|s| s.keys.iter().any(|k| compact(k) == wanted))
            {
                return Some(site);
            }
        }
        None
    }
}

impl Catalog {
    /// A page of a site said with the site's name: "github notifications", "my github pull
    /// requests", "my pull requests on github", "the notifications page on github" →
    /// (the site, the page's URL). `target` is [`normalize`]d.
    pub fn lookup_page(&self, target: &str) -> Option<(&Site, &str)> {
        // It runs for every utterance with a site verb: nothing more unless a page is said.
        if !self
            .sites
            .iter()
            .any(|s| s.pages.iter().any(|(key, _)| target.contains(key.as_str())))
        {
            return None;
        }
        let target = ["my ", "the ", "all my ", "all the "]
            .iter()
            .find_map(|lead| target.strip_prefix(lead))
            .unwrap_or(target);
        let page_of = |site: &'_ Site, said: &str| -> Option<usize> {
            let said = said
                .strip_prefix("my ")
                .or_else(|| said.strip_prefix("the "))
                .unwrap_or(said);
            let said = said.strip_suffix(" page").unwrap_or(said);
            site.pages.iter().position(|(key, _)| key == said)
        };
        let words: Vec<&str> = target.split(' ').collect();
        for cut in 1..words.len() {
            let (head, tail) = (words[..cut].join(" "), words[cut..].join(" "));
            // "<site> <page>"
            if let Some(site) = self.lookup(&head)
                && let Some(i) = page_of(site, &tail)
            {
                return Some((site, site.pages[i].1.as_str()));
            }
            // "<page> on <site>"
            for on in ["on", "in", "at", "from"] {
                if let Some(page) = head.strip_suffix(format!(" {on}").as_str())
                    && let Some(site) = self.lookup(&tail)
                    && let Some(i) = page_of(site, page)
                {
                    return Some((site, site.pages[i].1.as_str()));
                }
            }
        }
        None
    }

    /// [`Catalog::lookup_web`] for a site with a search of its own ("search amazon for …").
    pub fn lookup_search(&self, target: &str) -> Option<&Site> {
        self.lookup_web(target).filter(|s| s.search.is_some())
    }

    /// [`Catalog::lookup`], else a site one of whose `web_names` `target` is: for where the
    /// web is meant ("search spotify for X", "spotify in the browser").
    pub fn lookup_web(&self, target: &str) -> Option<&Site> {
        if let Some(site) = self.lookup(target) {
            return Some(site);
        }
        let forms = site_forms(target);
        forms.iter().find_map(|form| {
            let wanted = compact(form);
            self.sites
                .iter()
                .find(|s| s.web_keys.iter().any(|k| k == form || compact(k) == wanted))
        })
    }
}

/// What is wrong with a search template, if anything: it must be an `https://` (or
/// `http://`) URL with a host, holding `{q}` exactly once, and no whitespace.
pub fn check_search_template(template: &str) -> Option<String> {
    if template.matches("{q}").count() != 1 {
        return Some(format!(
            "{template:?} must hold {{q}} (the query) exactly once"
        ));
    }
    if template.chars().any(char::is_whitespace) || template.len() > 2048 {
        return Some(format!("{template:?} must be one URL without spaces"));
    }
    if url_host(&template.replace("{q}", "q")).is_none() {
        return Some(format!(
            "{template:?} must start with https:// or http:// and a host name"
        ));
    }
    None
}

/// `template` with `{q}` replaced by `query` form-encoded (`application/x-www-form-urlencoded`:
/// spaces as `+`, everything but letters, digits and `*-._` percent-encoded), as search
/// engines read their query parameter.
pub fn fill_template(template: &str, query: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
    template.replacen("{q}", &encoded, 1)
}

/// The variants of a spoken site target worth looking up, most literal first.
pub fn site_forms(target: &str) -> Vec<String> {
    let mut forms = vec![target.to_owned()];
    let mut cleaned = target;
    for article in ["the", "my"] {
        if let Some(rest) = strip_word_prefix(cleaned, article).filter(|r| !r.is_empty()) {
            cleaned = rest;
        }
    }
    for suffix in [
        "website",
        "web site",
        "web page",
        "webpage",
        "home page",
        "homepage",
        "site",
        "page",
        "dot com",
    ] {
        if let Some(rest) =
            crate::text::strip_word_suffix(cleaned, suffix).filter(|r| !r.is_empty())
        {
            cleaned = rest;
            break;
        }
    }
    for form in [
        Some(cleaned.to_owned()),
        join_spoken_dots(target),
        join_spoken_dots(cleaned),
    ]
    .into_iter()
    .flatten()
    {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// The lowercase host of an `http`/`https` URL, when it is a plain host name.
fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    is_hostname(&host).then_some(host)
}

/// True when the URL is just scheme and host (an optional trailing `/` allowed).
fn url_has_no_path(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    match rest.find(['/', '?', '#']) {
        None => true,
        Some(i) => &rest[i..] == "/",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Catalog {
        Catalog::builtin().expect("the built-in catalog parses")
    }

    fn url_of(catalog: &Catalog, target: &str) -> Option<String> {
        catalog.lookup(target).map(|s| s.url.clone())
    }

    #[test]
    fn builtin_catalog_has_the_promised_sites() {
        let c = builtin();
        assert!(c.sites().len() >= 25, "{} sites", c.sites().len());
        let expect = [
            ("youtube", "https://www.youtube.com"),
            ("gmail", "https://mail.google.com"),
            ("maps", "https://www.google.com/maps"),
            ("hacker news", "https://news.ycombinator.com"),
            ("github", "https://github.com"),
            ("crates", "https://crates.io"),
            ("docs.rs", "https://docs.rs"),
            ("arch wiki", "https://wiki.archlinux.org"),
            ("twitter", "https://x.com"),
            ("stack overflow", "https://stackoverflow.com"),
        ];
        for (target, url) in expect {
            assert_eq!(url_of(&c, target).as_deref(), Some(url), "{target}");
        }
    }

    #[test]
    fn lookup_is_tolerant_of_how_a_site_is_said() {
        let c = builtin();
        for target in [
            "youtube",
            "you tube",
            "the youtube website",
            "youtube site",
            "youtube dot com",
            "youtube.com",
            "www.youtube.com",
            "my youtube",
        ] {
            assert_eq!(
                url_of(&c, target).as_deref(),
                Some("https://www.youtube.com"),
                "{target}"
            );
        }
        assert_eq!(
            url_of(&c, "crates dot io").as_deref(),
            Some("https://crates.io")
        );
        assert_eq!(
            url_of(&c, "stackoverflow").as_deref(),
            Some("https://stackoverflow.com")
        );
        assert_eq!(url_of(&c, "frobnicator"), None);
        // A host with a path is not a key: www.google.com is Google, not Maps.
        assert_eq!(
            url_of(&c, "www.google.com").as_deref(),
            Some("https://www.google.com")
        );
    }

    #[test]
    fn bad_catalogs_are_refused_with_file_and_line() {
        let err = Catalog::parse("[[site]]\nname = \"A\"\nurl = \n", "x.toml").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("x.toml") && text.contains("line 3"), "{text}");

        let err = Catalog::parse(
            "[[site]]\nname = \"A\"\nurl = \"https://a.com\"\n\n[[site]]\nname = \"B\"\n\
             url = \"ftp://b.com\"\n",
            "y.toml",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("y.toml, line 7") && text.contains("ftp://b.com"),
            "{text}"
        );

        let err = Catalog::parse(
            "[[site]]\nname = \"A\"\nurl = \"https://a.com\"\n[[site]]\nname = \"B\"\n\
             url = \"https://b.com\"\naliases = [\"a\"]\n",
            "z.toml",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 7") && text.contains("both"), "{text}");

        let err = Catalog::parse(
            "[[site]]\nname = \"A\"\nurl = \"https://a.com\"\ncolour = 1\n",
            "u.toml",
        )
        .unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn empty_catalog_is_allowed() {
        let c = Catalog::parse("", "empty.toml").unwrap();
        assert!(c.sites().is_empty());
        assert_eq!(c.lookup("youtube"), None);
    }

    #[test]
    fn a_page_is_said_with_its_site_either_way_round_and_must_be_a_path() {
        let catalog = Catalog::parse(
            "[[site]]\nname = \"GitHub\"\nurl = \"https://github.com\"\npages.\"pull requests\" = \"/pulls\"\n",
            "t",
        )
        .unwrap();
        for said in [
            "github pull requests",
            "my github pull requests",
            "my pull requests on github",
            "the pull requests page on github",
        ] {
            let (site, url) = catalog.lookup_page(said).expect(said);
            assert_eq!(
                (site.name.as_str(), url),
                ("GitHub", "https://github.com/pulls")
            );
        }
        for said in [
            "github",
            "pull requests",
            "github issues",
            "my pull requests on gitlab",
        ] {
            assert!(catalog.lookup_page(said).is_none(), "{said}");
        }
        // A page is a path on the site: not another host, not a URL.
        for bad in ["https://evil.example/x", "//evil.example", "pulls", "/a b"] {
            let text = format!(
                "[[site]]\nname = \"GitHub\"\nurl = \"https://github.com\"\npages.\"x\" = {bad:?}\n"
            );
            assert!(Catalog::parse(&text, "t").is_err(), "{bad}");
        }
    }
}
