//! Decode and encode throughput of the generated bindings (issue #9).
//!
//! Decoding runs on real simulator responses: `RetrievePropertiesEx` pages of
//! 100 VMs over 1,000 VMs with `config.hardware.device` and `summary`, the
//! `WaitForUpdatesEx` update set entering those 1,000 VMs, and a SOAP fault.
//! The bytes are captured once by `benches/capture-soap bench` into
//! `<target>/bench-data/` (megabytes, not committed); set
//! `VSPHERE_BENCH_DATA=DIR` to use other captures. Each decode is compared,
//! on the same bytes, with a raw quick-xml event scan that allocates nothing
//! per event: the practical ceiling of a streaming decoder.
//!
//! Decoding is timed up to the decoded value; freeing that value is timed
//! apart (the scan builds nothing to free), and the summary shows both.
//!
//! `cargo bench -p vsphere-client --bench codec` runs criterion, then prints
//! a summary: decode and scan timed side by side, round after round, for the
//! MB/s and the decode/scan ratio (a shared machine's speed drifts between
//! criterion's runs of one and of the other), the time to free the result,
//! allocations per document, and encode MB/s from criterion's medians.
//! `BENCH_TSV=FILE` appends it as tab-separated lines for `make bench`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use quick_xml::events::Event;
use vsphere_client::types::*;
use vsphere_client::xml::soap;
use vsphere_client::xml::{ManagedObjectReference, Value};

/// Counts allocations while [`COUNTING`] is on, to show where decoding
/// allocates and that the scan does not. Off while criterion times: a
/// locked add per allocation would be measured as decoding.
struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

fn count_allocation() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// The allocator only counts and hands every call to `System` unchanged.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const VMS: usize = 1000;

/// A set of captured response documents decoded together as one iteration.
struct Workload {
    name: &'static str,
    docs: Vec<Vec<u8>>,
    decode: fn(&[u8]) -> Decoded,
}

impl Workload {
    fn bytes(&self) -> u64 {
        self.docs.iter().map(|d| d.len() as u64).sum()
    }

    fn decode_all(&self) -> Vec<Decoded> {
        self.docs
            .iter()
            .map(|d| (self.decode)(black_box(d)))
            .collect()
    }
}

/// What one document decodes to, kept whole so that the benchmark can time
/// decoding and freeing the result apart.
enum Decoded {
    Page(Option<RetrieveResult>),
    Updates(Option<UpdateSet>),
    Fault(soap::SoapFault),
}

impl Decoded {
    /// Objects (or fault details) decoded: checked against the captures.
    fn count(&self) -> usize {
        match self {
            Decoded::Page(page) => page.as_ref().map_or(0, |p| p.objects.len()),
            Decoded::Updates(updates) => updates
                .as_ref()
                .map_or(0, |u| u.filter_set.iter().map(|f| f.object_set.len()).sum()),
            Decoded::Fault(fault) => fault.detail.is_some() as usize,
        }
    }
}

/// A page: the first is a `RetrievePropertiesEx` response, the others
/// `ContinueRetrievePropertiesEx` responses (told apart in the first bytes).
fn decode_page(doc: &[u8]) -> Decoded {
    let head = &doc[..doc.len().min(600)];
    let continued = head
        .windows(b"<ContinueRetrievePropertiesExResponse".len())
        .any(|w| w == b"<ContinueRetrievePropertiesExResponse");
    let result = if continued {
        soap::decode_response::<ContinueRetrievePropertiesExRequestType>(doc).map(Some)
    } else {
        soap::decode_response::<RetrievePropertiesExRequestType>(doc)
    };
    match result {
        Ok(page) => Decoded::Page(page),
        Err(e) => panic!("captured page does not decode: {e}"),
    }
}

fn decode_updates(doc: &[u8]) -> Decoded {
    match soap::decode_response::<WaitForUpdatesExRequestType>(doc) {
        Ok(updates) => Decoded::Updates(updates),
        Err(e) => panic!("captured update set does not decode: {e}"),
    }
}

fn decode_fault(doc: &[u8]) -> Decoded {
    match soap::decode_fault(doc) {
        Ok(fault) => Decoded::Fault(fault),
        Err(e) => panic!("captured fault does not decode: {e}"),
    }
}

/// Every event of the document, nothing kept: no namespace resolution, no
/// unescaping, no end-name check. Nothing is allocated per event (quick-xml
/// grows its stack of open element names a few times per document).
fn scan(doc: &[u8]) -> usize {
    let mut reader = quick_xml::Reader::from_reader(doc);
    let config = reader.config_mut();
    config.expand_empty_elements = true;
    config.check_end_names = false;
    config.trim_text(false);
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(Event::Start(_)) => elements += 1,
            Ok(Event::Eof) => return elements,
            Ok(_) => {}
            Err(e) => panic!("captured document is not XML: {e}"),
        }
    }
}

fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("vsphere-client sits in the workspace")
        .to_path_buf()
}

/// `<target>/release/deps/codec-HASH` -> `<target>`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| workspace_dir().join("target"))
}

/// The captured 1,000-VM responses, captured now when missing.
fn bench_data() -> PathBuf {
    if let Ok(dir) = std::env::var("VSPHERE_BENCH_DATA") {
        return PathBuf::from(dir);
    }
    let dir = target_dir().join("bench-data").join(format!("vms-{VMS}"));
    if dir.join("wait-for-updates-all.xml").is_file() {
        return dir;
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    eprintln!(
        "capturing {VMS}-VM responses from the simulator into {}",
        dir.display()
    );
    let status = Command::new(workspace_dir().join("benches/capture-soap"))
        .args(["bench", "--vms", &VMS.to_string(), "--out"])
        .arg(&partial)
        .status()
        .expect("running benches/capture-soap");
    assert!(status.success(), "benches/capture-soap failed ({status})");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).expect("moving the captures in place");
    dir
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workloads() -> Vec<Workload> {
    let data = bench_data();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("{}: {e}", data.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("retrieve-properties-page-"))
        })
        .collect();
    pages.sort();
    let pages: Vec<Vec<u8>> = pages.iter().map(|p| read(p)).collect();
    let objects: usize = pages.iter().map(|p| decode_page(p).count()).sum();
    assert_eq!(objects, VMS, "the captured pages hold every VM once");
    let updates = read(&data.join("wait-for-updates-all.xml"));
    assert_eq!(
        decode_updates(&updates).count(),
        VMS,
        "the update set enters every VM"
    );
    let fault = read(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fault-managed-object-not-found.xml"),
    );
    vec![
        Workload {
            name: "retrieve_properties_1000_vms",
            docs: pages,
            decode: decode_page,
        },
        Workload {
            name: "wait_for_updates_1000_vms",
            docs: vec![updates],
            decode: decode_updates,
        },
        Workload {
            name: "fault",
            docs: vec![fault],
            decode: decode_fault,
        },
    ]
}

fn mor(type_: &str, value: impl Into<String>) -> ManagedObjectReference {
    ManagedObjectReference::new(type_, value)
}

