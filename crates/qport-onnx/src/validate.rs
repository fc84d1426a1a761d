//! Structural checks on the IR and topological ordering.
//!
//! A graph is valid when every value has exactly one producer (a graph
//! input, an initializer or one node output), every node input and graph
//! output is produced (in this graph or, for subgraphs of `If`/`Loop`/`Scan`,
//! in an enclosing one), and the nodes form no cycle. Errors name the node,
//! the op and the value involved. Subgraphs are checked recursively; a node
//! that owns a subgraph depends on every outer value the subgraph reads, so
//! ordering respects those implicit inputs too.
//!
//! [`sort_topologically`] is what [`crate::load()`] uses: it keeps the file's
//! order wherever that order is already valid (a stable Kahn sort that
//! always picks the earliest ready node).

use crate::error::{OnnxError, Result};
use crate::model::{Attribute, Graph, Node};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};

/// Checks `graph` and its subgraphs (see the module docs). A graph that
/// passes can be ordered by [`sort_topologically`].
pub fn validate(graph: &Graph) -> Result<()> {
    check_rec(graph, None)
}

/// Checks `graph` like [`validate`] and puts its nodes (and those of every
/// subgraph) in topological order, keeping the existing order where valid.
pub fn sort_topologically(graph: &mut Graph) -> Result<()> {
    sort_rec(graph, None)
}

/// The node indices of `graph` in a topological order (the top level only,
/// with no enclosing scope), or the first structural error.
pub fn topological_order(graph: &Graph) -> Result<Vec<usize>> {
    check_level(graph, None)
}

/// Values a (sub)graph reads but does not define itself: names that must
/// come from an enclosing graph. Includes those read by nested subgraphs.
pub fn outer_references(graph: &Graph) -> BTreeSet<String> {
    let mut defined: HashSet<&str> = graph.inputs.iter().map(|v| v.name.as_str()).collect();
    defined.extend(graph.initializers.keys().map(String::as_str));
    for node in &graph.nodes {
        defined.extend(node.outputs.iter().map(String::as_str));
    }
    let mut out = BTreeSet::new();
    for node in &graph.nodes {
        for inp in &node.inputs {
            if !inp.is_empty() && !defined.contains(inp.as_str()) {
                out.insert(inp.clone());
            }
        }
        for (_, sub) in subgraphs(node) {
            out.extend(
                outer_references(sub)
                    .into_iter()
                    .filter(|n| !defined.contains(n.as_str())),
            );
        }
    }
    for o in &graph.outputs {
        if !defined.contains(o.name.as_str()) {
            out.insert(o.name.clone());
        }
    }
    out
}

/// The subgraph attributes of `node`, with their attribute names.
pub fn subgraphs(node: &Node) -> impl Iterator<Item = (&str, &Graph)> {
    node.attributes.iter().flat_map(|(name, a)| {
        let gs: Vec<&Graph> = match a {
            Attribute::Graph(g) => vec![g.as_ref()],
            Attribute::Graphs(gs) => gs.iter().collect(),
            _ => vec![],
        };
        gs.into_iter().map(move |g| (name.as_str(), g))
    })
}

/// Names visible from enclosing graphs.
struct Scope<'p> {
    names: HashSet<String>,
    parent: Option<&'p Scope<'p>>,
}

impl<'p> Scope<'p> {
    fn of(graph: &Graph, parent: Option<&'p Scope<'p>>) -> Scope<'p> {
        let mut names: HashSet<String> = graph.inputs.iter().map(|v| v.name.clone()).collect();
        names.extend(graph.initializers.keys().cloned());
        for node in &graph.nodes {
            names.extend(node.outputs.iter().filter(|o| !o.is_empty()).cloned());
        }
        Scope { names, parent }
    }

    fn contains(&self, name: &str) -> bool {
        self.names.contains(name) || self.parent.is_some_and(|p| p.contains(name))
    }
}

fn has_subgraphs(graph: &Graph) -> bool {
    graph.nodes.iter().any(|n| subgraphs(n).next().is_some())
}

fn in_subgraph(e: OnnxError, node: &Node, attr: &str) -> OnnxError {
    match e {
        OnnxError::Invalid(m) => OnnxError::Invalid(format!(
            "in subgraph '{attr}' of node '{}' ({}): {m}",
            node.name, node.op_type
        )),
        other => other,
    }
}

