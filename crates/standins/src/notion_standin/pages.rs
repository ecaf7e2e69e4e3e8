//! The stand-in's page operations: create, retrieve, update, read and replace Markdown, and
//! list children, each checked as strictly as the published API.

use super::*;

pub(super) fn page_json(s: &State, id: &str) -> Value {
    let p = &s.pages[id];
    json!({
        "object": "page",
        "id": id,
        "url": page_url(id, &p.title),
        "in_trash": trashed(s, id),
        "parent": match &p.parent {
            Some(_) if p.nested => json!({"type": "block_id", "block_id": format!("{id}-toggle")}),
            Some(parent) => json!({"type": "page_id", "page_id": parent}),
            None => json!({"type": "workspace", "workspace": true}),
        },
        "properties": {"title": {"id": "title", "type": "title", "title": [
            {"type": "text", "text": {"content": p.title}, "plain_text": p.title}
        ]}},
    })
}

/// The Markdown's problems, if any: too many blocks, a text run too long, `<page>` tags that
/// name no child of `page` (or, for a new page, any `<page>` tag). Returns the child pages it
/// names.
pub(super) fn check_markdown(
    s: &State,
    page: Option<&str>,
    markdown: &str,
) -> Result<Vec<String>, Answer> {
    use pulldown_cmark::{Event, Parser, Tag};
    let mut blocks = 0usize;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(
                Tag::Paragraph
                | Tag::Heading { .. }
                | Tag::Item
                | Tag::CodeBlock(_)
                | Tag::BlockQuote(_)
                | Tag::HtmlBlock,
            ) => blocks += 1,
            Event::Text(t) | Event::Code(t) if t.encode_utf16().count() > MAX_TEXT => {
                return Err(error(400, "validation_error", format!(
                    "body.markdown: a rich text item is {} characters long; the limit is {MAX_TEXT}.",
                    t.encode_utf16().count()
                )));
            }
            _ => {}
        }
    }
    if blocks > MAX_BLOCKS {
        return Err(error(
            400,
            "validation_error",
            format!(
                "body.markdown converts to {blocks} blocks; a request takes at most {MAX_BLOCKS}."
            ),
        ));
    }
    let mut named = Vec::new();
    for line in markdown.lines() {
        let line = line.trim();
        let rest = line
            .strip_prefix("<page url=\"")
            .or_else(|| line.strip_prefix("<database url=\""));
        if let Some(rest) = rest {
            let Some(end) = rest.find('"') else {
                return Err(error(
                    400,
                    "validation_error",
                    format!("malformed page tag: {line}"),
                ));
            };
            let url = &rest[..end];
            let child = id_from_url(s, url);
            let is_child = match (page, &child) {
                (Some(page), Some(child)) => {
                    s.pages[page].children.contains(child)
                        && !trashed(s, child)
                        && !s.pages[child].nested
                }
                _ => false,
            };
            if !is_child {
                return Err(error(
                    400,
                    "validation_error",
                    format!(
                        "{url} is not a child page of this page; the stand-in does not move pages."
                    ),
                ));
            }
            named.push(child.unwrap());
        }
    }
    Ok(named)
}

pub(super) fn create_page(s: &mut State, body: &Value) -> Answer {
    let Some(parent) = body["parent"]["page_id"].as_str() else {
        return error(
            400,
            "validation_error",
            "body.parent.page_id should be defined.",
        );
    };
    if body.get("children").is_some() && body.get("markdown").is_some() {
        return error(
            400,
            "validation_error",
            "markdown and children are mutually exclusive.",
        );
    }
    let Some(title) = body["properties"]["title"]["title"][0]["text"]["content"].as_str() else {
        return error(
            400,
            "validation_error",
            "body.properties.title should be defined.",
        );
    };
    let markdown = body["markdown"].as_str().unwrap_or_default().to_string();
    if !reachable(s, parent) {
        return not_found(parent);
    }
    if trashed(s, parent) {
        return archived();
    }
    if let Err(a) = check_markdown(s, None, &markdown) {
        return a;
    }
    let id = new_id(s);
    s.pages.insert(
        id.clone(),
        Page {
            title: title.to_string(),
            parent: Some(parent.to_string()),
            markdown,
            children: Vec::new(),
            in_trash: false,
            deleted: false,
            database: false,
            created_by: BOT_ID.to_string(),
            nested: false,
        },
    );
    s.pages.get_mut(parent).unwrap().children.push(id.clone());
    ok(page_json(s, &id))
}

pub(super) fn retrieve(s: &State, id: &str) -> Answer {
    if !reachable(s, id) {
        return not_found(id);
    }
    ok(page_json(s, id))
}

pub(super) fn update_page(s: &mut State, id: &str, body: &Value) -> Answer {
    if body.get("archived").is_some() {
        return error(
            400,
            "validation_error",
            "body.archived is not a property in 2026-03-11; use in_trash.",
        );
    }
    if !reachable(s, id) {
        return not_found(id);
    }
    // A page in the trash through an ancestor cannot be edited, not even to be trashed or
    // restored: Notion answers 400 "Can't edit block that is archived" (only the trashed page
    // itself can be restored).
    if s.pages[id].parent.as_deref().is_some_and(|p| trashed(s, p)) {
        return archived();
    }
    if let Some(flag) = body["in_trash"].as_bool() {
        s.pages.get_mut(id).unwrap().in_trash = flag;
    }
    ok(page_json(s, id))
}

