// Cage's TypeScript hook host: runs one Yao hook (or script function) and bridges its `ctx` to the
// orchestrator over JSON lines (docs/hooks-ts.md). It is started by orchestrator/hooks_ts/runtime.py
// under Node's permission model (no file writes, no child processes, no workers; reads only this
// folder), with an empty environment and, where the host allows it, no network namespace.
//
// Yao's JS APIs are synchronous (`ctx.Send(...)`, `ctx.agent.Call(...)` return values), so each
// bridged call writes a request line to stdout and blocks on stdin for the answer.
"use strict";

const fs = require("fs");
const vm = require("vm");

let inbox = Buffer.alloc(0);
let nextId = 1;

function writeLine(obj) {
  const data = Buffer.from(JSON.stringify(obj) + "\n", "utf8");
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(1, data, off);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
    }
  }
}

function readLine() {
  const chunk = Buffer.alloc(65536);
  for (;;) {
    const nl = inbox.indexOf(10);
    if (nl >= 0) {
      const line = inbox.subarray(0, nl).toString("utf8");
      inbox = inbox.subarray(nl + 1);
      return JSON.parse(line);
    }
    let n;
    try {
      n = fs.readSync(0, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      throw e;
    }
    if (n === 0) throw new Error("cage: the orchestrator closed the hook bridge");
    inbox = Buffer.concat([inbox, chunk.subarray(0, n)]);
  }
}

function call(method, ...args) {
  const id = nextId++;
  writeLine({ t: "call", id, m: method, a: args.map((a) => (a === undefined ? null : a)) });
  const reply = readLine();
  if (reply.t === "err") {
    const err = new Error(reply.e);
    err.code = reply.code || 500;
    throw err;
  }
  return reply.v;
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.max(0, Number(ms) || 0));
}

function fmt(args) {
  return args
    .map((a) => (typeof a === "string" ? a : JSON.stringify(a)))
    .join(" ")
    .replace(/%[sdvj]/g, () => "");
}

function logger(level) {
  return (format, ...args) => {
    let i = 0;
    const msg =
      typeof format === "string"
        ? format.replace(/%[sdvj]/g, () => (i < args.length ? String(typeof args[i] === "object" ? JSON.stringify(args[i++]) : args[i++]) : ""))
        : fmt([format, ...args]);
    writeLine({ t: "log", level, msg: String(msg).slice(0, 2000) });
  };
}

class Exception extends Error {
  constructor(message, code) {
    super(message);
    this.code = code || 500;
  }
}

let assistantId = "";
const scripts = new Map();

function runScript(scriptId) {
  if (!scripts.has(scriptId)) {
    const code = call("script", scriptId);
    scripts.set(scriptId, evaluate(code, `${scriptId}.ts`));
  }
  return scripts.get(scriptId);
}

function Process(name, ...args) {
  const lower = String(name).toLowerCase();
  const own = `agents.${assistantId.toLowerCase()}.`;
  if (lower.startsWith(own)) {
    const rest = String(name).slice(own.length);
    const dot = rest.lastIndexOf(".");
    if (dot > 0) {
      const mod = runScript(rest.slice(0, dot).toLowerCase());
      const fn = mod[rest.slice(dot + 1)];
      if (typeof fn === "function") return fn(...args);
    }
    throw new Exception(`process ${name}: no such function in the assistant's src/ scripts`, 404);
  }
  throw new Exception(`process ${name} has no equivalent in Cage (only agents.<assistant>.<script>.<Function>)`, 501);
}

const log = {
  Trace: logger("debug"),
  Debug: logger("debug"),
  Info: logger("info"),
  Warn: logger("warning"),
  Error: logger("error"),
};

function unsupported(what) {
  return () => {
    throw new Exception(`${what} is not available in Cage's hook runtime`, 501);
  };
}

const runtime = {
  Process,
  Exception,
  log,
  time: { Sleep: sleep },
  http: new Proxy({}, { get: (_, k) => unsupported(`http.${String(k)}`) }),
  agent: {},
};

function requireFor(name) {
  if (name === "@yao/runtime") return runtime;
  if (name === "@yao/agent" || name === "@yao/yao") return {};
  throw new Exception(`cannot import ${name}: Cage provides @yao/runtime only`, 501);
}

function evaluate(code, filename) {
  const module = { exports: {} };
  const sandbox = {
    require: requireFor,
    module,
    exports: module.exports,
    console: { log: log.Info, info: log.Info, warn: log.Warn, error: log.Error, debug: log.Debug },
    Process,
    log,
    time: runtime.time,
    Exception,
  };
  const context = vm.createContext(sandbox, { codeGeneration: { strings: false, wasm: false } });
  new vm.Script(code, { filename }).runInContext(context, { timeout: 600000 });
  const found = {};
  for (const [k, v] of Object.entries(sandbox)) if (typeof v === "function") found[k] = v;
  return Object.assign(found, module.exports);
}