fn check_rec(graph: &Graph, outer: Option<&Scope<'_>>) -> Result<()> {
    check_level(graph, outer)?;
    if has_subgraphs(graph) {
        let scope = Scope::of(graph, outer);
        for node in &graph.nodes {
            for (attr, sub) in subgraphs(node) {
                check_rec(sub, Some(&scope)).map_err(|e| in_subgraph(e, node, attr))?;
            }
        }
    }
    Ok(())
}

fn sort_rec(graph: &mut Graph, outer: Option<&Scope<'_>>) -> Result<()> {
    let order = check_level(graph, outer)?;
    if has_subgraphs(graph) {
        let scope = Scope::of(graph, outer);
        for node in &mut graph.nodes {
            let (name, op) = (node.name.clone(), node.op_type.clone());
            for (attr, a) in node.attributes.iter_mut() {
                let gs: Vec<&mut Graph> = match a {
                    Attribute::Graph(g) => vec![g.as_mut()],
                    Attribute::Graphs(gs) => gs.iter_mut().collect(),
                    _ => continue,
                };
                for g in gs {
                    sort_rec(g, Some(&scope)).map_err(|e| match e {
                        OnnxError::Invalid(m) => OnnxError::Invalid(format!(
                            "in subgraph '{attr}' of node '{name}' ({op}): {m}"
                        )),
                        other => other,
                    })?;
                }
            }
        }
    }
    let mut slots: Vec<Option<Node>> = std::mem::take(&mut graph.nodes)
        .into_iter()
        .map(Some)
        .collect();
    graph.nodes = order.iter().filter_map(|&i| slots[i].take()).collect();
    Ok(())
}

#[derive(Clone, Copy)]
enum Producer {
    Input,
    Initializer,
    Node(usize),
}

fn describe(graph: &Graph, p: Producer) -> String {
    match p {
        Producer::Input => "the graph input".into(),
        Producer::Initializer => "an initializer".into(),
        Producer::Node(j) => {
            let n = &graph.nodes[j];
            format!("node '{}' ({})", n.name, n.op_type)
        }
    }
}

/// Checks one graph level and returns a stable topological order.
fn check_level(graph: &Graph, outer: Option<&Scope<'_>>) -> Result<Vec<usize>> {
    let invalid = |m: String| Err(OnnxError::Invalid(m));
    let mut prod: HashMap<&str, Producer> = HashMap::new();
    for vi in &graph.inputs {
        if vi.name.is_empty() {
            return invalid("a graph input has an empty name".into());
        }
        if prod.insert(&vi.name, Producer::Input).is_some() {
            return invalid(format!("graph input '{}' is declared twice", vi.name));
        }
    }
    for name in graph.initializers.keys() {
        if name.is_empty() {
            return invalid("an initializer has an empty name".into());
        }
        if prod.insert(name, Producer::Initializer).is_some() {
            return invalid(format!(
                "value '{name}' is both a graph input and an initializer"
            ));
        }
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        if node.op_type.is_empty() {
            return invalid(format!("node '{}' has no op_type", node.name));
        }
        for out in node.outputs.iter().filter(|o| !o.is_empty()) {
            if let Some(prev) = prod.insert(out, Producer::Node(i)) {
                return invalid(format!(
                    "value '{out}' has two producers: {} and node '{}' ({})",
                    describe(graph, prev),
                    node.name,
                    node.op_type
                ));
            }
        }
    }

    let n = graph.nodes.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let in_outer = |name: &str| outer.is_some_and(|s| s.contains(name));
    for (i, node) in graph.nodes.iter().enumerate() {
        let mut reads: Vec<(String, Option<&str>)> = node
            .inputs
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| (s.clone(), None))
            .collect();
        for (attr, sub) in subgraphs(node) {
            reads.extend(outer_references(sub).into_iter().map(|s| (s, Some(attr))));
        }
        for (name, via) in reads {
            match prod.get(name.as_str()) {
                Some(&Producer::Node(j)) => {
                    preds[i].push(j);
                    succs[j].push(i);
                }
                Some(_) => {}
                None if in_outer(&name) => {}
                None => {
                    let via = via
                        .map(|a| format!(" (in its '{a}' subgraph)"))
                        .unwrap_or_default();
                    return invalid(format!(
                        "node '{}' ({}) reads '{name}'{via} which no node, input or initializer produces",
                        node.name, node.op_type
                    ));
                }
            }
        }
    }

    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indeg[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &s in &succs[i] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() < n {
        return invalid(cycle_message(graph, &preds, &indeg));
    }

    for o in &graph.outputs {
        if o.name.is_empty() {
            return invalid("a graph output has an empty name".into());
        }
        if !prod.contains_key(o.name.as_str()) && !in_outer(&o.name) {
            return invalid(format!(
                "graph output '{}' is never produced (no node, input or initializer has it)",
                o.name
            ));
        }
    }
    Ok(order)
}

