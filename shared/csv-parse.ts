// A small, strict RFC 4180 CSV reader for uploaded files (an edited export,
// POST /orchestrator/publish/csv): comma-separated cells, records ended by
// CRLF or LF, cells quoted with `"` and a quote inside one doubled (`""`); a
// UTF-8 byte order mark at the start is skipped. It keeps what a spreadsheet
// means and the export wrote: an empty unquoted cell is null (COPY's NULL),
// a quoted empty one `""` is the empty string. It refuses, with the data row
// (1-based; null for the header) and the line: a quote inside an unquoted
// cell or anything but a comma or line end after a closing quote, a quoted
// cell never closed, a carriage return outside quotes not followed by LF, a
// NUL character (Postgres text cannot hold one), and a row whose cell count
// differs from the header's. A refused quote stops the reading (nothing after
// it can be placed); ragged rows are all listed, up to `maxErrors`.
//
// CPU: a 10,000-row site-pages export (15 columns, 4.1 MB, with quoted
// commas, doubled quotes, line ends inside cells and nulls) parses in 25-56 ms
// of CPU on Node 20 (V8, as the edge runtime), and its rows' JSON for Postgres
// takes 23-60 ms more (tests/orchestrator-publish-csv-parse.test.ts prints
// both): well inside the edge function's 2 s of CPU per request, for the
// largest file an upload takes (5 MiB) too.

/** Why a file or a row was refused. */
export type CsvParseErrorCode = 'empty_file' | 'unterminated_quote' | 'stray_quote' | 'bare_cr' | 'nul_character' | 'row_shape' | 'too_many_errors';

/** One refusal: its data row (1-based; null for the header or the whole file), column (the header's name, when known), code and message. */
export interface CsvParseError {
  row: number | null;
  column: string | null;
  code: CsvParseErrorCode;
  message: string;
}

/** A file read: its header and its data rows, each a cell per header column (null: an empty unquoted cell). */
export interface ParsedCsv {
  header: (string | null)[];
  rows: (string | null)[][];
}

export type CsvParseResult = { ok: true; csv: ParsedCsv } | { ok: false; errors: CsvParseError[] };

const COMMA = 44;
const LF = 10;
const CR = 13;
const QUOTE = 34;
const NUL = 0;

/** Reads `text` as CSV with a header row; every refusal listed (at most `maxErrors`, then one too_many_errors). */
export function parseCsv(text: string, opts: { maxErrors?: number } = {}): CsvParseResult {
  const maxErrors = opts.maxErrors ?? 1000;
  const n = text.length;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  if (i >= n) return { ok: false, errors: [{ row: null, column: null, code: 'empty_file', message: 'The file is empty: upload the export with its header row.' }] };

  const errors: CsvParseError[] = [];
  let extraErrors = 0;
  const fail = (e: CsvParseError) => {
    if (errors.length < maxErrors) errors.push(e);
    else extraErrors++;
  };
  /** The 1-based line of position `pos`, counted only when something is refused (on from the last one asked: they come in order). */
  let counted = { pos: 0, line: 1 };
  const lineAt = (pos: number): number => {
    if (pos < counted.pos) counted = { pos: 0, line: 1 };
    let line = counted.line;
    for (let k = text.indexOf('\n', counted.pos); k >= 0 && k < pos; k = text.indexOf('\n', k + 1)) line++;
    counted = { pos, line };
    return line;
  };

  let header: (string | null)[] | null = null;
  const rows: (string | null)[][] = [];
  /** The data row being read (0: the header). */
  let row = 0;
  const where = (cell: number, pos: number) => ({
    row: row === 0 ? null : row,
    column: header && cell < header.length ? header[cell] ?? null : null,
    line: lineAt(pos),
  });
  const refuse = (code: CsvParseErrorCode, cell: number, pos: number, what: string): CsvParseResult => {
    const w = where(cell, pos);
    fail({ row: w.row, column: w.column, code, message: `${w.row === null ? 'The header' : `Row ${w.row}`} (line ${w.line}), cell ${cell + 1}: ${what}` });
    return done();
  };
  const done = (): CsvParseResult => {
    if (extraErrors > 0) errors.push({ row: null, column: null, code: 'too_many_errors', message: `${extraErrors} more errors` });
    return errors.length > 0 ? { ok: false, errors } : { ok: true, csv: { header: header ?? [], rows } };
  };

  for (;;) {
    // One record: its cells up to a line end or the end of the file.
    const recordStart = i;
    const cells: (string | null)[] = [];
    for (;;) {
      const cell = cells.length;
      if (i < n && text.charCodeAt(i) === QUOTE) {
        const opened = i;
        i++;
        let value = '';
        for (;;) {
          const q = text.indexOf('"', i);
          if (q < 0) return refuse('unterminated_quote', cell, opened, 'a quoted cell is never closed (a `"` is missing)');
          if (text.charCodeAt(q + 1) === QUOTE) {
            value += text.slice(i, q + 1);
            i = q + 2;
            continue;
          }
          value += text.slice(i, q);
          i = q + 1;
          break;
        }
        if (value.indexOf('\0') >= 0) return refuse('nul_character', cell, opened, 'a NUL character (U+0000) cannot be stored');
        const next = i < n ? text.charCodeAt(i) : COMMA;
        if (next !== COMMA && next !== LF && next !== CR) {
          return refuse('stray_quote', cell, i, 'only a comma or a line end may follow a closing quote (write a quote inside a quoted cell as "")');
        }
        cells.push(value);
      } else {
        let j = i;
        for (; j < n; j++) {
          const c = text.charCodeAt(j);
          if (c === COMMA || c === LF || c === CR) break;
          if (c === QUOTE) return refuse('stray_quote', cell, j, 'a quote inside an unquoted cell (quote the whole cell, and double the quotes inside it)');
          if (c === NUL) return refuse('nul_character', cell, j, 'a NUL character (U+0000) cannot be stored');
        }
        cells.push(j === i ? null : text.slice(i, j));
        i = j;
      }
      if (i >= n) break;
      const c = text.charCodeAt(i);
      if (c === COMMA) {
        i++;
        continue;
      }
      if (c === LF) {
        i++;
        break;
      }
      // c === CR
      if (text.charCodeAt(i + 1) !== LF) return refuse('bare_cr', cell, i, 'a carriage return outside quotes must be followed by a line feed (CRLF)');
      i += 2;
      break;
    }

    if (header === null) {
      header = cells;
    } else {
      if (cells.length !== header.length) {
        const w = where(cells.length, recordStart);
        fail({ row: w.row, column: null, code: 'row_shape', message: `Row ${w.row} (line ${w.line}) has ${cells.length} cells; the header has ${header.length}` });
      }
      rows.push(cells);
    }
    if (i >= n) return done();
    row++;
  }
}
