//! From TOML text to a validated [`Scenario`], with every error naming file:line:col.
//!
//! The only place that knows which fields belong to which op, what the defaults are, and which
//! values are rejected before anything runs (unknown keys, wrong types, out-of-range ranks, bad
//! URLs). Run-time c10d errors (a missing env var, a bad port in the environment) are not
//! reported here: they belong to the model, exactly as PyTorch raises them.
//!
//! This file holds the entry points, locations and the scenario/expectation tables; the parts
//! by table are in load/: `world.rs` (`[world]`), `steps.rs` (`[[step]]`), `faults.rs`
//! (`[[faults]]`) and `sglang.rs` (sglang's steps).

use super::expr::Expr;
use super::limits;
use super::model::*;
use super::raw::*;
use std::cell::RefCell;
use toml::Spanned;

mod bytes;
mod faults;
mod p2p;
mod raise;
mod sglang;
mod split;
mod steps;
mod store;
mod world;

/// A scenario file problem, located.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Reads and validates a scenario file from disk.
pub fn load_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let cannot = |line, col, message: String| ScenarioError {
        file: file.clone(),
        line,
        col,
        message,
    };
    let bytes =
        std::fs::read(path).map_err(|e| cannot(0, 0, format!("cannot read the scenario: {e}")))?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            // Locate the first bad byte in the valid prefix.
            let at = e.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or("");
            let loc = Locator::new(valid).loc(valid, at);
            return Err(cannot(
                loc.line,
                loc.col,
                format!("not valid UTF-8: byte offset {at} (0x{:02x}) does not start a UTF-8 character; scenario files are UTF-8 text", e.as_bytes()[at]),
            ));
        }
    };
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    parse(&text, &file, &name)
}

/// Byte offset -> line:col (columns count characters), in O(log lines) per lookup so loading is
/// linear in the file's size however many steps it has.
struct Locator {
    line_starts: Vec<usize>,
}

impl Locator {
    fn new(text: &str) -> Locator {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Locator { line_starts }
    }

    fn loc(&self, text: &str, offset: usize) -> Loc {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|s| *s <= offset).max(1);
        let start = self.line_starts[line - 1];
        Loc {
            line,
            col: text[start..offset].chars().count() + 1,
        }
    }
}

/// Parses scenario text; `file` names it in errors, `default_name` is used when it has none.
pub fn parse(text: &str, file: &str, default_name: &str) -> Result<Scenario, ScenarioError> {
    let cx = Cx {
        text,
        file,
        works: RefCell::new(Vec::new()),
        lines: Locator::new(text),
        denoise_work: std::cell::Cell::new(0),
        payloads_key: std::cell::Cell::new(None),
        over_limit: RefCell::new(None),
        group_sizes: RefCell::new(std::collections::BTreeMap::new()),
        first_expect: std::cell::Cell::new(None),
        largest_coll: std::cell::Cell::new((0, 0)),
        stores: RefCell::default(),
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        cx.err(at, e.message().trim_end().to_string())
    })?;
    cx.scenario(raw, default_name)
}

struct Cx<'a> {
    text: &'a str,
    file: &'a str,
    /// Work handles named by `async_op = true` steps so far (for `wait`).
    works: RefCell<Vec<String>>,
    lines: Locator,
    /// denoise_step work so far (layers x elements), against [`limits::MAX_DENOISE_WORK`].
    denoise_work: std::cell::Cell<u64>,
    /// `[sim] payloads` as written: `Some(true)` symbolic, `Some(false)` values.
    payloads_key: std::cell::Cell<Option<bool>>,
    /// Without a `payloads` key: the first collective over [`limits::MAX_TENSOR_BYTES_TOTAL`]
    /// (its refusal) and the largest such total, decided once every step is read.
    over_limit: RefCell<Option<(ScenarioError, u64)>>,
    /// Members of each named group (the largest a handle has named), for the tensor-size
    /// estimate of a collective over it; a handle not here counts the whole world.
    group_sizes: RefCell<std::collections::BTreeMap<String, usize>>,
    /// Where the first step's `expect` is (symbolic payloads cannot check values).
    first_expect: std::cell::Cell<Option<usize>>,
    /// The largest collective's tensor bytes over all ranks and where its op is, for the
    /// memory estimate (bytes.rs).
    largest_coll: std::cell::Cell<(u64, usize)>,
    /// Stores the program made so far (`tcp_store` / `prefix_store` steps' `as`).
    stores: RefCell<Vec<String>>,
}

type R<T> = Result<T, ScenarioError>;

