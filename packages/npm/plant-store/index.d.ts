// Types of the plant-store module (index.js).

export const BINARY_VAR: "PLANT_STORE_BIN";
export const PLATFORMS: Record<string, string>;
export const START_TIMEOUT_MS: number;
export const STOP_TIMEOUT_MS: number;
export const LOG_LINES: number;

/** The path of the plant-store binary: $PLANT_STORE_BIN, else this platform's package's. */
export function binary(): string;

/** A DURATION: "90s", "15m", "2h", "7d", or a number of seconds. */
export type Duration = string | number;

export interface StartOptions {
  /** ":memory:" (the default) or a file. */
  db?: string;
  seedFile?: string;
  testSeed?: number | bigint | string;
  /** PLANT_STORE_TOKEN: a token accepted as principal `default`. */
  token?: string;
  /** More `serve` flags. */
  args?: Array<string | number>;
}

export interface Server {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly control: Control;
  readonly pid: number;
  /** The last lines the server wrote on standard error. */
  log(): string;
  /** Stops the server as SIGTERM does; its exit code. */
  stop(): Promise<number | null>;
}

export function start(options?: StartOptions): Promise<Server>;

export class ControlError extends Error {
  readonly status: number;
  readonly serverMessage: string;
}

export interface Minted {
  token: string;
  principal: string;
  scope: "read" | "read-write";
  expires_at: string | null;
  id?: string;
  [member: string]: unknown;
}

export interface FaultOptions {
  match?: Record<string, unknown>;
  action?: { kind: string; [member: string]: unknown };
  when?: "before" | "after";
  times?: number;
  probability?: number;
  seed?: number;
}

export interface JournalFilters {
  method?: string;
  path?: string;
  principal?: string;
  status?: string | number;
  after?: number;
  limit?: number;
  wait?: Duration;
  min?: number;
}

export class Control {
  constructor(url: string, token: string);
  readonly url: string;
  reset(): Promise<void>;
  snapshot(): Promise<string>;
  restore(id: string): Promise<void>;
  deleteSnapshot(id: string): Promise<void>;
  mint(
    principal: string,
    options?: { scope?: "read" | "read-write"; expires_in?: Duration; expires_at?: string | Date; token?: string },
  ): Promise<Minted>;
  fault(options?: FaultOptions): Promise<Record<string, any>>;
  faults(): Promise<Array<Record<string, any>>>;
  removeFault(id: string): Promise<void>;
  clearFaults(): Promise<void>;
  journal(filters?: JournalFilters): Promise<Array<Record<string, any>>>;
  clearJournal(): Promise<void>;
  clock(): Promise<{ now: string; frozen: boolean }>;
  setClock(now: string | Date, options?: { frozen?: boolean }): Promise<{ now: string; frozen: boolean }>;
  advanceClock(by: Duration): Promise<{ now: string; frozen: boolean }>;
  realClock(): Promise<void>;
}
