//! The stand-in's GraphQL resolver: each field of a validated query resolved against the
//! recorded repositories, counting nodes as GitHub's rate limit does.

use super::*;

/// Whether any operation or fragment of `document` selects `type_name.field`.
pub(super) fn selects(document: &ExecutableDocument, type_name: &str, field: &str) -> bool {
    fn walk(set: &SelectionSet, type_name: &str, field: &str) -> bool {
        set.selections.iter().any(|s| match s {
            Selection::Field(f) => {
                (f.name == field && set.ty == type_name) || walk(&f.selection_set, type_name, field)
            }
            Selection::InlineFragment(i) => walk(&i.selection_set, type_name, field),
            Selection::FragmentSpread(_) => false,
        })
    }
    document
        .operations
        .iter()
        .any(|op| walk(&op.selection_set, type_name, field))
        || document
            .fragments
            .values()
            .any(|f| walk(&f.selection_set, type_name, field))
}

pub(super) struct Context<'a> {
    pub(super) document: &'a Valid<ExecutableDocument>,
    pub(super) variables: &'a JsonMap,
}

pub(super) struct Root<'a> {
    pub(super) state: &'a State,
    pub(super) rate: &'a Value,
}

/// A resolved selection: its value and any field errors (GitHub's `NOT_FOUND`).
pub(super) struct Resolved {
    pub(super) value: Value,
    pub(super) errors: Vec<Value>,
}