impl Cx<'_> {
    fn loc(&self, offset: usize) -> Loc {
        self.lines.loc(self.text, offset)
    }

    /// The source offset of byte `inner` of the string value whose literal starts at `start`.
    /// Exact for plain one-line strings; for strings with escapes or multi-line strings (whose
    /// value differs from the source) the literal's first character.
    fn in_str(&self, start: usize, inner: usize) -> usize {
        let src = self.text.get(start..).unwrap_or("");
        let (open, quote) = if src.starts_with("\"\"\"") || src.starts_with("'''") {
            (3, &src[..3])
        } else if src.starts_with('"') || src.starts_with('\'') {
            (1, &src[..1])
        } else {
            return start;
        };
        let body = &src[open..];
        let Some(end) = body.find(quote) else {
            return start + open;
        };
        // Literal strings ('...') have no escapes; basic ones are exact without a backslash.
        let exact = quote.starts_with('\'') || !body[..end].contains('\\');
        match (exact, open) {
            (true, 1) if !body[..end].contains('\n') => start + open + inner,
            // A newline right after the opening delimiter is not part of the value.
            (true, 3) => start + open + usize::from(body.starts_with('\n')) + inner,
            _ => start + open,
        }
    }

    fn err(&self, offset: usize, message: impl Into<String>) -> ScenarioError {
        let loc = self.loc(offset);
        ScenarioError {
            file: self.file.to_string(),
            line: loc.line,
            col: loc.col,
            message: message.into(),
        }
    }

    fn at<T>(&self, s: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        self.err(s.span().start, message)
    }

    fn scenario(&self, raw: RawScenario, default_name: &str) -> R<Scenario> {
        let world = self.world(raw.world)?;
        self.payloads_key.set(self.payloads_key(&raw.sim)?);
        if raw.step.len() > limits::MAX_STEPS {
            let at = raw.step[limits::MAX_STEPS].span().start;
            return Err(self.err(
                at,
                format!(
                    "too many steps: {} (scen's limit is {} steps per scenario)",
                    raw.step.len(),
                    limits::MAX_STEPS
                ),
            ));
        }
        let mut steps = Vec::new();
        let mut handles: Vec<String> = Vec::new();
        for (index, s) in raw.step.into_iter().enumerate() {
            let step = self.step(index, s, &world, &mut handles)?;
            steps.push(step);
        }
        let expect = raw
            .expect
            .into_iter()
            .map(|e| self.expectation(e, &world, &steps))
            .collect::<R<Vec<_>>>()?;
        let mut sim = self.sim(raw.sim)?;
        sim.payloads = self.payloads()?;
        sim.memory = self.check_memory(&world, &steps, sim.payloads)?;
        let faults = raw
            .faults
            .into_iter()
            .enumerate()
            .map(|(i, f)| self.fault(i, f, &world, &steps))
            .collect::<R<Vec<_>>>()?;
        Ok(Scenario {
            name: raw
                .scenario
                .name
                .unwrap_or_else(|| default_name.to_string()),
            file: self.file.to_string(),
            description: raw.scenario.description,
            world,
            steps,
            expect,
            sim,
            faults,
            time_scale: Default::default(),
        })
    }

    fn sim(&self, raw: RawSim) -> R<SimSettings> {
        let (lo, hi) = match raw.latency_ms {
            Some(l) => {
                let [lo, hi] = *l.get_ref();
                if lo > hi {
                    return Err(self.at(&l, "latency_ms = [min, max] needs min <= max"));
                }
                if hi > limits::MAX_DURATION_MS {
                    return Err(self.at(
                        &l,
                        format!(
                            "latency_ms {hi} is over scen's limit for a duration ({} ms, 30 days)",
                            limits::MAX_DURATION_MS
                        ),
                    ));
                }
                (lo, hi)
            }
            None => (0, 0),
        };
        Ok(SimSettings {
            seed: raw.seed.unwrap_or(0),
            latency_min_ms: lo,
            latency_max_ms: hi,
            random_order: raw.random_order.unwrap_or(false),
            payloads: Payloads::Values,
            memory: Default::default(),
            batch_store_loops: true,
            loopback_queue: true,
        })
    }

    /// `[sim] payloads`: `Some(true)` for "symbolic", `Some(false)` for "values".
    fn payloads_key(&self, raw: &RawSim) -> R<Option<bool>> {
        let Some(p) = &raw.payloads else {
            return Ok(None);
        };
        match p.get_ref().as_str() {
            "values" => Ok(Some(false)),
            "symbolic" => Ok(Some(true)),
            other => Err(self.at(p, format!("unknown payloads `{other}` (values, symbolic)"))),
        }
    }

    /// The payload kind, once every step is read: as written, else values when the world fits
    /// scen's limits, else symbolic when no step checks values, else the first refusal.
    fn payloads(&self) -> R<Payloads> {
        match (self.payloads_key.get(), self.over_limit.borrow_mut().take()) {
            (Some(true), _) => Ok(Payloads::Symbolic {
                auto_total_bytes: None,
            }),
            (Some(false), _) | (None, None) => Ok(Payloads::Values),
            (None, Some((refusal, _))) if self.first_expect.get().is_some() => Err(refusal),
            (None, Some((_, total))) => Ok(Payloads::Symbolic {
                auto_total_bytes: Some(total),
            }),
        }
    }

    fn positive(&self, v: &Option<Spanned<i64>>, default: usize, what: &str) -> R<usize> {
        match v {
            None => Ok(default),
            Some(s) if *s.get_ref() >= 1 && *s.get_ref() <= 4096 => Ok(*s.get_ref() as usize),
            Some(s) => Err(self.at(s, format!("{what} must be between 1 and 4096"))),
        }
    }

    fn platform(&self, s: &Spanned<String>) -> R<Platform> {
        Platform::parse(s.get_ref()).ok_or_else(|| {
            self.at(
                s,
                format!("unknown platform `{}` (xpu, cuda, cpu)", s.get_ref()),
            )
        })
    }

    fn expr(&self, s: &Spanned<String>, vars: &[&str]) -> R<Expr> {
        Expr::parse(s.get_ref(), vars)
            .map_err(|e| self.err(self.in_str(s.span().start, e.offset), e.message))
    }

    fn expectation(&self, s: Spanned<RawExpect>, world: &World, steps: &[Step]) -> R<Expectation> {
        let loc = self.loc(s.span().start);
        let e = s.into_inner();
        let on = match &e.on {
            Some(sel) => self.selector(sel, world.size())?,
            None => Selector::All,
        };
        let outcome = match e.outcome.get_ref().as_str() {
            "completes" => ExpectedOutcome::Completes,
            "fails" => ExpectedOutcome::Fails,
            "hangs" => ExpectedOutcome::Hangs,
            "running" => ExpectedOutcome::Running {
                after_ms: self.after_ms(&e)?,
            },
            other => {
                return Err(self.at(
                    &e.outcome,
                    format!("unknown outcome `{other}` (completes, fails, hangs, running)"),
                ))
            }
        };
        if let Some(a) = e
            .after_s
            .as_ref()
            .filter(|_| !matches!(outcome, ExpectedOutcome::Running { .. }))
        {
            return Err(self.at(a, "`after_s` goes with outcome = \"running\""));
        }
        if let Some(err) = e
            .error
            .as_ref()
            .filter(|_| outcome != ExpectedOutcome::Fails)
        {
            return Err(self.at(err, "`error` goes with outcome = \"fails\""));
        }
        let step = match &e.step {
            None => None,
            Some(sr) => Some(self.step_ref(sr, steps)?),
        };
        let error = match e.error {
            None => Vec::new(),
            Some(x) => match x.get_ref() {
                RawErrors::One(t) => vec![t.clone()],
                RawErrors::Any(ts) if !ts.is_empty() => ts.clone(),
                RawErrors::Any(_) => {
                    return Err(self.at(&x, "`error = []` lists no text: give one or more"))
                }
            },
        };
        Ok(Expectation {
            loc,
            on,
            outcome,
            error,
            step,
        })
    }

    /// `running`'s `after_s`, required: the seconds after the start the rank was still running.
    fn after_ms(&self, e: &RawExpect) -> R<u64> {
        match &e.after_s {
            Some(a) if *a.get_ref() >= 0.0 && *a.get_ref() * 1000.0 <= limits::MAX_DURATION_MS as f64 => {
                Ok((*a.get_ref() * 1000.0).round() as u64)
            }
            Some(a) => Err(self.at(
                a,
                format!(
                    "after_s must be between 0 and {} seconds",
                    limits::MAX_DURATION_MS / 1000
                ),
            )),
            None => Err(self.at(
                &e.outcome,
                "outcome = \"running\" needs `after_s` (how long after the start the rank was still running)",
            )),
        }
    }

    fn step_ref(&self, sr: &Spanned<RawStepRef>, steps: &[Step]) -> R<usize> {
        match sr.get_ref() {
            RawStepRef::Index(i) if *i >= 1 && (*i as usize) <= steps.len() => Ok(*i as usize - 1),
            RawStepRef::Index(i) => Err(self.at(
                sr,
                format!(
                    "step {i} does not exist (the program has {} steps)",
                    steps.len()
                ),
            )),
            RawStepRef::Id(id) => steps
                .iter()
                .position(|s| s.id.as_deref() == Some(id))
                .ok_or_else(|| self.at(sr, format!("no step has id \"{id}\""))),
        }
    }
}
