fn main() {
    banlieue::crdgen::write(std::path::Path::new("/tmp/crds-test")).unwrap();
}