pub(super) type Failure = (String, Option<&'static str>);

impl Context<'_> {
    fn arg(&self, field: &Field, name: &str) -> Option<Value> {
        let argument = field.arguments.iter().find(|a| a.name == name)?;
        Some(self.value(&argument.value))
    }

    fn value(&self, value: &ast::Value) -> Value {
        match value {
            ast::Value::Null => Value::Null,
            ast::Value::Enum(n) => json!(n.as_str()),
            ast::Value::Variable(n) => self
                .variables
                .get(n.as_str())
                .and_then(|v| serde_json::to_value(v).ok())
                .unwrap_or(Value::Null),
            ast::Value::String(s) => json!(s),
            ast::Value::Float(f) => json!(f.try_to_f64().unwrap_or_default()),
            ast::Value::Int(i) => json!(i.as_str().parse::<i64>().unwrap_or_default()),
            ast::Value::Boolean(b) => json!(b),
            ast::Value::List(l) => Value::Array(l.iter().map(|v| self.value(v)).collect()),
            ast::Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.to_string(), self.value(v)))
                    .collect(),
            ),
        }
    }

    /// The fields of `set` (fragments flattened, whatever their type condition: cost is an
    /// upper bound, as GitHub computes it).
    fn fields<'s>(&'s self, set: &'s SelectionSet, out: &mut Vec<&'s Field>) {
        for selection in &set.selections {
            match selection {
                Selection::Field(f) => out.push(f),
                Selection::FragmentSpread(s) => {
                    if let Some(fragment) = self.document.fragments.get(&s.fragment_name) {
                        self.fields(&fragment.selection_set, out);
                    }
                }
                Selection::InlineFragment(i) => self.fields(&i.selection_set, out),
            }
        }
    }

    /// Connection requests and nodes asked for under `set`, each parent's `first` multiplied
    /// through (GitHub's published rule).
    pub(super) fn cost(&self, set: &SelectionSet, multiplier: u64) -> Result<(u64, u64), String> {
        let mut fields = Vec::new();
        self.fields(set, &mut fields);
        let (mut requests, mut nodes) = (0u64, 0u64);
        for field in fields {
            let type_name = field.definition.ty.inner_named_type().as_str();
            if type_name.ends_with("Connection") {
                let first = self
                    .arg(field, "first")
                    .or_else(|| self.arg(field, "last"))
                    .and_then(|v| v.as_i64());
                let mut inner = Vec::new();
                self.fields(&field.selection_set, &mut inner);
                let lists = inner.iter().any(|f| f.name == "nodes" || f.name == "edges");
                let page = match first {
                    Some(n) if !(1..=100).contains(&n) => {
                        return Err(format!(
                            "Requesting {n} records on the `{}` connection exceeds the `first` limit of 100 records.",
                            field.name
                        ))
                    }
                    Some(n) => n as u64,
                    None if lists => {
                        return Err(format!(
                            "You must provide a `first` or `last` value to properly paginate the `{}` connection.",
                            field.name
                        ))
                    }
                    None => 1,
                };
                requests += multiplier;
                nodes += multiplier * page;
                let (r, n) = self.cost(&field.selection_set, multiplier * page)?;
                requests += r;
                nodes += n;
            } else if !field.selection_set.selections.is_empty() {
                let (r, n) = self.cost(&field.selection_set, multiplier)?;
                requests += r;
                nodes += n;
            }
        }
        Ok((requests, nodes))
    }

    fn applies(&self, condition: &str, concrete: &str) -> bool {
        condition == concrete || schema().is_subtype(condition, concrete)
    }

    pub(super) fn select(
        &self,
        root: &Root<'_>,
        set: &SelectionSet,
        object: &Value,
        concrete: &str,
    ) -> Result<Resolved, Failure> {
        let mut out = Map::new();
        let mut errors = Vec::new();
        self.select_into(root, set, object, concrete, &mut out, &mut errors)?;
        Ok(Resolved {
            value: Value::Object(out),
            errors,
        })
    }

    fn select_into(
        &self,
        root: &Root<'_>,
        set: &SelectionSet,
        object: &Value,
        concrete: &str,
        out: &mut Map<String, Value>,
        errors: &mut Vec<Value>,
    ) -> Result<(), Failure> {
        for selection in &set.selections {
            match selection {
                Selection::Field(field) => {
                    let key = field.alias.as_ref().unwrap_or(&field.name).to_string();
                    let resolved = self.field(root, field, object, concrete)?;
                    errors.extend(resolved.errors);
                    out.insert(key, resolved.value);
                }
                Selection::FragmentSpread(spread) => {
                    let fragment = self
                        .document
                        .fragments
                        .get(&spread.fragment_name)
                        .ok_or_else(|| (format!("no fragment {}", spread.fragment_name), None))?;
                    if self.applies(fragment.type_condition().as_str(), concrete) {
                        self.select_into(
                            root,
                            &fragment.selection_set,
                            object,
                            concrete,
                            out,
                            errors,
                        )?;
                    }
                }
                Selection::InlineFragment(inline) => {
                    let applies = inline
                        .type_condition
                        .as_ref()
                        .is_none_or(|c| self.applies(c.as_str(), concrete));
                    if applies {
                        self.select_into(
                            root,
                            &inline.selection_set,
                            object,
                            concrete,
                            out,
                            errors,
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    fn field(
        &self,
        root: &Root<'_>,
        field: &Field,
        object: &Value,
        concrete: &str,
    ) -> Result<Resolved, Failure> {
        let name = field.name.as_str();
        let type_name = field.definition.ty.inner_named_type().as_str();
        let plain = |value: Value| Resolved {
            value,
            errors: Vec::new(),
        };
        if name == "__typename" {
            return Ok(plain(json!(concrete)));
        }
        match (concrete, name) {
            ("Query", "rateLimit") => {
                return self.select(root, &field.selection_set, root.rate, "RateLimit")
            }
            ("Query", "repository") => {
                let owner = self
                    .arg(field, "owner")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let repo_name = self
                    .arg(field, "name")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let key = format!("{owner}/{repo_name}").to_ascii_lowercase();
                return match root.state.repos.get(&key) {
                    Some(repo) => {
                        let object = json!({ "nameWithOwner": repo.name_with_owner, "__key": key });
                        self.select(root, &field.selection_set, &object, "Repository")
                    }
                    None => Ok(Resolved {
                        value: Value::Null,
                        errors: vec![json!({
                            "type": "NOT_FOUND",
                            "path": [field.alias.as_ref().unwrap_or(&field.name).as_str()],
                            "message": format!("Could not resolve to a Repository with the name '{owner}/{repo_name}'."),
                        })],
                    }),
                };
            }
            ("Repository", "pullRequest") => {
                let key = object["__key"].as_str().unwrap_or_default();
                let number = self
                    .arg(field, "number")
                    .and_then(|v| v.as_i64())
                    .unwrap_or_default();
                let found = root.state.repos.get(key).and_then(|r| {
                    r.pulls
                        .iter()
                        .find(|p| p["number"].as_i64() == Some(number))
                });
                return match found {
                    Some(pull) => self.select(root, &field.selection_set, pull, "PullRequest"),
                    None => Ok(Resolved {
                        value: Value::Null,
                        errors: vec![json!({
                            "type": "NOT_FOUND",
                            "path": ["repository", "pullRequest"],
                            "message": format!("Could not resolve to a PullRequest with the number of {number}."),
                        })],
                    }),
                };
            }
            ("Repository", "pullRequests") => return self.pull_requests(root, field, object),
            ("PullRequest", "reviews") => {
                // GitHub filters reviews by `states` before paginating.
                let states = self.states(field);
                let list: Vec<&Value> = object["reviews"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| in_states(&states, r))
                    .collect();
                return self.connection(root, field, &list);
            }
            _ => {}
        }
        if type_name.ends_with("Connection") {
            let list: Vec<&Value> = object[name]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            return self.connection(root, field, &list);
        }
        let value = object.get(name).cloned().unwrap_or(Value::Null);
        if field.selection_set.selections.is_empty() {
            return Ok(plain(value));
        }
        match value {
            Value::Array(items) => {
                let mut out = Vec::new();
                let mut errors = Vec::new();
                for item in &items {
                    let concrete = item["__typename"].as_str().unwrap_or(type_name);
                    let r = self.select(root, &field.selection_set, item, concrete)?;
                    errors.extend(r.errors);
                    out.push(r.value);
                }
                Ok(Resolved {
                    value: Value::Array(out),
                    errors,
                })
            }
            Value::Object(_) => {
                let concrete = value["__typename"]
                    .as_str()
                    .unwrap_or(type_name)
                    .to_string();
                self.select(root, &field.selection_set, &value, &concrete)
            }
            _ => Ok(plain(Value::Null)),
        }
    }

    /// A connection's `states` argument, when it has one.
    fn states(&self, field: &Field) -> Option<Vec<String>> {
        self.arg(field, "states").and_then(|v| match v {
            Value::Array(a) => Some(
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect(),
            ),
            Value::String(s) => Some(vec![s]),
            _ => None,
        })
    }

    /// A repository's pull requests, filtered by `states` and ordered by `orderBy`.
    fn pull_requests(
        &self,
        root: &Root<'_>,
        field: &Field,
        object: &Value,
    ) -> Result<Resolved, Failure> {
        let key = object["__key"].as_str().unwrap_or_default();
        let empty = Vec::new();
        let all = root.state.repos.get(key).map_or(&empty, |r| &r.pulls);
        let states = self.states(field);
        let mut list: Vec<&Value> = all.iter().filter(|p| in_states(&states, p)).collect();
        if let Some(order) = self.arg(field, "orderBy") {
            let key = match order["field"].as_str() {
                Some("UPDATED_AT") => "updatedAt",
                _ => "createdAt",
            };
            list.sort_by(|a, b| a[key].as_str().cmp(&b[key].as_str()));
            if order["direction"].as_str() == Some("DESC") {
                list.reverse();
            }
        }
        self.connection(root, field, &list)
    }

    /// A connection over `list`: `first`/`after` (or `last`/`before`), cursors are positions.
    fn connection(
        &self,
        root: &Root<'_>,
        field: &Field,
        list: &[&Value],
    ) -> Result<Resolved, Failure> {
        let position = |arg: &str| {
            self.arg(field, arg).and_then(|v| {
                v.as_str()
                    .and_then(|c| c.strip_prefix("cursor:"))
                    .and_then(|n| n.parse::<usize>().ok())
            })
        };
        let start = position("after").map_or(0, |p| p + 1).min(list.len());
        let end = position("before")
            .unwrap_or(list.len())
            .min(list.len())
            .max(start);
        let (from, to) = match (
            self.arg(field, "first").and_then(|v| v.as_u64()),
            self.arg(field, "last").and_then(|v| v.as_u64()),
        ) {
            (Some(n), _) => (start, (start + n as usize).min(end)),
            (None, Some(n)) => (end.saturating_sub(n as usize).max(start), end),
            (None, None) => (start, end),
        };
        let page: Vec<Value> = list[from..to].iter().map(|v| (*v).clone()).collect();
        let edges: Vec<Value> = page
            .iter()
            .enumerate()
            .map(|(i, node)| json!({ "cursor": format!("cursor:{}", from + i), "node": node }))
            .collect();
        let object = json!({
            "totalCount": list.len(),
            "pageInfo": {
                "hasNextPage": to < end,
                "hasPreviousPage": from > 0,
                "startCursor": (to > from).then(|| format!("cursor:{from}")),
                "endCursor": (to > from).then(|| format!("cursor:{}", to - 1)),
            },
            "nodes": page,
            "edges": edges,
        });
        let type_name = field.definition.ty.inner_named_type().to_string();
        self.select(root, &field.selection_set, &object, &type_name)
    }
}

/// Whether a node's `state` is among `states` (no filter: every node).
fn in_states(states: &Option<Vec<String>>, node: &Value) -> bool {
    states
        .as_ref()
        .is_none_or(|s| s.iter().any(|s| node["state"].as_str() == Some(s)))
}
