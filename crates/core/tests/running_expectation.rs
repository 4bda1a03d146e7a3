//! `outcome = "running"` (what `scen record --timeout-s` writes for a rank its time limit cut):
//! a hang in its step holds, so does an end at or after `after_s`; an earlier end does not, and
//! `after_s` belongs to `running` only.

use scen_core::outcome::Failure;
use scen_core::scenario::parse;
use scen_core::verdict::{check_expectations, RankVerdict};

const HEAD: &str = r#"
[world]
ranks_per_node = 2
platform = "cpu"

[[step]]
op = "init_process_group"
backend = "gloo"

[[step]]
id = "ar"
op = "all_reduce"
"#;

fn scenario(expect: &str) -> Result<scen_core::scenario::Scenario, String> {
    parse(&format!("{HEAD}\n{expect}"), "r.toml", "r").map_err(|e| e.to_string())
}

fn failed_at(t_ms: u64, step: usize) -> RankVerdict {
    RankVerdict::Failed {
        step,
        failure: Failure::Raised {
            exception: "RuntimeError".into(),
            message: "Connection closed by peer".into(),
        },
        t_ms,
    }
}

#[test]
fn running_holds_for_a_hang_or_a_late_end_only() {
    let s = scenario("[[expect]]\noutcome = \"running\"\nafter_s = 10.0\nstep = \"ar\"\n").unwrap();
    let cases = [
        (failed_at(12_000, 1), true),
        (failed_at(9_000, 1), false),
        (failed_at(12_000, 0), false),
        (RankVerdict::Completed { t_ms: 10_000 }, true),
        (RankVerdict::Completed { t_ms: 5 }, false),
        (
            RankVerdict::Hung {
                step: 1,
                wait: None,
            },
            true,
        ),
        (
            RankVerdict::Hung {
                step: 0,
                wait: None,
            },
            false,
        ),
    ];
    for (v, want) in cases {
        let checks = check_expectations(&s, &[v.clone(), v.clone()]);
        assert_eq!(checks[0].holds, want, "{v:?}: {}", checks[0].expected);
    }
}

#[test]
fn after_s_goes_with_running_and_running_needs_it() {
    let e = scenario("[[expect]]\noutcome = \"hangs\"\nafter_s = 3.0\n").unwrap_err();
    assert!(
        e.contains("`after_s` goes with outcome = \"running\""),
        "{e}"
    );
    let e = scenario("[[expect]]\noutcome = \"running\"\n").unwrap_err();
    assert!(e.contains("needs `after_s`"), "{e}");
    assert!(e.starts_with("r.toml:"), "{e}");
}

/// `error = [a, b]`: the failure's text contains one of them (a recording's two readings of a
/// race); containing neither breaks it, and the expected text names both.
#[test]
fn an_error_list_holds_for_either_text() {
    let s =
        scenario("[[expect]]\noutcome = \"fails\"\nerror = [\"Timed out waiting\", \"by peer\"]\n")
            .unwrap();
    let other = RankVerdict::Failed {
        step: 1,
        failure: Failure::Raised {
            exception: "RuntimeError".into(),
            message: "Timed out waiting 3000ms for send operation to complete".into(),
        },
        t_ms: 3000,
    };
    let neither = RankVerdict::Failed {
        step: 1,
        failure: Failure::Raised {
            exception: "ValueError".into(),
            message: "gives up".into(),
        },
        t_ms: 3000,
    };
    let c = check_expectations(&s, &[failed_at(10, 1), other]);
    assert!(c.iter().all(|c| c.holds), "{c:?}");
    assert_eq!(
        c[0].expected,
        "fails with \"Timed out waiting\" or \"by peer\""
    );
    let c = check_expectations(&s, &[neither, failed_at(10, 1)]);
    assert!(!c[0].holds && c[1].holds, "{c:?}");
}
