//! Elements decoding skipped because the bindings do not know them (a
//! server newer than the schema they were generated from): noted while a
//! response is decoded, so the client can say so once and count them.
//!
//! Decoding is synchronous and may go through several readers (the property
//! collector decodes nested paths in readers of their own), so the notes go
//! to the decoding thread's collector rather than to one reader: [`collect`]
//! opens it around a decode and returns what was noted.

use std::cell::RefCell;

/// At most this many different (type, element) pairs are kept per decode;
/// past it, elements are only counted (a hostile body cannot make it grow).
const MAX_DISTINCT: usize = 64;

/// What the bindings did not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkippedKind {
    /// An element, skipped.
    Element,
    /// An `xsi:type` of a data object: decoded as the declared type (its
    /// unknown elements skipped and noted as elements).
    Type,
    /// An `xsi:type` of a fault (a subtype of `MethodFault`: a SOAP fault's
    /// detail, a failed task's `info.error`): decoded as the declared fault.
    Fault,
}

/// One kind of element or type skipped: where, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedElement {
    /// An element, or an `xsi:type` decoded as its declared type.
    pub kind: SkippedKind,
    /// For an element, the XML type being decoded (`HostCapability`); for a
    /// property of a managed object the object type (`VirtualMachine`). For
    /// a type or fault, the declared type it was decoded as (`VirtualDevice`,
    /// `MethodFault`).
    pub type_name: &'static str,
    /// The element's local name (`fptHotplugSupported`), or the unknown
    /// `xsi:type` (`VirtualFutureDevice`).
    pub element: String,
    /// How many times it was skipped.
    pub count: u64,
}

/// What one decode skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// The different elements, in the order first seen.
    pub elements: Vec<SkippedElement>,
    /// Every note (elements, types and faults), those past the list's bound included.
    pub total: u64,
    /// The unknown types among them.
    pub types: u64,
    /// The unknown fault types among them.
    pub faults: u64,
}

impl Skipped {
    /// Whether nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The unknown elements among them.
    pub fn elements_skipped(&self) -> u64 {
        self.total - self.types - self.faults
    }

    fn note(&mut self, kind: SkippedKind, type_name: &'static str, element: &str) {
        self.total += 1;
        match kind {
            SkippedKind::Element => {}
            SkippedKind::Type => self.types += 1,
            SkippedKind::Fault => self.faults += 1,
        }
        if let Some(seen) = self
            .elements
            .iter_mut()
            .find(|e| e.kind == kind && e.type_name == type_name && e.element == element)
        {
            seen.count += 1;
        } else if self.elements.len() < MAX_DISTINCT {
            self.elements.push(SkippedElement {
                kind,
                type_name,
                element: element.to_owned(),
                count: 1,
            });
        }
    }
}

thread_local! {
    static COLLECTOR: RefCell<Option<Skipped>> = const { RefCell::new(None) };
}

/// Runs `decode` and returns its result with the elements it skipped.
/// Nested calls each get their own notes.
pub fn collect<T>(decode: impl FnOnce() -> T) -> (T, Skipped) {
    let outer = COLLECTOR.with(|c| c.replace(Some(Skipped::default())));
    let value = decode();
    let skipped = COLLECTOR.with(|c| c.replace(outer)).unwrap_or_default();
    (value, skipped)
}

/// Notes an element of `type_name` that the bindings do not know. Outside
/// [`collect`] the note goes nowhere.
#[cold]
#[inline(never)]
pub fn note(type_name: &'static str, element: &str) {
    note_kind(SkippedKind::Element, type_name, element);
}

/// Notes an `xsi:type` the bindings do not know, decoded as `declared`.
#[cold]
#[inline(never)]
pub fn note_type(kind: SkippedKind, declared: &'static str, xsi_type: &str) {
    note_kind(kind, declared, xsi_type);
}

fn note_kind(kind: SkippedKind, type_name: &'static str, element: &str) {
    COLLECTOR.with(|c| {
        if let Ok(mut collector) = c.try_borrow_mut() {
            if let Some(skipped) = collector.as_mut() {
                skipped.note(kind, type_name, element);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_count_each_pair_and_stay_bounded() {
        note("Outside", "ignored");
        let ((), skipped) = collect(|| {
            note("HostCapability", "fptHotplugSupported");
            note("HostCapability", "fptHotplugSupported");
            let ((), inner) = collect(|| note("Inner", "own"));
            assert_eq!(inner.total, 1);
            note("VirtualHardware", "motherboardLayout");
        });
        assert_eq!(skipped.total, 3);
        assert_eq!(
            skipped.elements,
            [
                SkippedElement {
                    kind: SkippedKind::Element,
                    type_name: "HostCapability",
                    element: "fptHotplugSupported".into(),
                    count: 2
                },
                SkippedElement {
                    kind: SkippedKind::Element,
                    type_name: "VirtualHardware",
                    element: "motherboardLayout".into(),
                    count: 1
                },
            ]
        );

        let ((), many) = collect(|| {
            for i in 0..1000 {
                note("T", &format!("e{i}"));
            }
        });
        assert_eq!((many.total, many.elements.len()), (1000, MAX_DISTINCT));
    }
}
