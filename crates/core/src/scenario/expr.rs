//! The small expression language of scenario files.
//!
//! Steps are limited to ranks with conditions (`on = "rank % 2 == 0"`), tensors are filled and
//! checked with formulas over the rank and the element index (`fill = "rank * 10 + i"`), and
//! environment values are templated (`"{local_rank}"`). One parser serves all three, so a user
//! learns one syntax. Values are f64; comparisons and logic yield 1.0 / 0.0.

use std::fmt;

/// A parsed expression, evaluated many times (once per element for fills).
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    node: Node,
    source: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Var(String),
    Neg(Box<Node>),
    Not(Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
    In(Box<Node>, Vec<Node>),
    Call(String, Vec<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// Why an expression did not parse or evaluate; `offset` is a byte offset into the source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Expr {
    /// Parses `source`; every variable must be one of `vars`.
    pub fn parse(source: &str, vars: &[&str]) -> Result<Expr, ExprError> {
        let tokens = lex(source)?;
        if let Some(t) = tokens.get(MAX_TOKENS) {
            return Err(err(
                t.offset,
                format!("formula too long: more than {MAX_TOKENS} tokens (scen's limit)"),
            ));
        }
        let mut p = Parser {
            tokens,
            pos: 0,
            vars,
            depth: 0,
        };
        let node = p.or()?;
        if let Some(t) = p.tokens.get(p.pos) {
            return Err(err(t.offset, format!("unexpected `{}`", t.text)));
        }
        Ok(Expr {
            node,
            source: source.to_string(),
        })
    }

    /// Evaluates with `lookup` supplying variable values.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> f64) -> f64 {
        eval(&self.node, lookup)
    }

    /// Whether the formula reads variable `name` (a fill without `i` has one value for all
    /// elements and is evaluated once).
    pub fn uses(&self, name: &str) -> bool {
        fn walk(n: &Node, name: &str) -> bool {
            match n {
                Node::Num(_) => false,
                Node::Var(v) => v == name,
                Node::Neg(a) | Node::Not(a) => walk(a, name),
                Node::Bin(_, a, b) => walk(a, name) || walk(b, name),
                Node::In(a, xs) => walk(a, name) || xs.iter().any(|x| walk(x, name)),
                Node::Call(_, xs) => xs.iter().any(|x| walk(x, name)),
            }
        }
        walk(&self.node, name)
    }

    /// The same formula with the variables `fixed` knows replaced by their values and constant
    /// parts computed once: evaluating it gives exactly what [`Expr::eval`] gives with those
    /// values (a fill or `expect` evaluated per element looks up only the per-element
    /// variables then).
    pub fn bind(&self, fixed: &dyn Fn(&str) -> Option<f64>) -> Expr {
        Expr {
            node: fold(&self.node, fixed),
            source: self.source.clone(),
        }
    }

    /// When the formula reads `var` only as `var % m` (m a positive whole number), its value
    /// for a whole number `var` >= 0 repeats every lcm of the m's: that period (at most
    /// `max`), else `None`. A fill or `expect` evaluates one period and repeats its bytes.
    pub fn period_in(&self, var: &str, max: u64) -> Option<u64> {
        fn walk(n: &Node, var: &str, max: u64) -> Option<u64> {
            match n {
                Node::Num(_) => Some(1),
                Node::Var(v) => (v != var).then_some(1),
                Node::Bin(BinOp::Rem, a, b) => match (&**a, &**b) {
                    (Node::Var(v), Node::Num(m)) if v == var => {
                        (*m >= 1.0 && m.fract() == 0.0 && *m <= max as f64).then_some(*m as u64)
                    }
                    _ => lcm(walk(a, var, max)?, walk(b, var, max)?, max),
                },
                Node::Neg(a) | Node::Not(a) => walk(a, var, max),
                Node::Bin(_, a, b) => lcm(walk(a, var, max)?, walk(b, var, max)?, max),
                Node::In(a, xs) => xs
                    .iter()
                    .try_fold(walk(a, var, max)?, |p, x| lcm(p, walk(x, var, max)?, max)),
                Node::Call(_, xs) => xs
                    .iter()
                    .try_fold(1, |p, x| lcm(p, walk(x, var, max)?, max)),
            }
        }
        fn lcm(a: u64, b: u64, max: u64) -> Option<u64> {
            let (mut x, mut y) = (a, b);
            while y != 0 {
                (x, y) = (y, x % y);
            }
            Some(a / x * b).filter(|l| *l <= max)
        }
        walk(&self.node, var, max)
    }

    /// Evaluates as a condition (non-zero is true).
    pub fn holds(&self, lookup: &dyn Fn(&str) -> f64) -> bool {
        self.eval(lookup) != 0.0
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The same formula as a Python expression over float variables of the same names, with
    /// the same values as [`Expr::eval`] (comparisons and logic give 1.0 / 0.0). Torch mode
    /// writes fills, checks and conditions into its generated program with this.
    pub fn to_python(&self) -> String {
        python(&self.node)
    }
}

fn python(node: &Node) -> String {
    match node {
        // `{:?}` of a finite f64 reads back as the same value in Python; `inf` is no Python name.
        Node::Num(v) if v.is_finite() => format!("{v:?}"),
        Node::Num(v) => format!(
            "float(\"{}\")",
            if v.is_nan() {
                "nan"
            } else if *v > 0.0 {
                "inf"
            } else {
                "-inf"
            }
        ),
        Node::Var(name) => name.clone(),
        Node::Neg(inner) => format!("(-{})", python(inner)),
        Node::Not(inner) => format!("float({} == 0)", python(inner)),
        Node::In(lhs, items) => {
            let list: Vec<String> = items.iter().map(python).collect();
            format!("float({} in ({},))", python(lhs), list.join(", "))
        }
        Node::Call(name, args) => {
            let list: Vec<String> = args.iter().map(python).collect();
            match name.as_str() {
                "floor" => format!("float(math.floor({}))", list[0]),
                "abs" => format!("abs({})", list[0]),
                _ => format!("float({name}({}))", list.join(", ")),
            }
        }
        Node::Bin(op, a, b) => {
            let (a, b) = (python(a), python(b));
            match op {
                BinOp::Add => format!("({a} + {b})"),
                BinOp::Sub => format!("({a} - {b})"),
                BinOp::Mul => format!("({a} * {b})"),
                BinOp::Div => format!("({a} / {b})"),
                BinOp::FloorDiv => format!("float(math.floor({a} / {b}))"),
                BinOp::Rem => format!("({a} % abs({b}))"),
                BinOp::Pow => format!("({a} ** {b})"),
                BinOp::Eq => format!("float({a} == {b})"),
                BinOp::Ne => format!("float({a} != {b})"),
                BinOp::Lt => format!("float({a} < {b})"),
                BinOp::Le => format!("float({a} <= {b})"),
                BinOp::Gt => format!("float({a} > {b})"),
                BinOp::Ge => format!("float({a} >= {b})"),
                BinOp::And => format!("float({a} != 0 and {b} != 0)"),
                BinOp::Or => format!("float({a} != 0 or {b} != 0)"),
            }
        }
    }
}

/// Limits that keep parsing and evaluation (both recursive) far from the stack's end.
pub const MAX_TOKENS: usize = 1000;
/// Nesting of parentheses, lists and prefix operators.
pub const MAX_DEPTH: usize = 64;

fn err(offset: usize, message: impl Into<String>) -> ExprError {
    ExprError {
        offset,
        message: message.into(),
    }
}

#[derive(Debug, Clone)]
struct Token {
    text: String,
    offset: usize,
}

fn lex(s: &str) -> Result<Vec<Token>, ExprError> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == '.' && i + 1 < bytes.len() && bytes[i + 1].is_ascii_digit())
        {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            if ["==", "!=", "<=", ">=", "&&", "||", "//", "**"].contains(&two) {
                i += 2;
            } else if "+-*/%<>!()[],".contains(c) {
                i += 1;
            } else if c == '=' {
                return Err(err(i, "unexpected `=`: use `==` to compare (`rank == 0`)"));
            } else if c == '&' || c == '|' {
                return Err(err(
                    i,
                    format!("unexpected `{c}`: use `{c}{c}` (or `and`/`or`)"),
                ));
            } else {
                // `i` is at a character boundary: only ASCII has been consumed so far.
                let ch = s[i..].chars().next().unwrap_or(c);
                return Err(err(i, format!("unexpected character `{ch}`")));
            }
        }
        out.push(Token {
            text: s[start..i].to_string(),
            offset: start,
        });
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    vars: &'a [&'a str],
    /// Current nesting (parentheses, lists, prefix operators).
    depth: usize,
}

