//! Which REST endpoint a request is for, and its paging parameters, read as GitHub reads them.

use super::*;

pub(super) enum Route {
    /// `GET /repos/{o}/{r}/contents/{path}` (empty path: the root directory).
    Contents {
        repo: String,
        path: String,
    },
    /// `GET /repos/{o}/{r}/readme/{dir}` (empty: the repository's README).
    Readme {
        repo: String,
        dir: String,
    },
    Pull {
        repo: String,
        number: u64,
    },
    PullFiles {
        repo: String,
        number: u64,
    },
    PullCommits {
        repo: String,
        number: u64,
    },
    Issue {
        repo: String,
        number: u64,
    },
}

impl Route {
    pub(super) fn parse(path: &str) -> Option<Route> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        let (owner, name, rest) = match segments.as_slice() {
            ["repos", owner, name, rest @ ..] if !owner.is_empty() && !name.is_empty() => {
                (owner, name, rest)
            }
            _ => return None,
        };
        let repo = format!("{owner}/{name}");
        let number = |s: &str| -> Option<u64> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok().filter(|n| *n > 0)
        };
        Some(match rest {
            ["contents", path @ ..] => {
                let path: Vec<String> = path.iter().map(|s| percent_decode(s)).collect();
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                // No empty segment (`a//b`, a trailing `/`) and no `..`: GitHub answers 404.
                if path.iter().any(|s| s.is_empty() || *s == "..")
                    && !(path.len() == 1 && path[0].is_empty())
                {
                    return None;
                }
                Route::Contents {
                    repo,
                    path: path.join("/"),
                }
            }
            ["readme", dir @ ..] => {
                let dir: Vec<String> = dir.iter().map(|s| percent_decode(s)).collect();
                let dir: Vec<&str> = dir.iter().map(String::as_str).collect();
                if dir.iter().any(|s| s.is_empty() || *s == "..") {
                    return None;
                }
                Route::Readme {
                    repo,
                    dir: dir.join("/"),
                }
            }
            ["pulls", n] => Route::Pull {
                repo,
                number: number(n)?,
            },
            ["pulls", n, "files"] => Route::PullFiles {
                repo,
                number: number(n)?,
            },
            ["pulls", n, "commits"] => Route::PullCommits {
                repo,
                number: number(n)?,
            },
            ["issues", n] => Route::Issue {
                repo,
                number: number(n)?,
            },
            _ => return None,
        })
    }

    pub(super) fn paginated(&self) -> bool {
        matches!(self, Route::PullFiles { .. } | Route::PullCommits { .. })
    }

    pub(super) fn resource(&self) -> &'static str {
        match self {
            Route::Pull { .. } | Route::PullFiles { .. } | Route::PullCommits { .. } => {
                "PullRequest"
            }
            Route::Issue { .. } => "Issue",
            Route::Contents { .. } | Route::Readme { .. } => "Content",
        }
    }
}

pub(super) struct Params {
    /// `per_page` as the client sent it (kept in the `Link` URLs only if it was sent).
    per_page: Option<u64>,
    page: u64,
}

impl Params {
    /// `Err(field)` for an invalid, repeated or unexpected parameter.
    pub(super) fn parse(query: Option<&str>, paginated: bool) -> Result<Params, String> {
        let mut per_page = None;
        let mut page = None;
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "per_page" if paginated => &mut per_page,
                "page" if paginated => &mut page,
                _ => return Err(key.to_string()),
            };
            if slot.is_some() {
                return Err(key.to_string());
            }
            let n = positive(value).ok_or_else(|| key.to_string())?;
            *slot = Some(n);
        }
        if per_page.is_some_and(|p| p > MAX_PER_PAGE) {
            return Err("per_page".to_string());
        }
        Ok(Params {
            per_page,
            page: page.unwrap_or(1),
        })
    }

    fn per_page(&self) -> u64 {
        self.per_page.unwrap_or(DEFAULT_PER_PAGE)
    }
}

pub(super) fn positive(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n >= 1)
}

/// One page of `total` items, with GitHub's `Link` header.
pub(super) fn page(
    base: &str,
    path: &str,
    params: &Params,
    total: usize,
    item: impl Fn(usize) -> Value,
) -> Answer {
    let per_page = params.per_page();
    let last = (total as u64).div_ceil(per_page).max(1);
    let start = params.page.saturating_sub(1).saturating_mul(per_page);
    let end = start.saturating_add(per_page).min(total as u64);
    let items: Vec<Value> = (start..end.max(start)).map(|i| item(i as usize)).collect();
    let mut answer = Answer::json(StatusCode::OK, Value::Array(items));
    if total as u64 > per_page || params.page > 1 {
        let link = |page: u64, rel: &str| {
            let query = match params.per_page {
                Some(p) => format!("per_page={p}&page={page}"),
                None => format!("page={page}"),
            };
            format!("<{base}{path}?{query}>; rel=\"{rel}\"")
        };
        let mut links = Vec::new();
        if params.page > 1 {
            links.push(link(params.page - 1, "prev"));
        }
        if params.page < last {
            links.push(link(params.page + 1, "next"));
        }
        if params.page != last {
            links.push(link(last, "last"));
        }
        if params.page > 1 {
            links.push(link(1, "first"));
        }
        answer = answer.header("link", links.join(", "));
    }
    answer
}
