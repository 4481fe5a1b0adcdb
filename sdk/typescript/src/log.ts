/**
 * Logging: a tiny structured interface (any object with these four methods works: pino, winston,
 * console wrappers). The default writes one JSON object per line to stderr, at `info` and above
 * (`BATON_LOG_LEVEL=debug` for more).
 */
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 } as const;
export type LogLevel = keyof typeof LEVELS;

/** One JSON object per line on stderr: `{"time","level","logger","msg",...fields}`. */
export class JsonLogger implements Logger {
  private readonly min: number;
  constructor(
    private readonly name = "baton",
    level: LogLevel = (process.env.BATON_LOG_LEVEL as LogLevel | undefined) ?? "info",
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {
    this.min = LEVELS[level] ?? LEVELS.info;
  }

  private log(level: Exclude<LogLevel, "silent">, msg: string, fields?: LogFields): void {
    if (LEVELS[level] < this.min) return;
    const record: LogFields = { time: new Date().toISOString(), level, logger: this.name, msg };
    for (const [k, v] of Object.entries(fields ?? {})) {
      record[k] = v instanceof Error ? v.message : v;
    }
    let line: string;
    try {
      line = JSON.stringify(record);
    } catch {
      line = JSON.stringify({ time: record.time, level, logger: this.name, msg });
    }
    this.write(`${line}\n`);
  }

  debug(msg: string, fields?: LogFields): void {
    this.log("debug", msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.log("info", msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.log("warn", msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.log("error", msg, fields);
  }
}

/** A logger that adds `fields` to every record of `base`. */
export function withFields(base: Logger, fields: LogFields): Logger {
  return {
    debug: (m, f) => base.debug(m, { ...fields, ...f }),
    info: (m, f) => base.info(m, { ...fields, ...f }),
    warn: (m, f) => base.warn(m, { ...fields, ...f }),
    error: (m, f) => base.error(m, { ...fields, ...f }),
  };
}

/** Drops everything (tests). */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};
