//! Compiles the generator's golden output (`codegen/tests/golden/basic`)
//! against this crate's XML runtime and exercises it: the expected code of
//! the golden test is real, working Rust, not just text.

#[rustfmt::skip]
#[path = "../../codegen/tests/golden/basic/mod.rs"]
#[allow(dead_code, unused_imports, unreachable_pub)]
mod generated;

/// The `Vim` methods, which the real crates keep in the client (`src/methods`)
/// beside the bindings: they reach the types as `super::super::types`.
#[rustfmt::skip]
#[path = "../../codegen/tests/golden/basic/methods/mod.rs"]
#[allow(dead_code, unused_imports, unreachable_pub)]
mod methods;

/// The generated code reaches the runtime as `crate::xml`.
#[allow(unreachable_pub)] // as public as in the real crate
mod xml {
    pub use vsphere_client::xml::*;
}

/// The generated paths reach the runtime's path type as `crate::property`.
#[allow(unreachable_pub)]
mod property {
    pub use vsphere_client::property::{ManagedObject, PropertyPath};
}

/// Stand-in for the runtime's `Vim` (the generated methods' home): encodes
/// the request and answers from a canned body.
pub struct Vim<'a>(&'a Client);

/// What the stand-in `Vim` answers and records.
pub struct Client {
    response: String,
    sent: std::sync::Mutex<Vec<String>>,
}

/// Stand-in for the runtime's error.
#[derive(Debug)]
pub struct Error(#[allow(dead_code)] String);

impl<'a> Vim<'a> {
    pub fn call<R: xml::Request + 'a>(
        &self,
        request: R,
    ) -> impl std::future::Future<Output = Result<R::Response, Error>> + 'a {
        let client = self.0;
        async move {
            let body = xml::soap::encode_request_envelope(&request);
            client
                .sent
                .lock()
                .expect("lock")
                .push(String::from_utf8_lossy(&body).into_owned());
            xml::soap::decode_response_with::<R>(client.response.as_bytes(), &generated::REGISTRY)
                .map_err(|e| Error(e.to_string()))
        }
    }
}

use generated::types::{self, *};
use xml::{Decode, Encode, ManagedObjectReference, Value, XmlReader, XmlWriter};

fn envelope(body: &str) -> String {
    format!(
        r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
    }
}