/// A reconfigure adding 32 disks and 8 NICs, with 200 guestinfo entries.
fn large_config_spec() -> ReconfigVMRequestType {
    let mut device_change: Vec<AnyVirtualDeviceConfigSpec> = Vec::new();
    for i in 0..32 {
        let backing = VirtualDiskFlatVer2BackingInfo {
            virtual_device_file_backing_info: VirtualDeviceFileBackingInfo {
                file_name: format!("[datastore1] app-01/app-01_{i}.vmdk"),
                datastore: Some(mor("Datastore", "datastore-11")),
                ..Default::default()
            },
            disk_mode: "persistent".into(),
            thin_provisioned: Some(true),
            ..Default::default()
        };
        let disk = VirtualDisk {
            virtual_device: VirtualDevice {
                key: -100 - i,
                controller_key: Some(1000 + i / 15),
                unit_number: Some(i % 15),
                backing: Some(backing.into()),
                ..Default::default()
            },
            capacity_in_kb: 64 * 1024 * 1024,
            ..Default::default()
        };
        device_change.push(
            VirtualDeviceConfigSpec {
                operation: Some(VirtualDeviceConfigSpecOperation::Add),
                file_operation: Some(VirtualDeviceConfigSpecFileOperation::Create),
                device: disk.into(),
                ..Default::default()
            }
            .into(),
        );
    }
    for i in 0..8 {
        let backing = VirtualEthernetCardDistributedVirtualPortBackingInfo {
            port: DistributedVirtualSwitchPortConnection {
                switch_uuid: "50 1a 2b 3c 4d 5e 6f 70-81 92 a3 b4 c5 d6 e7 f8".into(),
                portgroup_key: Some(format!("dvportgroup-{}", 40 + i)),
                ..Default::default()
            },
        };
        let device = VirtualDevice {
            key: -200 - i,
            backing: Some(backing.into()),
            connectable: Some(VirtualDeviceConnectInfo {
                start_connected: true,
                allow_guest_control: true,
                connected: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let nic = VirtualVmxnet3 {
            virtual_vmxnet: VirtualVmxnet {
                virtual_ethernet_card: VirtualEthernetCard {
                    virtual_device: device,
                    ..Default::default()
                },
            },
            ..Default::default()
        };
        device_change.push(
            VirtualDeviceConfigSpec {
                operation: Some(VirtualDeviceConfigSpecOperation::Add),
                device: nic.into(),
                ..Default::default()
            }
            .into(),
        );
    }
    let extra_config = (0..200)
        .map(|i| {
            OptionValue {
                key: format!("guestinfo.app.setting{i}"),
                value: Some(Value::String(format!("value <{i}> & more"))),
            }
            .into()
        })
        .collect();
    ReconfigVMRequestType {
        this: mor("VirtualMachine", "vm-42"),
        spec: VirtualMachineConfigSpec {
            name: Some("app-01".into()),
            annotation: Some("built by the codec benchmark".into()),
            num_cpus: Some(8),
            num_cores_per_socket: Some(4),
            memory_mb: Some(32 * 1024),
            cpu_hot_add_enabled: Some(true),
            memory_hot_add_enabled: Some(true),
            firmware: Some("efi".into()),
            device_change,
            extra_config,
            ..Default::default()
        },
    }
}

/// A property filter over 1,000 VMs named one by one (as govmomi's Retrieve
/// does), with the walk's six paths.
fn large_filter_spec() -> RetrievePropertiesExRequestType {
    RetrievePropertiesExRequestType {
        this: mor("PropertyCollector", "propertyCollector"),
        spec_set: vec![PropertyFilterSpec {
            prop_set: vec![PropertySpec {
                type_: "VirtualMachine".into(),
                path_set: [
                    "name",
                    "runtime.powerState",
                    "config.uuid",
                    "config.hardware",
                    "summary.storage",
                    "guest.ipAddress",
                ]
                .map(String::from)
                .to_vec(),
                ..Default::default()
            }],
            object_set: (0..VMS)
                .map(|i| ObjectSpec {
                    obj: mor("VirtualMachine", format!("vm-{}", 1000 + i)),
                    skip: Some(false),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        options: RetrieveOptions {
            max_objects: Some(100),
        },
    }
}

fn config() -> Criterion {
    Criterion::default()
        .output_directory(&target_dir().join("criterion"))
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args()
}

fn main() {
    let workloads = workloads();
    let config_spec = large_config_spec();
    let filter_spec = large_filter_spec();
    let encoded_config = soap::encode_request_envelope(&config_spec).len() as u64;
    let encoded_filter = soap::encode_request_envelope(&filter_spec).len() as u64;

    // Before criterion: its runs leave a heap grown large (batches of
    // decoded values kept alive), on which decoding then pays no fresh
    // pages; a program that has just started has no such heap. Measured
    // first, the ratios are those of the less favourable case.
    let side_by_side: Vec<SideBySide> = workloads.iter().map(side_by_side).collect();

    let mut c = config();
    for workload in &workloads {
        let mut group = c.benchmark_group(workload.name);
        group.throughput(Throughput::Bytes(workload.bytes()));
        // Decoding alone: criterion frees the values after the clock stops
        // (the scan builds nothing to free); the summary times freeing them.
        group.bench_function("decode", |b| {
            b.iter_with_large_drop(|| workload.decode_all())
        });
        group.bench_function("scan", |b| {
            b.iter(|| {
                workload
                    .docs
                    .iter()
                    .map(|d| scan(black_box(d)))
                    .sum::<usize>()
            })
        });
        group.finish();
    }
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Bytes(encoded_config));
    group.bench_function("vm_config_spec", |b| {
        b.iter(|| soap::encode_request_envelope(black_box(&config_spec)))
    });
    group.throughput(Throughput::Bytes(encoded_filter));
    group.bench_function("property_filter_spec", |b| {
        b.iter(|| soap::encode_request_envelope(black_box(&filter_spec)))
    });
    group.finish();
    c.final_summary();

    summary(
        &workloads,
        &side_by_side,
        &[
            ("vm_config_spec", encoded_config),
            ("property_filter_spec", encoded_filter),
        ],
    );
}

/// Criterion's median time of one iteration, in seconds, when it ran.
fn median_seconds(group: &str, function: &str) -> Option<f64> {
    let path = target_dir()
        .join("criterion")
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["median"]["point_estimate"].as_f64().map(|ns| ns / 1e9)
}

fn allocations_of<T>(f: impl FnOnce() -> T) -> u64 {
    COUNTING.store(true, Ordering::Relaxed);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let value = black_box(f());
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTING.store(false, Ordering::Relaxed);
    drop(value);
    allocations
}

/// Decoding, freeing the result and the scan of one workload, timed in
/// turn round after round. The machines this runs on are shared and their
/// speed drifts from second to second, so the ratios come from timings taken
/// side by side (medians over the rounds), not from criterion runs a minute
/// apart.
struct SideBySide {
    /// Median seconds of one pass over the workload's documents.
    decode: f64,
    free: f64,
    scan: f64,
    /// Median over the rounds of scan / decode, and of scan / (decode + free).
    ratio: f64,
    ratio_with_free: f64,
}

fn side_by_side(w: &Workload) -> SideBySide {
    let scan_all = || w.docs.iter().map(|d| scan(black_box(d))).sum::<usize>();
    // Small documents are repeated so that each timing spans about 2 ms.
    let start = Instant::now();
    black_box(scan_all());
    let once = start.elapsed().as_nanos().max(1);
    let repeat = (2_000_000 / once).clamp(1, 100_000) as usize;
    // One decode before the rounds, so that the heap has grown once, as in
    // a program that decodes response after response.
    drop(black_box(w.decode_all()));
    let mut rounds: Vec<[f64; 3]> = Vec::new();
    let until = Instant::now() + Duration::from_secs(3);
    while rounds.len() < 15 || (rounds.len() < 300 && Instant::now() < until) {
        // Both timings start right after a scan, with the documents in the
        // caches: in the order decode, free, scan, the scan found them
        // pushed out by the decoded values and decoding found them fresh.
        for _ in 0..repeat {
            black_box(scan_all());
        }
        let start = Instant::now();
        for _ in 0..repeat {
            black_box(scan_all());
        }
        let scan = start.elapsed();
        let start = Instant::now();
        let decoded: Vec<Vec<Decoded>> = (0..repeat).map(|_| w.decode_all()).collect();
        let decode = start.elapsed();
        let start = Instant::now();
        drop(black_box(decoded));
        let free = start.elapsed();
        rounds.push([decode, free, scan].map(|t| t.as_secs_f64() / repeat as f64));
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let column = |i: usize| median(rounds.iter().map(|r| r[i]).collect());
    SideBySide {
        decode: column(0),
        free: column(1),
        scan: column(2),
        ratio: median(rounds.iter().map(|[d, _, s]| s / d).collect()),
        ratio_with_free: median(rounds.iter().map(|[d, f, s]| s / (d + f)).collect()),
    }
}

fn summary(workloads: &[Workload], side_by_side: &[SideBySide], encodes: &[(&str, u64)]) {
    let mut tsv = String::new();
    println!("\nDecode on captured simulator responses (MB = 10^6 bytes; decode, free and scan timed side by side, medians)\n");
    println!("| workload | bytes | decode MB/s | raw scan MB/s | decode / scan | freeing the result (µs) | decode + free / scan | allocations per doc (decode / scan) |");
    println!("|---|---|---|---|---|---|---|---|");
    for (w, timed) in workloads.iter().zip(side_by_side) {
        let bytes = w.bytes() as f64;
        let decode_mbps = bytes / timed.decode / 1e6;
        let scan_mbps = bytes / timed.scan / 1e6;
        let (ratio, ratio_with_free) = (timed.ratio, timed.ratio_with_free);
        let docs = w.docs.len() as u64;
        let decode_allocs = allocations_of(|| w.decode_all()) / docs;
        let scan_allocs = allocations_of(|| w.docs.iter().map(|d| scan(d)).sum::<usize>()) / docs;
        println!(
            "| {} | {} | {decode_mbps:.0} | {scan_mbps:.0} | {:.0}% | {:.1} | {:.0}% | {decode_allocs} / {scan_allocs} |",
            w.name,
            w.bytes(),
            ratio * 100.0,
            timed.free * 1e6,
            ratio_with_free * 100.0,
        );
        tsv.push_str(&format!(
            "decode\t{}\t{}\t{decode_mbps:.1}\t{scan_mbps:.1}\t{ratio:.3}\t{decode_allocs}\t{ratio_with_free:.3}\n",
            w.name,
            w.bytes()
        ));
    }
    println!("\n| encode | bytes | MB/s |\n|---|---|---|");
    for (name, bytes) in encodes {
        if let Some(seconds) = median_seconds("encode", name) {
            let mbps = *bytes as f64 / seconds / 1e6;
            println!("| {name} | {bytes} | {mbps:.0} |");
            tsv.push_str(&format!("encode\t{name}\t{bytes}\t{mbps:.1}\n"));
        }
    }
    if let Ok(path) = std::env::var("BENCH_TSV") {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(tsv.as_bytes()));
        if let Err(e) = written {
            eprintln!("BENCH_TSV={path}: {e}");
        }
    }
}