/// Finds one cycle among the nodes Kahn's algorithm could not order (those
/// with `indeg > 0`) and describes it in data-flow order.
fn cycle_message(graph: &Graph, preds: &[Vec<usize>], indeg: &[usize]) -> String {
    let Some(start) = (0..indeg.len()).find(|&i| indeg[i] > 0) else {
        return "the nodes contain a cycle".into();
    };
    // Walk backwards along unordered predecessors until a node repeats.
    let mut path = vec![start];
    let mut seen: HashMap<usize, usize> = HashMap::from([(start, 0)]);
    let mut cur = start;
    let cycle: Vec<usize> = loop {
        let Some(&p) = preds[cur].iter().find(|&&p| indeg[p] > 0) else {
            return "the nodes contain a cycle".into();
        };
        if let Some(&pos) = seen.get(&p) {
            let mut c: Vec<usize> = path[pos..].to_vec();
            c.reverse();
            break c;
        }
        seen.insert(p, path.len());
        path.push(p);
        cur = p;
    };
    let min_at = cycle
        .iter()
        .enumerate()
        .min_by_key(|&(_, &v)| v)
        .map_or(0, |(k, _)| k);
    let mut names: Vec<&str> = cycle[min_at..]
        .iter()
        .chain(&cycle[..min_at])
        .map(|&i| graph.nodes[i].name.as_str())
        .collect();
    names.push(names[0]);
    format!("cycle through nodes {}", names.join(" -> "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ValueInfo;
    use qport_core::DType;

    fn graph(nodes: Vec<Node>, out: &str) -> Graph {
        Graph::new(
            "g",
            nodes,
            vec![ValueInfo::known("x", DType::F32, &[1])],
            vec![ValueInfo::known(out, DType::F32, &[1])],
        )
    }

    #[test]
    fn sorts_stably() {
        let mut g = graph(
            vec![
                Node::new("c", "Relu", ["b"], ["y"]),
                Node::new("a", "Relu", ["x"], ["a"]),
                Node::new("b", "Relu", ["a"], ["b"]),
            ],
            "y",
        );
        sort_topologically(&mut g).unwrap();
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn cycle_is_named_in_flow_order() {
        let g = graph(
            vec![
                Node::new("a", "Add", ["x", "b"], ["a"]),
                Node::new("b", "Relu", ["a"], ["b"]),
            ],
            "b",
        );
        let e = validate(&g).unwrap_err().to_string();
        assert!(e.contains("cycle through nodes a -> b -> a"), "{e}");
    }

    #[test]
    fn subgraph_outer_reads_are_dependencies() {
        let body = Graph {
            name: "then".into(),
            nodes: vec![Node::new("inner", "Relu", ["a"], ["t"])],
            outputs: vec![ValueInfo::known("t", DType::F32, &[1])],
            ..Default::default()
        };
        let mut if_node = Node::new("if", "If", ["cond"], ["y"]);
        if_node.attributes.insert(
            "then_branch".into(),
            Attribute::Graph(Box::new(body.clone())),
        );
        if_node
            .attributes
            .insert("else_branch".into(), Attribute::Graph(Box::new(body)));
        let mut g = graph(
            vec![
                if_node,
                Node::new("a", "Relu", ["x"], ["a"]),
                Node::new("c", "Cast", ["x"], ["cond"]),
            ],
            "y",
        );
        sort_topologically(&mut g).unwrap();
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "c", "if"]);
        assert_eq!(outer_references(&g), BTreeSet::new());

        g.nodes.remove(0); // drop the producer of 'a'
        let e = validate(&g).unwrap_err().to_string();
        assert!(e.contains("node 'if' (If) reads 'a' (in its"), "{e}");
    }
}