pub(super) fn get_markdown(s: &State, id: &str) -> Answer {
    if !reachable(s, id) {
        return not_found(id);
    }
    ok(
        json!({"object": "page_markdown", "id": id, "markdown": s.pages[id].markdown, "truncated": false, "unknown_block_ids": []}),
    )
}

pub(super) fn patch_markdown(s: &mut State, id: &str, body: &Value) -> Answer {
    if !reachable(s, id) {
        return not_found(id);
    }
    if trashed(s, id) {
        return archived();
    }
    if body["type"] != "replace_content" {
        return error(
            400,
            "validation_error",
            format!(
                "body.type {} is not supported by this stand-in (replace_content only).",
                body["type"]
            ),
        );
    }
    let Some(new_str) = body["replace_content"]["new_str"].as_str() else {
        return error(
            400,
            "validation_error",
            "body.replace_content.new_str should be defined.",
        );
    };
    let named = match check_markdown(s, Some(id), new_str) {
        Ok(named) => named,
        Err(a) => return a,
    };
    let live: Vec<String> = s.pages[id]
        .children
        .iter()
        .filter(|c| !trashed(s, c))
        .cloned()
        .collect();
    let dropped: Vec<String> = live.into_iter().filter(|c| !named.contains(c)).collect();
    if !dropped.is_empty() {
        if body["replace_content"]["allow_deleting_content"].as_bool() != Some(true) {
            return error(400, "validation_error", format!(
                "The new content would delete {} child page(s) or database(s); name them with <page> or <database> tags, or pass allow_deleting_content.",
                dropped.len()
            ));
        }
        for c in &dropped {
            s.pages.get_mut(c).unwrap().in_trash = true;
        }
    }
    s.pages.get_mut(id).unwrap().markdown = new_str.to_string();
    ok(
        json!({"object": "page_markdown", "id": id, "markdown": new_str, "truncated": false, "unknown_block_ids": []}),
    )
}

pub(super) fn children(s: &State, id: &str, query: &HashMap<String, String>) -> Answer {
    if !reachable(s, id) {
        return not_found(id);
    }
    let size: usize = match query.get("page_size").map(|v| v.parse()) {
        None => 100,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        _ => {
            return error(
                400,
                "validation_error",
                "body.page_size should be a number between 1 and 100.",
            )
        }
    };
    // The page's content as paragraphs (one per non-empty line), then its child pages.
    let mut all: Vec<Value> = s.pages[id]
        .markdown
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.is_empty() && !l.starts_with("<page ") && !l.starts_with("<database ")
        })
        .enumerate()
        .map(|(i, line)| json!({"object": "block", "id": format!("{id}-line-{i}"), "type": "paragraph", "in_trash": false,
            "paragraph": {"rich_text": [{"type": "text", "text": {"content": line}}]}}))
        .collect();
    for child in &s.pages[id].children {
        if !trashed(s, child) && !s.pages[child].nested {
            let kind = if s.pages[child].database {
                "child_database"
            } else {
                "child_page"
            };
            all.push(
                json!({"object": "block", "id": child, "type": kind, "in_trash": false,
                "created_by": {"object": "user", "id": s.pages[child].created_by},
                kind: {"title": s.pages[child].title}}),
            );
        }
    }
    let start: usize = query
        .get("start_cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let page: Vec<Value> = all.iter().skip(start).take(size).cloned().collect();
    let more = start + size < all.len();
    ok(json!({
        "object": "list",
        "results": page,
        "has_more": more,
        "next_cursor": more.then(|| (start + size).to_string()),
    }))
}

pub(super) fn move_page(s: &mut State, id: &str, body: &Value) -> Answer {
    if body["parent"]["type"] != "page_id" {
        return error(
            400,
            "validation_error",
            "body.parent.type should be `page_id` (the stand-in moves pages under pages only).",
        );
    }
    let Some(parent) = body["parent"]["page_id"].as_str() else {
        return error(
            400,
            "validation_error",
            "body.parent.page_id should be defined.",
        );
    };
    let parent = parent.to_string();
    if !reachable(s, id) {
        return not_found(id);
    }
    if !reachable(s, &parent) {
        return not_found(&parent);
    }
    if s.pages[id].database || s.pages[&parent].database {
        return error(
            400,
            "validation_error",
            "Only pages can be moved, and only under a page.",
        );
    }
    if trashed(s, id) || trashed(s, &parent) {
        return archived();
    }
    // Not under itself or one of its own descendants.
    let mut up = Some(parent.clone());
    while let Some(at) = up {
        if at == id {
            return error(
                400,
                "validation_error",
                "A page cannot be moved under itself or one of its descendants.",
            );
        }
        up = s.pages.get(&at).and_then(|p| p.parent.clone());
    }
    let url_id = compact(id);
    if let Some(old) = s.pages[id].parent.clone() {
        if let Some(old) = s.pages.get_mut(&old) {
            old.children.retain(|c| c != id);
            // Its `<page>` block goes with it.
            old.markdown = old
                .markdown
                .lines()
                .filter(|l| !(l.trim_start().starts_with("<page url=") && l.contains(&url_id)))
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    let page = s.pages.get_mut(id).unwrap();
    page.parent = Some(parent.clone());
    page.nested = false;
    s.pages
        .get_mut(&parent)
        .unwrap()
        .children
        .push(id.to_string());
    ok(page_json(s, id))
}