function space(name) {
  return {
    Get: (key) => call("memory.get", name, key),
    Set: (key, value, ttl) => call("memory.set", name, key, value, ttl === undefined ? null : ttl),
    Del: (key) => call("memory.del", name, key),
    Has: (key) => call("memory.has", name, key),
    Keys: (prefix) => call("memory.keys", name, prefix || ""),
    Clear: () => call("memory.clear", name),
  };
}

function agentBatch(method) {
  return (requests) =>
    call(
      method,
      (requests || []).map((r) => ({ agent_id: r.agent_id || r.agent, messages: r.messages, options: r.options || {} }))
    );
}

function makeContext(info) {
  const ctx = Object.assign({}, info.fields);
  ctx.Send = (message) => call("send", message);
  ctx.SendStream = (message) => call("send_stream", message);
  ctx.Append = (id, content) => call("append", id, content);
  ctx.Replace = (id, message) => call("replace", id, message);
  ctx.Merge = (id, message) => call("replace", id, message);
  ctx.End = (id) => call("end", id);
  ctx.BlockID = () => `B${nextId}`;
  ctx.EndBlock = () => null;
  ctx.memory = { user: space("user"), team: space("team"), chat: space("chat"), context: space("context") };
  ctx.space = ctx.memory.context;
  ctx.agent = {
    Call: (agentId, messages, options) => call("agent.call", agentId, messages, options || {}),
    All: agentBatch("agent.all"),
    Any: (requests) => [agentBatch("agent.any")(requests)],
    Race: (requests) => [agentBatch("agent.race")(requests)],
  };
  ctx.mcp = {
    ListTools: (server) => call("mcp.list_tools", server),
    CallTool: (server, tool, args) => call("mcp.call_tool", server, tool, args || {}),
  };
  if (info.sandbox) {
    const run = (argv) => call("sandbox.exec", argv);
    const ok = (argv, what) => {
      const r = run(argv);
      if (r.exit_code !== 0) throw new Exception(`${what}: ${(r.stderr || r.stdout || "").trim()}`, 500);
      return r;
    };
    const readDir = (path) =>
      ok(["ls", "-1Ap", "--", path || "."], `ReadDir ${path}`)
        .stdout.split("\n")
        .filter((l) => l)
        .map((l) => ({ name: l.replace(/\/$/, ""), is_dir: l.endsWith("/") }));
    const files = {
      ReadFile: (path) => call("sandbox.read_file", path),
      WriteFile: (path, content) => call("sandbox.write_file", path, String(content)),
      ReadDir: readDir,
      ListDir: readDir,
      Exists: (path) => run(["test", "-e", path]).exit_code === 0,
      MkdirAll: (path) => void ok(["mkdir", "-p", "--", path], `MkdirAll ${path}`),
      Remove: (path) => void ok(["rm", "-rf", "--", path], `Remove ${path}`),
      Copy: (src, dst) => void ok(["cp", "-r", "--", src, dst], `Copy ${src}`),
      Rename: (src, dst) => void ok(["mv", "--", src, dst], `Rename ${src}`),
      Stat: (path) => {
        const [name, size, kind] = ok(["stat", "-c", "%n|%s|%F", "--", path], `Stat ${path}`).stdout.trim().split("|");
        return { name: name.split("/").pop(), size: Number(size), is_dir: kind === "directory" };
      },
    };
    ctx.sandbox = Object.assign({ workdir: info.sandbox.workdir, Exec: (cmd) => run(cmd).stdout }, files);
    ctx.computer = {
      id: info.sandbox.id,
      Exec: run,
      Info: () => ({ id: info.sandbox.id, kind: "box", status: "running", work_dir: info.sandbox.workdir, system: { os: "linux" } }),
    };
    ctx.workspace = files;
  }
  return ctx;
}

function main() {
  const start = readLine();
  assistantId = start.assistant_id || "";
  let fns;
  try {
    fns = evaluate(start.code, start.filename || "index.ts");
  } catch (e) {
    writeLine({ t: "fail", e: `load: ${e && e.stack ? e.stack.split("\n").slice(0, 3).join(" | ") : String(e)}` });
    return;
  }
  const fn = fns[start.fn];
  if (typeof fn !== "function") {
    writeLine({ t: "done", defined: false, v: null });
    return;
  }
  const args = start.args.slice();
  if (start.with_ctx) args.unshift(makeContext(start.ctx));
  Promise.resolve()
    .then(() => fn(...args))
    .then(
      (v) => writeLine({ t: "done", defined: true, v: v === undefined ? null : v }),
      (e) => writeLine({ t: "fail", e: e && e.message ? e.message : String(e) })
    );
}

main();
