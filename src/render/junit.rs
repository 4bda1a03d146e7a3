//! `scen test --junit FILE`: the results as JUnit XML (quick-junit writes it), one test case
//! per scenario, for CI systems that show test reports. A scenario without a snapshot is a
//! failure when `strict` (under CI), else a success.

use crate::suite::{Outcome, Status};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

/// The JUnit XML document for a suite run.
pub fn render(outcomes: &[Outcome], strict: bool) -> anyhow::Result<String> {
    let mut suite = TestSuite::new("scen");
    for o in outcomes {
        let status = match o.status {
            Status::Passed | Status::Updated => TestCaseStatus::success(),
            Status::NoSnapshot if !strict => TestCaseStatus::success(),
            Status::NoSnapshot => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(o.no_snapshot_text());
                s
            }
            Status::Failed | Status::Invalid => {
                let kind = if o.status == Status::Invalid {
                    NonSuccessKind::Error
                } else {
                    NonSuccessKind::Failure
                };
                let mut s = TestCaseStatus::non_success(kind);
                let lines: Vec<String> = o.problems.iter().map(ToString::to_string).collect();
                s.set_message(lines.first().cloned().unwrap_or_default());
                let mut description = lines.join("\n");
                if let Some(c) = &o.snapshot {
                    let old = c.old.as_ref().map(|o| o.body.as_str()).unwrap_or("");
                    description.push('\n');
                    description.push_str(&crate::suite::snapshot::diff(old, &c.new_body));
                }
                s.set_description(description);
                s
            }
        };
        let mut case = TestCase::new(o.name.clone(), status);
        case.set_classname(o.file.display().to_string());
        suite.add_test_case(case);
    }
    let mut report = Report::new("scen test");
    report.add_test_suite(suite);
    Ok(report.to_string()?)
}
