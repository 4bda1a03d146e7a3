//! Just enough of the Level Zero loader (libze_loader.so.1) to find Intel GPUs: zeInit,
//! zeDriverGet, zeDeviceGet, zeDeviceGetProperties. Loaded at run time so scen builds and runs
//! without it. On a machine with the loader but no GPU driver, zeInit returns
//! ZE_RESULT_ERROR_UNINITIALIZED (0x78000001): that is "zero devices", not an error.
//! ZE_AFFINITY_MASK is applied by the loader/driver itself, so the devices listed are the ones
//! this process may use.

use libloading::Library;
use std::ffi::{c_char, c_void};

pub type ZeResult = u32;
pub const ZE_RESULT_SUCCESS: ZeResult = 0;
pub const ZE_RESULT_ERROR_UNINITIALIZED: ZeResult = 0x7800_0001;
const ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES: u32 = 0x3;

/// `ze_device_properties_t` (ze_api.h 1.x), with spare room at the end for newer fields.
#[repr(C)]
struct DeviceProperties {
    stype: u32,
    p_next: *mut c_void,
    device_type: u32,
    vendor_id: u32,
    device_id: u32,
    flags: u32,
    subdevice_id: u32,
    core_clock_rate: u32,
    max_mem_alloc_size: u64,
    max_hardware_contexts: u32,
    max_command_queue_priority: u32,
    num_threads_per_eu: u32,
    physical_eu_simd_width: u32,
    num_eus_per_subslice: u32,
    num_subslices_per_slice: u32,
    num_slices: u32,
    timer_resolution: u64,
    timestamp_valid_bits: u32,
    kernel_timestamp_valid_bits: u32,
    uuid: [u8; 16],
    name: [c_char; 256],
    spare: [u8; 256],
}

/// One device as the loader lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Position in the enumeration over all drivers (what `xpu:N` means with this affinity mask).
    pub index: usize,
    pub name: String,
    /// "gpu", "cpu", "fpga", "mca", "vpu" or "unknown(N)".
    pub device_type: String,
    pub uuid: [u8; 16],
    pub vendor_id: u32,
}

impl Device {
    pub fn uuid_hex(&self) -> String {
        self.uuid.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The library that was opened.
    pub loader: String,
    pub drivers: usize,
    pub devices: Vec<Device>,
    /// Why there are no devices, when zeInit or zeDriverGet said so.
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ZeError {
    #[error("the Level Zero loader is not installed ({0}); install libze1 (Debian/Ubuntu) or the Intel GPU driver stack")]
    NoLoader(String),
    #[error("libze_loader.so.1 lacks {0}")]
    MissingSymbol(&'static str),
    #[error("{call} returned {code:#x}")]
    Call { call: &'static str, code: ZeResult },
}

type InitFn = unsafe extern "C" fn(u32) -> ZeResult;
type DriverGetFn = unsafe extern "C" fn(*mut u32, *mut *mut c_void) -> ZeResult;
type DeviceGetFn = unsafe extern "C" fn(*mut c_void, *mut u32, *mut *mut c_void) -> ZeResult;
type PropsFn = unsafe extern "C" fn(*mut c_void, *mut DeviceProperties) -> ZeResult;

/// Loads the loader and lists its devices.
pub fn probe() -> Result<Probe, ZeError> {
    let name = "libze_loader.so.1";
    // SAFETY: opening the loader runs its initialisers, which are sound.
    let lib = unsafe { Library::new(name) }.map_err(|e| ZeError::NoLoader(e.to_string()))?;
    macro_rules! sym {
        ($t:ty, $n:literal) => {{
            // SAFETY: the type matches the prototype in ze_api.h.
            let s: libloading::Symbol<$t> = unsafe { lib.get(concat!($n, "\0").as_bytes()) }
                .map_err(|_| ZeError::MissingSymbol($n))?;
            *s
        }};
    }
    let ze_init = sym!(InitFn, "zeInit");
    let driver_get = sym!(DriverGetFn, "zeDriverGet");
    let device_get = sym!(DeviceGetFn, "zeDeviceGet");
    let props = sym!(PropsFn, "zeDeviceGetProperties");
    let mut out = Probe {
        loader: name.into(),
        drivers: 0,
        devices: vec![],
        note: None,
    };
    // SAFETY: plain calls with valid out pointers, sized by the count calls before them.
    unsafe {
        let rc = ze_init(0);
        if rc == ZE_RESULT_ERROR_UNINITIALIZED {
            out.note = Some(
                "zeInit returned ZE_RESULT_ERROR_UNINITIALIZED: no Level Zero GPU driver is installed"
                    .into(),
            );
            return Ok(out);
        }
        if rc != ZE_RESULT_SUCCESS {
            return Err(ZeError::Call {
                call: "zeInit",
                code: rc,
            });
        }
        let mut n = 0u32;
        let rc = driver_get(&mut n, std::ptr::null_mut());
        if rc != ZE_RESULT_SUCCESS || n == 0 {
            out.note = Some(format!("zeDriverGet found no driver (rc {rc:#x})"));
            return Ok(out);
        }
        let mut drivers = vec![std::ptr::null_mut(); n as usize];
        check("zeDriverGet", driver_get(&mut n, drivers.as_mut_ptr()))?;
        out.drivers = n as usize;
        for d in drivers {
            let mut m = 0u32;
            check("zeDeviceGet", device_get(d, &mut m, std::ptr::null_mut()))?;
            let mut devs = vec![std::ptr::null_mut(); m as usize];
            check("zeDeviceGet", device_get(d, &mut m, devs.as_mut_ptr()))?;
            for dev in devs {
                let mut p: DeviceProperties = std::mem::zeroed();
                p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
                check("zeDeviceGetProperties", props(dev, &mut p))?;
                let name_bytes: Vec<u8> = p
                    .name
                    .iter()
                    .take_while(|c| **c != 0)
                    .map(|c| *c as u8)
                    .collect();
                out.devices.push(Device {
                    index: out.devices.len(),
                    name: String::from_utf8_lossy(&name_bytes).into_owned(),
                    device_type: type_name(p.device_type),
                    uuid: p.uuid,
                    vendor_id: p.vendor_id,
                });
            }
        }
    }
    Ok(out)
}

fn check(call: &'static str, code: ZeResult) -> Result<(), ZeError> {
    if code == ZE_RESULT_SUCCESS {
        Ok(())
    } else {
        Err(ZeError::Call { call, code })
    }
}

fn type_name(t: u32) -> String {
    match t {
        1 => "gpu".into(),
        2 => "cpu".into(),
        3 => "fpga".into(),
        4 => "mca".into(),
        5 => "vpu".into(),
        n => format!("unknown({n})"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_never_fails_on_a_machine_without_a_driver() {
        // Here (libze1 installed, no GPU driver) zeInit says UNINITIALIZED: zero devices, a note.
        match super::probe() {
            Ok(p) => assert!(p.note.is_some() || !p.devices.is_empty() || p.drivers > 0),
            Err(super::ZeError::NoLoader(_)) => eprintln!("skip: no libze_loader.so.1"),
            Err(e) => panic!("{e}"),
        }
    }
}
