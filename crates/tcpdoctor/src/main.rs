fn main() {
    println!("tcpdoctor");
}
