/**
 * A real `caderno serve` for the tests: a temp SQLite file, keys made by the
 * CLI, a free loopback port, stopped with SIGTERM.
 *
 * The interpreter is `CADERNO_PYTHON`, by default the repository's
 * `.venv/bin/python` (two folders above this package); the repository's
 * `src` goes first on `PYTHONPATH`, so the server is this checkout's caderno.
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** This package's folder (compiled, this file is build/test/support/server.js). */
export const PACKAGE_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const REPO_ROOT = resolve(PACKAGE_ROOT, "../..");

/** How long the server may take to answer /healthz: a cold start imports FastAPI and migrates the file. */
const START_SECONDS = 60;
/** How long a CLI call (`keys create`) may take. */
const CLI_SECONDS = 60;
/** How long SIGTERM may take before SIGKILL. */
const STOP_SECONDS = 15;

export interface Server {
  /** e.g. `http://127.0.0.1:41234`. */
  baseUrl: string;
  /** One key per resource asked for, each allowed that resource only. */
  keys: Record<string, string>;
  stop(): Promise<void>;
}

export function python(): string {
  return process.env.CADERNO_PYTHON ?? resolve(PACKAGE_ROOT, "../../.venv/bin/python");
}

function environment(home: string): NodeJS.ProcessEnv {
  const paths = [join(REPO_ROOT, "src"), process.env.PYTHONPATH].filter((p): p is string => Boolean(p));
  // CADERNO_HOME in the temp folder: no test touches the real home.
  return { ...process.env, PYTHONPATH: paths.join(delimiter), CADERNO_HOME: home };
}

async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once("error", fail);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address ? done(address.port) : fail(new Error("no port"))));
    });
  });
}

/**
 * Start `caderno serve` on a new SQLite file, with a key for each resource.
 *
 * @param resources the resources to make keys for (`caderno keys create --resource R --json`).
 */
export async function startServer(resources: string[] = []): Promise<Server> {
  const folder = await mkdtemp(join(tmpdir(), "caderno-ts-"));
  const env = environment(folder);
  const db = join(folder, "caderno.db");
  const cli = ["-m", "caderno.cli", "--db", db];
  const keys: Record<string, string> = {};
  try {
    // One after the other: the first call also creates and migrates the file.
    for (const resource of resources) {
      const { stdout } = await promisify(execFile)(
        python(),
        [...cli, "keys", "create", "--resource", resource, "--name", `test-${resource}`, "--json"],
        { env, timeout: CLI_SECONDS * 1000 },
      );
      keys[resource] = (JSON.parse(stdout) as { token: string }).token;
    }
  } catch (error) {
    await rm(folder, { recursive: true, force: true });
    throw error;
  }
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const child = spawn(python(), [...cli, "serve", "--port", String(port), "--log-level", "warning"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const stop = async (): Promise<void> => {
    await stopChild(child);
    await rm(folder, { recursive: true, force: true });
  };
  try {
    await waitHealthy(child, baseUrl, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  return { baseUrl, keys, stop };
}

async function waitHealthy(child: ChildProcess, baseUrl: string, output: () => string): Promise<void> {
  const deadline = Date.now() + START_SECONDS * 1000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`caderno serve exited (${child.exitCode ?? child.signalCode}) before answering:\n${output()}`);
    }
    try {
      if ((await fetch(`${baseUrl}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new Error(`caderno serve did not answer /healthz in ${START_SECONDS} s:\n${output()}`);
    }
    await new Promise((wake) => setTimeout(wake, 100));
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_SECONDS * 1000);
  await exited;
  clearTimeout(timer);
}
