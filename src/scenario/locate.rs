//! Field paths (`faults[2].node`) and their places in the text: a path is looked up in a
//! span-carrying parse of the same text, and a byte offset is turned into line and column.

use std::fmt;
use std::ops::Range;
use toml_edit::{ImDocument, Item, Table, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Where a value sits in the scenario, e.g. `rendezvous.min_nodes` or `faults[2].node`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    /// The empty path: the whole file.
    pub fn root() -> Self {
        FieldPath(Vec::new())
    }

    /// This path followed by a key.
    pub fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_string()));
        FieldPath(segs)
    }

    /// This path followed by an array index.
    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        FieldPath(segs)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of a byte offset; offsets past the end or inside
/// a character are clamped so this never panics.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// A node of the span-carrying document: tables hold items, arrays hold values, and an
/// array of tables holds tables.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Value(&'a Value),
    Table(&'a Table),
}

impl<'a> Node<'a> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Value(v) => v.span(),
            Node::Table(t) => t.span(),
        }
    }

    fn value(self) -> Option<&'a Value> {
        match self {
            Node::Item(Item::Value(v)) | Node::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The key's span and the child under `seg`, when there is one.
    fn child(self, seg: &Seg) -> Option<(Option<Range<usize>>, Node<'a>)> {
        match (self, seg) {
            (Node::Table(t) | Node::Item(Item::Table(t)), Seg::Key(k)) => t
                .get_key_value(k)
                .map(|(key, item)| (key.span(), Node::Item(item))),
            (Node::Item(Item::ArrayOfTables(a)), Seg::Index(i)) => {
                a.get(*i).map(|t| (None, Node::Table(t)))
            }
            (_, Seg::Key(k)) => match self.value()? {
                Value::InlineTable(t) => t
                    .get_key_value(k)
                    .map(|(key, item)| (key.span(), Node::Item(item))),
                _ => None,
            },
            (_, Seg::Index(i)) => match self.value()? {
                Value::Array(a) => a.get(*i).map(|v| (None, Node::Value(v))),
                _ => None,
            },
        }
    }

    /// The children with their paths' last step, in document order.
    fn children(self) -> Vec<(Seg, Option<Range<usize>>, Node<'a>)> {
        let keyed = |pairs: Vec<&'a str>| -> Vec<(Seg, Option<Range<usize>>, Node<'a>)> {
            pairs
                .into_iter()
                .filter_map(|k| {
                    let seg = Seg::Key(k.to_string());
                    self.child(&seg).map(|(ks, n)| (seg, ks, n))
                })
                .collect()
        };
        match self {
            Node::Table(t) | Node::Item(Item::Table(t)) => {
                keyed(t.iter().map(|(k, _)| k).collect())
            }
            Node::Item(Item::ArrayOfTables(a)) => a
                .iter()
                .enumerate()
                .map(|(i, t)| (Seg::Index(i), None, Node::Table(t)))
                .collect(),
            _ => match self.value() {
                Some(Value::InlineTable(t)) => keyed(t.iter().map(|(k, _)| k).collect()),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (Seg::Index(i), None, Node::Value(v)))
                    .collect(),
                _ => Vec::new(),
            },
        }
    }
}

/// Where to point for `path`: the value (or the key when `at_key`), else the nearest
/// enclosing item that the text spells out; the start of the file when nothing matches.
pub fn locate(doc: &ImDocument<&str>, path: &FieldPath, at_key: bool) -> usize {
    let mut node = Node::Table(doc.as_table());
    let mut best = 0;
    for seg in &path.0 {
        let Some((key_span, child)) = node.child(seg) else {
            break;
        };
        let here = if at_key {
            key_span.clone().or_else(|| child.span())
        } else {
            child.span().or(key_span)
        };
        if let Some(span) = here {
            best = span.start;
        }
        node = child;
    }
    best
}

/// The deepest path whose key or value covers byte `offset` (serde errors carry a span but
/// no field name).
pub fn path_at(doc: &ImDocument<&str>, offset: usize) -> FieldPath {
    let mut path = FieldPath::root();
    let mut node = Node::Table(doc.as_table());
    // Depth is bounded by the text's nesting, which the TOML parser already limits.
    'descend: loop {
        for (seg, key_span, child) in node.children() {
            let covers = |s: &Option<Range<usize>>| {
                s.as_ref()
                    .is_some_and(|s| s.start <= offset && offset < s.end.max(s.start + 1))
            };
            if covers(&key_span) || covers(&child.span()) || contains_offset(child, offset) {
                path.0.push(seg);
                node = child;
                continue 'descend;
            }
        }
        return path;
    }
}

/// Whether a table-like node has any key or value covering `offset` (a `[table]`'s own span
/// is its header plus its body, but dotted and implicit tables have none).
fn contains_offset(node: Node, offset: usize) -> bool {
    node.children().into_iter().any(|(_, key_span, child)| {
        let covers = |s: Option<Range<usize>>| {
            s.is_some_and(|s| s.start <= offset && offset < s.end.max(s.start + 1))
        };
        covers(key_span) || covers(child.span()) || contains_offset(child, offset)
    })
}
