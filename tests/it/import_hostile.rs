//! `gymapi import` over hostile files: a workbook that claims a cell at its last column and row, a
//! `.ods` that repeats cells and rows a million times, a cell of megabytes, a line of megabytes,
//! a file that is UTF-8 but for one byte, mapping files nested deep or full of mistakes. Each ends
//! with a clear message (exit 2) or with its bad rows refused, and the client's peak memory stays
//! under 256 MB (its resident set's high-water mark, read from /proc while it runs).

use std::{
    io::{Read, Write},
    path::Path,
    process::{Command, Stdio},
};

use serde_json::Value;

use crate::common::TestApp;

const PEAK_LIMIT_KB: u64 = 256 * 1024;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_kb: u64,
}

/// Runs the client to its end, reading its peak memory as it goes.
fn run(args: &[&str], key: Option<&str>, base: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gymapi"));
    cmd.arg("import").args(args).env("GYMAPI_BASE_URL", base).env_remove("DATABASE_URL").env_remove("REDIS_URL");
    match key {
        Some(k) => cmd.env("GYMAPI_KEY", k),
        None => cmd.env_remove("GYMAPI_KEY"),
    };
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s).unwrap_or_default()
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).map(|_| s).unwrap_or_default()
    });
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0;
    let status = loop {
        if let Some(hwm) = std::fs::read_to_string(&status)
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        {
            let kb = hwm.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Run { code: status.code(), stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap(), peak_kb }
}

fn inspect(file: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["inspect", "--entity", "members", "--json"];
    args.extend(extra);
    args.push(file.to_str().unwrap());
    run(&args, None, "http://127.0.0.1:9")
}

fn zip(path: &Path, parts: &[(&str, String)]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, text) in parts {
        w.start_file(*name, stored).unwrap();
        w.write_all(text.as_bytes()).unwrap();
    }
    w.finish().unwrap();
}

const HEADER: &str = r#"<row r="1"><c r="A1" t="inlineStr"><is><t>legacy_id</t></is></c><c r="B1" t="inlineStr"><is><t>first_name</t></is></c><c r="C1" t="inlineStr"><is><t>last_name</t></is></c></row>"#;

/// An `.xlsx` of one sheet whose rows are `rows` (each `<row>...</row>`), with these shared strings.
fn xlsx(path: &Path, rows: &str, shared: &[String]) {
    let sheet = format!(
        r#"<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{HEADER}{rows}</sheetData></worksheet>"#
    );
    let strings: String = shared.iter().map(|s| format!("<si><t>{s}</t></si>")).collect();
    zip(
        path,
        &[
            (
                "xl/workbook.xml",
                r#"<workbook xmlns:r="r"><sheets><sheet name="Members" sheetId="1" r:id="rId1"/></sheets></workbook>"#
                    .into(),
            ),
            (
                "xl/_rels/workbook.xml.rels",
                r#"<Relationships><Relationship Id="rId1" Target="worksheets/sheet1.xml"/></Relationships>"#.into(),
            ),
            ("xl/worksheets/sheet1.xml", sheet),
            ("xl/sharedStrings.xml", format!("<sst>{strings}</sst>")),
        ],
    );
}

