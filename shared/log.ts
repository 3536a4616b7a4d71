// Structured JSON logs, one line per event. Known secrets are scrubbed from
// every line (shared/redact.ts), and fields named like credentials are never printed.
import { secretRedactor } from './redact.ts';
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  /** A logger whose lines carry `fields` too. */
  child(fields: LogFields): Logger;
}

const SECRET_FIELD = /token|secret|authorization|password|api[-_]?key|jwt/i;

/** Creates a logger writing JSON lines to `write`; every secret in `secrets` (8 characters or more) is replaced by [redacted]. */
export function createLogger(opts: { base?: LogFields; secrets?: readonly (string | undefined)[]; write?: (line: string) => void } = {}): Logger {
  const secrets = opts.secrets ?? [];
  const redact = secretRedactor(secrets);
  const write = opts.write ?? ((line: string) => console.log(line));
  const base = opts.base ?? {};
  const emit = (level: string, event: string, fields: LogFields = {}) => {
    const record: LogFields = { ts: new Date().toISOString(), level, event, ...base };
    for (const [k, v] of Object.entries(fields)) record[k] = SECRET_FIELD.test(k) && k !== 'fencing_token' ? '[redacted]' : v;
    const line = JSON.stringify(record, (_k, v) => (v instanceof Error ? { name: v.name, message: v.message } : typeof v === 'bigint' ? v.toString() : v));
    write(redact(line));
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
