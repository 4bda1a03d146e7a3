//! The dump on a hang that XCCL lacks: when the launcher's watchdog declares a stall it writes
//! every rank's flight-recorder dump (pickle, as ProcessGroupNCCL's watchdog writes
//! `TORCH_FR_DUMP_TEMP_FILE<rank>` on a timeout) from the call records it heard up to the
//! stall, so `torchfrtrace` and `scen import-fr` can read an oneCCL hang like an NCCL one.

use crate::HwOptions;
use scen_core::fr::export::{dumps, write_dir, Format};
use scen_core::observe::Observed;
use scen_core::scenario::Scenario;

/// Writes the dumps into `o.fr_dump_dir` (if set) and notes where, or why not.
pub(crate) fn on_stall(s: &Scenario, obs: &Observed, o: &HwOptions, notes: &mut Vec<String>) {
    let Some(dir) = &o.fr_dump_dir else { return };
    let calls = obs
        .first_stall_calls
        .as_ref()
        .map(|(c, _, _)| c.as_slice())
        .unwrap_or(&obs.calls);
    match write_dir(dir, &dumps(s.world.size(), calls), Format::Pickle) {
        Ok(files) => notes.push(format!(
            "watchdog: wrote {} flight-recorder dumps to {} at the stall",
            files.len(),
            dir.display()
        )),
        Err(e) => notes.push(format!(
            "watchdog: cannot write flight-recorder dumps to {}: {e}",
            dir.display()
        )),
    }
}