fn ods(path: &Path, rows: &str) {
    let cell =
        |t: &str| format!(r#"<table:table-cell office:value-type="string"><text:p>{t}</text:p></table:table-cell>"#);
    let header =
        format!("<table:table-row>{}{}{}</table:table-row>", cell("legacy_id"), cell("first_name"), cell("last_name"));
    let content = format!(
        r#"<office:document-content xmlns:office="o" xmlns:table="t" xmlns:text="x"><office:body><office:spreadsheet><table:table table:name="Members">{header}{rows}</table:table></office:spreadsheet></office:body></office:document-content>"#
    );
    zip(path, &[("mimetype", "application/vnd.oasis.opendocument.spreadsheet".into()), ("content.xml", content)]);
}

fn assert_bounded(name: &str, r: &Run) {
    assert!(r.peak_kb < PEAK_LIMIT_KB, "{name}: peak {} KB\n{}", r.peak_kb, r.stderr);
}

/// A cell claimed at the sheet's last column and row, and cells and rows repeated a million times
/// (empty, then full): no sheet is ever laid out whole. Before, the 2 KB workbook aborted the
/// client on a 512 GiB allocation.
#[test]
fn sparse_and_repeated_sheets_cost_what_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let sparse = dir.path().join("sparse.xlsx");
    let far = r#"<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>"#;
    xlsx(
        &sparse,
        &format!(
            r#"<row r="2"><c r="A2" t="s"><v>0</v></c><c r="B2" t="s"><v>1</v></c><c r="C2" t="s"><v>1</v></c></row>{far}"#
        ),
        &["M1".into(), "Ann".into()],
    );
    let r = inspect(&sparse, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((report["rows"].as_u64(), report["refused_locally"].as_u64()), (Some(2), Some(1)), "{report}");
    assert_bounded("sparse.xlsx", &r);

    let empty_repeats = r#"<table:table-row table:number-rows-repeated="1048570"><table:table-cell table:number-columns-repeated="16384"/></table:table-row><table:table-row><table:table-cell table:number-columns-repeated="16383"/><table:table-cell office:value-type="string"><text:p>x</text:p></table:table-cell></table:table-row>"#;
    let sparse = dir.path().join("sparse.ods");
    ods(&sparse, empty_repeats);
    let r = inspect(&sparse, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((report["rows"].as_u64(), report["refused_locally"].as_u64()), (Some(1), Some(1)), "{report}");
    assert_bounded("sparse.ods", &r);

    let full_repeats = r#"<table:table-row table:number-rows-repeated="1048576"><table:table-cell table:number-columns-repeated="16384" office:value-type="string"><text:p>x</text:p></table:table-cell></table:table-row>"#;
    let full = dir.path().join("full.ods");
    ods(&full, full_repeats);
    let r = inspect(&full, &[]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("more than 20000000 cells"), "{}", r.stderr);
    assert_bounded("full.ods", &r);
}

/// A 3 MB cell in a workbook and a 24 MB line in a CSV: their rows go to the rejects file with the
/// reason, every other row is imported. Before, the CSV's one line stopped the whole run (the
/// batch was past the server's 4 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_cell_refuses_its_row_and_the_run_goes_on() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(3 * 1024 * 1024);
    let book = dir.path().join("members.xlsx");
    let rows: String = (2..=4)
        .map(|i| format!(r#"<row r="{i}"><c t="inlineStr"><is><t>M{i}</t></is></c><c t="s"><v>{}</v></c><c t="inlineStr"><is><t>Lee</t></is></c></row>"#, if i == 3 { 1 } else { 0 }))
        .collect();
    xlsx(&book, &rows, &["Ann".into(), big.clone()]);
    let csv = dir.path().join("members.csv");
    let line = "y".repeat(24 * 1024 * 1024);
    std::fs::write(&csv, format!("legacy_id,first_name,last_name\nC1,Ann,Lee\nC2,{line},Lee\nC3,Bo,Kim\n")).unwrap();

    for (file, bad_line) in [(&book, 3), (&csv, 3)] {
        let rejects = dir.path().join("rejects.csv");
        let args = ["--quiet", "--json", "--rejects", rejects.to_str().unwrap(), file.to_str().unwrap()];
        let r = tokio::task::spawn_blocking({
            let (base, key) = (app.address.clone(), gym.live_key.clone());
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            move || run(&args.iter().map(String::as_str).collect::<Vec<_>>(), Some(&key), &base)
        })
        .await
        .unwrap();
        assert_eq!(r.code, Some(0), "{}: {}", file.display(), r.stderr);
        let summary: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!((summary["created"].as_i64(), summary["rejected"].as_u64()), (Some(2), Some(1)), "{summary}");
        assert_bounded(&file.display().to_string(), &r);
        let written = std::fs::read_to_string(&rejects).unwrap();
        assert!(written.len() < 4096, "the rejects file holds the row without its oversized cell");
        assert!(written.contains("more than the 65536 a cell may hold"), "{written}");
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 2, "{written}");
        assert!(lines[1].starts_with(if bad_line == 3 && file == &book { "M3" } else { "C2" }), "{written}");
    }
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 4);
}

/// A thousand UTF-8 rows with accents and one stray byte: refused, naming the line and the byte,
/// until the encoding is named. Before, the whole file was read as Windows-1252 and every accent
/// imported mangled.
#[test]
fn a_file_that_is_utf8_but_for_a_byte_is_refused_until_its_encoding_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("members.csv");
    let mut text = b"legacy_id,first_name,last_name\n".to_vec();
    for i in 0..1000 {
        text.extend(format!("M{i},Jürgen,Müller\n").as_bytes());
    }
    text.extend(b"M1000,J\xFFrgen,M\xFCller\n");
    std::fs::write(&file, &text).unwrap();
    let r = inspect(&file, &[]);
    assert_eq!(r.code, Some(2), "{}", r.stdout);
    assert!(r.stderr.contains("UTF-8 but for 2 byte sequence(s), the first at line 1002"), "{}", r.stderr);
    let r = inspect(&file, &["--encoding", "windows-1252"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

/// A mapping file nested 100,000 deep, and one with 8,000 rules naming no field: each answered at
/// once (before: 92 s and 77 s), the second with its first 50 problems and a count of the rest.
#[test]
fn mapping_files_are_checked_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("members.csv");
    std::fs::write(&csv, "legacy_id,first_name,last_name\nM1,Ann,Lee\n").unwrap();
    let deep = dir.path().join("deep.yaml");
    std::fs::write(&deep, format!("members: {}{}\n", "[".repeat(100_000), "]".repeat(100_000))).unwrap();
    let r = inspect(&csv, &["--mapping", deep.to_str().unwrap()]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("nest deeper than 16"), "{}", r.stderr);
    let many = dir.path().join("many.toml");
    let rules: String = (0..8000).map(|i| format!("col{i} = \"nofield{i}\"\n")).collect();
    std::fs::write(&many, format!("[members.columns]\n{rules}")).unwrap();
    let r = inspect(&csv, &["--mapping", many.to_str().unwrap()]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("and 7950 more problems"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 51, "{}", r.stderr);
}