impl Parser<'_> {
    /// Runs `f` one nesting level deeper, refusing past [`MAX_DEPTH`].
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ExprError>,
    ) -> Result<T, ExprError> {
        if self.depth >= MAX_DEPTH {
            return Err(err(
                self.offset(),
                format!("formula nested too deeply: more than {MAX_DEPTH} levels (scen's limit)"),
            ));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(|t| t.text.as_str())
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map(|t| t.offset)
            .unwrap_or_else(|| {
                self.tokens
                    .last()
                    .map(|t| t.offset + t.text.len())
                    .unwrap_or(0)
            })
    }

    fn eat(&mut self, text: &str) -> bool {
        if self.peek() == Some(text) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, text: &str) -> Result<(), ExprError> {
        if self.eat(text) {
            Ok(())
        } else {
            Err(err(self.offset(), format!("expected `{text}`")))
        }
    }

    fn binary(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Self) -> Result<Node, ExprError>,
    ) -> Result<Node, ExprError> {
        let mut lhs = next(self)?;
        'outer: loop {
            for (text, op) in ops {
                if self.eat(text) {
                    let rhs = next(self)?;
                    lhs = Node::Bin(*op, Box::new(lhs), Box::new(rhs));
                    continue 'outer;
                }
            }
            return Ok(lhs);
        }
    }

    fn or(&mut self) -> Result<Node, ExprError> {
        self.binary(&[("||", BinOp::Or), ("or", BinOp::Or)], Self::and)
    }

    fn and(&mut self) -> Result<Node, ExprError> {
        self.binary(&[("&&", BinOp::And), ("and", BinOp::And)], Self::not)
    }

    fn not(&mut self) -> Result<Node, ExprError> {
        if self.eat("!") || self.eat("not") {
            return Ok(Node::Not(Box::new(self.nested(Self::not)?)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Node, ExprError> {
        let lhs = self.add()?;
        if self.eat("in") {
            self.expect("[")?;
            let items = self.nested(|p| p.list("]"))?;
            return Ok(Node::In(Box::new(lhs), items));
        }
        let ops = [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ];
        for (text, op) in ops {
            if self.eat(text) {
                let rhs = self.add()?;
                return Ok(Node::Bin(op, Box::new(lhs), Box::new(rhs)));
            }
        }
        Ok(lhs)
    }

    fn list(&mut self, close: &str) -> Result<Vec<Node>, ExprError> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.or()?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(",")?;
        }
    }

    fn add(&mut self) -> Result<Node, ExprError> {
        self.binary(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::mul)
    }

    fn mul(&mut self) -> Result<Node, ExprError> {
        self.binary(
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("/", BinOp::Div),
                ("%", BinOp::Rem),
            ],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        if self.eat("-") {
            return Ok(Node::Neg(Box::new(self.nested(Self::unary)?)));
        }
        let base = self.atom()?;
        if self.eat("**") {
            let exp = self.nested(Self::unary)?;
            return Ok(Node::Bin(BinOp::Pow, Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Node, ExprError> {
        let offset = self.offset();
        let Some(tok) = self.tokens.get(self.pos).cloned() else {
            return Err(err(offset, "expression ends too early"));
        };
        self.pos += 1;
        let first = tok.text.chars().next().unwrap_or(' ');
        if tok.text == "(" {
            let inner = self.nested(Self::or)?;
            self.expect(")")?;
            return Ok(inner);
        }
        if first.is_ascii_digit() || first == '.' {
            return tok
                .text
                .parse::<f64>()
                .map(Node::Num)
                .map_err(|_| err(offset, format!("bad number `{}`", tok.text)));
        }
        if first.is_ascii_alphabetic() || first == '_' {
            return self.name(tok, offset);
        }
        Err(err(offset, format!("unexpected `{}`", tok.text)))
    }

    fn name(&mut self, tok: Token, offset: usize) -> Result<Node, ExprError> {
        match tok.text.as_str() {
            "true" => return Ok(Node::Num(1.0)),
            "false" => return Ok(Node::Num(0.0)),
            _ => {}
        }
        if self.eat("(") {
            const FUNCS: [&str; 4] = ["min", "max", "abs", "floor"];
            if !FUNCS.contains(&tok.text.as_str()) {
                return Err(err(
                    offset,
                    format!(
                        "unknown function `{}` (known: {})",
                        tok.text,
                        FUNCS.join(", ")
                    ),
                ));
            }
            let args = self.nested(|p| p.list(")"))?;
            let arity_ok = match tok.text.as_str() {
                "abs" | "floor" => args.len() == 1,
                _ => !args.is_empty(),
            };
            if !arity_ok {
                return Err(err(
                    offset,
                    format!("wrong number of arguments to `{}`", tok.text),
                ));
            }
            return Ok(Node::Call(tok.text, args));
        }
        if !self.vars.contains(&tok.text.as_str()) {
            return Err(err(
                offset,
                format!(
                    "unknown variable `{}` (known here: {})",
                    tok.text,
                    self.vars.join(", ")
                ),
            ));
        }
        Ok(Node::Var(tok.text))
    }
}

fn truth(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

fn eval(node: &Node, lookup: &dyn Fn(&str) -> f64) -> f64 {
    match node {
        Node::Num(v) => *v,
        Node::Var(name) => lookup(name),
        Node::Neg(inner) => -eval(inner, lookup),
        Node::Not(inner) => truth(eval(inner, lookup) == 0.0),
        Node::In(lhs, items) => {
            let v = eval(lhs, lookup);
            truth(items.iter().any(|item| eval(item, lookup) == v))
        }
        Node::Call(name, args) => {
            let vals: Vec<f64> = args.iter().map(|a| eval(a, lookup)).collect();
            match name.as_str() {
                "min" => vals.iter().copied().fold(f64::INFINITY, f64::min),
                "max" => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                "abs" => vals[0].abs(),
                _ => vals[0].floor(),
            }
        }
        Node::Bin(op, a, b) => bin(*op, eval(a, lookup), eval(b, lookup)),
    }
}

/// `node` with `fixed`'s variables as numbers and every subtree without variables evaluated.
fn fold(node: &Node, fixed: &dyn Fn(&str) -> Option<f64>) -> Node {
    let f = match node {
        Node::Num(_) => return node.clone(),
        Node::Var(name) => return fixed(name).map_or_else(|| node.clone(), Node::Num),
        Node::Neg(a) => Node::Neg(Box::new(fold(a, fixed))),
        Node::Not(a) => Node::Not(Box::new(fold(a, fixed))),
        Node::Bin(op, a, b) => Node::Bin(*op, Box::new(fold(a, fixed)), Box::new(fold(b, fixed))),
        Node::In(a, xs) => Node::In(
            Box::new(fold(a, fixed)),
            xs.iter().map(|x| fold(x, fixed)).collect(),
        ),
        Node::Call(name, xs) => {
            Node::Call(name.clone(), xs.iter().map(|x| fold(x, fixed)).collect())
        }
    };
    let constant = match &f {
        Node::Neg(a) | Node::Not(a) => matches!(**a, Node::Num(_)),
        Node::Bin(_, a, b) => matches!((&**a, &**b), (Node::Num(_), Node::Num(_))),
        Node::In(a, xs) => {
            matches!(**a, Node::Num(_)) && xs.iter().all(|x| matches!(x, Node::Num(_)))
        }
        Node::Call(_, xs) => xs.iter().all(|x| matches!(x, Node::Num(_))),
        Node::Num(_) | Node::Var(_) => false,
    };
    if constant {
        Node::Num(eval(&f, &|_| f64::NAN))
    } else {
        f
    }
}

/// `a.rem_euclid(b)`; for positive whole numbers below 2^53 (`i % 7`) in integers, the same
/// value without libm's fmod (the hot part of a per-element fill).
fn rem(a: f64, b: f64) -> f64 {
    const EXACT: f64 = 9007199254740992.0; // 2^53
    if a > 0.0 && b > 0.0 && a < EXACT && b < EXACT && a.fract() == 0.0 && b.fract() == 0.0 {
        return ((a as u64) % (b as u64)) as f64;
    }
    a.rem_euclid(b)
}

fn bin(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::FloorDiv => (a / b).floor(),
        BinOp::Rem => rem(a, b),
        BinOp::Pow => a.powf(b),
        BinOp::Eq => truth(a == b),
        BinOp::Ne => truth(a != b),
        BinOp::Lt => truth(a < b),
        BinOp::Le => truth(a <= b),
        BinOp::Gt => truth(a > b),
        BinOp::Ge => truth(a >= b),
        BinOp::And => truth(a != 0.0 && b != 0.0),
        BinOp::Or => truth(a != 0.0 || b != 0.0),
    }
}

/// Expands `{expr}` placeholders in `template` (environment values, log lines).
pub fn interpolate(
    template: &str,
    vars: &[&str],
    lookup: &dyn Fn(&str) -> f64,
) -> Result<String, ExprError> {
    let mut out = String::new();
    let mut rest = template;
    let mut base = 0;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(err(base + open, "unclosed `{`"));
        };
        let inner = &rest[open + 1..open + close];
        let expr =
            Expr::parse(inner, vars).map_err(|e| err(base + open + 1 + e.offset, e.message))?;
        out.push_str(&format_number(expr.eval(lookup)));
        base += open + close + 1;
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Prints integral values without a fraction, like Python's `int`.
pub fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_found_only_where_the_variable_is_under_a_constant_remainder() {
        let p = |src: &str| {
            let e = Expr::parse(src, &["rank", "i", "world_size"]).unwrap();
            e.period_in("i", 1 << 20)
        };
        assert_eq!(p("rank + i % 7"), Some(7));
        assert_eq!(p("world_size * (i % 4) + max(i % 6, rank)"), Some(12));
        assert_eq!(p("rank + 1"), Some(1));
        assert_eq!(p("i"), None);
        assert_eq!(p("(i + 1) % 7"), None);
        assert_eq!(p("i % 2.5"), None);
        assert_eq!(p("i % (3 + 4)"), None);
        assert_eq!(p("i % 1048577"), None);
    }

    #[test]
    fn bound_formulas_and_integer_remainders_give_the_same_bits() {
        let vars = ["rank", "i", "world_size"];
        for src in [
            "rank + i % 7",
            "world_size * (world_size - 1) / 2 + world_size * (i % 7)",
            "(rank - i) % 3 + max(rank, 2) ** 2",
            "-(i % 5) % -3 + (rank in [0, 1]) - abs(-rank)",
            "i // 2 + 0.5 * rank + floor(i / 3) % 2.5",
        ] {
            let e = Expr::parse(src, &vars).unwrap();
            let b = e.bind(&|v| (v != "i").then_some(if v == "rank" { 3.0 } else { 4.0 }));
            for i in [0.0, -0.0, 1.0, 6.0, 7.0, 13.0, -14.0, 1e17, f64::NAN] {
                let look = |v: &str| match v {
                    "i" => i,
                    "rank" => 3.0,
                    _ => 4.0,
                };
                let (x, y) = (e.eval(&look), b.eval(&look));
                assert_eq!(x.to_bits(), y.to_bits(), "{src} at i = {i}");
            }
        }
        for (a, m) in [
            (13.0, 7.0),
            (-0.0, 7.0),
            (-13.0, 7.0),
            (13.0, -7.0),
            (7.5, 2.0),
            (1e17, 7.0),
        ] {
            assert_eq!(
                rem(a, m).to_bits(),
                f64::rem_euclid(a, m).to_bits(),
                "{a} % {m}"
            );
        }
    }

    fn eval_with(src: &str, rank: f64, i: f64) -> f64 {
        let e = Expr::parse(src, &["rank", "i", "world_size"]).unwrap();
        e.eval(&|name| match name {
            "rank" => rank,
            "i" => i,
            _ => 4.0,
        })
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(eval_with("rank * 10 + i", 2.0, 3.0), 23.0);
        assert_eq!(eval_with("(rank + 1) * (i + 1)", 1.0, 1.0), 4.0);
        assert_eq!(eval_with("7 // 2 + 7 % 2", 0.0, 0.0), 4.0);
        assert_eq!(eval_with("-2 ** 2", 0.0, 0.0), -4.0);
        assert_eq!(
            eval_with("world_size * (world_size - 1) / 2", 0.0, 0.0),
            6.0
        );
    }

    #[test]
    fn conditions() {
        assert_eq!(eval_with("rank % 2 == 0 && i < 3", 2.0, 1.0), 1.0);
        assert_eq!(eval_with("rank in [1, 3]", 2.0, 0.0), 0.0);
        assert_eq!(eval_with("not rank == 0", 0.0, 0.0), 0.0);
        assert_eq!(eval_with("max(rank, i, 7)", 9.0, 1.0), 9.0);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = Expr::parse("rank + nodes", &["rank"]).unwrap_err();
        assert_eq!(e.offset, 7);
        assert!(e.message.contains("unknown variable `nodes`"));
        assert!(Expr::parse("rank +", &["rank"]).is_err());
        assert!(Expr::parse("rank $ 2", &["rank"]).unwrap_err().offset == 5);
    }

    #[test]
    fn interpolation() {
        let s = interpolate("xpu:{rank % 2}/{rank*2}", &["rank"], &|_| 3.0).unwrap();
        assert_eq!(s, "xpu:1/6");
        assert!(interpolate("{rank", &["rank"], &|_| 0.0).is_err());
    }
}
