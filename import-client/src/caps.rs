//! The limits of what the import client reads, whatever a file holds (`docs/import.md` lists them
//! with what happens past each). Each is checked while the file is read, so memory stays within a
//! few rows, plus a workbook's shared strings.

/// A cell longer than this refuses its row (into `--rejects`); the run goes on.
pub(super) const CELL_BYTES: usize = 64 * 1024;
/// A row whose cells together are longer is refused; so is a JSON Lines line longer than this.
pub(super) const ROW_BYTES: usize = 1024 * 1024;
/// Cells of a row past this column are left out, and the row is refused as wider than its header.
pub(super) const COLUMNS: usize = 16_384;
/// Rows of a sheet (a row a `.ods` repeats counts each time); more ends the run.
pub(super) const SHEET_ROWS: u64 = 1_048_576;
/// Cells with something in them a sheet may yield (a cell a `.ods` repeats counts each time);
/// more ends the run.
pub(super) const SHEET_CELLS: u64 = 20_000_000;
/// Bytes one part of a workbook (a sheet, its shared strings) may decompress to; more ends the run.
pub(super) const PART_BYTES: u64 = 1024 * 1024 * 1024;
/// An `.xlsx`'s shared strings, held in memory: at most this many ...
pub(super) const SHARED_STRINGS: usize = 8_000_000;
/// ... and this many bytes of text.
pub(super) const SHARED_STRING_BYTES: usize = 64 * 1024 * 1024;
/// Entries of a workbook's zip directory, and its size.
pub(super) const ZIP_ENTRIES: usize = 10_000;
pub(super) const ZIP_DIRECTORY_BYTES: usize = 4 * 1024 * 1024;
/// A mapping file's size, and how deep its tables and lists may nest.
pub(super) const MAPPING_BYTES: u64 = 1024 * 1024;
pub(super) const MAPPING_DEPTH: usize = 16;
