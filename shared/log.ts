// Structured JSON logs, one line per event. Known secrets are scrubbed from
// every line, and fields named like credentials are never printed.
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  /** A logger whose lines carry `fields` too. */
  child(fields: LogFields): Logger;
}

const SECRET_FIELD = /token|secret|authorization|password|api[-_]?key|jwt/i;

/** Creates a logger writing JSON lines to `write`; every string in `secrets` is replaced by [redacted]. */
export function createLogger(opts: { base?: LogFields; secrets?: readonly (string | undefined)[]; write?: (line: string) => void } = {}): Logger {
  const secrets = (opts.secrets ?? []).filter((s): s is string => typeof s === 'string' && s.length >= 6);
  const write = opts.write ?? ((line: string) => console.log(line));
  const base = opts.base ?? {};
  const emit = (level: string, event: string, fields: LogFields = {}) => {
    const record: LogFields = { ts: new Date().toISOString(), level, event, ...base };
    for (const [k, v] of Object.entries(fields)) record[k] = SECRET_FIELD.test(k) && k !== 'fencing_token' ? '[redacted]' : v;
    let line = JSON.stringify(record, (_k, v) => (v instanceof Error ? { name: v.name, message: v.message } : typeof v === 'bigint' ? v.toString() : v));
    for (const s of secrets) line = line.split(s).join('[redacted]');
    write(line);
  };
  return {
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
    child: (fields) => createLogger({ base: { ...base, ...fields }, secrets, write }),
  };
}

/** A logger that drops everything (tests that do not look at logs). */
export const silentLogger: Logger = createLogger({ write: () => {} });