#[test]
fn golden_types_round_trip_with_polymorphism_recursion_and_any_type() {
    let drawing = Drawing {
        type_: "sketch & <draft>".into(),
        main: Circle {
            shape: Shape {
                id: 1,
                color: Some(Color::DarkBlue),
            },
            radius_mm: 2.5,
        }
        .into(),
        shapes: vec![
            Square {
                shape: Shape {
                    id: 2,
                    color: Some(Color::Self_),
                },
                side_length: 10,
                rounded_corners: Some(true),
                ..Default::default()
            }
            .into(),
            Shape {
                id: 3,
                color: Some(Color::from("ultraviolet")),
            }
            .into(),
        ],
        parent: Some(Box::new(Drawing {
            type_: "parent".into(),
            ..Default::default()
        })),
        ref_: Some(ManagedObjectReference::new("Canvas", "canvas-1")),
        created_at: Some("2024-05-01T12:00:00Z".into()),
        thumbnail: Some(vec![0, 1, 2, 254, 255]),
        extra: Some(Value::object(Color::V64bit)),
        ip_address: vec!["10.0.0.1".into(), "fe80::1".into()],
    };
    let mut w = XmlWriter::new();
    drawing.encode(&mut w, "drawing");
    let xml = String::from_utf8(w.into_bytes()).expect("UTF-8");
    assert!(xml.contains(r#"<main xsi:type="Circle"><id>1</id><color>dark-blue</color><radiusMM>2.5</radiusMM></main>"#), "{xml}");
    assert!(
        xml.contains(r#"<extra xsi:type="Color">64bit</extra>"#),
        "{xml}"
    );
    let mut r = XmlReader::new(xml.as_bytes(), &generated::REGISTRY);
    r.root().expect("root");
    let back = Drawing::decode(&mut r).expect("decodes");
    assert_eq!(back, drawing);
    assert_eq!(back.shapes[1].type_name(), "Shape");
    assert_eq!(generated::REGISTRY.base_of("Square"), Some("Shape"));
    assert!(generated::REGISTRY.is_subtype_of("Circle", "DynamicData"));
}

#[test]
fn golden_methods_build_requests_and_decode_responses() {
    let client = Client {
        response: envelope(
            r#"<GetShapesResponse xmlns="urn:vim25"><returnval xsi:type="Square"><id>7</id><sideLength>3</sideLength></returnval><returnval><id>8</id></returnval></GetShapesResponse>"#,
        ),
        sent: Default::default(),
    };
    let this = ManagedObjectReference::new("Canvas", "canvas-1");
    let shapes = block_on(Vim(&client).get_shapes(&this, Some("all"))).expect("shapes");
    assert_eq!(shapes.len(), 2);
    assert_eq!(
        shapes[0].downcast_ref::<Square>().map(|s| s.side_length),
        Some(3)
    );
    let sent = client.sent.lock().expect("lock");
    assert!(sent[0].contains(r#"<GetShapes xmlns="urn:vim25"><_this type="Canvas">canvas-1</_this><match>all</match></GetShapes>"#), "{}", sent[0]);
    const { assert!(<GetShapesRequestType as xml::Request>::IDEMPOTENT) };
    const { assert!(!<DrawTaskRequestType as xml::Request>::IDEMPOTENT) };
    const { assert!(!<ContinueRetrievePropertiesExRequestType as xml::Request>::IDEMPOTENT) };

    let field = generated::mo::property_type("Canvas", "drawing.main.id").expect("path");
    assert_eq!(field.type_name, "int");
    assert_eq!(
        generated::mo::property_type("Canvas", "name").map(|f| f.type_name),
        Ok("string")
    );
}

/// What `x` encodes to for a server of API `server`: the XML, or the first
/// item newer than the server.
fn encode_for<T: Encode>(x: &T, server: &str) -> Result<String, (String, String)> {
    let mut w = XmlWriter::for_server(xml::ApiLevel::parse(server).expect("version"));
    x.encode(&mut w, "x");
    match w.newer_than_server() {
        Some(newer) => Err((newer.item.to_string(), newer.since.to_string())),
        None => Ok(String::from_utf8(w.into_bytes()).expect("UTF-8")),
    }
}

#[test]
fn golden_items_newer_than_the_server_are_named_and_unset_ones_left_out() {
    // Square.cornerRadius is 8.0.1.0, Square.layer (required) 8.0.2.0.
    let mut square = Square {
        corner_radius: Some(0.5),
        ..Default::default()
    };
    square.id = 1;
    assert_eq!(
        encode_for(&square, "8.0.0.0"),
        Err(("Square.cornerRadius".into(), "8.0.1.0".into()))
    );
    // 8.0.1.0 knows cornerRadius; layer is at its default, so not written.
    let xml = encode_for(&square, "8.0.1.0").expect("encodes");
    assert!(
        xml.contains("<cornerRadius>0.5</cornerRadius>") && !xml.contains("<layer>"),
        "{xml}"
    );
    let layered = Square {
        layer: 2,
        ..square.clone()
    };
    assert_eq!(
        encode_for(&layered, "8.0.1.0"),
        Err(("Square.layer".into(), "8.0.2.0".into()))
    );
    assert!(encode_for(&layered, "8.0.2.0")
        .expect("encodes")
        .contains("<layer>2</layer>"));
    // Without a server, everything is written.
    let mut w = XmlWriter::new();
    layered.encode(&mut w, "x");
    assert!(w.newer_than_server().is_none());

    // An enumeration value newer than its enumeration (Color green, 8.0.2.0).
    assert_eq!(
        encode_for(&Color::Green, "7.0.3.0"),
        Err(("Color value green".into(), "8.0.2.0".into()))
    );
    assert_eq!(encode_for(&Color::Red, "7.0.3.0").as_deref(), Ok("<x xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">red</x>"));

    // A type added later (Triangle, 8.0.2.0) in a polymorphic slot, and its
    // own later field (vMotionSafe, 9.0.0.0).
    let triangle = Triangle {
        vmotion_safe: Some(true),
        ..Default::default()
    };
    let drawing = Drawing {
        shapes: vec![triangle.clone().into()],
        ..Default::default()
    };
    assert_eq!(
        encode_for(&drawing, "8.0.1.0"),
        Err(("type Triangle".into(), "8.0.2.0".into()))
    );
    assert_eq!(
        encode_for(&triangle, "8.0.3.0"),
        Err(("Triangle.vMotionSafe".into(), "9.0.0.0".into()))
    );
    assert!(encode_for(&triangle, "9.0.0.0").is_ok());

    // An operation added later (Clear_Task, 9.0.0.0), and a parameter
    // added to an older one (SessionIsActive userName, 8.0.0.1).
    let this = ManagedObjectReference::new("Canvas", "canvas-1");
    let clear = ClearRequestType {
        this: this.clone(),
        ..Default::default()
    };
    let newer =
        xml::soap::encode_request_envelope_for(&clear, xml::ApiLevel::parse("8.0.3.0").unwrap())
            .expect_err("newer than 8.0.3.0");
    assert_eq!(
        (newer.item, newer.since.to_string().as_str()),
        ("operation Clear_Task", "9.0.0.0")
    );
    let active = SessionIsActiveRequestType {
        this,
        user_name: Some("u".into()),
        ..Default::default()
    };
    let newer =
        xml::soap::encode_request_envelope_for(&active, xml::ApiLevel::parse("8.0.0.0").unwrap())
            .expect_err("newer than 8.0.0.0");
    assert_eq!(newer.item, "SessionIsActive.userName");
    let sent =
        xml::soap::encode_request_envelope_for(&active, xml::ApiLevel::parse("8.0.0.1").unwrap())
            .expect("8.0.0.1 has it");
    assert!(String::from_utf8_lossy(&sent).contains("<userName>u</userName>"));
}

#[test]
fn golden_any_enums_hand_out_the_declared_type_and_test_subtypes() {
    let mut shapes: Vec<AnyShape> = vec![
        Circle {
            radius_mm: 1.0,
            ..Default::default()
        }
        .into(),
        Square::default().into(),
        Shape::default().into(),
    ];
    for (i, shape) in (10..).zip(shapes.iter_mut()) {
        shape.base_mut().id = i;
    }
    let ids: Vec<i32> = shapes.iter().map(|s| s.base().id).collect();
    assert_eq!(ids, [10, 11, 12]);
    // The change is in the value held, so it is what gets encoded.
    let mut w = XmlWriter::new();
    shapes[0].encode(&mut w, "main");
    let xml = String::from_utf8(w.into_bytes()).expect("UTF-8");
    assert!(xml.contains("<id>10</id><radiusMM>1</radiusMM>"), "{xml}");

    assert!(shapes.iter().all(AnyShape::is::<Shape>));
    assert!(shapes[0].is::<Circle>() && !shapes[0].is::<Square>());
    assert!(!shapes[2].is::<Circle>() && !shapes[2].is::<Square>());
}

#[test]
fn golden_paths_spell_the_properties_through_nested_and_inherited_fields() {
    use generated::paths;
    // `name` is Entity's, inherited by Canvas; `drawing.main` goes through
    // two data types.
    assert_eq!(paths::Canvas.name().as_str(), "name");
    assert_eq!(
        paths::Canvas.drawing().main().color().as_str(),
        "drawing.main.color"
    );
    assert_eq!(
        paths::Canvas.drawing().main().into_path().to_string(),
        "drawing.main"
    );
    // Repeated fields end a path: `shapes` is a finished path.
    let shapes: vsphere_client::property::PropertyPath<generated::mo::Canvas> =
        paths::Canvas.drawing().shapes();
    assert_eq!(shapes.as_str(), "drawing.shapes");
}

/// A structure in an `anyType` slot is one kind of object for every
/// structure type (`xml::StructObject`): typed again only as its own type,
/// shown, compared and encoded as the typed value is, and taken by a
/// polymorphic enum as its variant; an enumeration beside it stays its
/// chunk's. (A copy decodes the object's encoding through the crate's own
/// registry, which has no golden types: vsphere-vim25's tests copy one.)
#[test]
fn golden_structures_in_any_type_slots_keep_their_type() {
    let square = Square {
        side_length: 3,
        ..Default::default()
    };
    let value = Value::object(square.clone());
    assert_eq!(value.type_name(), "Square");
    assert_eq!(value.downcast_ref::<Square>(), Some(&square));
    assert!(value.downcast_ref::<Shape>().is_none(), "only its own type");
    assert!(value.downcast_ref::<Circle>().is_none());
    assert_eq!(format!("{value:?}"), format!("Object({square:?})"));
    assert_ne!(Value::object(Square::default()), value);
    let circle = Value::object(Circle::default());
    assert_ne!(circle, Value::object(Square::default()), "not across types");

    // Decoded from its `xsi:type`, it is the same object.
    let mut w = XmlWriter::new();
    value.encode(&mut w, "v");
    let xml = w.into_bytes();
    let mut r = XmlReader::new(&xml, &generated::REGISTRY);
    r.root().expect("root");
    let back = Value::decode(&mut r).expect("decodes");
    assert_eq!(back, value);
    assert_eq!(
        back.downcast_ref::<Square>().map(|s| s.side_length),
        Some(3)
    );

    let Value::Object(object) = back else {
        panic!("an object: {back:?}")
    };
    match AnyShape::from_object(object) {
        Ok(AnyShape::Square(s)) => assert_eq!(*s, square),
        other => panic!("a square: {other:?}"),
    }
    let Value::Object(color) = Value::object(Color::DarkBlue) else {
        unreachable!()
    };
    let color = AnyShape::from_object(color).expect_err("not a shape");
    assert_eq!(color.type_name(), "Color");
    assert_eq!(
        Value::Object(color).downcast_ref::<Color>(),
        Some(&Color::DarkBlue)
    );
}
