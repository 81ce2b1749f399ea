//! Script validation as data: every file in `testdata/scripts/valid/` and `examples/` parses;
//! every file in `testdata/scripts/invalid/` fails with exactly the message in its `.expect`
//! sibling (a line and column, then what is wrong). `UPDATE_EXPECT=1` rewrites the `.expect`
//! files from the current messages, for review in the diff.

use std::fs;
use std::path::{Path, PathBuf};

use tcpdoctor_core::script::{preset_names, Script};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tomls(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn valid_scripts_and_examples_parse() {
    let mut files = tomls(&repo().join("testdata/scripts/valid"));
    let examples = tomls(&repo().join("examples"));
    assert!(examples.len() >= 5, "examples/ has the example scripts");
    files.extend(examples);
    for file in &files {
        let src = fs::read_to_string(file).unwrap();
        if let Err(e) = Script::parse(&src) {
            panic!("{}: {e}", file.display());
        }
    }
}

#[test]
fn invalid_scripts_fail_with_their_expected_message() {
    let files = tomls(&repo().join("testdata/scripts/invalid"));
    assert!(files.len() >= 15, "only {} invalid cases", files.len());
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut wrong = Vec::new();
    for file in &files {
        let src = fs::read_to_string(file).unwrap();
        let expect_file = file.with_extension("expect");
        let got = match Script::parse(&src) {
            Ok(_) => "(parsed without error)".to_string(),
            Err(e) => {
                assert!(e.line().is_some(), "{}: no line in `{e}`", file.display());
                e.to_string()
            }
        };
        if update {
            fs::write(&expect_file, format!("{got}\n")).unwrap();
            continue;
        }
        let want = fs::read_to_string(&expect_file)
            .unwrap_or_else(|e| panic!("{}: {e}", expect_file.display()));
        if got != want.trim_end() {
            wrong.push(format!(
                "{}:\n  got  {got}\n  want {}",
                file.display(),
                want.trim_end()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_preset_parses_with_its_defaults() {
    for name in preset_names() {
        let script = Script::preset(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!script.step_names().is_empty(), "{name}");
    }
}

/// Damaged scripts (bytes replaced, lines cut) give an error or a script, never a panic.
#[test]
fn parse_never_panics_on_damaged_scripts() {
    let mut files = tomls(&repo().join("testdata/scripts/valid"));
    files.extend(tomls(&repo().join("examples")));
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const BITS: &[u8] = b"{}[]\"'\\=.#\n xu0{random:}in(),";
    for file in &files {
        let src = fs::read(file).expect("a script");
        for _ in 0..200 {
            let mut bytes = src.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % bytes.len();
                bytes[at] = BITS[(next() as usize) % BITS.len()];
            }
            if next() % 4 == 0 {
                bytes.truncate((next() as usize) % bytes.len());
            }
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = Script::parse(text);
            }
        }
    }
}
